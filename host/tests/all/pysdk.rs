//! Interop with the official MCP Python SDK (PyPI `mcp`) over Streamable
//! HTTP, and what ending a session with `DELETE /mcp` answers.
//!
//! `just python-sdk-setup` (part of `just test`) installs the pinned SDK in
//! the virtualenv `target/pysdk`; the script it runs is
//! `tests/fixtures/pysdk/client.py`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

/// The virtualenv's Python, with the SDK installed.
fn python() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pysdk/bin/python");
    assert!(
        path.exists(),
        "{} is missing: install the MCP Python SDK first (`just python-sdk-setup`, or run the suite with `just test`)",
        path.display()
    );
    path
}

#[tokio::test]
async fn the_python_sdk_opens_uses_and_ends_a_session_without_complaint() {
    let python = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pysdk/client.py");
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let mut host = http(&m, &[]);

    let run = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&host.url)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    // A guard against a client that never finishes, not a measurement.
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the Python client finishes within 2 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python client failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("Session termination failed"),
        "the SDK did not accept the answer to its DELETE:\n{stderr}"
    );

    let seen: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the client prints one JSON object, got {stdout:?}: {e}"));
    assert_eq!(seen["protocol"], "2025-11-25", "{seen}");
    let mut expected: Vec<&str> = HELPDESK_TOOLS.iter().map(|(name, _)| *name).collect();
    expected.sort_unstable();
    assert_eq!(seen["tools"], json!(expected), "{seen}");
    assert_eq!(seen["ticket"]["key"], "T-1041", "{seen}");
    assert_eq!(seen["ticket"]["status"], "open", "{seen}");
    assert_eq!(
        seen["deletes"],
        json!([204]),
        "one DELETE, answered 204: {seen}"
    );

    // The DELETE closed the session while the host kept running: its
    // closing record is there before the host stops.
    let state = m.path.parent().unwrap().join(".toolhost");
    let records = crate::audit::wait_for(&state, "session_closed");
    assert!(
        host.child.try_wait().unwrap().is_none(),
        "the host is still serving"
    );
    let opened = records
        .iter()
        .find(|r| r["event"] == "session_opened" && r["client"] == "toolhost-pysdk-test")
        .unwrap_or_else(|| panic!("no session_opened of the Python client in {records:#?}"));
    assert_eq!(opened["transport"], "http", "{opened}");
    assert_eq!(opened["protocol"], "2025-11-25", "{opened}");
    let closed = records
        .iter()
        .find(|r| r["event"] == "session_closed" && r["session"] == opened["session"])
        .unwrap_or_else(|| panic!("the Python client's session was not closed: {records:#?}"));
    assert_eq!(closed["calls"], 1, "{closed}");
}

/// A request as a 2025-11-25 client sends it, in `session` if given.
fn request(method: reqwest::Method, url: &str, session: Option<&str>) -> reqwest::RequestBuilder {
    request_as(method, url, session, "2025-11-25")
}

fn request_as(
    method: reqwest::Method,
    url: &str,
    session: Option<&str>,
    version: &str,
) -> reqwest::RequestBuilder {
    let mut request = http_client()
        .request(method, url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

/// The status of a refusal, which must carry a JSON-RPC error, and its message.
async fn refusal(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("a JSON-RPC error body");
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    let message = body["error"]["message"].as_str().unwrap().to_string();
    (status, message)
}

#[tokio::test]
async fn deleting_a_session_answers_204_then_404() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &[]);

    let opened = request(reqwest::Method::POST, &host.url, None)
        .header("content-type", "application/json")
        .body(INITIALIZE)
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    drop(opened);

    let ended = request(reqwest::Method::DELETE, &host.url, Some(&session))
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 204);
    assert!(ended.bytes().await.unwrap().is_empty(), "204 has no body");

    // The session is gone: ending it again, or using it, is a 404.
    let again = request(reqwest::Method::DELETE, &host.url, Some(&session))
        .send()
        .await
        .unwrap();
    let (status, message) = refusal(again).await;
    assert_eq!(
        (status, message.as_str()),
        (404, "Not Found: Session not found")
    );
    let ping = request(reqwest::Method::POST, &host.url, Some(&session))
        .header("content-type", "application/json")
        .body(r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(ping.status(), 404);

    // A session id never issued is a 404 too.
    let unknown = request(reqwest::Method::DELETE, &host.url, Some("no-such-session"))
        .send()
        .await
        .unwrap();
    assert_eq!(refusal(unknown).await.0, 404);

    // What rmcp refuses stays refused as before.
    let without_id = request(reqwest::Method::DELETE, &host.url, None)
        .send()
        .await
        .unwrap();
    assert_eq!(refusal(without_id).await.0, 400);
    let foreign = request(reqwest::Method::DELETE, &host.url, Some("no-such-session"))
        .header("origin", "https://attacker.example")
        .send()
        .await
        .unwrap();
    assert_eq!(refusal(foreign).await.0, 403);
    let unknown_version = request_as(
        reqwest::Method::DELETE,
        &host.url,
        Some("no-such-session"),
        "1999-01-01",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refusal(unknown_version).await.0, 400);
    // A 2026-07-28 client has no session to end.
    let stateless = request_as(
        reqwest::Method::DELETE,
        &host.url,
        Some("no-such-session"),
        "2026-07-28",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(refusal(stateless).await.0, 405);
}
