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
//! connection was gone first, the stream is kept for
//! [`KEEP_UNDELIVERED`](super::kept::KEEP_UNDELIVERED)
//! after the answer, within [`UNDELIVERED_KEPT`]'s budgets and the
//! [`Ledger`]'s over all sessions, so the client can come back for it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientJsonRpcMessage, GetExtensions, GetMeta, JsonRpcMessage, ProgressToken, RequestId,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::OriginatingRequestId;
use rmcp::transport::common::server_side_http::ServerSseMessage;

use super::kept::{Kept, Ledger};
use crate::mcp::http::pipe::{Inlet, Outlet, pipe};

/// Events each stream keeps for a client that resumes it.
pub const EVENTS_KEPT: usize = 16;

/// At most this many streams whose answer no connection took are kept per
/// session, holding at most [`UNDELIVERED_BYTES`] of messages, and all
/// sessions together at most [`super::kept::UNDELIVERED_BYTES_ALL`]; the
/// oldest are given up first. A client that breaks off every request
/// cannot make the host hoard answers.
pub const UNDELIVERED_KEPT: usize = 64;

/// See [`UNDELIVERED_KEPT`].
pub const UNDELIVERED_BYTES: usize = 4 << 20;

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
    /// first.
    undelivered: VecDeque<u64>,
    /// The stream of the client's standalone `GET`. A second `GET` while it
    /// is open gets a stream that only carries keep-alives, as rmcp's
    /// manager does, so clients that open several do not take the stream
    /// from each other in turn; one of them carries the stream if its
    /// connection turns out to be gone (see
    /// [`Routes::promote_extra_standalone`]).
    standalone: Events,
    extra_standalone: Vec<Inlet>,
    ended: bool,
    /// Where kept streams' events are held, over all sessions.
    ledger: Arc<Ledger>,
}

struct RequestStream {
    events: Events,
    /// The request and progress token routed here, removed when it ends.
    owners: Vec<Owner>,
    /// The answer has been sent: nothing more comes.
    finished: bool,
    /// Its events, moved out of `events`, if it is in
    /// [`Routes::undelivered`].
    kept: Option<Arc<Kept>>,
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
    /// For the standalone stream: the index of the last event the client
    /// had, as it said or as the host saw, when its current connection
    /// began, or when its last one went; read it with
    /// [`Events::delivered`], which adds what the connection took since.
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
    /// The routes of a new session; `ledger` holds kept answers over all
    /// sessions.
    pub(super) fn new(ledger: Arc<Ledger>) -> Routes {
        let mut routes = Routes::default();
        routes.ledger = ledger;
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
        self.forget_expired();
        let stream = self.streams.get_mut(&number)?;
        let kept = stream.kept.as_ref().map(|kept| kept.events());
        if let Some(None) = kept {
            // Given up to make room for newer answers.
            self.remove(number);
            return None;
        }
        let stream = self.streams.get_mut(&number)?;
        let (tx, rx) = pipe();
        match kept.flatten() {
            Some(events) => stream.events.replay(tx, after, &events),
            None => stream.events.reconnect(tx, after),
        }
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
            // A request id still in flight, used again: rmcp answers only
            // one of the two, so the older stream ends here rather than
            // wait forever. A progress token used again only moves: its
            // progress comes here from now on, and the older request is
            // still answered on its own stream.
            let reused = self
                .owners
                .get(&Owner::Request(request.id.clone()))
                .copied();
            if let Some(old) = reused {
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
            Destination::Standalone => {
                self.standalone.push(message, false);
                if self.standalone.to_client.is_none() {
                    self.promote_extra_standalone();
                }
            }
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

    /// Keeps a finished stream whose answer no connection took: its events
    /// move to the ledger.
    fn keep(&mut self, number: u64) {
        let Some(stream) = self.streams.get_mut(&number) else {
            return;
        };
        if stream.kept.is_some() {
            return;
        }
        let events = std::mem::take(&mut stream.events.kept);
        stream.kept = Some(self.ledger.keep(events));
        self.undelivered.push_back(number);
        // Those the ledger gave up go; then the oldest, this one last if it
        // alone is too much.
        let given_up: Vec<u64> = self
            .undelivered
            .iter()
            .copied()
            .filter(|&n| !self.kept(n).is_some_and(Kept::is_held))
            .collect();
        for number in given_up {
            self.remove(number);
        }
        while self.undelivered.len() > UNDELIVERED_KEPT || self.kept_bytes() > UNDELIVERED_BYTES {
            let Some(oldest) = self.undelivered.pop_front() else {
                break;
            };
            self.remove(oldest);
        }
    }

    /// A kept stream's events.
    fn kept(&self, number: u64) -> Option<&Kept> {
        self.streams.get(&number)?.kept.as_deref()
    }

    /// Bytes of messages in this session's kept streams.
    fn kept_bytes(&self) -> usize {
        self.undelivered
            .iter()
            .filter_map(|&n| self.kept(n))
            .map(Kept::bytes)
            .sum()
    }

    /// Removes a stream, letting its kept events go.
    fn remove(&mut self, number: u64) {
        if let Some(RequestStream {
            kept: Some(kept), ..
        }) = self.streams.remove(&number)
        {
            self.ledger.release(&kept);
            self.undelivered.retain(|&n| n != number);
        }
    }

    /// Forgets every stream, letting kept events go.
    fn clear(&mut self) {
        for kept in self.streams.values().filter_map(|s| s.kept.as_ref()) {
            self.ledger.release(kept);
        }
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
        while let Some(&number) = self.undelivered.front() {
            if self.kept(number).is_some_and(|kept| !kept.expired()) {
                break;
            }
            self.undelivered.pop_front();
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
            // Event 0 is the priming event rmcp sends on this stream. Events
            // the last connection had not taken when it went are sent again.
            let after = after.or(self.standalone.delivered()).unwrap_or(0);
            self.standalone.reconnect(tx, after);
        }
        rx
    }

    /// The standalone stream's connection was found gone while sending to
    /// it: the newest extra stream still open carries the stream from the
    /// first event that connection had not taken. A client that reconnects
    /// without `Last-Event-ID` before the host noticed its old connection
    /// go gets an extra stream, which would otherwise only keep alive.
    fn promote_extra_standalone(&mut self) {
        while let Some(tx) = self.extra_standalone.pop() {
            if tx.is_open() {
                let after = self.standalone.delivered().unwrap_or(0);
                self.standalone.reconnect(tx, after);
                return;
            }
        }
    }
}

impl Events {
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
        if let Some(tx) = &self.to_client
            && !tx.send(index, event, last)
        {
            self.delivered = self.delivered();
            self.to_client = None;
        }
    }

    /// The index of the last event the client took, as far as the host
    /// knows: one still queued for a connection when it went was not.
    fn delivered(&self) -> Option<u64> {
        let taken = self.to_client.as_ref().and_then(Inlet::taken);
        taken.or(self.delivered)
    }

    /// Sends the kept events after index `after` to a new connection, which
    /// then gets what comes next.
    fn reconnect(&mut self, tx: Inlet, after: u64) {
        let kept = std::mem::take(&mut self.kept);
        self.replay(tx, after, &kept);
        self.kept = kept;
    }

    /// As [`Events::reconnect`], with the stream's last events kept
    /// elsewhere (in the ledger).
    fn replay(&mut self, tx: Inlet, after: u64, kept: &VecDeque<ServerSseMessage>) {
        let first = self.next - kept.len() as u64;
        for (index, event) in (first..).zip(kept) {
            if index > after {
                tx.send(index, event.clone(), false);
            }
        }
        // What the client says it has, but no event not yet sent: a made-up
        // id must not make a later connection skip events.
        self.delivered = self.next.checked_sub(1).map(|last| after.min(last));
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
pub(super) mod tests {
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

    fn call(id: i64, token: &str) -> ClientJsonRpcMessage {
        serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": "echo", "_meta": { "progressToken": token } }
        }))
        .unwrap()
    }

    #[test]
    fn a_progress_token_used_again_moves_its_progress_and_ends_no_stream() {
        let mut routes = Routes::default();
        let (_, mut first) = routes.open(&call(1, "t"));
        let (_, mut second) = routes.open(&call(2, "t"));
        assert!(ready(&mut first).is_none(), "the older stream ended");
        routes.route(server(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/progress",
            "params": { "progressToken": "t", "progress": 1 }
        })));
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

    fn list_changed() -> ServerJsonRpcMessage {
        server(serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/tools/list_changed"
        }))
    }

    fn id_of(event: Option<Option<ServerSseMessage>>) -> String {
        event.flatten().unwrap().event_id.unwrap()
    }

    #[test]
    fn standalone_events_a_lost_connection_had_not_taken_are_sent_again() {
        let mut routes = Routes::new(Arc::default());
        let mut first = routes.open_standalone(None);
        for _ in 0..3 {
            routes.route(list_changed());
        }
        assert_eq!(id_of(ready(&mut first)), "1");
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
    fn a_made_up_standalone_event_id_does_not_make_later_gets_skip_events() {
        let mut routes = Routes::new(Arc::default());
        routes.route(list_changed());
        let mut resumed = routes.open_standalone(Some(999));
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
        let mut resumed = routes.open_standalone(Some(0));
        assert_eq!(id_of(ready(&mut resumed)), "1", "not sent again");
        assert!(matches!(ready(&mut first), Some(None)), "not taken over");
        routes.route(list_changed());
        assert_eq!(id_of(ready(&mut resumed)), "2");
        assert!(ready(&mut extra).is_none());
    }

    #[test]
    fn an_extra_get_carries_the_stream_once_the_first_connection_is_found_gone() {
        let mut routes = Routes::new(Arc::default());
        let mut first = routes.open_standalone(None);
        routes.route(list_changed());
        routes.route(list_changed());
        assert_eq!(id_of(ready(&mut first)), "1");
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
