//! The transports themselves: stdout holds JSON-RPC only, messages are
//! capped, malformed input gets JSON-RPC errors, HTTP checks Host and Origin.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

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
    http_client()
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

/// A stdio host on `manifest` whose stdin and stdout the test drives
/// itself, line by line.
fn stdio_host(manifest: &TestManifest) -> std::process::Child {
    toolhost()
        .args(["serve", "--stdio", "--manifest"])
        .arg(&manifest.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Writes raw bytes as one line each to a stdio host and collects replies
/// until `done` says enough.
fn stdio_exchange(
    manifest: &TestManifest,
    lines: &[Vec<u8>],
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut child = stdio_host(manifest);
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    let mut stdin = Some(stdin);
    let mut replies: Vec<Value> = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        replies.push(serde_json::from_str(&line).unwrap());
        if done(&replies) {
            stdin.take();
        }
    }
    assert!(child.wait().unwrap().success());
    replies
}

#[test]
fn stdio_answers_hostile_json_and_keeps_going() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":10,"method":"ping","params":{{"x":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let mut invalid_utf8 = br#"{"jsonrpc":"2.0","id":11,"method":"ping","params":{"x":""#.to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    invalid_utf8.extend_from_slice(br#""}}"#);
    let call = |id: u32, tool: &str, arguments: Value| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": { "name": tool, "arguments": arguments } })
        .to_string()
        .into_bytes()
    };
    let lines = vec![
        INITIALIZE.as_bytes().to_vec(),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
        nested.into_bytes(),
        invalid_utf8,
        br#"{"jsonrpc":"2.0","id":12,"method":"no/such/method"}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":13,"method":"tools/call","params":"nope"}"#.to_vec(),
        br#"{"jsonrpc":"1.0","id":14,"method":"ping"}"#.to_vec(),
        call(
            15,
            "helpdesk_ticket_get",
            json!({ "key": "K".repeat(1_000_000) }),
        ),
        call(16, "fixture_echo_get", json!({ "text": vec![7; 200_000] })),
        call(17, "helpdesk_ticket_get", json!({ "key": "T-1041" })),
    ];
    let replies = stdio_exchange(&m, &lines, |replies| {
        (12..=17).all(|id| replies.iter().any(|r| r["id"] == id))
    });
    let by_id = |id: u32| replies.iter().find(|r| r["id"] == id).unwrap();
    let parse_errors = replies
        .iter()
        .filter(|r| r["id"].is_null() && r["error"]["code"] == -32700)
        .count();
    assert_eq!(parse_errors, 2, "nesting and bad UTF-8: {replies:#?}");
    assert_eq!(by_id(12)["error"]["code"], -32601);
    assert!(by_id(13)["error"]["code"].is_i64(), "{}", by_id(13));
    assert_eq!(by_id(14)["error"]["code"], -32600);
    for id in [15, 16] {
        let result = &by_id(id)["result"];
        assert_eq!(result["isError"], true, "{result}");
        assert_eq!(result["structuredContent"]["code"], "invalid_arguments");
    }
    assert_eq!(by_id(17)["result"]["structuredContent"]["key"], "T-1041");
}

/// The JSON-RPC message in an SSE or JSON response body.
async fn message_of(response: reqwest::Response) -> Value {
    let text = response.text().await.unwrap();
    if let Ok(value) = serde_json::from_str(&text) {
        return value;
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC message in {text:?}"))
}

#[tokio::test]
async fn http_answers_hostile_clients_and_keeps_going() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &["--max-sessions", "20"]);

    // Thousands of clients at once: exactly the cap get a session, the rest
    // a 503 that says why and when to come back.
    let attempts = futures::future::join_all(
        (0..1_000).map(|_| async { post(&host.url, INITIALIZE.into()).send().await.unwrap() }),
    )
    .await;
    let mut opened = Vec::new();
    let mut refused = 0;
    for response in attempts {
        match response.status().as_u16() {
            200 => opened.push(
                response.headers()["mcp-session-id"]
                    .to_str()
                    .unwrap()
                    .to_string(),
            ),
            503 => {
                assert_eq!(response.headers()["retry-after"], "5");
                let body = json_rpc_error(response, 503).await;
                assert!(
                    body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains("at most 20"),
                    "{body}"
                );
                refused += 1;
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert_eq!((opened.len(), refused), (20, 980));
    // However the request is dressed up, an `initialize` opens a session and
    // is counted: naming the stateless era, or an unreadable session id.
    let stateless_era = post(&host.url, INITIALIZE.replace("2025-11-25", "2026-07-28"))
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .unwrap();
    assert_eq!(stateless_era.status().as_u16(), 503);
    let unreadable_id = post(&host.url, INITIALIZE.into())
        .header(
            "mcp-session-id",
            reqwest::header::HeaderValue::from_bytes(b"\xff\xfe").unwrap(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(unreadable_id.status().as_u16(), 503);
    // Closing a session makes room for a new one.
    let closed = http_client()
        .delete(&host.url)
        .header("mcp-session-id", &opened[0])
        .send()
        .await
        .unwrap();
    assert!(closed.status().is_success(), "{}", closed.status());
    let session = post(&host.url, INITIALIZE.into()).send().await.unwrap();
    assert_eq!(session.status().as_u16(), 200);
    let session = session.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let in_session = |body: String| {
        post(&host.url, body)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
    };
    in_session(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into())
        .send()
        .await
        .unwrap();

    // Malformed bodies.
    let nested = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"x":{}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let body = json_rpc_error(in_session(nested).send().await.unwrap(), 400).await;
    assert_eq!(body["error"]["code"], -32700);
    let mut invalid_utf8 = br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":""#.to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe, 0xc3, b'"', b'}', b'}']);
    let bad = http_client()
        .post(&host.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &session)
        .body(invalid_utf8)
        .send()
        .await
        .unwrap();
    assert_eq!(json_rpc_error(bad, 400).await["error"]["code"], -32700);
    let unknown = in_session(r#"{"jsonrpc":"2.0","id":4,"method":"no/such/method"}"#.into())
        .send()
        .await
        .unwrap();
    assert_eq!(message_of(unknown).await["error"]["code"], -32601);
    let huge_argument = json!({
        "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "name": "helpdesk_ticket_get", "arguments": { "key": "K".repeat(1_000_000) } }
    });
    let answer = message_of(in_session(huge_argument.to_string()).send().await.unwrap()).await;
    assert_eq!(
        answer["result"]["structuredContent"]["code"],
        "invalid_arguments"
    );

    // And the host still serves.
    let call = json!({
        "jsonrpc": "2.0", "id": 6, "method": "tools/call",
        "params": { "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } }
    });
    let answer = message_of(in_session(call.to_string()).send().await.unwrap()).await;
    assert_eq!(answer["result"]["structuredContent"]["key"], "T-1041");
}

#[tokio::test]
async fn http_cuts_off_slow_clients() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &["--read-timeout", "500ms"]);
    // Headers that never end, then a body that never ends.
    let cut = stall(
        &host.url,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ",
    )
    .await;
    assert!(cut.is_empty() || cut.contains(" 408 "), "{cut:?}");
    let slow_body = stall(
        &host.url,
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{\"jsonrpc\"",
    )
    .await;
    assert!(slow_body.starts_with("HTTP/1.1 408"), "{slow_body:?}");
    assert!(
        slow_body.contains("did not arrive within 500 ms"),
        "{slow_body:?}"
    );
    // Others are served all along.
    let client = connect(&host.url).await;
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
}

/// A client that keeps its connection open and reads none of its answers
/// (its receive window closed, which its kernel keeps acknowledging) loses
/// the connection after the read timeout, and with it the place it held:
/// with one connection allowed, the next client is served.
#[tokio::test]
async fn http_cuts_off_a_client_that_reads_nothing() {
    use tokio::io::AsyncWriteExt;
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &["--read-timeout", "1s", "--max-connections", "1"]);
    let elsewhere = host.url.replace("/mcp", "/elsewhere");
    let addr = authority(&host.url);
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr.parse().unwrap()).await.unwrap();
    // Pipelined requests for a small 404 each, until the host takes no more:
    // its answers have filled the buffers between us, and its writes wait.
    let requests = b"GET /elsewhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(1000);
    let mut sent = 0;
    loop {
        assert!(sent < 256 << 20, "the host kept taking requests");
        match tokio::time::timeout(Duration::from_secs(2), stalled.write_all(&requests)).await {
            Ok(Ok(())) => sent += requests.len(),
            Ok(Err(_)) | Err(_) => break,
        }
    }
    let began = std::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        http_client().get(&elsewhere).send(),
    )
    .await
    .expect("the next client is served")
    .unwrap();
    assert_eq!(answer.status(), 404);
    assert!(
        began.elapsed() < Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    drop(stalled);
}

#[tokio::test]
async fn an_idle_http_session_is_closed_with_its_instances() {
    let m = manifest(vec![
        PluginEntry::helpdesk().with("limits = { call_timeout_ms = 500 }"),
    ]);
    let host = http(&m, &["--session-idle", "2s"]);
    let client = connect(&host.url).await;
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    // No request for longer than the idle limit.
    let state = m.path.parent().unwrap().join(".toolhost");
    let closed = crate::audit::wait_for(&state, "session_closed");
    let closed = closed
        .iter()
        .find(|r| r["event"] == "session_closed")
        .unwrap();
    assert_eq!(closed["transport"], "http", "{closed}");
    // The client may open a new session and go on.
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
}

/// The `flags:` of one of a process's descriptors, from /proc.
fn fd_flags(pid: u32, fd: u32) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .expect("a flags line");
    u32::from_str_radix(flags.trim(), 8).unwrap()
}

#[tokio::test]
async fn stdio_leaves_the_pipes_it_was_given_blocking() {
    const O_NONBLOCK: u32 = 0o4000;
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let (client, pid) = stdio_with_pid(&m, &[]).await;
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    // The host reads and writes its own reopened, non-blocking copies; the
    // descriptors it shares with its parent keep their mode.
    for fd in [0, 1] {
        assert_eq!(
            fd_flags(pid, fd) & O_NONBLOCK,
            0,
            "fd {fd} became non-blocking"
        );
    }
    client.cancel().await.unwrap();
}

/// A client that sends without reading its answers is held back: the host
/// stops reading once answers pile up unwritten, rather than holding them
/// all in memory, and every answer still comes once the client reads.
#[test]
fn stdio_stops_reading_while_its_answers_are_not_read() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SENT: usize = 5_000;
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let mut child = stdio_host(&m);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("protocolVersion"), "{line}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();

    // Each request in one write, counted once the pipe took it.
    let written = Arc::new(AtomicUsize::new(0));
    let writer = std::thread::spawn({
        let written = written.clone();
        move || {
            for id in 2..SENT + 2 {
                let request = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
                stdin.write_all(format!("{request}\n").as_bytes()).unwrap();
                written.fetch_add(1, Ordering::SeqCst);
            }
            // Closing stdin lets the host end once everything is answered.
        }
    });
    // Wait for the writing to stall: the pipes are full and the host
    // reads no more.
    let mut last = usize::MAX;
    for _ in 0..600 {
        std::thread::sleep(Duration::from_millis(500));
        let now = written.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
    }
    // What the client wrote includes what stdin's pipe holds (about 1 300
    // of these requests); the host itself reads about 250.
    assert!(
        last < SENT / 2,
        "the host read {last} of {SENT} requests whose answers nobody read"
    );

    // Once the client reads, every request is answered, each once.
    let mut answered = vec![false; SENT + 2];
    for line in stdout.lines() {
        let reply: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let id = reply["id"].as_u64().expect("an answer to a request") as usize;
        assert!(reply["result"]["tools"].is_array(), "{reply}");
        assert!(!std::mem::replace(&mut answered[id], true), "{id} twice");
    }
    writer.join().unwrap();
    assert!(child.wait().unwrap().success());
    assert!(answered[2..].iter().all(|&a| a), "every request answered");
}

#[tokio::test]
async fn an_http_host_keeps_serving_when_nobody_reads_its_stdout() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let log = m.path.with_file_name("serve.log");
    // A pipe whose reading end is gone before the host starts.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut child = toolhost()
        .args(["serve", "--http", "127.0.0.1:0", "--manifest"])
        .arg(&m.path)
        .stdout(writer)
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The address it could not print is in its log.
    let mut url = None;
    for _ in 0..300 {
        let logged = std::fs::read_to_string(&log).unwrap();
        assert!(
            child.try_wait().unwrap().is_none(),
            "the host stopped: {logged}"
        );
        url = logged
            .lines()
            .find(|l| l.contains("cannot print to stdout"))
            .and_then(|l| l.split_whitespace().find(|w| w.starts_with("http://")))
            .map(String::from);
        if url.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let url = url.expect("the host logs the address it could not print");
    let client = connect(&url).await;
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    client.cancel().await.unwrap();
    assert!(child.try_wait().unwrap().is_none(), "the host stopped");
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test]
async fn other_paths_are_refused_like_mcp_is() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &[]);
    let other = host.url.replace("/mcp", "/other");
    let body = json_rpc_error(post(&other, INITIALIZE.into()).send().await.unwrap(), 404).await;
    assert!(
        body["error"]["message"].as_str().unwrap().contains("/mcp"),
        "{body}"
    );
    // A token the host never issued is refused wherever it is sent.
    let bad_token = post(&other, INITIALIZE.into())
        .header("authorization", "Bearer not-a-token")
        .send()
        .await
        .unwrap();
    assert!(bad_token.headers().contains_key("www-authenticate"));
    json_rpc_error(bad_token, 401).await;
}

/// Serves HTTP with `log` (or the default filter when `None`), opens a
/// session and makes a stateless request, stops the host with SIGTERM and
/// returns what it logged.
async fn logged_while_serving(log: Option<&str>) -> String {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let stderr = m.path.with_file_name("serve.log");
    let mut cmd = toolhost();
    match log {
        Some(filter) => cmd.env("TOOLHOST_LOG", filter),
        None => cmd.env_remove("TOOLHOST_LOG"),
    };
    cmd.args(["serve", "--http", "127.0.0.1:0", "--manifest"])
        .arg(&m.path)
        .stderr(std::fs::File::create(&stderr).unwrap());
    let mut host = http_from(cmd);
    let url = host.url.clone();
    let session = connect(&url).await;
    ok(&session, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    session.cancel().await.unwrap();
    let stateless = connect_stateless(&url).await;
    ok(
        &stateless,
        "helpdesk_ticket_get",
        json!({ "key": "T-1041" }),
    )
    .await;
    stateless.cancel().await.unwrap();
    // A stop by signal writes out every queued line before the exit.
    terminate(&host.child);
    assert!(host.child.wait().unwrap().success());
    std::fs::read_to_string(&stderr).unwrap()
}

#[tokio::test]
async fn the_default_log_has_no_line_per_session_or_request() {
    // With rmcp's own notices let through, each session and each
    // stateless request adds lines: the check below would see them.
    let verbose = logged_while_serving(Some("info")).await;
    assert!(verbose.contains("rmcp::service"), "{verbose}");
    let quiet = logged_while_serving(None).await;
    assert!(!quiet.contains("rmcp::"), "{quiet}");
    // The host's own lines are still there.
    assert!(quiet.contains("listening"), "{quiet}");
    assert!(quiet.contains("catalog ready"), "{quiet}");
}

/// A host started under a low soft limit on open files (as service
/// managers start one, at 1 024) raises it to the hard limit, or it could
/// not hold `--max-connections` connections.
#[test]
fn serve_raises_its_open_files_limit_to_the_hard_one() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let inner = toolhost();
    let mut cmd = std::process::Command::new("sh");
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd.arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\" \"$@\"")
        .arg(inner.get_program())
        .args(["serve", "--http", "127.0.0.1:0", "--manifest"])
        .arg(&m.path);
    let host = http_from(cmd);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", host.child.id())).unwrap();
    let open_files: Vec<&str> = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .expect("a Max open files line")
        .split_whitespace()
        .collect();
    assert_eq!(open_files[0], open_files[1], "{limits}");
    assert_ne!(open_files[0], "256", "{limits}");
}
