//! What every store backend promises, checked on SQLite and on PostgreSQL
//! alike: budgets and the write rate charged exactly, plugin state scoped
//! per plugin, bounded by its quota, with a compare-and-set that compares.

use std::time::Duration;

use toolhost::store::postgres::{PoolSettings, PostgresStore};
use toolhost::store::{
    Account, Approval, ApprovalRequest, ApprovalState, Charge, ChargeRefusal, Decision,
    MAX_PENDING_PER_TASK, NewTask, Role, SignInLimits, SqliteStore, StateError, Store, StoreError,
    TaskState,
};

use crate::postgres::Postgres;

#[tokio::test]
async fn the_sqlite_store_keeps_its_promises() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    budget_and_write_rate_are_charged_exactly(&store).await;
    state_is_scoped_and_bounded(&store).await;
    approvals_are_asked_once_used_once_and_end_with_their_task(&store).await;
    tasks_are_extended_and_served_again_as_the_cli_expects(&store).await;
    operators_and_their_sign_ins(&store).await;
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reads_spend_a_budget_exactly_on_either_store() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = std::sync::Arc::new(SqliteStore::open(dir.path()).unwrap());
    reads_at_once_spend_exactly_the_budget(sqlite).await;
    let pg = Postgres::start();
    let postgres = std::sync::Arc::new(
        PostgresStore::connect(&pg.url(), PoolSettings::default())
            .await
            .unwrap(),
    );
    reads_at_once_spend_exactly_the_budget(postgres).await;
}

/// 40 read charges at once against a budget of 25: each of the 25 that
/// pass sees a different count, the rest are refused as spent, and the
/// task ends at exactly 25. On SQLite the store's one connection takes them
/// in turn; `tasks::the_call_budget_is_exhausted_exactly_at_n_across_concurrent_sessions`
/// has two processes charge one SQLite file. A revoked or expired task
/// with budget left refuses a read as closed and is not charged; an
/// unknown task is an error, not a refusal.
async fn reads_at_once_spend_exactly_the_budget(store: std::sync::Arc<dyn Store>) {
    let (task, _) = store.open_task(new_task(Some(25), None)).await.unwrap();
    let charges = (0..40).map(|_| {
        let (store, id) = (store.clone(), task.id.clone());
        tokio::spawn(async move { store.charge(&id, "x_y_get", Charge::Read).await })
    });
    let mut counts = Vec::new();
    let mut spent = 0;
    for outcome in futures::future::join_all(charges).await {
        match outcome.unwrap().unwrap() {
            Ok(charged) => counts.push(charged.calls_used),
            Err(ChargeRefusal::CallsExhausted { max_calls: 25 }) => spent += 1,
            Err(other) => panic!("unexpected refusal {other:?}"),
        }
    }
    counts.sort_unstable();
    assert_eq!(counts, (1..=25).collect::<Vec<u64>>());
    assert_eq!(spent, 15);
    let after = store.task(&task.id).await.unwrap().unwrap();
    assert_eq!(after.calls_used, 25);
    // A task with budget left that is revoked, or expired (extended by
    // nothing), refuses a read as closed.
    let (revoked, _) = store.open_task(new_task(Some(25), None)).await.unwrap();
    let (expired, _) = store.open_task(new_task(Some(25), None)).await.unwrap();
    for task in [&revoked, &expired] {
        let charged = store.charge(&task.id, "x_y_get", Charge::Read).await;
        assert_eq!(charged.unwrap().unwrap().calls_used, 1);
    }
    store.revoke_task(&revoked.id, "t").await.unwrap();
    store
        .extend_task(&expired.id, Duration::ZERO, "t")
        .await
        .unwrap();
    for (task, state) in [
        (&revoked, TaskState::Revoked),
        (&expired, TaskState::Expired),
    ] {
        let refused = store.charge(&task.id, "x_y_get", Charge::Read).await;
        assert_eq!(refused.unwrap().unwrap_err(), ChargeRefusal::Closed(state));
        let after = store.task(&task.id).await.unwrap().unwrap();
        assert_eq!(after.calls_used, 1, "a refused read is not charged");
    }
    assert!(matches!(
        store.charge("no-such-task", "x_y_get", Charge::Read).await,
        Err(StoreError::NoTask(_))
    ));
}

#[tokio::test]
async fn the_postgres_store_keeps_its_promises() {
    let pg = Postgres::start();
    let store = PostgresStore::connect(&pg.url(), PoolSettings::default())
        .await
        .unwrap();
    budget_and_write_rate_are_charged_exactly(&store).await;
    state_is_scoped_and_bounded(&store).await;
    approvals_are_asked_once_used_once_and_end_with_their_task(&store).await;
    tasks_are_extended_and_served_again_as_the_cli_expects(&store).await;
    operators_and_their_sign_ins(&store).await;
    // A second host on the same database finds the schema in place.
    let again = PostgresStore::connect(&pg.url(), PoolSettings::default())
        .await
        .unwrap();
    assert_eq!(
        again.schema_version().await.unwrap(),
        toolhost::store::postgres::SCHEMA_VERSION
    );
}

fn new_task(max_calls: Option<u64>, writes_per_hour: Option<u32>) -> NewTask {
    NewTask {
        purpose: "test".into(),
        opened_by: "test".into(),
        grants: vec!["notes_note_save".into()],
        pre_approved: vec![],
        ttl: Duration::from_secs(600),
        max_calls,
        writes_per_hour,
        operator_approval: false,
        approve_in_client: false,
    }
}

async fn budget_and_write_rate_are_charged_exactly(store: &dyn Store) {
    let (task, token) = store.open_task(new_task(Some(3), Some(1))).await.unwrap();
    let authed = store.authenticate(token.as_str()).await.unwrap().unwrap();
    assert_eq!(authed.id, task.id);
    assert!(
        store
            .authenticate("tht_0000000000000000_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
            .await
            .unwrap()
            .is_none()
    );
    let save = "notes_note_save";
    assert!(
        store
            .charge(&task.id, save, Charge::Write)
            .await
            .unwrap()
            .is_ok()
    );
    assert_eq!(
        store
            .charge(&task.id, save, Charge::Write)
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::WriteRateExhausted { per_hour: 1 }
    );
    assert_eq!(
        store
            .charge(&task.id, "other_thing_delete", Charge::Write)
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::NotGranted
    );
    // Each charge reports the task's calls with itself counted: the write
    // above was the first.
    for expected in [2, 3] {
        let charged = store
            .charge(&task.id, "x_y_get", Charge::Read)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(charged.calls_used, expected);
        assert_eq!(charged.approval, None);
    }
    assert_eq!(
        store
            .charge(&task.id, "x_y_get", Charge::Read)
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::CallsExhausted { max_calls: 3 }
    );
    store.revoke_task(&task.id, "t").await.unwrap();
    assert_eq!(
        store
            .charge(&task.id, "x_y_get", Charge::Read)
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::Closed(TaskState::Revoked)
    );
}

async fn state_is_scoped_and_bounded(store: &dyn Store) {
    // Any string a plugin hands over comes back the same, NUL included.
    store.state_set("a", "nul", "x\u{0}y é", 100).await.unwrap();
    assert_eq!(
        store.state_get("a", "nul").await.unwrap().as_deref(),
        Some("x\u{0}y é")
    );
    assert!(store.state_delete("a", "nul").await.unwrap());
    store.state_set("a", "k", "v1", 100).await.unwrap();
    assert_eq!(store.state_get("b", "k").await.unwrap(), None);
    assert_eq!(
        store.state_list("b", "").await.unwrap(),
        Vec::<String>::new()
    );
    assert!(
        !store
            .state_compare_and_set("a", "k", Some("v0"), "v2", 100)
            .await
            .unwrap()
    );
    assert!(
        store
            .state_compare_and_set("a", "k", Some("v1"), "v2", 100)
            .await
            .unwrap()
    );
    assert!(
        !store
            .state_compare_and_set("a", "k", None, "v3", 100)
            .await
            .unwrap()
    );
    assert!(matches!(
        store.state_set("a", "big", &"x".repeat(200), 100).await,
        Err(StateError::QuotaExceeded)
    ));
    // Deleting frees its bytes for the next write.
    store
        .state_set("a", "big", &"x".repeat(95), 100)
        .await
        .unwrap_err();
    assert!(store.state_delete("a", "k").await.unwrap());
    store
        .state_set("a", "big", &"x".repeat(95), 100)
        .await
        .unwrap();
    assert!(store.state_delete("a", "big").await.unwrap());
    store.state_set("a", "k%_", "v", 100).await.unwrap();
    assert_eq!(
        store.state_list("a", "k%").await.unwrap(),
        vec!["k%_".to_string()]
    );
    assert!(matches!(
        store.state_get("a", "").await,
        Err(StateError::InvalidKey)
    ));
}

/// A connection to the test server that holds `task`'s row lock until
/// dropped (its transaction never commits).
async fn lock_task_row(pg: &Postgres, task: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM task WHERE id = '{task}' FOR UPDATE"
        ))
        .await
        .unwrap();
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_answers_busy_after_its_wait_and_a_cut_connection_charges_nothing() {
    let pg = Postgres::start();
    let settings = PoolSettings {
        max_connections: 1,
        wait: Duration::from_millis(300),
        ..PoolSettings::default()
    };
    let store = std::sync::Arc::new(PostgresStore::connect(&pg.url(), settings).await.unwrap());
    let (task, _) = store.open_task(new_task(None, None)).await.unwrap();

    // The one connection waits on a row another transaction holds...
    let holder = lock_task_row(&pg, &task.id).await;
    let waiting = {
        let (store, id) = (store.clone(), task.id.clone());
        tokio::spawn(async move { store.charge(&id, "x_y_get", Charge::Read).await })
    };
    let mut waiting_on_lock = Vec::new();
    for _ in 0..100 {
        waiting_on_lock = pg
            .query(
                "SELECT pid FROM pg_stat_activity \
                 WHERE application_name = 'toolhost' AND wait_event_type = 'Lock'",
            )
            .await;
        if !waiting_on_lock.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(waiting_on_lock.len(), 1, "the charge waits on the row lock");
    // ... so the next operation waits for the pool's wait time, then `busy`.
    let began = std::time::Instant::now();
    let busy = store.state_get("p", "k").await;
    assert!(
        matches!(&busy, Err(StateError::Unavailable(e)) if e.contains("busy")),
        "{busy:?}"
    );
    assert!(began.elapsed() >= Duration::from_millis(250));
    assert!(began.elapsed() < Duration::from_secs(3));

    // The waiting charge's connection is cut mid-statement: it fails,
    // and nothing was charged.
    let victims = pg
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'toolhost' AND wait_event_type = 'Lock'",
        )
        .await;
    assert_eq!(victims, ["t"], "one charge was waiting on the lock");
    let cut = waiting.await.unwrap();
    assert!(
        matches!(cut, Err(toolhost::store::StoreError::Unavailable(_))),
        "{cut:?}"
    );
    drop(holder);
    let used = pg
        .query(&format!(
            "SELECT calls_used FROM task WHERE id = '{}'",
            task.id
        ))
        .await;
    assert_eq!(used, ["0"]);
    // The pool replaces the dead connection by itself. Until the driver
    // has noticed the cut, the pool may hand the dead one out once more;
    // that operation fails as retryable, and the next gets a new one.
    let mut charged = None;
    for _ in 0..3 {
        match store.charge(&task.id, "x_y_get", Charge::Read).await {
            Ok(result) => {
                charged = Some(result.unwrap());
                break;
            }
            Err(StoreError::Unavailable(_)) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(charged.expect("charged after the cut").calls_used, 1);
}

#[tokio::test]
async fn a_url_that_asks_for_tls_gets_a_verified_connection() {
    let pg = Postgres::start();
    let ca = pg.enable_tls();
    let base = format!("postgres://postgres@localhost:{}/postgres", pg.port);
    let ca_param: String = percent_encoding::utf8_percent_encode(
        &ca.display().to_string(),
        percent_encoding::NON_ALPHANUMERIC,
    )
    .to_string();
    let verified = format!("{base}?sslmode=verify-full&sslrootcert={ca_param}");
    let store = PostgresStore::connect(&verified, PoolSettings::default())
        .await
        .expect("TLS verified against the test CA");
    store.tasks().await.unwrap();
    let over_tls = pg
        .query("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND application_name = 'toolhost'")
        .await;
    assert_ne!(over_tls, ["0"], "the host's connections use TLS");

    // The same server against the web's roots: its certificate is refused.
    let unverified =
        PostgresStore::connect(&format!("{base}?sslmode=require"), PoolSettings::default()).await;
    assert!(
        matches!(&unverified, Err(StoreError::Database(e)) if e.contains("TLS")),
        "{:?}",
        unverified.err()
    );
}

fn approval_request(task: &str, binding: &str) -> ApprovalRequest {
    ApprovalRequest {
        task_id: task.into(),
        tool: "notes_note_delete".into(),
        binding: binding.into(),
        arguments: serde_json::json!({ "slug": binding }),
        summary: format!("delete {binding}"),
        ttl: Duration::from_secs(600),
        operator_only: false,
        in_client: false,
        asked_by: Some("http session 12345678".into()),
    }
}

async fn approvals_are_asked_once_used_once_and_end_with_their_task(store: &dyn Store) {
    let mut new = new_task(None, None);
    new.grants = vec!["notes_note_delete".into()];
    let (task, _) = store.open_task(new).await.unwrap();
    let delete = "notes_note_delete";
    let destructive = |binding| Charge::Destructive { binding };

    // Asked twice, one question; no yes yet, no charge.
    let asked = store
        .request_approval(approval_request(&task.id, "b1"))
        .await
        .unwrap();
    let again = store
        .request_approval(approval_request(&task.id, "b1"))
        .await
        .unwrap();
    assert_eq!(asked.id, again.id);
    assert_eq!(asked.state, ApprovalState::Pending);
    assert_eq!(
        store
            .charge(&task.id, delete, destructive("b1"))
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::ApprovalMissing
    );
    assert_eq!(store.approvals(true).await.unwrap().len(), 1);

    // A yes is used by exactly one call of that binding.
    let approved = store
        .decide(&asked.id, Decision::Approve, "alice", "cli", None)
        .await
        .unwrap();
    assert_eq!(approved.state, ApprovalState::Approved);
    assert_eq!(approved.decided_by.as_deref(), Some("alice"));
    assert!(matches!(
        store
            .decide(&asked.id, Decision::Deny, "bob", "cli", None)
            .await,
        Err(StoreError::AlreadyDecided { .. })
    ));
    assert_eq!(
        store
            .charge(&task.id, delete, destructive("b2"))
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::ApprovalMissing
    );
    let charged = store
        .charge(&task.id, delete, destructive("b1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(charged.approval.as_deref(), Some(asked.id.as_str()));
    assert_eq!(
        store
            .charge(&task.id, delete, destructive("b1"))
            .await
            .unwrap()
            .unwrap_err(),
        ChargeRefusal::ApprovalMissing
    );
    assert_eq!(
        store.approval(&asked.id).await.unwrap().unwrap().state,
        ApprovalState::Used
    );

    // A no is reported once, then the call may be asked again.
    let second = store
        .request_approval(approval_request(&task.id, "b2"))
        .await
        .unwrap();
    store
        .decide(&second.id, Decision::Deny, "alice", "cli", None)
        .await
        .unwrap();
    let denied = store.take_denial(&task.id, "b2").await.unwrap().unwrap();
    assert_eq!(denied.id, second.id);
    assert!(store.take_denial(&task.id, "b2").await.unwrap().is_none());
    let third = store
        .request_approval(approval_request(&task.id, "b2"))
        .await
        .unwrap();
    assert_ne!(third.id, second.id);

    // Closed: the used yes, the no, and a question whose time ran out
    // (its row still says pending); not the question still waiting. No
    // more than asked for.
    let lapsed = store
        .request_approval(ApprovalRequest {
            ttl: Duration::ZERO,
            ..approval_request(&task.id, "lapsed")
        })
        .await
        .unwrap();
    let closed = |list: Vec<Approval>| -> Vec<(String, ApprovalState)> {
        list.into_iter()
            .filter(|a| a.task_id == task.id)
            .map(|a| (a.id, a.state))
            .collect()
    };
    let mut found = closed(store.closed_approvals(10).await.unwrap());
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut expected = vec![
        (asked.id.clone(), ApprovalState::Used),
        (second.id.clone(), ApprovalState::Denied),
        (lapsed.id.clone(), ApprovalState::Expired),
    ];
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(found, expected);
    assert_eq!(store.closed_approvals(1).await.unwrap().len(), 1);

    // At most MAX_PENDING_PER_TASK questions wait at once.
    for n in 0..MAX_PENDING_PER_TASK - 1 {
        store
            .request_approval(approval_request(&task.id, &format!("cap-{n}")))
            .await
            .unwrap();
    }
    assert!(matches!(
        store
            .request_approval(approval_request(&task.id, "one-more"))
            .await,
        Err(StoreError::TooManyPending(_, _))
    ));
    // Revoking the task ends every question about it.
    store.revoke_task(&task.id, "alice").await.unwrap();
    assert!(
        store
            .approvals(true)
            .await
            .unwrap()
            .iter()
            .all(|a| a.task_id != task.id)
    );
    assert_eq!(
        store.approval(&third.id).await.unwrap().unwrap().state,
        ApprovalState::Expired
    );
    // Questions ended with their task are closed.
    let found = closed(store.closed_approvals(1_000).await.unwrap());
    assert_eq!(found.len(), 3 + MAX_PENDING_PER_TASK);
    assert!(found.contains(&(third.id.clone(), ApprovalState::Expired)));
}

/// Also: a token names its task for the task's whole life, through
/// extension and revocation; the HTTP endpoint remembers checked tokens on
/// that promise (`mcp/http/tokens.rs`).
async fn tasks_are_extended_and_served_again_as_the_cli_expects(store: &dyn Store) {
    let (task, token) = store.open_task(new_task(None, None)).await.unwrap();
    let names = |found: Option<toolhost::store::Task>| found.map(|t| t.id);
    assert_eq!(
        names(store.authenticate(token.as_str()).await.unwrap()),
        Some(task.id.clone())
    );
    let extended = store
        .extend_task(&task.id, Duration::from_secs(7_200), "alice")
        .await
        .unwrap();
    assert!(extended.expires_at > task.expires_at);
    store.revoke_task(&task.id, "alice").await.unwrap();
    let revoked = store.authenticate(token.as_str()).await.unwrap().unwrap();
    assert_eq!(revoked.id, task.id);
    assert!(revoked.revoked_at.is_some());
    assert!(matches!(
        store
            .extend_task(&task.id, Duration::from_secs(60), "alice")
            .await,
        Err(StoreError::TaskClosed { .. })
    ));
    assert!(store.tasks().await.unwrap().iter().any(|t| t.id == task.id));

    // What the console lists: every open task, and as many of the ended
    // ones as asked for, newest first like the whole list.
    let (open, _) = store.open_task(new_task(None, None)).await.unwrap();
    let ids = |tasks: Vec<toolhost::store::Task>| -> Vec<String> {
        tasks.into_iter().map(|t| t.id).collect()
    };
    let all = store.tasks().await.unwrap();
    let at = toolhost::store::now();
    let open_ones: Vec<String> = all
        .iter()
        .filter(|t| t.state(at) == TaskState::Open)
        .map(|t| t.id.clone())
        .collect();
    assert!(open_ones.contains(&open.id) && !open_ones.contains(&task.id));
    assert!(
        all.len() > open_ones.len() + 1,
        "the earlier tests ended some"
    );
    assert_eq!(ids(store.recent_tasks(0).await.unwrap()), open_ones);
    // The newest ended one, in its place among the open ones.
    let newest_ended = all
        .iter()
        .find(|t| t.state(at) != TaskState::Open)
        .map(|t| t.id.clone())
        .unwrap();
    let expected: Vec<String> = all
        .iter()
        .map(|t| t.id.clone())
        .filter(|id| open_ones.contains(id) || *id == newest_ended)
        .collect();
    assert_eq!(ids(store.recent_tasks(1).await.unwrap()), expected);
    assert_eq!(ids(store.recent_tasks(100_000).await.unwrap()), ids(all));

    // `serve --task ID`: created, re-opened with new grants, never over an
    // opened task, never after a revocation.
    let grants = vec!["notes_note_save".to_string()];
    let ad_hoc = store
        .ad_hoc_task("adhoc-1", &grants, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(ad_hoc.ad_hoc && ad_hoc.grants == grants);
    let more = vec![
        "notes_note_save".to_string(),
        "notes_note_delete".to_string(),
    ];
    let reopened = store
        .ad_hoc_task("adhoc-1", &more, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(reopened.grants, more);
    assert!(matches!(
        store
            .ad_hoc_task(&task.id, &grants, Duration::from_secs(60))
            .await,
        Err(StoreError::TaskExists(_))
    ));
    store.revoke_task("adhoc-1", "alice").await.unwrap();
    assert!(matches!(
        store
            .ad_hoc_task("adhoc-1", &grants, Duration::from_secs(60))
            .await,
        Err(StoreError::TaskClosed { .. })
    ));

    // An operator's move of a plugin's value, and listing in byte order.
    for key in ["trash/b", "note/b", "note/a", "note/B"] {
        store.state_set("mover", key, "v", 1_000).await.unwrap();
    }
    assert!(matches!(
        store
            .state_rename("mover", "trash/b", "note/b", "alice")
            .await,
        Err(StoreError::KeyExists(_))
    ));
    assert!(matches!(
        store
            .state_rename("mover", "trash/none", "note/c", "alice")
            .await,
        Err(StoreError::NoKey(_))
    ));
    store
        .state_rename("mover", "trash/b", "note/c", "alice")
        .await
        .unwrap();
    assert_eq!(
        store.state_list("mover", "note/").await.unwrap(),
        ["note/B", "note/a", "note/b", "note/c"]
    );
}

/// Operators are unique by name; a sign-in lives while used, ends when idle
/// or old, and ends with a password change or the operator's removal.
async fn operators_and_their_sign_ins(store: &dyn Store) {
    let account = |name: &str, role| Account {
        name: name.into(),
        role,
        password_hash: format!("$argon2id$fake${name}"),
        created_at: toolhost::store::now(),
        created_by: "test".into(),
    };
    store
        .add_account(&account("bob", Role::Approver))
        .await
        .unwrap();
    store
        .add_account(&account("alice", Role::Admin))
        .await
        .unwrap();
    assert!(matches!(
        store.add_account(&account("bob", Role::Admin)).await,
        Err(StoreError::OperatorExists(name)) if name == "bob"
    ));
    let names: Vec<_> = store
        .accounts()
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.name, a.role))
        .collect();
    assert_eq!(
        names,
        [
            ("alice".to_string(), Role::Admin),
            ("bob".to_string(), Role::Approver)
        ]
    );
    assert_eq!(
        store.account("bob").await.unwrap().unwrap().password_hash,
        "$argon2id$fake$bob"
    );

    let live = SignInLimits {
        idle_secs: 600,
        max_secs: 3600,
    };
    let cookie = [7u8; 32];
    store.open_sign_in(&cookie, "bob", "csrf-1").await.unwrap();
    let found = store.sign_in(&cookie, live).await.unwrap().unwrap();
    assert_eq!(
        (found.operator.as_str(), found.role, found.csrf.as_str()),
        ("bob", Role::Approver, "csrf-1")
    );
    assert!(
        store.sign_in(&[8u8; 32], live).await.unwrap().is_none(),
        "an unknown cookie signs nobody in"
    );
    // Past its idle time (here: none at all) it ends, and stays ended.
    let idle_now = SignInLimits {
        idle_secs: 0,
        max_secs: 3600,
    };
    assert!(store.sign_in(&cookie, idle_now).await.unwrap().is_none());
    assert!(store.sign_in(&cookie, live).await.unwrap().is_none());

    store.open_sign_in(&cookie, "bob", "csrf-2").await.unwrap();
    store
        .set_password("bob", "$argon2id$fake$new", "test")
        .await
        .unwrap();
    assert!(
        store.sign_in(&cookie, live).await.unwrap().is_none(),
        "a new password ends sign-ins"
    );
    store.open_sign_in(&cookie, "bob", "csrf-3").await.unwrap();
    store.remove_account("bob", "test").await.unwrap();
    assert!(
        store.sign_in(&cookie, live).await.unwrap().is_none(),
        "removal ends sign-ins"
    );
    assert!(matches!(
        store.remove_account("bob", "test").await,
        Err(StoreError::NoOperator(_))
    ));
    assert!(matches!(
        store.set_password("bob", "x", "test").await,
        Err(StoreError::NoOperator(_))
    ));
}
