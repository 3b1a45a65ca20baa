//! `toolhost call`: one call against the manifest, without an MCP client.

use serde_json::{Value, json};

use super::audit::records;
use super::support::*;

fn call_cli(manifest: &TestManifest, args: &[&str]) -> (i32, Value, String) {
    let out = cli_output(manifest, args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        value,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn call_runs_one_tool_with_the_hosts_policy_and_records_it() {
    let m = manifest(vec![PluginEntry::helpdesk()]);

    let (code, result, _) = call_cli(
        &m,
        &[
            "call",
            "helpdesk_ticket_get",
            "--args",
            r#"{"key": "T-1041"}"#,
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(result["key"], json!("T-1041"), "{result}");

    // A write tool without a task is refused, as in any session.
    let close = json!({ "key": "T-1048" }).to_string();
    let (code, error, _) = call_cli(&m, &["call", "helpdesk_ticket_close", "--args", &close]);
    assert_eq!(code, 1);
    assert_eq!(error["ok"], json!(false));
    assert_eq!(error["code"], json!("not_granted"), "{error}");

    let task = open_task(&m, &["helpdesk_ticket_close"], &[]);
    let (code, closed, stderr) = call_cli(
        &m,
        &[
            "call",
            "helpdesk_ticket_close",
            "--args",
            &close,
            "--task-token",
            &task.token,
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(closed.is_object());

    // Bad input is an error on stderr, not a call.
    for (args, expected) in [
        (
            vec!["call", "helpdesk_ticket_get", "--args", "[1]"],
            "JSON object",
        ),
        (
            vec!["call", "helpdesk_ticket_get", "--args", "{"],
            "not JSON",
        ),
        (
            vec!["call", "helpdesk_nothing_get"],
            "no tool `helpdesk_nothing_get`",
        ),
        (
            vec!["call", "helpdesk_ticket_get", "--task-token", "tht_nope"],
            "unknown to this host's store",
        ),
    ] {
        let (code, _, stderr) = call_cli(&m, &args);
        assert_eq!(code, 1, "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }

    let state = m.path.parent().unwrap().join(".toolhost");
    let trail = records(&state);
    let calls: Vec<(&str, &str)> = trail
        .iter()
        .filter(|r| r["event"] == "tool_call")
        .map(|r| (r["tool"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        [
            ("helpdesk_ticket_get", "ok"),
            ("helpdesk_ticket_close", "not_granted"),
            ("helpdesk_ticket_close", "ok"),
        ]
    );
    assert!(
        trail
            .iter()
            .any(|r| r["event"] == "session_opened" && r["transport"] == "cli")
    );
}
