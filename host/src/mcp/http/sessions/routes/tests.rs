//! Tests of where each message of a session goes.

use super::*;
use futures::{FutureExt, StreamExt};
use rmcp::model::ServerResult;

/// The next event if one is there, `Some(None)` at the end of the
/// stream, `None` if it would wait.
fn ready(outlet: &mut Outlet) -> Option<Option<ServerSseMessage>> {
    outlet.next().now_or_never()
}

/// A client's `ping` request with id `id`.
pub(in crate::mcp::http::sessions) fn ping(id: i64) -> ClientJsonRpcMessage {
    serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
        .unwrap()
}

/// The server's empty answer to request `id`.
pub(in crate::mcp::http::sessions) fn answer(id: i64) -> ServerJsonRpcMessage {
    JsonRpcMessage::response(ServerResult::empty(()), RequestId::Number(id))
}

#[test]
fn an_answer_goes_to_its_request_s_stream_and_ends_it() {
    let mut routes = Routes::default();
    let (a, mut to_a) = routes.open(&ping(1));
    let (_, mut to_b) = routes.open(&ping(2));
    routes.route(answer(1));
    let event = ready(&mut to_a).flatten().unwrap();
    assert_eq!(event.event_id.as_deref(), Some(format!("0/{a}").as_str()));
    assert!(ready(&mut to_b).is_none(), "b's stream got a's answer");
    // The stream's end follows its answer; once read, the stream goes.
    assert!(matches!(ready(&mut to_a), Some(None)));
    routes.connection_ended(a, 0, true);
    assert_eq!(routes.streams.len(), 1);
    assert_eq!(routes.owners.len(), 1);
}

#[test]
fn an_answer_no_connection_took_is_kept_for_a_while_and_only_so_many() {
    let mut routes = Routes::default();
    for id in 0..UNDELIVERED_KEPT as i64 + 5 {
        let (number, to_client) = routes.open(&ping(id));
        drop(to_client);
        routes.connection_ended(number, 0, false);
        routes.route(answer(id));
    }
    assert_eq!(routes.streams.len(), UNDELIVERED_KEPT);
    assert_eq!(routes.undelivered.len(), UNDELIVERED_KEPT);
    assert!(routes.owners.is_empty());
    // The five oldest were given up.
    assert!(!routes.streams.contains_key(&4));
    assert!(routes.streams.contains_key(&5));
}

fn server(value: serde_json::Value) -> ServerJsonRpcMessage {
    serde_json::from_value(value).unwrap()
}

#[test]
fn kept_answers_stay_within_their_byte_budgets() {
    let mut routes = Routes::default();
    let big = "x".repeat(1 << 20);
    for id in 0..8 {
        let (number, to_client) = routes.open(&ping(id));
        drop(to_client);
        routes.connection_ended(number, 0, false);
        routes.route(server(serde_json::json!({
            "jsonrpc": "2.0", "id": id,
            "result": { "content": [{ "type": "text", "text": big }] }
        })));
    }
    assert!(
        routes.kept_bytes() <= UNDELIVERED_BYTES,
        "{}",
        routes.kept_bytes()
    );
    assert_eq!(
        routes.undelivered.len(),
        3,
        "three 1 MiB answers fit in 4 MiB"
    );
    let ledger = routes.ledger.clone();
    assert_eq!(ledger.bytes(), routes.kept_bytes());
    drop(routes);
    assert_eq!(ledger.bytes(), 0, "a dropped session gives its bytes back");
}

#[test]
fn a_request_id_used_again_ends_the_older_stream_and_late_answers_go_nowhere() {
    let mut routes = Routes::default();
    let (_, mut first) = routes.open(&ping(1));
    let (_, mut second) = routes.open(&ping(1));
    assert!(
        matches!(ready(&mut first), Some(None)),
        "the older stream ended"
    );
    routes.route(answer(1));
    assert!(ready(&mut second).flatten().unwrap().message.is_some());
    // An answer nobody waits for (its request was cancelled) does not
    // go out on the standalone stream.
    routes.route(answer(1));
    assert_eq!(routes.standalone.next, 0);
    assert!(routes.standalone.kept.is_empty());
}

/// A `tools/call` whose progress comes with `token`.
pub(in crate::mcp::http::sessions) fn call(id: i64, token: &str) -> ClientJsonRpcMessage {
    serde_json::from_value(serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": { "name": "echo", "_meta": { "progressToken": token } }
    }))
    .unwrap()
}

/// A progress notification for `token`.
pub(in crate::mcp::http::sessions) fn progress(token: &str, step: usize) -> ServerJsonRpcMessage {
    server(serde_json::json!({
        "jsonrpc": "2.0", "method": "notifications/progress",
        "params": { "progressToken": token, "progress": step }
    }))
}

#[test]
fn a_progress_token_used_again_moves_its_progress_and_ends_no_stream() {
    let mut routes = Routes::default();
    let (_, mut first) = routes.open(&call(1, "t"));
    let (_, mut second) = routes.open(&call(2, "t"));
    assert!(ready(&mut first).is_none(), "the older stream ended");
    routes.route(progress("t", 1));
    assert!(ready(&mut second).flatten().unwrap().message.is_some());
    routes.route(answer(1));
    let answered = ready(&mut first).flatten().unwrap();
    assert!(answered.message.is_some(), "the first request's answer");
    assert!(matches!(ready(&mut first), Some(None)));
    assert!(routes.busy(), "the second request is still answered");
    routes.route(answer(2));
    assert!(ready(&mut second).flatten().unwrap().message.is_some());
    assert!(!routes.busy());
}

/// Opens a request whose connection breaks before its answer of about
/// `bytes` bytes comes: its stream's number.
fn broken_off(routes: &mut Routes, id: i64, bytes: usize) -> u64 {
    // Primed as over HTTP: the answer is event 1, after the priming 0.
    let (number, connection, to_client) = routes.open_request(&ping(id), true);
    drop(to_client);
    routes.connection_ended(number, connection, false);
    routes.route(server(serde_json::json!({
        "jsonrpc": "2.0", "id": id,
        "result": { "content": [{ "type": "text", "text": "x".repeat(bytes) }] }
    })));
    number
}

#[test]
fn a_kept_answer_is_resumed_once_taken_and_then_gone() {
    let mut routes = Routes::default();
    let number = broken_off(&mut routes, 1, 10);
    assert!(routes.ledger.bytes() > 0);
    let (connection, mut again) = routes.resume(number, 0).unwrap();
    assert!(ready(&mut again).flatten().unwrap().message.is_some());
    assert!(matches!(ready(&mut again), Some(None)));
    routes.connection_ended(number, connection, true);
    assert!(routes.resume(number, 0).is_none());
    assert_eq!(routes.ledger.bytes(), 0);
}

#[test]
fn over_all_sessions_the_oldest_kept_answer_goes_whoever_kept_it() {
    let ledger = Arc::new(Ledger::with_budget(7 << 19));
    let mut hoarder = Routes::new(ledger.clone());
    let hoarded: Vec<u64> = (0..3)
        .map(|id| broken_off(&mut hoarder, id, 1 << 20))
        .collect();
    let mut other = Routes::new(ledger.clone());
    let number = broken_off(&mut other, 7, 1 << 20);
    let (_, mut again) = other.resume(number, 0).expect("kept");
    assert!(ready(&mut again).flatten().unwrap().message.is_some());
    // The hoarder's oldest made room, its newer ones are still there.
    assert!(hoarder.resume(hoarded[0], 0).is_none());
    assert!(hoarder.resume(hoarded[2], 0).is_some());
    assert!(ledger.bytes() <= 7 << 19);
}

#[test]
fn a_kept_answer_is_not_resumed_once_expired() {
    let mut routes = Routes::default();
    let number = broken_off(&mut routes, 1, 10);
    let stream = routes.streams.get_mut(&number).unwrap();
    let kept = stream.kept.take().unwrap();
    let events = kept.events().unwrap();
    routes.ledger.release(&kept);
    // The same answer, kept a minute ago and not yet freed.
    stream.kept = Some(routes.ledger.keep_expired(events));
    assert!(routes.ledger.bytes() > 0);
    assert!(routes.resume(number, 0).is_none(), "resumed after expiry");
    assert!(routes.streams.is_empty());
    assert_eq!(routes.ledger.bytes(), 0);
}

#[test]
fn a_cancelled_request_s_stream_ends_and_its_late_answer_goes_nowhere() {
    let mut routes = Routes::default();
    let (number, mut stream) = routes.open(&ping(1));
    routes.cancelled(&RequestId::Number(1));
    assert!(matches!(ready(&mut stream), Some(None)), "still open");
    assert!(!routes.busy(), "a cancelled request keeps the session busy");
    routes.route(answer(1));
    assert!(routes.standalone.kept.is_empty());
    routes.connection_ended(number, 0, true);
    assert!(routes.streams.is_empty());
}

/// A `tools/list_changed` notification, which goes to the standalone
/// stream.
pub(in crate::mcp::http::sessions) fn list_changed() -> ServerJsonRpcMessage {
    server(serde_json::json!({
        "jsonrpc": "2.0", "method": "notifications/tools/list_changed"
    }))
}

fn id_of(event: Option<Option<ServerSseMessage>>) -> String {
    event.flatten().unwrap().event_id.unwrap()
}

/// Sends `n` notifications out on the standalone stream.
fn notify(routes: &mut Routes, n: usize) {
    for _ in 0..n {
        routes.route(list_changed());
    }
}

/// Opens the standalone stream and sends `n` events; its connection
/// takes the first.
fn first_taken_of(routes: &mut Routes, n: usize) -> Outlet {
    let mut first = routes.open_standalone(None);
    notify(routes, n);
    assert_eq!(id_of(ready(&mut first)), "1");
    first
}

/// Reads every event that is there.
fn ids(outlet: &mut Outlet) -> Vec<String> {
    std::iter::from_fn(|| ready(outlet).flatten())
        .map(|event| event.event_id.unwrap())
        .collect()
}

#[test]
fn standalone_events_a_lost_connection_had_not_taken_are_sent_again() {
    let mut routes = Routes::new(Arc::default());
    let first = first_taken_of(&mut routes, 3);
    // Gone with events 2 and 3 queued, not taken.
    drop(first);
    let mut second = routes.open_standalone(None);
    assert_eq!(id_of(ready(&mut second)), "2");
    assert_eq!(id_of(ready(&mut second)), "3");
    assert!(ready(&mut second).is_none());
    drop(second);
    routes.route(list_changed());
    let mut third = routes.open_standalone(None);
    assert_eq!(
        id_of(ready(&mut third)),
        "4",
        "sent again: 2 and 3 were read"
    );
    assert!(ready(&mut third).is_none());
}

#[test]
fn a_made_up_standalone_event_id_is_not_trusted_and_skips_nothing() {
    let mut routes = Routes::new(Arc::default());
    routes.route(list_changed());
    let mut resumed = routes.open_standalone(Some(999));
    assert_eq!(id_of(ready(&mut resumed)), "1", "skipped for id 999");
    assert!(ready(&mut resumed).is_none());
    drop(resumed);
    routes.route(list_changed());
    let mut again = routes.open_standalone(None);
    assert_eq!(id_of(ready(&mut again)), "2");
}

#[test]
fn a_second_get_only_keeps_alive_and_a_resuming_one_takes_the_stream_over() {
    let mut routes = Routes::new(Arc::default());
    let mut first = routes.open_standalone(None);
    let mut extra = routes.open_standalone(None);
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut first)), "1");
    assert!(
        ready(&mut extra).is_none(),
        "an extra stream carried an event"
    );
    // The first stream's client, resuming after the event it had.
    let mut resumed = routes.open_standalone(Some(1));
    assert!(ready(&mut resumed).is_none(), "event 1 sent again");
    assert!(matches!(ready(&mut first), Some(None)), "not taken over");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut resumed)), "2");
    assert!(ready(&mut extra).is_none());
}

#[test]
fn a_resume_from_the_priming_or_a_made_up_id_takes_no_open_stream_over() {
    let mut routes = Routes::new(Arc::default());
    let mut first = first_taken_of(&mut routes, 1);
    // An extra stream's client has only its priming id, 0.
    let mut extra = routes.open_standalone(Some(0));
    assert!(ready(&mut extra).is_none(), "event 1 sent twice");
    let mut made_up = routes.open_standalone(Some(999));
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut first)), "2", "taken over");
    assert!(ready(&mut extra).is_none());
    assert!(ready(&mut made_up).is_none());
}

#[test]
fn a_stream_taken_over_by_an_extra_one_is_not_taken_back_by_its_old_client() {
    let mut routes = Routes::new(Arc::default());
    let mut first = routes.open_standalone(None);
    let mut extra = routes.open_standalone(None);
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut first)), "1");
    drop(first);
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut extra)), "2");
    // The first client comes back with the last event it had; the
    // extra stream keeps the stream, and its own client may resume it.
    let mut back = routes.open_standalone(Some(1));
    assert!(ready(&mut back).is_none(), "event 2 sent twice");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut extra)), "3", "taken over");
    assert!(ready(&mut back).is_none());
    let mut resumed = routes.open_standalone(Some(3));
    assert!(matches!(ready(&mut extra), Some(None)), "not taken over");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut resumed)), "4");
    assert!(ready(&mut back).is_none());
}

#[test]
fn with_no_connection_open_a_primed_only_client_gets_what_the_last_connection_was_sent() {
    let mut routes = Routes::new(Arc::default());
    let first = first_taken_of(&mut routes, 1);
    drop(first);
    // The client had event 1; its next connection is sent 2 and 3, takes
    // 2, and is lost before the client read either.
    let mut second = routes.open_standalone(Some(1));
    notify(&mut routes, 2);
    assert_eq!(id_of(ready(&mut second)), "2");
    drop(second);
    let mut third = routes.open_standalone(None);
    assert_eq!(id_of(ready(&mut third)), "3", "only the untaken one");
    drop(third);
    // A client primed with 0 that received nothing gets all its lost
    // connection was sent, and nothing sent before it.
    let mut primed = routes.open_standalone(Some(0));
    assert_eq!(id_of(ready(&mut primed)), "3");
    assert!(ready(&mut primed).is_none());
}

#[test]
fn with_no_connection_open_a_resume_from_another_connection_s_id_is_not_trusted() {
    let mut routes = Routes::new(Arc::default());
    let first = first_taken_of(&mut routes, 1);
    drop(first);
    let mut resumed = routes.open_standalone(Some(1));
    let extra = routes.open_standalone(None);
    notify(&mut routes, 2);
    assert_eq!(id_of(ready(&mut resumed)), "2");
    assert_eq!(id_of(ready(&mut resumed)), "3");
    // Both connections go; the extra stream's client comes back first,
    // with the priming id, then the resumed one's with the id it had.
    drop(extra);
    drop(resumed);
    let mut primed_only = routes.open_standalone(Some(0));
    assert!(
        ready(&mut primed_only).is_none(),
        "events 2 and 3 sent twice"
    );
    let mut back = routes.open_standalone(Some(3));
    assert!(ready(&mut primed_only).is_none(), "taken over");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut primed_only)), "4");
    assert!(ready(&mut back).is_none(), "event 4 sent twice");
}

#[test]
fn a_one_stream_client_loses_nothing_kept_however_often_it_reconnects() {
    // Primed only, twice in a row, its connections lost with what they took.
    let mut routes = Routes::new(Arc::default());
    let mut first = routes.open_standalone(None);
    notify(&mut routes, 2);
    assert_eq!(ids(&mut first), ["1", "2"]);
    drop(first);
    let again = routes.open_standalone(Some(0));
    drop(again);
    let mut third = routes.open_standalone(Some(0));
    assert_eq!(ids(&mut third), ["1", "2"]);

    // It had 2 of the events sent again; 3 was taken and lost.
    routes.route(list_changed());
    assert_eq!(ids(&mut third), ["3"]);
    drop(third);
    let mut fourth = routes.open_standalone(Some(2));
    assert_eq!(ids(&mut fourth), ["3"]);

    // Primed only, reconnecting before the host noticed: an extra stream,
    // which takes over when the host does, with what the lost one took.
    let mut routes = Routes::new(Arc::default());
    let mut first = routes.open_standalone(None);
    routes.route(list_changed());
    assert_eq!(ids(&mut first), ["1"]);
    let mut extra = routes.open_standalone(Some(0));
    assert!(ids(&mut extra).is_empty());
    routes.standalone_ended(&first);
    drop(first);
    assert_eq!(ids(&mut extra), ["1"]);
}

#[test]
fn ids_replayed_to_one_client_do_not_let_another_take_its_stream() {
    let mut routes = Routes::new(Arc::default());
    let mut a = routes.open_standalone(None);
    let y = routes.open_standalone(None);
    notify(&mut routes, 2);
    assert_eq!(ids(&mut a), ["1", "2"]);
    drop(y);
    drop(a);
    // Y, primed only, is sent 1 and 2 twice over, lost the first time.
    drop(routes.open_standalone(Some(0)));
    let mut y = routes.open_standalone(Some(0));
    assert_eq!(ids(&mut y), ["1", "2"]);
    // A, with the id it had, gets a stream that only keeps alive.
    let mut a = routes.open_standalone(Some(2));
    assert!(ready(&mut y).is_none(), "taken over");
    routes.route(list_changed());
    assert_eq!(ids(&mut y), ["3"]);
    assert!(ids(&mut a).is_empty());
}

#[test]
fn two_clients_primed_only_never_take_the_stream_from_each_other() {
    let mut routes = Routes::new(Arc::default());
    let mut first = routes.open_standalone(None);
    let extra = routes.open_standalone(None);
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut first)), "1");
    drop(extra);
    drop(first);
    // Which of the two was the first stream's client the host cannot
    // tell: the one that comes back first gets what it was sent.
    let mut primed = routes.open_standalone(Some(0));
    assert_eq!(id_of(ready(&mut primed)), "1");
    let mut back = routes.open_standalone(Some(1));
    assert!(ready(&mut primed).is_none(), "taken over");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut primed)), "2");
    assert!(ready(&mut back).is_none(), "event 2 sent twice");
}

#[test]
fn an_extra_get_takes_over_as_soon_as_the_connection_is_reported_gone() {
    let mut routes = Routes::new(Arc::default());
    let first = routes.open_standalone(None);
    routes.route(list_changed());
    let mut extra = routes.open_standalone(None);
    routes.standalone_ended(&extra);
    assert!(ready(&mut extra).is_none(), "an extra stream's end moved");
    routes.standalone_ended(&first);
    drop(first);
    assert_eq!(id_of(ready(&mut extra)), "1", "the untaken event");
    assert!(ready(&mut extra).is_none());
}

#[test]
fn an_extra_get_carries_the_stream_once_the_first_connection_is_found_gone() {
    let mut routes = Routes::new(Arc::default());
    let first = first_taken_of(&mut routes, 2);
    // The client reconnects before the host noticed the first
    // connection go, with event 2 still queued for it; of the extra
    // streams, the newest still open takes over.
    let mut older = routes.open_standalone(None);
    let mut reconnected = routes.open_standalone(None);
    let gone_too = routes.open_standalone(None);
    drop(first);
    drop(gone_too);
    assert!(ready(&mut reconnected).is_none(), "only keeps alive so far");
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut reconnected)), "2", "the untaken event");
    assert_eq!(id_of(ready(&mut reconnected)), "3");
    assert!(ready(&mut reconnected).is_none());
    routes.route(list_changed());
    assert_eq!(id_of(ready(&mut reconnected)), "4");
    assert!(ready(&mut older).is_none(), "still only keeps alive");
}

#[test]
fn a_connection_taken_over_by_its_own_client_sends_nothing_more() {
    let mut routes = Routes::new(Arc::default());
    let mut first = first_taken_of(&mut routes, 3);
    // Its client lost it and resumes after event 1, with 2 and 3 still
    // queued on it.
    let mut resumed = routes.open_standalone(Some(1));
    assert_eq!(ids(&mut resumed), ["2", "3"]);
    assert!(
        matches!(ready(&mut first), Some(None)),
        "2 and 3 went out twice"
    );
}

#[test]
fn a_finished_request_s_connection_still_draining_is_cut_when_the_client_resumes() {
    let mut routes = Routes::default();
    let (number, _, mut stalled) = routes.open_request(&ping(1), true);
    routes.route(answer(1));
    // The client gave up on the connection before reading the answer, and
    // resumes after the priming event.
    let (_, mut again) = routes.resume(number, 0).unwrap();
    assert!(ready(&mut again).flatten().unwrap().message.is_some());
    assert!(matches!(ready(&mut again), Some(None)));
    assert!(
        matches!(ready(&mut stalled), Some(None)),
        "the answer went out twice"
    );
}

#[test]
fn a_standalone_connection_never_read_is_cut_off_and_an_extra_one_carries_on() {
    let mut routes = Routes::new(Arc::default());
    let mut unread = routes.open_standalone(None);
    let mut extra = routes.open_standalone(None);
    notify(&mut routes, QUEUE_LIMIT);
    assert!(ready(&mut extra).is_none(), "taken over with room left");
    notify(&mut routes, 1);
    assert!(
        matches!(ready(&mut unread), Some(None)),
        "its queue was held"
    );
    assert!(unread.is_cut());
    // From the start of what the stream keeps: the cut connection took
    // nothing.
    let last = QUEUE_LIMIT + 1;
    let first = last + 1 - EVENTS_KEPT;
    let expected: Vec<String> = (first..=last).map(|i| i.to_string()).collect();
    assert_eq!(ids(&mut extra), expected);
}

#[test]
fn a_request_s_connection_never_read_is_cut_off_and_its_answer_kept() {
    let mut routes = Routes::default();
    let (number, mut unread) = routes.open(&call(1, "t"));
    for step in 0..=QUEUE_LIMIT {
        routes.route(progress("t", step));
    }
    assert!(
        matches!(ready(&mut unread), Some(None)),
        "its queue was held"
    );
    routes.route(answer(1));
    assert_eq!(routes.undelivered, [number], "the answer was not kept");
    let (_, mut again) = routes.resume(number, QUEUE_LIMIT as u64).unwrap();
    assert!(ready(&mut again).flatten().unwrap().message.is_some());
    assert!(matches!(ready(&mut again), Some(None)));
}

#[test]
fn a_server_request_and_its_cancellation_go_where_the_client_request_went() {
    let mut routes = Routes::default();
    // The client's request 0 and the server's request 0 are unrelated.
    let (_, mut zero) = routes.open(&ping(0));
    let (_, mut one) = routes.open(&ping(1));
    let mut asked = server(serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}));
    if let JsonRpcMessage::Request(request) = &mut asked {
        request
            .request
            .extensions_mut()
            .insert(OriginatingRequestId(RequestId::Number(1)));
    }
    routes.route(asked);
    routes.route(server(serde_json::json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 0 }
    })));
    assert!(ready(&mut one).flatten().unwrap().message.is_some());
    assert!(ready(&mut one).flatten().unwrap().message.is_some());
    assert!(
        ready(&mut zero).is_none(),
        "client request 0's stream got nothing"
    );
    assert!(routes.standalone.kept.is_empty());
}

#[test]
fn a_connection_that_ends_after_a_newer_one_took_over_changes_nothing() {
    let mut routes = Routes::default();
    let (number, first) = routes.open(&ping(1));
    let (tx, mut second) = pipe();
    routes
        .streams
        .get_mut(&number)
        .unwrap()
        .events
        .reconnect(tx, 0);
    drop(first);
    routes.connection_ended(number, 0, false);
    routes.route(answer(1));
    let answer = ready(&mut second).flatten().unwrap();
    assert!(answer.message.is_some());
}

#[test]
fn event_ids_round_trip_and_foreign_ones_are_refused() {
    assert_eq!(parse_event_id("3/7").unwrap(), (3, Some(7)));
    assert_eq!(parse_event_id("12").unwrap(), (12, None));
    for bad in ["", "x", "1/", "/2", "1/2/3", "-1", "1/x"] {
        assert!(parse_event_id(bad).is_none(), "{bad} accepted");
    }
}
