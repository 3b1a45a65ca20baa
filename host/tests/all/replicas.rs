//! Several host processes on one PostgreSQL database behave as one host:
//! tasks, budgets, approvals and plugin state are the same on every
//! replica, and a database that goes away refuses what needs it and
//! nothing else.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::postgres::*;
use crate::support::*;

const SAVE: &str = "notes_note_save";
const DELETE: &str = "notes_note_delete";
const GET: &str = "notes_note_get";

fn note(slug: &str, body: &str) -> Value {
    json!({ "slug": slug, "title": format!("Note {slug}"), "body": body, "tags": ["ops"] })
}

/// Notes with room for a burst: every call of the test reaches the store.
fn notes_manifest() -> TestManifest {
    manifest(vec![
        PluginEntry::notes().with("limits = { concurrent = 16, queue = 64 }"),
    ])
}

const TICKET_GET: &str = "helpdesk_ticket_get";

/// The notes and the helpdesk, whose read tools need no `state`.
fn notes_and_helpdesk_manifest() -> TestManifest {
    manifest(vec![
        PluginEntry::helpdesk(),
        PluginEntry::notes().with("limits = { concurrent = 16, queue = 64 }"),
    ])
}

fn three(m: &TestManifest, pg: &Postgres) -> [Replica; 3] {
    ["replica-a", "replica-b", "replica-c"].map(|name| Replica::start(m, pg, name))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_is_exact_across_three_replicas_and_a_revocation_acts_on_all() {
    let pg = Postgres::start();
    let m = notes_manifest();
    let replicas = three(&m, &pg);
    let task = open_task_on(&m, &pg, &[SAVE], &["--max-calls", "25"]);

    // 3 replicas × 40 concurrent calls, four sessions on each.
    let mut calls = Vec::new();
    for (r, replica) in replicas.iter().enumerate() {
        for s in 0..4 {
            let client = Arc::new(
                connect_with(replica.url(), Some(&task.token), ())
                    .await
                    .unwrap(),
            );
            for c in 0..10 {
                let client = client.clone();
                calls.push(tokio::spawn(async move {
                    let slug = format!("r{r}-s{s}-c{c}");
                    content(&call(&client, SAVE, note(&slug, "burst")).await)
                }));
            }
        }
    }
    let mut ran = 0;
    let mut exhausted = 0;
    for outcome in futures::future::join_all(calls).await {
        let outcome = outcome.unwrap();
        match outcome["code"].as_str() {
            None => ran += 1,
            Some("budget_exhausted") => exhausted += 1,
            Some(other) => panic!("unexpected outcome {other}: {outcome}"),
        }
    }
    assert_eq!((ran, exhausted), (25, 95));
    let keys = pg
        .query("SELECT count(*) FROM plugin_state WHERE plugin = 'notes' AND key LIKE 'note/%'")
        .await;
    assert_eq!(keys, ["25"], "exactly the calls that ran wrote a note");
    let used = pg
        .query(&format!(
            "SELECT calls_used FROM task WHERE id = '{}'",
            task.id
        ))
        .await;
    assert_eq!(used, ["25"]);

    // The write rate is as exact: 3 replicas × 10 concurrent writes
    // against 7 an hour.
    let paced = open_task_on(&m, &pg, &[SAVE], &["--writes-per-hour", "7"]);
    let mut writes = Vec::new();
    for (r, replica) in replicas.iter().enumerate() {
        let client = Arc::new(
            connect_with(replica.url(), Some(&paced.token), ())
                .await
                .unwrap(),
        );
        for c in 0..10 {
            let client = client.clone();
            writes.push(tokio::spawn(async move {
                let slug = format!("paced-r{r}-c{c}");
                content(&call(&client, SAVE, note(&slug, "paced")).await)
            }));
        }
    }
    let outcomes: Vec<Value> = futures::future::join_all(writes)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let ran = outcomes.iter().filter(|o| o["code"].is_null()).count();
    let paced_out = outcomes
        .iter()
        .filter(|o| o["code"] == "budget_exhausted")
        .count();
    assert_eq!((ran, paced_out), (7, 23), "{outcomes:?}");

    // Extended through replica A's admin API, revoked through C's: each
    // acts on the very next call on every replica.
    let second = open_task_on(&m, &pg, &[SAVE], &["--ttl", "4s"]);
    let clients = futures::future::join_all(
        replicas
            .iter()
            .map(|r| connect_with(r.url(), Some(&second.token), ())),
    )
    .await;
    let clients: Vec<_> = clients.into_iter().map(Result::unwrap).collect();
    let (status, _) = replicas[0]
        .admin(
            reqwest::Method::POST,
            &format!("/tasks/{}/extend", second.id),
            Some(json!({ "ttl": "10m" })),
        )
        .await;
    assert_eq!(status, 200);
    // Past the original expiry (4 s from opening).
    tokio::time::sleep(Duration::from_millis(4_200)).await;
    for (i, client) in clients.iter().enumerate() {
        assert!(
            content(&call(client, SAVE, note(&format!("ext-{i}"), "x")).await)["code"].is_null(),
            "the extension holds on replica {i}"
        );
    }
    let (status, _) = replicas[2]
        .admin(
            reqwest::Method::POST,
            &format!("/tasks/{}/revoke", second.id),
            None,
        )
        .await;
    assert_eq!(status, 200);
    for client in &clients {
        let error = refused(client, SAVE, note("after-revoke", "x")).await;
        assert_eq!(error["code"], "grant_expired");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_asked_on_one_replica_and_decided_on_another_runs_once_on_a_third() {
    let pg = Postgres::start();
    let m = notes_manifest();
    let [a, b, c] = three(&m, &pg);
    let task = open_task_on(&m, &pg, &[SAVE, DELETE], &["--operator-approval"]);
    let on_a = connect_with(a.url(), Some(&task.token), ()).await.unwrap();
    let on_b = connect_with(b.url(), Some(&task.token), ()).await.unwrap();
    for slug in ["one", "two"] {
        content(&call(&on_a, SAVE, note(slug, "to delete")).await);
    }

    let asked = content(&call(&on_a, DELETE, json!({ "slug": "one" })).await);
    assert_eq!(asked["code"], "approval_required");
    let id = asked["approval_id"].as_str().unwrap().to_string();
    // The same call asked on another replica is the same question.
    let again = content(&call(&on_b, DELETE, json!({ "slug": "one" })).await);
    assert_eq!(again["approval_id"], id.as_str());

    // Two operators say yes at once, on two replicas: one decision counts.
    let approve = format!("/approvals/{id}/approve");
    let (first, second) = tokio::join!(
        c.admin(reqwest::Method::POST, &approve, None),
        a.admin(reqwest::Method::POST, &approve, None),
    );
    let mut statuses = [first.0, second.0];
    statuses.sort();
    assert_eq!(statuses, [200, 409], "{first:?} {second:?}");

    // Repeated on B and on A at once: it runs exactly once.
    let (on_b_result, on_a_result) = tokio::join!(
        call(&on_b, DELETE, json!({ "slug": "one" })),
        call(&on_a, DELETE, json!({ "slug": "one" })),
    );
    let outcomes = [content(&on_b_result), content(&on_a_result)];
    let ran = outcomes.iter().filter(|o| o["code"].is_null()).count();
    assert_eq!(ran, 1, "{outcomes:?}");
    let other = outcomes.iter().find(|o| !o["code"].is_null()).unwrap();
    // The other found the yes used and asks again; `not_found` here would
    // mean the plugin ran twice.
    assert_eq!(other["code"], "approval_required", "{other}");
    let used = pg
        .query(&format!("SELECT state FROM approval WHERE id = '{id}'"))
        .await;
    assert_eq!(used, ["used"]);

    // A denial decided on C is reported on B once.
    let asked = content(&call(&on_a, DELETE, json!({ "slug": "two" })).await);
    let deny_id = asked["approval_id"].as_str().unwrap().to_string();
    let (status, _) = c
        .admin(
            reqwest::Method::POST,
            &format!("/approvals/{deny_id}/deny"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let denied = content(&call(&on_b, DELETE, json!({ "slug": "two" })).await);
    assert_eq!(denied["code"], "approval_denied");
    ok(&on_a, GET, json!({ "slug": "two" })).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_state_is_shared_and_compare_and_set_stays_exact() {
    let pg = Postgres::start();
    let m = notes_manifest();
    let replicas = three(&m, &pg);
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    let mut clients = Vec::new();
    for replica in &replicas {
        clients.push(Arc::new(
            connect_with(replica.url(), Some(&task.token), ())
                .await
                .unwrap(),
        ));
    }
    let saved = ok(&clients[0], SAVE, note("shared", "from A")).await;
    let read = ok(&clients[1], GET, json!({ "slug": "shared" })).await;
    assert_eq!(read["body"], "from A");
    let version = saved["version"].as_u64().unwrap();

    // Every replica updates the version it read, six times each at once:
    // exactly one update wins. The rest conflict, except that a save which
    // found every history key of that second taken by the others before
    // the winner landed is told to retry (the notes plugin keeps ten).
    let mut racers = Vec::new();
    for (r, client) in clients.iter().enumerate() {
        for i in 0..6 {
            let client = client.clone();
            racers.push(tokio::spawn(async move {
                let body = format!("replica {r} try {i}");
                let mut arguments = note("shared", &body);
                arguments["expected_version"] = json!(version);
                let mut outcome = content(&call(&client, SAVE, arguments).await);
                outcome["sent"] = json!(body);
                outcome
            }));
        }
    }
    let outcomes: Vec<Value> = futures::future::join_all(racers)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let won: Vec<&Value> = outcomes.iter().filter(|o| o["code"].is_null()).collect();
    assert_eq!(won.len(), 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| !o["code"].is_null())
            .all(|o| o["code"] == "conflict"
                || (o["code"] == "state_unavailable"
                    && o["retryable"] == true
                    && o["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("too many saves")))),
        "{outcomes:?}"
    );
    let read = ok(&clients[2], GET, json!({ "slug": "shared" })).await;
    assert_eq!(read["body"], won[0]["sent"]);
    assert_eq!(read["version"], json!(version + 1));

    // The operator's state commands work from any machine with the URL.
    let keys = cli_ok(&m, &pg, &["state", "list", "notes"]);
    assert!(keys.contains("note/shared"), "{keys}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lives_on_its_replica_and_stateless_requests_go_anywhere() {
    let pg = Postgres::start();
    let m = notes_manifest();
    let [a, b, _c] = three(&m, &pg);
    let http = http_client();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "1" } }
    });
    let response = http
        .post(a.url())
        .header("accept", "application/json, text/event-stream")
        .json(&initialize)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    // The same session id on a replica that does not hold it: the spec's
    // 404, so the client initializes again.
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let elsewhere = http
        .post(b.url())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 404);

    // A 2026-07-28 client needs no affinity: each request stands alone.
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    for (i, replica) in [&a, &b].into_iter().enumerate() {
        let client = connect_stateless_with(replica.url(), Some(&task.token), ()).await;
        ok(&client, SAVE, note(&format!("stateless-{i}"), "x")).await;
        ok(&client, GET, json!({ "slug": "stateless-0" })).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_database_refuses_task_calls_at_once_and_reads_go_on() {
    let pg = Postgres::start();
    let m = notes_and_helpdesk_manifest();
    let replica = Replica::start(&m, &pg, "replica-a");
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    let anonymous = connect(replica.url()).await;
    ok(&anonymous, TICKET_GET, json!({ "key": "T-1041" })).await;
    // stdio binds its task at start; every call then charges it.
    let dir = tempfile::tempdir().unwrap();
    let env = pg.env(&dir.path().join("stdio"), "stdio-replica");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let bound = stdio_with(&m, &["--task-token", &task.token], &env, ()).await;
    ok(&bound, SAVE, note("before", "x")).await;
    // Over HTTP the host remembers a token it has checked; its calls are
    // still charged in the database, so they fail closed too.
    let bound_http = connect_with(replica.url(), Some(&task.token), ())
        .await
        .unwrap();
    ok(&bound_http, SAVE, note("before-http", "x")).await;

    pg.stop();
    let began = std::time::Instant::now();
    for client in [&bound, &bound_http] {
        let error = refused(client, SAVE, note("during", "x")).await;
        assert_eq!(error["code"], "store_unavailable");
        assert_eq!(error["retryable"], true);
    }
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "refused at once, not after a long wait"
    );
    // Reads of sessions without a task never touch the database.
    let listed = anonymous.list_all_tools().await.unwrap();
    assert!(!listed.is_empty());
    ok(&anonymous, TICKET_GET, json!({ "key": "T-1041" })).await;
    // A read tool that keeps its data in the `state` import does need the
    // database: the plugin gets an error from the import and says so.
    let notes = content(&call(&anonymous, "notes_note_list", json!({})).await);
    assert!(notes["code"].is_string(), "{notes}");
    // Over HTTP, the token itself cannot be checked: 503, retry later.
    let response = http_client()
        .post(replica.url())
        .bearer_auth(&task.token)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": { "name": "t", "version": "1" } }
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert!(response.text().await.unwrap().contains("store_unavailable"));

    // Back again: the host reconnects by itself.
    pg.resume();
    let mut recovered = false;
    for _ in 0..50 {
        let result = content(&call(&bound, SAVE, note("after", "x")).await);
        if result["code"].is_null() {
            recovered = true;
            break;
        }
        assert_eq!(result["code"], "store_unavailable");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(recovered, "the host did not reconnect");
    let keys = pg
        .query("SELECT key FROM plugin_state WHERE key LIKE 'note/%' ORDER BY key")
        .await;
    assert_eq!(keys, ["note/after", "note/before", "note/before-http"]);

    // The stdio host said so in its trail: lost, then found again.
    assert_eq!(
        database_events(&m, &pg, &dir.path().join("stdio")).await,
        ["database_unreachable", "database_reachable"]
    );
}

/// The `database_*` events of a host's trail, once there are two.
async fn database_events(m: &TestManifest, pg: &Postgres, state_dir: &Path) -> Vec<String> {
    let trail = state_dir.display().to_string();
    let mut events = Vec::new();
    for _ in 0..50 {
        let out = cli_ok(m, pg, &["audit", "export", "--trail", &trail]);
        events = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|r| r["event"].as_str().map(str::to_string))
            .filter(|e| e.starts_with("database_"))
            .collect();
        if events.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    events
}

/// A database that stops answering without closing anything (its
/// processes stopped, as one hung on its disk or on a standby would be):
/// the kernel still acknowledges every byte, so only the host's own
/// deadline ends the wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_refuses_task_calls_after_a_deadline_and_reads_go_on() {
    let pg = Postgres::start();
    let m = notes_and_helpdesk_manifest();
    let replica = Replica::start(&m, &pg, "replica-a");
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    let anonymous = connect(replica.url()).await;
    let bound = connect_with(replica.url(), Some(&task.token), ())
        .await
        .unwrap();
    ok(&bound, SAVE, note("before", "x")).await;

    pg.freeze();
    for slug in ["frozen-1", "frozen-2"] {
        let began = std::time::Instant::now();
        let error = tokio::time::timeout(
            Duration::from_secs(60),
            refused(&bound, SAVE, note(slug, "x")),
        )
        .await
        .expect("a call on a frozen database ends");
        assert_eq!(error["code"], "store_unavailable", "{error}");
        assert_eq!(error["retryable"], true);
        assert!(
            began.elapsed() < Duration::from_secs(40),
            "{:?}",
            began.elapsed()
        );
    }
    // Reads of sessions without a task never wait for the database.
    let began = std::time::Instant::now();
    ok(&anonymous, TICKET_GET, json!({ "key": "T-1041" })).await;
    assert!(began.elapsed() < Duration::from_secs(5));

    pg.thaw();
    let mut saved = Value::Null;
    for _ in 0..100 {
        saved = content(&call(&bound, SAVE, note("after", "x")).await);
        if saved["code"].is_null() {
            break;
        }
        assert_eq!(saved["code"], "store_unavailable", "{saved}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(saved["code"].is_null(), "{saved}");
    // The refused calls never ran their plugin.
    let keys = pg
        .query("SELECT key FROM plugin_state WHERE key LIKE 'note/%' ORDER BY key")
        .await;
    assert_eq!(keys, ["note/after", "note/before"]);
    // Lost once and found once: a connection handed out while the server
    // was frozen did not count as finding it.
    assert_eq!(
        database_events(&m, &pg, &replica.state_dir).await,
        ["database_unreachable", "database_reachable"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_while_the_database_is_down_serves_reads_and_catches_up() {
    let pg = Postgres::start();
    let m = notes_and_helpdesk_manifest();
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    pg.stop();
    let replica = Replica::start(&m, &pg, "replica-a");
    let anonymous = connect(replica.url()).await;
    assert!(!tools(&anonymous).await.is_empty());
    ok(&anonymous, TICKET_GET, json!({ "key": "T-1041" })).await;

    pg.resume();
    let mut saved = Value::Null;
    for _ in 0..50 {
        if let Ok(bound) = connect_with(replica.url(), Some(&task.token), ()).await {
            saved = content(&call(&bound, SAVE, note("after-outage", "x")).await);
            if saved["code"].is_null() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(saved["code"].is_null(), "{saved}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_acknowledged_is_lost_when_a_replica_is_killed_or_the_database_restarts() {
    let pg = Postgres::start();
    let m = notes_manifest();
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    for round in 0..2 {
        let mut replica = Replica::start(&m, &pg, "replica-a");
        let client = Arc::new(
            connect_with(replica.url(), Some(&task.token), ())
                .await
                .unwrap(),
        );
        let writers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(save_until_it_fails(
                    client.clone(),
                    format!("r{round}-w{w}"),
                ))
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(800)).await;
        if round == 0 {
            // kill -9 of the replica mid-burst.
            replica.host.child.kill().unwrap();
            replica.host.child.wait().unwrap();
        } else {
            // The database restarts mid-burst; the writers stop at the
            // first refusal.
            pg.stop();
            pg.resume();
        }
        let mut acknowledged = Vec::new();
        for writer in writers {
            acknowledged.extend(writer.await.unwrap());
        }
        drop(client);
        assert!(!acknowledged.is_empty(), "round {round} wrote nothing");
        let stored = pg
            .query(&format!(
                "SELECT substr(key, 6) FROM plugin_state WHERE key LIKE 'note/r{round}-%'"
            ))
            .await;
        for slug in &acknowledged {
            assert!(stored.contains(slug), "acknowledged note {slug} was lost");
        }
        // Every note stored was charged once, and nothing was charged twice:
        // each charge is one row of the write window.
        let writes = pg
            .query(&format!(
                "SELECT count(*) FROM task_write WHERE task_id = '{}'",
                task.id
            ))
            .await;
        let notes = pg
            .query("SELECT count(*) FROM plugin_state WHERE key LIKE 'note/%'")
            .await;
        let writes: usize = writes[0].parse().unwrap();
        let notes: usize = notes[0].parse().unwrap();
        assert!(
            writes >= notes && writes <= notes + 4 * (round + 1),
            "{writes} charges for {notes} notes (at most one in flight per writer and round)"
        );
    }
}

#[tokio::test]
async fn the_database_is_configured_outside_the_manifest_and_its_schema_is_checked() {
    let m = manifest_text(
        "[host]\nstore = \"postgres\"\ndatabase_url = \"postgres://u:secret@db/x\"\n",
    );
    let out = start_and_exit(&m, &[]);
    assert!(!out.success);
    assert!(
        out.stderr.contains("database_url is not accepted") && !out.stderr.contains("secret@"),
        "{}",
        out.stderr
    );

    let m = manifest_text("[host]\nstore = \"postgres\"\ndatabase_url_file = \"db-url\"\n");
    let url_file = m.path.parent().unwrap().join("db-url");
    std::fs::write(&url_file, "postgres://postgres@127.0.0.1:1/postgres\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&url_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = start_and_exit(&m, &[]);
    assert!(!out.success);
    assert!(out.stderr.contains("chmod 600"), "{}", out.stderr);

    let m = manifest_text("[host]\nstore = \"postgres\"\n");
    let out = start_and_exit(&m, &[]);
    assert!(!out.success);
    assert!(
        out.stderr.contains("TOOLHOST_DATABASE_URL"),
        "{}",
        out.stderr
    );

    // A database migrated by a newer host is refused, naming its version.
    let pg = Postgres::start();
    let m = notes_manifest();
    cli_ok(&m, &pg, &["task", "list"]);
    pg.query("UPDATE toolhost_schema SET version = 99").await;
    let out = cli_on(&m, &pg, &["task", "list"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("schema is version 99")
            && stderr.contains(&format!(
                "newer than this host's {}",
                toolhost::store::postgres::SCHEMA_VERSION
            )),
        "{stderr}"
    );
}

/// Checkpoints every second, so a test sees several.
fn notes_manifest_checkpointing() -> TestManifest {
    let m = notes_manifest();
    let text = std::fs::read_to_string(&m.path).unwrap();
    std::fs::write(
        &m.path,
        format!("[host]\naudit_checkpoint_secs = 1\n\n{text}"),
    )
    .unwrap();
    m
}

fn audit(m: &TestManifest, pg: &Postgres, args: &[&str]) -> std::process::Output {
    let mut full = vec!["audit"];
    full.extend(args);
    cli_on(m, pg, &full)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_replica_keeps_its_own_trail_and_the_database_shows_one_cut_back() {
    let pg = Postgres::start();
    let m = notes_manifest_checkpointing();
    let task = open_task_on(&m, &pg, &[SAVE], &[]);
    let mut a = Replica::start(&m, &pg, "replica-a");
    let b = Replica::start(&m, &pg, "replica-b");
    let on_a = connect_with(a.url(), Some(&task.token), ()).await.unwrap();
    let on_b = connect_with(b.url(), Some(&task.token), ()).await.unwrap();
    ok(&on_a, SAVE, note("early", "x")).await;
    ok(&on_b, SAVE, note("from-b", "x")).await;
    // A checkpoint of the early records (the checkpoints read before the
    // records, so that none signs past them), then more records, and the
    // database's copy of a checkpoint past the early ones.
    let trail_a = a.state_dir.join("audit");
    let segment = trail_a.join("segment-000001.jsonl");
    let early_checkpoints = wait_for_checkpoint(&trail_a, 0).await;
    let early_len = std::fs::metadata(&segment).unwrap().len();
    let early_seq = newest_seq(&early_checkpoints);
    ok(&on_a, SAVE, note("late", "x")).await;
    let mut copied = 0;
    for _ in 0..100 {
        let newest = pg
            .query("SELECT coalesce(max(seq), 0) FROM audit_checkpoint WHERE replica = 'replica-a'")
            .await;
        copied = newest[0].parse().unwrap();
        if copied > early_seq {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        copied > early_seq,
        "replica-a's later checkpoint reached the database"
    );
    for _ in 0..100 {
        let b_rows = pg
            .query("SELECT count(*) FROM audit_checkpoint WHERE replica = 'replica-b'")
            .await;
        if b_rows != ["0"] {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    a.host.child.kill().unwrap();
    a.host.child.wait().unwrap();

    // Both trails, merged by time, each record naming its replica.
    let (dir_a, dir_b) = (
        a.state_dir.display().to_string(),
        b.state_dir.display().to_string(),
    );
    let out = audit(&m, &pg, &["export", "--trail", &dir_a, "--trail", &dir_b]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let times: Vec<&str> = records
        .iter()
        .map(|r| r["time"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "merged by time");
    for name in ["replica-a", "replica-b"] {
        assert!(
            records
                .iter()
                .any(|r| r["replica"] == name && r["event"] == "tool_call")
        );
    }
    assert!(
        records.iter().all(|r| r["replica"].is_string()),
        "every record names its replica"
    );

    let verified = audit(
        &m,
        &pg,
        &[
            "verify",
            "--against-db",
            "--trail",
            &dir_a,
            "--trail",
            &dir_b,
        ],
    );
    let text = String::from_utf8_lossy(&verified.stdout);
    assert!(verified.status.success(), "{text}");
    assert_eq!(text.matches("OK:").count(), 2, "{text}");

    // Someone with replica A's disk rolls its trail back, checkpoints and
    // all: on its own the trail still verifies...
    let bytes = std::fs::read(&segment).unwrap();
    std::fs::write(&segment, &bytes[..early_len as usize]).unwrap();
    std::fs::write(trail_a.join("checkpoints.jsonl"), &early_checkpoints).unwrap();
    let alone = audit(&m, &pg, &["verify", "--trail", &dir_a]);
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stdout)
    );
    // ... but not against the copies in the database.
    let against = audit(&m, &pg, &["verify", "--against-db", "--trail", &dir_a]);
    let text = String::from_utf8_lossy(&against.stdout);
    assert_eq!(against.status.code(), Some(1), "{text}");
    assert!(
        text.contains("BROKEN") && text.contains("database") && text.contains("cut off the end"),
        "{text}"
    );
    assert!(
        text.contains("replica-b"),
        "the other replica is named: {text}"
    );

    // Emptied altogether, key kept: the database's copies, signed by that
    // key, still show it.
    for entry in std::fs::read_dir(&trail_a).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let emptied = audit(&m, &pg, &["verify", "--against-db", "--trail", &dir_a]);
    let text = String::from_utf8_lossy(&emptied.stdout);
    assert_eq!(emptied.status.code(), Some(1), "{text}");
    assert!(
        text.contains("BROKEN") && text.contains("database"),
        "{text}"
    );
}

/// The trail's checkpoint file once it holds a checkpoint past `seq`.
async fn wait_for_checkpoint(trail: &std::path::Path, seq: u64) -> String {
    for _ in 0..100 {
        if let Ok(text) = std::fs::read_to_string(trail.join("checkpoints.jsonl"))
            && newest_seq(&text) > seq
        {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no checkpoint past seq {seq} in {}", trail.display());
}

fn newest_seq(checkpoints: &str) -> u64 {
    checkpoints
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|c| c["seq"].as_u64())
        .max()
        .unwrap_or(0)
}
