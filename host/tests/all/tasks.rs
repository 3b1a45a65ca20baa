//! Tasks: tokens, binding over HTTP and stdio, expiry and revocation on
//! live sessions, budgets, and the store that keeps them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

fn ticket_close(key: &str) -> Value {
    json!({ "key": key })
}

#[tokio::test]
async fn without_a_token_only_reads_work_and_a_token_grants_exactly_its_tools() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &[]);

    let anonymous = connect_with(&host.url, None, ()).await.unwrap();
    ok(
        &anonymous,
        "helpdesk_ticket_get",
        json!({ "key": "T-1048" }),
    )
    .await;
    let error = refused(&anonymous, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    assert_eq!(error["code"], "not_granted");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("not bound to a task")
    );

    let bound = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let closed = ok(&bound, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    assert_eq!(closed["status"], "closed");
    let error = refused(
        &bound,
        "helpdesk_ticket_escalate",
        json!({ "key": "T-1047", "team": "legal", "reason": "lawyer threatens action" }),
    )
    .await;
    assert_eq!(error["code"], "not_granted");
    assert!(error["message"].as_str().unwrap().contains(&task.id));

    // A token that was never issued is refused at connect.
    let forged = format!("{}x", &task.token[..task.token.len() - 1]);
    assert!(connect_with(&host.url, Some(&forged), ()).await.is_err());
    let response = http_client()
        .post(&host.url)
        .bearer_auth(&forged)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers().contains_key("www-authenticate"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["message"], "unknown task token");

    anonymous.cancel().await.unwrap();
    bound.cancel().await.unwrap();
}

#[tokio::test]
async fn stdio_binds_to_the_task_of_its_token() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let client = stdio_with(&m, &[], &[("TOOLHOST_TASK_TOKEN", &task.token)], ()).await;
    ok(&client, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    client.cancel().await.unwrap();

    let flag = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok(&flag, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    flag.cancel().await.unwrap();
    assert_eq!(show_task(&m, &task.id)["calls_used"], 2);

    let out = start_and_exit(
        &m,
        &[
            "--task-token",
            "tht_0123456789abcdef_nottherightsecretnottherightsecretxxxxxxx",
        ],
    );
    assert!(!out.success);
    assert!(out.stderr.contains("unknown"), "{}", out.stderr);
}

#[tokio::test]
async fn the_ad_hoc_task_of_serve_is_recorded_like_any_other() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(&m, &["--task", "T-42", "--grant", "helpdesk_ticket_close"]).await;
    ok(&client, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    client.cancel().await.unwrap();
    let task = show_task(&m, "T-42");
    assert_eq!(task["ad_hoc"], true);
    assert_eq!(task["grants"], json!(["helpdesk_ticket_close"]));
    assert_eq!(task["calls_used"], 1);

    cli(&m, &["task", "revoke", "T-42"]);
    let out = start_and_exit(&m, &["--task", "T-42", "--grant", "helpdesk_ticket_close"]);
    assert!(!out.success, "a revoked task is not served again");
    assert!(out.stderr.contains("revoked"), "{}", out.stderr);
}

#[tokio::test]
async fn revocation_acts_on_the_next_call_of_every_live_session() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &[]);
    let over_http = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let over_stdio = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok(&over_http, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    ok(&over_stdio, "helpdesk_ticket_close", ticket_close("T-1048")).await;

    let out = cli(&m, &["task", "revoke", &task.id]);
    assert!(out.contains("revoked"), "{out}");

    for error in [
        refused(&over_http, "helpdesk_ticket_close", ticket_close("T-1046")).await,
        refused(&over_stdio, "helpdesk_ticket_close", ticket_close("T-1046")).await,
    ] {
        assert_eq!(error["code"], "grant_expired");
        assert_eq!(error["retryable"], false);
        assert!(error["message"].as_str().unwrap().contains("revoked"));
    }
    // Reading needs no task, so it goes on.
    ok(
        &over_http,
        "helpdesk_ticket_get",
        json!({ "key": "T-1046" }),
    )
    .await;
    // A new connection with the revoked token is refused outright.
    assert!(
        connect_with(&host.url, Some(&task.token), ())
            .await
            .is_err()
    );
    assert_eq!(show_task(&m, &task.id)["state"], "revoked");
    // A stateless client, which never connects, learns it from the call.
    let stateless = connect_stateless_with(&host.url, Some(&task.token), ()).await;
    let error =
        content(&call_as(&stateless, "helpdesk_ticket_close", ticket_close("T-1046")).await);
    assert_eq!(error["code"], "grant_expired");
    ok(
        &stateless,
        "helpdesk_ticket_get",
        json!({ "key": "T-1046" }),
    )
    .await;
    stateless.cancel().await.unwrap();

    over_http.cancel().await.unwrap();
    over_stdio.cancel().await.unwrap();
}

#[tokio::test]
async fn expiry_acts_on_the_next_call_without_a_restart() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &[]);
    let a = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let b = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    ok(&a, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    ok(&b, "helpdesk_ticket_close", ticket_close("T-1048")).await;

    // Make the task end a second from now, then wait it out (the store
    // counts whole seconds).
    cli(&m, &["task", "extend", &task.id, "--ttl", "1s"]);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    for client in [&a, &b] {
        let error = refused(client, "helpdesk_ticket_close", ticket_close("T-1046")).await;
        assert_eq!(error["code"], "grant_expired");
        assert!(error["message"].as_str().unwrap().contains("expired"));
    }
    assert_eq!(show_task(&m, &task.id)["state"], "expired");

    // Extending it makes the same sessions' grants work again.
    cli(&m, &["task", "extend", &task.id, "--ttl", "5m"]);
    ok(&a, "helpdesk_ticket_close", ticket_close("T-1046")).await;
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn the_call_budget_is_exhausted_exactly_at_n_across_concurrent_sessions() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &["--max-calls", "25"]);
    let host = http(&m, &[]);
    let a = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let b = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;

    // 60 calls at once, half through each session, for a budget of 25.
    let get = |key: &'static str| json!({ "key": key });
    let mut calls = Vec::new();
    for i in 0..30 {
        let key = if i % 2 == 0 { "T-1041" } else { "T-1042" };
        calls.push(call(&a, "helpdesk_ticket_get", get(key)));
    }
    let from_a = futures::future::join_all(calls);
    let mut calls = Vec::new();
    for _ in 0..30 {
        calls.push(call_as(&b, "helpdesk_ticket_get", get("T-1043")));
    }
    let from_b = futures::future::join_all(calls);
    let (from_a, from_b) = tokio::join!(from_a, from_b);

    let results: Vec<_> = from_a.iter().chain(&from_b).collect();
    let succeeded = results.iter().filter(|r| r.is_error == Some(false)).count();
    assert_eq!(succeeded, 25, "exactly the budget ran");
    for refused in results.iter().filter(|r| r.is_error == Some(true)) {
        let error = content(refused);
        assert_eq!(error["code"], "budget_exhausted");
        assert_eq!(error["retryable"], false);
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("Stop") && message.contains("do not retry"),
            "{message}"
        );
    }
    assert_eq!(show_task(&m, &task.id)["calls_used"], 25);

    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn the_write_rate_caps_writes_but_not_reads() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(
        &m,
        &["helpdesk_ticket_close", "helpdesk_ticket_categorize"],
        &["--writes-per-hour", "2"],
    );
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok(&client, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    ok(&client, "helpdesk_ticket_close", ticket_close("T-1046")).await;
    let error = refused(
        &client,
        "helpdesk_ticket_categorize",
        json!({ "key": "T-1041", "category": "malfunction" }),
    )
    .await;
    assert_eq!(error["code"], "budget_exhausted");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("2 write calls per hour")
    );
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    client.cancel().await.unwrap();
}

/// While another process holds SQLite's write lock (an operator's command,
/// a `sqlite3` shell), task-bound calls wait for it and then run, charged
/// once each; calls without a task go on being answered meanwhile, even
/// with one runtime thread, which a call waiting inside SQLite would have
/// held. A lock held for longer than the wait gets `busy`.
#[tokio::test]
async fn a_locked_database_holds_up_task_calls_but_not_reads() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &["--workers", "1"]);
    let bound = std::sync::Arc::new(
        connect_with(&host.url, Some(&task.token), ())
            .await
            .unwrap(),
    );
    let anonymous = connect_with(&host.url, None, ()).await.unwrap();
    let read = || json!({ "key": "T-1048" });
    ok(&bound, "helpdesk_ticket_get", read()).await;

    let database = m.path.parent().unwrap().join(".toolhost/toolhost.db");
    let other_process = rusqlite::Connection::open(database).unwrap();
    other_process.execute_batch("BEGIN IMMEDIATE").unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let bound = bound.clone();
            tokio::spawn(async move { call(&bound, "helpdesk_ticket_get", read()).await })
        })
        .collect();
    // Long enough for the task-bound calls to reach the store.
    tokio::time::sleep(Duration::from_millis(300)).await;
    ok(&anonymous, "helpdesk_ticket_get", read()).await;
    assert!(
        waiting.iter().all(|call| !call.is_finished()),
        "task-bound calls wait while the database is locked"
    );

    other_process.execute_batch("COMMIT").unwrap();
    for call in waiting {
        let result = call.await.unwrap();
        assert_ne!(result.is_error, Some(true), "{result:?}");
    }
    assert_eq!(show_task(&m, &task.id)["calls_used"], 4);

    // A lock held past the wait: the call is refused, retryable, and not
    // charged.
    other_process.execute_batch("BEGIN IMMEDIATE").unwrap();
    let error = refused(&bound, "helpdesk_ticket_get", read()).await;
    other_process.execute_batch("COMMIT").unwrap();
    assert_eq!(error["code"], "busy", "{error}");
    assert_eq!(show_task(&m, &task.id)["calls_used"], 4);
}

#[tokio::test]
async fn the_store_keeps_only_a_hash_of_each_token() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    // Use the token, so the host has handled it too.
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok(&client, "helpdesk_ticket_close", ticket_close("T-1048")).await;
    client.cancel().await.unwrap();

    // The secret is base64url and may itself contain `_`: it is everything
    // after the id.
    let secret = task.token.splitn(3, '_').nth(2).unwrap();
    assert!(secret.len() >= 40, "{secret}");
    let state_dir = m.path.parent().unwrap().join(".toolhost");
    let mut files = 0;
    for entry in std::fs::read_dir(&state_dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_file() {
            continue;
        }
        files += 1;
        let bytes = std::fs::read(&path).unwrap();
        for needle in [task.token.as_bytes(), secret.as_bytes()] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{} contains the token",
                path.display()
            );
        }
    }
    assert!(files >= 1, "the database is in {}", state_dir.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state_dir.join("toolhost.db"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the database is private to its owner");
    }
}

#[test]
fn granting_what_cannot_be_granted_is_an_error_that_says_so() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::notes()]);
    for (args, expected) in [
        (vec!["--grant", "helpdesk_ticket_get"], "read tool"),
        (
            vec!["--grant", "helpdesk_ticket_purge"],
            "declares no such tool",
        ),
        (
            vec![
                "--grant",
                "helpdesk_ticket_close",
                "--pre-approve",
                "helpdesk_ticket_close",
            ],
            "only destructive tools",
        ),
        (
            vec![
                "--grant",
                "notes_note_save",
                "--pre-approve",
                "notes_note_delete",
            ],
            "not granted",
        ),
        (
            vec!["--grant", "notes_note_save", "--ttl", "forever"],
            "invalid ttl",
        ),
    ] {
        let mut full = vec!["task", "open", "--purpose", "p"];
        if !args.contains(&"--ttl") {
            full.extend(["--ttl", "5m"]);
        }
        full.extend(args);
        let out = cli_output(&m, &full);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{full:?}: {stderr}");
    }
    assert!(cli(&m, &["task", "list"]).contains("no tasks"));
}
