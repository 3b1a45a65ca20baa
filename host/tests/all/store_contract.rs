//! What every store backend promises, checked on SQLite and on PostgreSQL
//! alike: budgets and the write rate charged exactly, plugin state scoped
//! per plugin, bounded by its quota, with a compare-and-set that compares.

use std::time::Duration;

use toolhost::store::postgres::{PoolSettings, PostgresStore};
use toolhost::store::{Charge, ChargeRefusal, NewTask, SqliteStore, StateError, Store, TaskState};

use crate::postgres::Postgres;

#[tokio::test]
async fn the_sqlite_store_keeps_its_promises() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path()).unwrap();
    budget_and_write_rate_are_charged_exactly(&store).await;
    state_is_scoped_and_bounded(&store).await;
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[tokio::test]
async fn the_postgres_store_keeps_its_promises() {
    let pg = Postgres::start();
    let store = PostgresStore::connect(&pg.url(), PoolSettings::default())
        .await
        .unwrap();
    budget_and_write_rate_are_charged_exactly(&store).await;
    state_is_scoped_and_bounded(&store).await;
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
    assert!(
        store
            .charge(&task.id, "x_y_get", Charge::Read)
            .await
            .unwrap()
            .is_ok()
    );
    assert!(
        store
            .charge(&task.id, "x_y_get", Charge::Read)
            .await
            .unwrap()
            .is_ok()
    );
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
    tokio::time::sleep(Duration::from_millis(200)).await;
    // ... so the next operation waits for the pool's wait time, then `busy`.
    let began = std::time::Instant::now();
    let busy = store.state_get("p", "k").await;
    assert!(
        matches!(&busy, Err(StateError::Unavailable(e)) if e.contains("busy")),
        "{busy:?}"
    );
    assert!(began.elapsed() >= Duration::from_millis(250));
    assert!(began.elapsed() < Duration::from_secs(3));

    // The waiting charge's connection is cut mid-transaction: it fails,
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
    // The pool replaces the dead connection by itself.
    let charged = store
        .charge(&task.id, "x_y_get", Charge::Read)
        .await
        .unwrap();
    assert_eq!(charged.unwrap().task.calls_used, 1);
}
