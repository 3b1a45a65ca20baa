//! A plugin that crashes, loops, hoards memory or returns junk ends only its
//! own call, with a code the model can act on.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_trap_ends_the_call_and_resets_the_session_instance() {
    let m = manifest(vec![PluginEntry::fixture()]);
    let client = stdio(&m, &[]).await;
    ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    let error = refused(&client, "fixture_fault_run", json!({ "fault": "trap" })).await;
    assert_eq!(error["code"], "plugin_trap");
    assert!(error["message"].as_str().unwrap().contains("reset"));
    let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    assert_eq!(counted["calls"], 1, "a fresh instance after the trap");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_endless_loop_times_out_and_the_host_keeps_serving() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 300 }"),
        PluginEntry::helpdesk(),
    ]);
    let client = stdio(&m, &[]).await;
    let (looped, ticket) = tokio::join!(
        refused(&client, "fixture_fault_run", json!({ "fault": "loop" })),
        ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })),
    );
    assert_eq!(looped["code"], "timeout");
    assert_eq!(looped["retryable"], true);
    assert_eq!(ticket["key"], "T-1041");
    client.cancel().await.unwrap();
}

/// With `--workers 1` a spinning guest shares the one thread with
/// everything else: it must still let the session's other requests be read
/// and answered while it runs.
#[tokio::test]
async fn a_spinning_plugin_on_a_one_worker_host_leaves_room_for_other_calls() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 20000 }"),
        PluginEntry::helpdesk(),
    ]);
    let client = stdio(&m, &["--workers", "1"]).await;
    {
        let spin = refused(&client, "fixture_fault_run", json!({ "fault": "loop" }));
        let others = async {
            for _ in 0..20 {
                let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
                assert_eq!(ticket["key"], "T-1041");
            }
        };
        tokio::pin!(spin);
        tokio::select! {
            biased;
            looped = &mut spin => panic!("the spinning call ended first: {looped}"),
            () = others => {}
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_plugin_waiting_inside_the_host_times_out_too() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 300 }"),
    ]);
    let client = stdio(&m, &[]).await;
    ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    let slept = refused(&client, "fixture_fault_run", json!({ "fault": "sleep" })).await;
    assert_eq!(slept["code"], "timeout");
    assert!(slept["message"].as_str().unwrap().contains("reset"));
    // The session's instance was replaced, so the session is not stuck.
    let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    assert_eq!(counted["calls"], 1);
    client.cancel().await.unwrap();
}

#[test]
fn a_describe_that_never_returns_refuses_only_its_plugin() {
    let m = manifest(vec![
        PluginEntry::fixture()
            .with("limits = { call_timeout_ms = 300 }\nconfig = { describe = \"sleep\" }"),
        PluginEntry::helpdesk(),
    ]);
    let out = start_and_exit(&m, &["--strict"]);
    assert!(!out.success);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("describe() failed") && stderr.contains("300ms"),
        "{stderr}"
    );
}

#[tokio::test]
async fn memory_output_and_contract_violations_have_their_own_codes() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { memory_mib = 16, output_kib = 64 }"),
    ]);
    let client = stdio(&m, &[]).await;
    let oom = refused(&client, "fixture_fault_run", json!({ "fault": "memory" })).await;
    assert_eq!(oom["code"], "out_of_memory");
    let big = refused(
        &client,
        "fixture_fault_run",
        json!({ "fault": "big-output" }),
    )
    .await;
    assert_eq!(big["code"], "output_too_large");
    let junk = refused(&client, "fixture_fault_run", json!({ "fault": "not-json" })).await;
    assert_eq!(junk["code"], "invalid_output");
    let echo = ok(&client, "fixture_echo_get", json!({ "text": "still here" })).await;
    assert_eq!(echo["text"], "still here");
    client.cancel().await.unwrap();
}

/// Start code that waits inside the host (a WASI sleep while the component
/// is instantiated, where no epoch check runs) is cut off by the call's
/// timer, as a call's code is: the call that needed the instance fails with
/// `timeout` and frees its place, and a host starting meanwhile refuses the
/// plugin instead of never starting.
#[tokio::test]
async fn start_code_that_never_returns_is_cut_off() {
    let stalling = |name: &str| {
        PluginEntry::fixture_as(
            name,
            &format!(
                "instance = \"call\"\n\
                 limits = {{ call_timeout_ms = 500, concurrent = 1, queue = 0 }}\n\
                 files = [{{ host = \"scratch\", guest = \"/scratch\", mode = \"rw\" }}]\n\
                 config = {{ stall_at_start = \"/scratch/stall\", prefix = \"{name}\" }}"
            ),
        )
    };
    let m = manifest(vec![stalling("fixture"), PluginEntry::helpdesk()]);
    let scratch = m.path.parent().unwrap().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let client = stdio(&m, &[]).await;
    ok(&client, "fixture_echo_get", json!({ "text": "before" })).await;

    std::fs::write(scratch.join("stall"), "").unwrap();
    for _ in 0..2 {
        let began = std::time::Instant::now();
        let stalled = tokio::time::timeout(
            Duration::from_secs(30),
            refused(&client, "fixture_echo_get", json!({ "text": "stalled" })),
        )
        .await
        .expect("a call whose instance never starts ends");
        assert_eq!(stalled["code"], "timeout", "{stalled}");
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "{:?}",
            began.elapsed()
        );
    }
    std::fs::remove_file(scratch.join("stall")).unwrap();
    // One place in all: it was given back each time.
    let echo = ok(&client, "fixture_echo_get", json!({ "text": "after" })).await;
    assert_eq!(echo["text"], "after");
    client.cancel().await.unwrap();

    // A plugin whose describe() needs an instance that never starts.
    let m = manifest(vec![stalling("stalled"), PluginEntry::helpdesk()]);
    let scratch = m.path.parent().unwrap().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    std::fs::write(scratch.join("stall"), "").unwrap();
    let out = start_and_exit(&m, &[]);
    let refusal = refusal_line(&out.stderr, "stalled");
    assert!(refusal.contains("500ms"), "{refusal}");
    assert!(out.stderr.contains("plugin loaded"), "{}", out.stderr);
}
