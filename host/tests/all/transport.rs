//! The transports themselves: stdout holds JSON-RPC only, messages are
//! capped, malformed input gets JSON-RPC errors, HTTP checks Host and Origin.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::support::*;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;

#[test]
fn stdio_answers_oversized_and_malformed_lines_and_keeps_going() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let mut child = toolhost()
        .env("TOOLHOST_LOG", "debug")
        .args([
            "serve",
            "--stdio",
            "--max-message-bytes",
            "1024",
            "--manifest",
        ])
        .arg(&m.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(4096)
    );
    let mut stdin = child.stdin.take().unwrap();
    for line in [
        // A notification before the first request is dropped, not fatal.
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        INITIALIZE,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &huge,
        "{not json",
        r#"{"jsonrpc":"2.0","id":3}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"helpdesk_ticket_get","arguments":{"key":"T-1041"}}}"#,
        // The plugin's panic message goes to its stderr, which must reach the host log only.
        r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fixture_fault_run","arguments":{"fault":"trap"}}}"#,
    ] {
        writeln!(stdin, "{line}").unwrap();
    }
    // Drained on its own thread: a full stderr pipe would stall the host.
    let mut stderr = child.stderr.take().unwrap();
    let logs = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });

    let mut replies: Vec<Value> = Vec::new();
    let mut stdin = Some(stdin);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries JSON-RPC only, got {line:?}: {e}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        replies.push(value);
        // Close stdin only once both calls are answered, so none is cut short.
        if [4, 5]
            .iter()
            .all(|id| replies.iter().any(|r| r["id"] == *id))
        {
            stdin.take();
        }
    }
    assert!(child.wait().unwrap().success());
    let logs = logs.join().unwrap();
    assert!(logs.contains("DEBUG"), "logs go to stderr");
    assert!(
        logs.contains("fixture trap"),
        "plugin output goes to the host log"
    );

    let by_code = |code: i64| {
        replies
            .iter()
            .find(|r| r["error"]["code"] == code)
            .unwrap_or_else(|| panic!("no error {code} in {replies:#?}"))
    };
    let oversized = by_code(-32600);
    assert!(
        oversized["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1024")
    );
    assert_eq!(by_code(-32700)["id"], Value::Null);
    assert!(
        replies
            .iter()
            .any(|r| r["id"] == 3 && r["error"]["code"] == -32600)
    );
    let call = replies
        .iter()
        .find(|r| r["id"] == 4)
        .expect("the call after them is answered");
    assert_eq!(call["result"]["structuredContent"]["key"], "T-1041");
    assert!(
        replies.iter().all(|r| r["id"] != 2),
        "the oversized ping was not run"
    );
}

fn post(url: &str, body: String) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body)
}

async fn json_rpc_error(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status);
    let body: Value = response.json().await.expect("a JSON-RPC error body");
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body["error"]["code"].is_i64(), "{body}");
    body
}

#[tokio::test]
async fn http_refuses_foreign_hosts_origins_and_oversized_bodies() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &["--max-message-bytes", "65536"]);

    let foreign_origin = post(&host.url, INITIALIZE.into())
        .header("origin", "https://attacker.example")
        .send()
        .await
        .unwrap();
    json_rpc_error(foreign_origin, 403).await;

    let port = host
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let rebound = post(&host.url, INITIALIZE.into())
        .header("host", format!("attacker.example:{port}"))
        .send()
        .await
        .unwrap();
    json_rpc_error(rebound, 403).await;

    let local_origin = post(&host.url, INITIALIZE.into())
        .header("origin", format!("http://localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert!(
        local_origin.status().is_success(),
        "{}",
        local_origin.status()
    );

    let huge = json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "pad": "x".repeat(200_000) }
    });
    let too_big = post(&host.url, huge.to_string()).send().await.unwrap();
    let body = json_rpc_error(too_big, 413).await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("65536"),
        "{body}"
    );

    let garbled = post(&host.url, "{not json".into()).send().await.unwrap();
    let body = json_rpc_error(garbled, 400).await;
    assert_eq!(body["error"]["code"], -32700);

    // The host still serves a proper client afterwards.
    let client = connect(&host.url).await;
    assert_eq!(tools(&client).await.len(), 9);
    client.cancel().await.unwrap();
}
