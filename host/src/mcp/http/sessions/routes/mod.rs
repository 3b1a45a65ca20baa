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
use crate::mcp::http::pipe::{Inlet, Outlet, QUEUE_LIMIT, pipe};

/// Events each stream keeps for a client that resumes it.
pub const EVENTS_KEPT: usize = 16;

// A new connection is sent up to every kept event at once: more than a
// pipe holds unread would cut it off before it began.
const _: () = assert!(EVENTS_KEPT <= QUEUE_LIMIT);

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
    /// is open, unless its client is resuming it (see [`Routes::serves`]),
    /// gets a stream that only carries keep-alives, as rmcp's manager does,
    /// so clients that open several do not take the stream from each other
    /// in turn; one of them carries the stream if its connection turns out
    /// to be gone (see [`Routes::promote_extra_standalone`]).
    standalone: Events,
    /// How the standalone stream's current (or last) connection began.
    standalone_began: Began,
    /// Extra standalone streams, with the `Last-Event-ID` each was asked
    /// with.
    extra_standalone: Vec<(Inlet, Option<u64>)>,
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
    /// A finished request stream's last connection, ended and still taking
    /// what was queued; like `to_client`, cut when a new connection takes
    /// over, which would otherwise be sent the answer too.
    draining: Option<Inlet>,
    /// The stream number in event ids; `None` for the standalone stream.
    stream: Option<u64>,
    /// The index of the next event.
    next: u64,
    kept: VecDeque<ServerSseMessage>,
    /// For the standalone stream: the index of the event before the first
    /// its current connection was sent, or of the last one its last
    /// connection took when it went; read it with
    /// [`Events::delivered`], which adds what the connection took since.
    delivered: Option<u64>,
    /// Counts the connections the stream has had, so a connection that
    /// ends after a newer one took over changes nothing.
    connection: u64,
}

/// How the standalone stream's current (or last) connection began.
#[derive(Default, Clone, Copy)]
struct Began {
    /// The index of the first event it was sent.
    sent_from: u64,
    /// Ids from this one on are of events no other connection took, so only
    /// this connection's client can have them; see [`Routes::serves`].
    trusted_from: u64,
    /// The `Last-Event-ID` its client gave, if it was trusted.
    said: Option<u64>,
    /// Its client gave no `Last-Event-ID` or 0, so it may have only the
    /// priming event's id, 0.
    primed_only: bool,
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
            stream.events.drain();
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
        if !stream.events.drain() {
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
        stream.events.draining = None;
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
    /// and this is not its own client resuming it; sends what it holds
    /// after `after` (when `None`, or not to be trusted, see
    /// [`Routes::connect_standalone`]).
    pub(super) fn open_standalone(&mut self, after: Option<u64>) -> Outlet {
        self.forget_expired();
        let (tx, rx) = pipe();
        let open = self
            .standalone
            .to_client
            .as_ref()
            .is_some_and(Inlet::is_open);
        // The client of the open connection, resuming, lost that
        // connection, though the host may not have noticed yet: it takes
        // the stream over. Any other client gets an extra stream, which
        // takes over if the host finds the connection gone.
        if open && !after.is_some_and(|after| self.serves(after)) {
            self.extra_standalone.retain(|(tx, _)| tx.is_open());
            if self.extra_standalone.len() >= EXTRA_STANDALONE {
                self.extra_standalone.remove(0);
            }
            self.extra_standalone.push((tx, after));
        } else {
            self.connect_standalone(tx, after);
        }
        rx
    }

    /// Whether a client that had the standalone stream's events up to
    /// `after` is the one its current (or, if none is open, its last)
    /// connection serves: it had an event no other connection took, or
    /// gave the id that connection began after. Every standalone `GET`
    /// without `Last-Event-ID` is primed with id 0, so 0 names no
    /// connection (before the first, any id of an event sent is trusted),
    /// and neither does an id never sent. Another client that took an open
    /// stream over would be sent again what that connection had, and the
    /// two would take the stream from each other at each reconnect.
    fn serves(&self, after: u64) -> bool {
        let began = self.standalone_began;
        (began.trusted_from..self.standalone.next).contains(&after) || began.said == Some(after)
    }

    /// Sends the standalone stream on `tx`, its client having said it had
    /// the events up to `after`. A trusted id is resumed from. Otherwise no
    /// connection is open (or `tx` is an extra stream taking over from a
    /// lost one), so no live stream can be sent an event twice, and it
    /// starts from the first event the last connection had not taken, or
    /// earlier: from the client's own id if lower, and from the start of
    /// what the last connection was sent if its client, primed only, would
    /// resume from 0 (it may be this client, which then received none of
    /// it). Replayed events the last connection took may have reached
    /// another client, so their ids are not trusted.
    fn connect_standalone(&mut self, tx: Inlet, after: Option<u64>) {
        let trusted = after.filter(|&after| self.serves(after));
        let last = self.standalone_began;
        let taken = self.standalone.delivered();
        let from = match (trusted, after, taken) {
            (Some(after), _, _) => after,
            (None, _, None) => 0,
            (None, Some(0), Some(taken)) if last.primed_only => {
                taken.min(last.sent_from.saturating_sub(1))
            }
            (None, Some(0) | None, Some(taken)) => taken,
            (None, Some(after), Some(taken)) => taken.min(after),
        };
        self.standalone.reconnect(tx, from);
        let first = self.standalone.delivered.map_or(0, |last| last + 1);
        let untaken = taken.map_or(0, |taken| taken + 1).max(first);
        self.standalone_began = Began {
            sent_from: first,
            // Never lower for an untrusted start: an earlier connection
            // may have taken ids the last one was only replayed.
            trusted_from: if trusted.is_some() {
                first
            } else {
                untaken.max(last.trusted_from)
            },
            said: trusted.filter(|&after| after > 0),
            primed_only: matches!(after, None | Some(0)),
        };
    }

    /// A standalone stream's connection has ended; if it was the stream's
    /// current one, an extra stream takes over.
    pub(super) fn standalone_ended(&mut self, rx: &Outlet) {
        if !self
            .standalone
            .to_client
            .as_ref()
            .is_some_and(|tx| tx.feeds(rx))
        {
            return;
        }
        self.standalone.connection_lost();
        self.promote_extra_standalone();
    }

    /// The standalone stream's connection is gone: the newest extra stream
    /// still open carries the stream from the first event that connection
    /// had not taken. A client that reconnects before the host noticed its
    /// old connection go gets an extra stream, which would otherwise only
    /// keep alive.
    fn promote_extra_standalone(&mut self) {
        while let Some((tx, after)) = self.extra_standalone.pop() {
            if tx.is_open() {
                self.connect_standalone(tx, after);
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
            self.connection_lost();
        }
    }

    /// Ends the connection after what it was sent, keeping it to cut if the
    /// client resumes; whether there was one.
    fn drain(&mut self) -> bool {
        let Some(tx) = self.to_client.take() else {
            return false;
        };
        tx.end();
        self.draining = Some(tx);
        true
    }

    /// The connection is gone: what it took is what the client had.
    fn connection_lost(&mut self) {
        self.delivered = self.delivered();
        self.to_client = None;
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
        // The old connection, if open or still draining, is this client's
        // (or the stream is taken over from a lost one): what it still
        // queues would reach the client twice.
        let old = [self.to_client.replace(tx), self.draining.take()];
        for old in old.into_iter().flatten() {
            old.cut();
        }
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
pub(super) mod tests;
