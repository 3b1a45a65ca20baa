//! Where each message of one session goes: which of its event streams a
//! message from the server goes out on, what each stream keeps for a client
//! that resumes it, and when a stream ends.
//!
//! - a response or error goes to the stream of the request it answers,
//!   which then ends; if that stream has ended already (the client
//!   cancelled the request), nowhere;
//! - a progress notification, to the stream of the request that asked for
//!   progress with that token;
//! - a request from the server (an approval's elicitation), to the stream
//!   of the client request it was made while handling (SEP-2260), and a
//!   cancellation of it after it;
//! - anything else, to the session's standalone stream (a client's `GET`),
//!   kept until one is open.
//!
//! Every event carries an id so a client whose stream broke can resume it
//! with `Last-Event-ID`: `<n>/<stream>` on a request's stream, `<n>` on the
//! standalone one. Each stream keeps its last [`EVENTS_KEPT`] events. A
//! request's stream ends when its connection has taken the answer; if the
//! connection was gone first, the stream is kept for [`KEEP_UNDELIVERED`]
//! after the answer, within [`UNDELIVERED_KEPT`]'s budgets, so the client
//! can come back for it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientJsonRpcMessage, GetExtensions, GetMeta, JsonRpcMessage, ProgressToken, RequestId,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::OriginatingRequestId;
use rmcp::transport::common::server_side_http::ServerSseMessage;

use crate::mcp::http::pipe::{Inlet, Outlet, pipe};

/// Events each stream keeps for a client that resumes it.
pub const EVENTS_KEPT: usize = 16;

/// How long a request's stream is kept after its answer when the client's
/// connection did not take it.
pub const KEEP_UNDELIVERED: Duration = Duration::from_secs(60);

/// At most this many such streams are kept per session, holding at most
/// [`UNDELIVERED_BYTES`] of messages, and all sessions together at most
/// [`UNDELIVERED_BYTES_ALL`]; the oldest are given up first. A client that
/// breaks off every request cannot make the host hoard answers.
pub const UNDELIVERED_KEPT: usize = 64;

/// See [`UNDELIVERED_KEPT`].
pub const UNDELIVERED_BYTES: usize = 4 << 20;

/// See [`UNDELIVERED_KEPT`].
pub const UNDELIVERED_BYTES_ALL: usize = 64 << 20;

/// How long to wait before reconnecting, told to clients at the start of
/// each request's stream (the SSE `retry` field).
const RECONNECT_AFTER: Duration = Duration::from_secs(3);

/// At most this many extra standalone streams are held open per session;
/// see [`Routes::standalone`].
const EXTRA_STANDALONE: usize = 32;

/// Who a message from the server belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Owner {
    /// A client's request.
    Request(RequestId),
    /// The progress token a client's request gave.
    Progress(ProgressToken),
    /// A request the server made while handling a client's request (its
    /// cancellation goes where it went).
    Asked(RequestId),
}

/// The streams of one session and what goes where.
#[derive(Default)]
pub(super) struct Routes {
    next_stream: u64,
    /// Request streams, open or kept for a resuming client, by number.
    streams: HashMap<u64, RequestStream>,
    /// Which stream each request in flight, and each progress token it
    /// asked for, belongs to.
    owners: HashMap<Owner, u64>,
    /// Finished streams whose connection did not take the answer, oldest
    /// first, with when they were kept.
    undelivered: VecDeque<(Instant, u64)>,
    /// The stream of the client's standalone `GET`. A second `GET` while it
    /// is open gets a stream that only carries keep-alives, as rmcp's
    /// manager does, so clients that open several do not take the stream
    /// from each other in turn.
    standalone: Events,
    extra_standalone: Vec<Inlet>,
    ended: bool,
    /// Bytes of messages in this session's kept streams.
    kept_bytes: usize,
    /// The same, summed over all sessions.
    all_kept_bytes: Arc<AtomicUsize>,
}

struct RequestStream {
    events: Events,
    /// The request and progress token routed here, removed when it ends.
    owners: Vec<Owner>,
    /// The answer has been sent: nothing more comes.
    finished: bool,
    /// Its size in bytes, if it is in [`Routes::undelivered`].
    kept: Option<usize>,
}

/// A stream's open connection, if any, and its last events.
#[derive(Default)]
struct Events {
    to_client: Option<Inlet>,
    /// The stream number in event ids; `None` for the standalone stream.
    stream: Option<u64>,
    /// The index of the next event.
    next: u64,
    kept: VecDeque<ServerSseMessage>,
    /// The index of the last event handed to an open connection.
    delivered: Option<u64>,
    /// Counts the connections the stream has had, so a connection that
    /// ends after a newer one took over changes nothing.
    connection: u64,
}

/// Where a message from the server goes.
enum Destination {
    /// A request's stream; `true` if the message ends it.
    Stream(u64, bool),
    Standalone,
    Nowhere,
}

impl Drop for Routes {
    fn drop(&mut self) {
        self.clear();
    }
}

impl Routes {
    /// The routes of a new session; `all_kept_bytes` counts kept answers
    /// over all sessions.
    pub(super) fn new(all_kept_bytes: Arc<AtomicUsize>) -> Routes {
        let mut routes = Routes::default();
        routes.all_kept_bytes = all_kept_bytes;
        // The standalone stream's priming event, which rmcp sends, is
        // event 0.
        routes.standalone.next = 1;
        routes
    }

    /// Whether the session has ended: nothing opens any more.
    pub(super) fn is_ended(&self) -> bool {
        self.ended
    }

    /// Opens the stream of a client's request (with its priming event if
    /// `prime`): its number, its connection's number, and its events.
    pub(super) fn open_request(
        &mut self,
        request: &ClientJsonRpcMessage,
        prime: bool,
    ) -> (u64, u64, Outlet) {
        let (number, events) = self.open(request);
        let stream = self.streams.get_mut(&number).expect("just opened");
        if prime {
            stream.events.prime();
        }
        (number, stream.events.connection, events)
    }

    /// A new connection for request stream `number`, from event `after` on:
    /// its connection's number and its events; `None` if the stream is gone.
    pub(super) fn resume(&mut self, number: u64, after: u64) -> Option<(u64, Outlet)> {
        let stream = self.streams.get_mut(&number)?;
        let (tx, rx) = pipe();
        stream.events.reconnect(tx, after);
        if stream.finished {
            // Everything it will carry is sent: the connection ends after it.
            stream.events.to_client = None;
        }
        Some((stream.events.connection, rx))
    }

    /// The client cancelled `request`: it gets no answer (rmcp's service
    /// drops it), so its stream ends.
    pub(super) fn cancelled(&mut self, request: &RequestId) {
        if let Some(&number) = self.owners.get(&Owner::Request(request.clone())) {
            self.finish(number);
        }
    }

    /// Whether a request is still being answered; forgets expired kept
    /// streams on the way.
    pub(super) fn busy(&mut self) -> bool {
        self.forget_expired();
        !self.owners.is_empty()
    }

    /// Ends every stream; nothing opens after this.
    pub(super) fn end(&mut self) {
        self.ended = true;
        self.clear();
        self.standalone = Events::default();
        self.extra_standalone.clear();
    }

    /// Opens a stream for a request and routes the request (and its
    /// progress token) to it.
    fn open(&mut self, request: &ClientJsonRpcMessage) -> (u64, Outlet) {
        self.forget_expired();
        let number = self.next_stream;
        self.next_stream += 1;
        let (tx, rx) = pipe();
        let mut stream = RequestStream {
            events: Events {
                to_client: Some(tx),
                stream: Some(number),
                ..Events::default()
            },
            owners: Vec::new(),
            finished: false,
            kept: None,
        };
        if let JsonRpcMessage::Request(request) = request {
            stream.owners.push(Owner::Request(request.id.clone()));
            if let Some(token) = request.request.get_meta().get_progress_token() {
                stream.owners.push(Owner::Progress(token));
            }
            // A request id (or token) still in flight, used again: rmcp
            // answers only one of the two, so the older stream ends here
            // rather than wait forever.
            let reused: Vec<u64> = stream
                .owners
                .iter()
                .filter_map(|owner| self.owners.get(owner).copied())
                .collect();
            for old in reused {
                self.finish(old);
            }
            for owner in &stream.owners {
                self.owners.insert(owner.clone(), number);
            }
        }
        self.streams.insert(number, stream);
        (number, rx)
    }

    /// Where `message` goes.
    fn destination(&self, message: &ServerJsonRpcMessage) -> Destination {
        let (owner, ends) = match message {
            JsonRpcMessage::Response(response) => (Owner::Request(response.id.clone()), true),
            JsonRpcMessage::Error(error) => match &error.id {
                Some(id) => (Owner::Request(id.clone()), true),
                None => return Destination::Standalone,
            },
            JsonRpcMessage::Request(request) => {
                match request.request.extensions().get::<OriginatingRequestId>() {
                    Some(origin) => (Owner::Request(origin.0.clone()), false),
                    None => return Destination::Standalone,
                }
            }
            JsonRpcMessage::Notification(notification) => match &notification.notification {
                ServerNotification::ProgressNotification(progress) => (
                    Owner::Progress(progress.params.progress_token.clone()),
                    false,
                ),
                ServerNotification::CancelledNotification(cancelled) => {
                    match &cancelled.params.request_id {
                        Some(id) => (Owner::Asked(id.clone()), false),
                        None => return Destination::Standalone,
                    }
                }
                _ => return Destination::Standalone,
            },
        };
        match self.owners.get(&owner) {
            Some(&number) => Destination::Stream(number, ends),
            // An answer to a request whose stream has ended (the client
            // cancelled it) goes nowhere: an answer never goes out on the
            // standalone stream.
            None if ends => Destination::Nowhere,
            None => {
                if matches!(owner, Owner::Request(_)) {
                    tracing::warn!(
                        "a server request goes out on the standalone stream: the request \
                         it was made for has ended"
                    );
                }
                Destination::Standalone
            }
        }
    }

    pub(super) fn route(&mut self, message: ServerJsonRpcMessage) {
        if self.ended {
            return;
        }
        self.forget_expired();
        match self.destination(&message) {
            Destination::Stream(number, ends) => {
                let Some(stream) = self.streams.get_mut(&number) else {
                    return;
                };
                if let JsonRpcMessage::Request(request) = &message {
                    let asked = Owner::Asked(request.id.clone());
                    stream.owners.push(asked.clone());
                    self.owners.insert(asked, number);
                }
                stream.events.push(message, ends);
                if ends {
                    self.finish(number);
                }
            }
            Destination::Standalone => self.standalone.push(message, false),
            Destination::Nowhere => {
                tracing::debug!("an answer to a request whose stream has ended is dropped");
            }
        }
    }

    /// Ends a request's stream once its answer is sent: the connection
    /// closes after it has taken what was sent. If the connection is gone
    /// already, the stream is kept for the client to resume.
    fn finish(&mut self, number: u64) {
        let Some(stream) = self.streams.get_mut(&number) else {
            return;
        };
        for owner in stream.owners.drain(..) {
            // Unless a newer request took the id over.
            if self.owners.get(&owner) == Some(&number) {
                self.owners.remove(&owner);
            }
        }
        stream.finished = true;
        if stream.events.to_client.take().is_none() {
            self.keep(number);
        }
    }

    /// Keeps a finished stream whose answer no connection took.
    fn keep(&mut self, number: u64) {
        let Some(stream) = self.streams.get_mut(&number) else {
            return;
        };
        if stream.kept.is_some() {
            return;
        }
        let bytes = stream.events.size();
        stream.kept = Some(bytes);
        self.kept_bytes += bytes;
        self.all_kept_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.undelivered.push_back((Instant::now(), number));
        // The oldest go first, this one last if it alone is too much.
        while self.undelivered.len() > UNDELIVERED_KEPT
            || self.kept_bytes > UNDELIVERED_BYTES
            || self.all_kept_bytes.load(Ordering::Relaxed) > UNDELIVERED_BYTES_ALL
        {
            let Some((_, oldest)) = self.undelivered.pop_front() else {
                break;
            };
            self.remove(oldest);
        }
    }

    /// Removes a stream, and its kept bytes from the counts.
    fn remove(&mut self, number: u64) {
        if let Some(RequestStream {
            kept: Some(bytes), ..
        }) = self.streams.remove(&number)
        {
            self.kept_bytes -= bytes;
            self.all_kept_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.undelivered.retain(|&(_, n)| n != number);
        }
    }

    /// Forgets every stream, keeping the counts right.
    fn clear(&mut self) {
        self.all_kept_bytes
            .fetch_sub(self.kept_bytes, Ordering::Relaxed);
        self.kept_bytes = 0;
        self.streams.clear();
        self.owners.clear();
        self.undelivered.clear();
    }

    /// A request stream's connection has ended: `complete` if it took
    /// everything up to the end of the stream.
    pub(super) fn connection_ended(&mut self, number: u64, connection: u64, complete: bool) {
        let Some(stream) = self.streams.get_mut(&number) else {
            return;
        };
        if stream.events.connection != connection {
            return;
        }
        stream.events.to_client = None;
        if !stream.finished {
            // The answer, when it comes, is kept for the client to resume.
            return;
        }
        if complete {
            self.remove(number);
        } else {
            self.keep(number);
        }
    }

    fn forget_expired(&mut self) {
        while let Some(&(at, number)) = self.undelivered.front() {
            if at.elapsed() < KEEP_UNDELIVERED {
                break;
            }
            self.remove(number);
        }
    }

    /// Opens the standalone stream, or an extra one if it is open already
    /// and this is not a resumption; sends what it holds after `after`
    /// (everything not yet delivered when `None`).
    pub(super) fn open_standalone(&mut self, after: Option<u64>) -> Outlet {
        self.forget_expired();
        let (tx, rx) = pipe();
        let open = self
            .standalone
            .to_client
            .as_ref()
            .is_some_and(Inlet::is_open);
        // A client resuming the stream lost its connection, though the
        // host may not have noticed yet: it takes the stream over.
        if open && after.is_none() {
            self.extra_standalone.retain(Inlet::is_open);
            if self.extra_standalone.len() >= EXTRA_STANDALONE {
                self.extra_standalone.remove(0);
            }
            self.extra_standalone.push(tx);
        } else {
            // Event 0 is the priming event rmcp sends on this stream.
            let after = after.or(self.standalone.delivered).unwrap_or(0);
            self.standalone.reconnect(tx, after);
        }
        rx
    }
}

impl Events {
    /// About how many bytes its kept messages take: their JSON.
    fn size(&self) -> usize {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0 += bytes.len();
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        for message in self.kept.iter().filter_map(|e| e.message.as_deref()) {
            let _ = serde_json::to_writer(&mut count, message);
        }
        count.0
    }

    fn id_of(&self, index: u64) -> String {
        match self.stream {
            Some(stream) => format!("{index}/{stream}"),
            None => index.to_string(),
        }
    }

    /// The first event of a request's stream: no message, but an id to
    /// resume from and how long to wait before reconnecting.
    fn prime(&mut self) {
        let event = ServerSseMessage::priming(self.id_of(self.next), RECONNECT_AFTER);
        self.send(event, false);
    }

    /// Sends a message; `last` if nothing follows it on this stream, so the
    /// connection is told of the end with the message, not after it.
    fn push(&mut self, message: ServerJsonRpcMessage, last: bool) {
        let event = ServerSseMessage::new(self.id_of(self.next), message);
        self.send(event, last);
    }

    fn send(&mut self, event: ServerSseMessage, last: bool) {
        let index = self.next;
        self.next += 1;
        if self.kept.len() == EVENTS_KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(event.clone());
        if let Some(tx) = &self.to_client {
            if tx.send(event, last) {
                self.delivered = Some(index);
            } else {
                self.to_client = None;
            }
        }
    }

    /// Sends the kept events after index `after` to a new connection, which
    /// then gets what comes next.
    fn reconnect(&mut self, tx: Inlet, after: u64) {
        let first = self.next - self.kept.len() as u64;
        for (index, event) in (first..).zip(&self.kept) {
            if index > after && tx.send(event.clone(), false) {
                self.delivered = Some(index);
            }
        }
        self.to_client = Some(tx);
        self.connection += 1;
    }
}

/// Splits an event id this host issued into its index and stream number.
pub(super) fn parse_event_id(id: &str) -> Option<(u64, Option<u64>)> {
    match id.split_once('/') {
        Some((index, stream)) => Some((index.parse().ok()?, Some(stream.parse().ok()?))),
        None => Some((id.parse().ok()?, None)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use rmcp::model::ServerResult;

    /// The next event if one is there, `Some(None)` at the end of the
    /// stream, `None` if it would wait.
    fn ready(outlet: &mut Outlet) -> Option<Option<ServerSseMessage>> {
        outlet.next().now_or_never()
    }

    fn ping(id: i64) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "ping"}))
            .unwrap()
    }

    fn answer(id: i64) -> ServerJsonRpcMessage {
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
            routes.kept_bytes <= UNDELIVERED_BYTES,
            "{}",
            routes.kept_bytes
        );
        assert_eq!(
            routes.undelivered.len(),
            3,
            "three 1 MiB answers fit in 4 MiB"
        );
        let all = routes.all_kept_bytes.clone();
        assert_eq!(all.load(Ordering::Relaxed), routes.kept_bytes);
        drop(routes);
        assert_eq!(
            all.load(Ordering::Relaxed),
            0,
            "a dropped session gives its bytes back"
        );
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
}
