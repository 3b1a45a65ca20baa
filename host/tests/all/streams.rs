//! A Streamable HTTP session's event streams, seen from the wire: a request's
//! stream that breaks is resumed with `Last-Event-ID` and still carries the
//! answer; a cancelled request's stream ends; the standalone `GET` stream
//! and ids the host never issued.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::*;

/// A session opened over raw HTTP, as a client without an SDK would.
struct RawSession {
    url: String,
    id: String,
}

impl RawSession {
    async fn open(url: &str) -> RawSession {
        let initialize = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "raw", "version": "1" }
            }
        });
        let opened = http_client()
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .unwrap();
        assert_eq!(opened.status(), 200);
        let id = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let session = RawSession {
            url: url.to_string(),
            id,
        };
        let initialized = session
            .post(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
            .await;
        assert_eq!(initialized.status(), 202);
        session
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        http_client()
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut get = http_client()
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(id) = last_event_id {
            get = get.header("last-event-id", id);
        }
        get.send().await.unwrap()
    }
}

/// One server-sent event: its id and its data, if any.
#[derive(Debug)]
struct Event {
    id: Option<String>,
    data: Option<Value>,
}

/// Reads events from an event stream as they arrive.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    fn of(response: reqwest::Response) -> Events {
        assert_eq!(response.status(), 200);
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next event, or `None` when the stream ends. Keep-alive comments
    /// are skipped.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut event = Event {
                    id: None,
                    data: None,
                };
                let mut is_event = false;
                for line in block.lines() {
                    if let Some(id) = line.strip_prefix("id:") {
                        event.id = Some(id.trim().to_string());
                        is_event = true;
                    } else if let Some(data) = line.strip_prefix("data:") {
                        event.data = serde_json::from_str(data.trim()).ok();
                        is_event = true;
                    } else if line.starts_with("retry:") {
                        is_event = true;
                    }
                }
                if is_event {
                    return Some(event);
                }
                continue;
            }
            // A guard against a host that never answers, not a measurement.
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("the stream goes on within 30 s")
                .unwrap()?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event that carries a JSON-RPC message.
    async fn next_message(&mut self) -> Option<Event> {
        loop {
            let event = self.next().await?;
            if event.data.is_some() {
                return Some(event);
            }
        }
    }
}

fn sleep_call(id: u64) -> Value {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": "fixture_fault_run", "arguments": { "fault": "sleep" } }
    })
}

/// The fixture, whose `sleep` fault is answered with `timeout` after this.
fn slow_fixture() -> TestManifest {
    manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 1500 }"),
    ])
}

#[tokio::test]
async fn a_request_stream_that_breaks_is_resumed_and_still_gets_its_answer() {
    let m = slow_fixture();
    let host = http(&m, &[]);
    let session = RawSession::open(&host.url).await;

    // The stream's first event carries no message, only an id to resume
    // from; the client's connection then breaks before the answer.
    let mut events = Events::of(session.post(sleep_call(7)).await);
    let primed = events.next().await.expect("a priming event");
    assert!(primed.data.is_none(), "{primed:?}");
    let resume_from = primed.id.expect("the priming event has an id");
    drop(events);

    // Resumed while the call still runs: the answer comes on the new
    // connection.
    let mut resumed = Events::of(session.get(Some(&resume_from)).await);
    let answer = resumed.next_message().await.expect("the answer");
    let answer = answer.data.unwrap();
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(resumed.next().await.is_none(), "the stream ends after it");

    // Broken again, and resumed only after the answer was sent: the host
    // kept it for the client.
    let mut events = Events::of(session.post(sleep_call(8)).await);
    let resume_from = events.next().await.unwrap().id.unwrap();
    drop(events);
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    let mut resumed = Events::of(session.get(Some(&resume_from)).await);
    let answer = resumed.next_message().await.expect("the kept answer");
    assert_eq!(answer.data.unwrap()["id"], 8);
    assert!(resumed.next().await.is_none());

    // Resuming a stream that already delivered its answer finds nothing,
    // and nor does an id the host never issued: an empty stream, so a
    // browser's EventSource stops instead of retrying.
    for foreign in [resume_from.as_str(), "12/999999", "not-an-event-id"] {
        let mut empty = Events::of(session.get(Some(foreign)).await);
        assert!(empty.next().await.is_none(), "{foreign}");
    }

    // The session is unharmed.
    let pong = session
        .post(json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }))
        .await;
    let mut pong = Events::of(pong);
    assert_eq!(pong.next_message().await.unwrap().data.unwrap()["id"], 9);
}

/// A call answered within the host's short hold leaves as one body of
/// known length, its priming event first; whatever its shape, every stream
/// is the priming event, the answer, the end. The hold is 2 ms and a debug
/// build under load may miss it, so some of 20 warm calls must be whole.
#[tokio::test]
async fn a_quick_answer_leaves_with_its_priming_event_in_one_body() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &[]);
    let session = RawSession::open(&host.url).await;
    let call = |id: u64| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } }
        })
    };
    // The first call makes the session's instance, which takes longer.
    Events::of(session.post(call(1)).await).next_message().await;
    let mut whole = 0;
    for id in 2..22 {
        let response = session.post(call(id)).await;
        if response.content_length().is_some() {
            whole += 1;
        }
        let mut events = Events::of(response);
        let primed = events.next().await.expect("a priming event");
        assert!(primed.data.is_none() && primed.id.is_some(), "{primed:?}");
        let answer = events.next().await.expect("the answer").data.unwrap();
        assert_eq!(answer["id"], id, "{answer}");
        assert!(events.next().await.is_none(), "the stream ends after it");
    }
    assert!(whole > 0, "no answer left as one body");
}

#[tokio::test]
async fn a_cancelled_request_s_stream_ends_without_an_answer() {
    let m = slow_fixture();
    let host = http(&m, &[]);
    let session = RawSession::open(&host.url).await;
    let mut events = Events::of(session.post(sleep_call(5)).await);
    events.next().await.expect("a priming event");

    let cancelled = session
        .post(json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": 5, "reason": "the user moved on" }
        }))
        .await;
    assert_eq!(cancelled.status(), 202);
    assert!(
        events.next_message().await.is_none(),
        "a cancelled request's stream ends with no answer"
    );
}

#[tokio::test]
async fn the_standalone_stream_opens_and_a_second_one_only_keeps_alive() {
    let m = slow_fixture();
    let host = http(&m, &[]);
    let session = RawSession::open(&host.url).await;
    let mut first = Events::of(session.get(None).await);
    let primed = first.next().await.expect("a priming event");
    assert_eq!(primed.id.as_deref(), Some("0"));
    // A second GET while the first is open is answered too (some clients
    // open several), with a stream that carries nothing.
    let mut second = Events::of(session.get(None).await);
    assert!(second.next().await.is_some());

    // Ending the session ends both.
    let deleted = http_client()
        .delete(&host.url)
        .header("mcp-session-id", &session.id)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert!(first.next().await.is_none());
    assert!(second.next().await.is_none());
}

#[tokio::test]
async fn a_call_that_outlasts_the_idle_limit_keeps_its_session() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 2500 }"),
    ]);
    let host = http(&m, &["--session-idle", "1s"]);
    let session = RawSession::open(&host.url).await;
    // No message either way for 2.5 s, but a request is being answered.
    let mut events = Events::of(session.post(sleep_call(3)).await);
    let answer = events.next_message().await.expect("the answer");
    assert_eq!(answer.data.unwrap()["id"], 3);
    let pong = session
        .post(json!({ "jsonrpc": "2.0", "id": 4, "method": "ping" }))
        .await;
    assert_eq!(
        Events::of(pong).next_message().await.unwrap().data.unwrap()["id"],
        4,
        "the session outlived its idle limit while answering"
    );
    // Idle now, and nothing in flight: closed, so the spec's 404.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let gone = session
        .post(json!({ "jsonrpc": "2.0", "id": 5, "method": "ping" }))
        .await;
    assert_eq!(gone.status(), 404);
}
