//! Instances per session and per call, over both HTTP protocol eras.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn two_concurrent_http_sessions_keep_separate_state() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &[]);
    let (a, b) = tokio::join!(
        connect_with(&host.url, Some(&task.token), ()),
        connect_with(&host.url, Some(&task.token), ())
    );
    let (a, b) = (a.unwrap(), b.unwrap());

    let (closed, seen) = tokio::join!(
        ok(&a, "helpdesk_ticket_close", json!({ "key": "T-1048" })),
        ok(&b, "helpdesk_ticket_get", json!({ "key": "T-1041" })),
    );
    assert_eq!(closed["status"], "closed");
    assert_eq!(seen["status"], "open");

    let in_b = ok(&b, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(in_b["status"], "open", "session B does not see A's change");
    let in_a = ok(&a, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(in_a["status"], "closed", "session A keeps its own change");
    let stats_b = ok(&b, "helpdesk_stats_get", json!({})).await;
    assert_eq!(stats_b["by_status"]["closed"], 0);

    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn a_stateless_2026_client_lists_and_calls_with_fresh_instances() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let host = http(&m, &[]);
    let client = connect_stateless(&host.url).await;
    assert_eq!(tools(&client).await.len(), 11);
    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1045" })).await;
    assert_eq!(ticket["subject"], "Sensor shows 0 cm since Tuesday");
    // No session: each request gets fresh instances, so nothing carries over.
    for _ in 0..2 {
        let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
        assert_eq!(counted["calls"], 1);
    }
    // A request that writes megabytes of its memory leaves nothing for the
    // next one in the same pool slot.
    call(
        &client,
        "fixture_fault_run",
        json!({ "fault": "big-output" }),
    )
    .await;
    let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    assert_eq!(counted["calls"], 1);
    let error = refused(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    assert_eq!(error["code"], "not_granted");
    client.cancel().await.unwrap();
}

/// An instance often gets a pool slot that another instance used; what
/// that one wrote (on its stack, in its static data, over 4 MiB of its
/// heap) must not be there for the next. One worker thread, so every
/// instance comes from the same shard of the pool and a fresh instance of
/// the fixture takes the slot its predecessor left. Without swap this
/// cannot catch a reset that skips swapped-out pages (the scan-based reset
/// docs/architecture.md keeps off); it holds the reset the host uses.
#[tokio::test]
async fn a_fresh_instance_never_sees_what_the_last_one_wrote() {
    let m = manifest(vec![PluginEntry::fixture()]);
    let host = http(&m, &["--workers", "1"]);
    let scribble = json!({ "fault": "scribble", "seed": 7 });

    // Within one session the instance lives on, so its own scan finds what
    // it wrote: the scan reads where the writes went. Eight of the words
    // were on the stack, which later calls may overwrite.
    let session = connect(&host.url).await;
    let written = ok(&session, "fixture_fault_run", scribble.clone()).await;
    let seen = ok(
        &session,
        "fixture_fault_run",
        json!({ "fault": "scan", "seed": 7 }),
    )
    .await;
    let written = written["written"].as_u64().unwrap();
    assert!(seen["found"].as_u64().unwrap() >= written - 8, "{seen}");
    session.cancel().await.unwrap();

    // Each stateless request gets a fresh instance, whose scan first grows
    // its memory over all that the scribbling instance had.
    let scribbled = seen["bytes"].as_u64().unwrap();
    let scan = json!({ "fault": "scan", "seed": 7, "bytes": scribbled });
    let stateless = connect_stateless(&host.url).await;
    for _ in 0..5 {
        ok(&stateless, "fixture_fault_run", scribble.clone()).await;
        let fresh = ok(&stateless, "fixture_fault_run", scan.clone()).await;
        assert_eq!(fresh["found"], 0, "{fresh}");
        assert!(fresh["bytes"].as_u64().unwrap() >= scribbled, "{fresh}");
    }
    stateless.cancel().await.unwrap();
}

#[tokio::test]
async fn session_instances_keep_state_and_call_instances_do_not() {
    let mut per_call = PluginEntry::fixture().with("instance = \"call\"");
    per_call.name = "fixture".into();
    let m = manifest(vec![PluginEntry::fixture()]);
    let client = stdio(&m, &[]).await;
    for expected in 1..=3 {
        let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
        assert_eq!(counted["calls"], expected);
    }
    client.cancel().await.unwrap();

    let m = manifest(vec![per_call]);
    let client = stdio(&m, &[]).await;
    for _ in 0..3 {
        let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
        assert_eq!(counted["calls"], 1);
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn stateless_requests_of_a_task_share_the_task_s_instances() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &[]);
    let client = connect_stateless_with(&host.url, Some(&task.token), ()).await;
    ok(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(
        ticket["status"], "closed",
        "the next request sees the change"
    );
    for expected in 1..=2 {
        let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
        assert_eq!(counted["calls"], expected);
    }
    // A 2025-11-25 session keeps its own instances all the same.
    let legacy = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let ticket = ok(&legacy, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(ticket["status"], "open");
    client.cancel().await.unwrap();
    legacy.cancel().await.unwrap();
}

/// A task's stateless requests share one session (and its instances), kept
/// as long as an MCP session would be: after `--session-idle` with no
/// request it is dropped with its instances, and the task starts afresh.
#[tokio::test]
async fn a_task_stateless_session_is_dropped_when_idle() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let host = http(&m, &["--session-idle", "2s"]);
    let stateless = connect_stateless_with(&host.url, Some(&task.token), ()).await;
    ok(
        &stateless,
        "helpdesk_ticket_close",
        json!({ "key": "T-1048" }),
    )
    .await;
    let status = || async {
        ok(
            &stateless,
            "helpdesk_ticket_get",
            json!({ "key": "T-1048" }),
        )
        .await["status"]
            .clone()
    };
    assert_eq!(
        status().await,
        "closed",
        "the task's requests share an instance"
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(status().await, "open", "an idle task session starts afresh");
    stateless.cancel().await.unwrap();
}
