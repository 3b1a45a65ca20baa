//! The live sessions of the Streamable HTTP endpoint, and for each, which of
//! its open event streams a message from the server goes out on.
//!
//! rmcp's service drives the protocol; this is the [`SessionManager`] it
//! asks where messages go. rmcp's own `LocalSessionManager` puts a task
//! between the HTTP requests and each session's service loop, so every
//! message, either way, costs one more task hop (a wake-up and a context
//! switch on another thread) and a reply through a one-shot channel; each
//! session also holds six channels of 32 message slots, used or not. Here a
//! session is a queue and a routing table behind locks that whoever holds
//! a message consults: a request handler queues the client's message and
//! wakes the service loop, and the service loop's `send` puts each answer
//! straight into the event stream of the request it answers.
//!
//! Where each message goes, and what a stream keeps for a client that
//! resumes it, is [`routes`].

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::common::server_side_http::{ServerSseMessage, SessionId, session_id};
use rmcp::transport::streamable_http_server::SessionManager;
use tokio::sync::Notify;

use super::pipe::Outlet;
use kept::Ledger;
use routes::{Routes, parse_event_id};

mod kept;
mod routes;

/// How long a new session's service may take to answer `initialize`.
const INITIALIZE_WITHIN: Duration = Duration::from_secs(60);

/// Why a session could not do what a request asked.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no live session {0}")]
    NotFound(SessionId),
    #[error("session {0} has ended")]
    Ended(SessionId),
    #[error("`{0}` is not an event id this host issued")]
    BadEventId(String),
    #[error("stream {0} of this session is gone, so it cannot be resumed")]
    NoStream(u64),
    #[error("the session's service did not answer `initialize` within {0:?}")]
    InitializeTimedOut(Duration),
}

/// The live sessions, by id.
pub struct Sessions {
    live: RwLock<HashMap<SessionId, Arc<Session>>>,
    /// A session with no message either way, and no request in flight, for
    /// this long is closed.
    idle: Duration,
    /// Answers kept for resuming clients over all sessions (see
    /// [`routes::UNDELIVERED_KEPT`]).
    ledger: Arc<Ledger>,
}

/// One session: the client's messages waiting for the service loop, and
/// where the server's messages go.
struct Session {
    id: SessionId,
    inbox: Mutex<Inbox>,
    /// Wakes the service loop when a message is queued or the session ends.
    arrived: Notify,
    routes: Mutex<Routes>,
    /// When the session began; `active_at` counts from it.
    began: Instant,
    /// Milliseconds from `began` to the last message either way.
    active_at: AtomicU64,
}

#[derive(Default)]
struct Inbox {
    queue: VecDeque<ClientJsonRpcMessage>,
    ended: bool,
}

/// The service loop's side of a session.
pub struct SessionTransport {
    session: Arc<Session>,
    idle: Duration,
    idle_timer: Pin<Box<tokio::time::Sleep>>,
}

impl Sessions {
    pub fn new(idle: Duration) -> Sessions {
        Sessions {
            live: RwLock::default(),
            idle,
            ledger: Arc::default(),
        }
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.live.read().expect("never poisoned").len()
    }

    /// Whether `id` is a live session.
    pub fn contains(&self, id: &str) -> bool {
        self.live
            .read()
            .expect("never poisoned")
            .get(id)
            .is_some_and(|s| !s.inbox.lock().expect("never poisoned").ended)
    }

    fn get(&self, id: &SessionId) -> Result<Arc<Session>, SessionError> {
        self.live
            .read()
            .expect("never poisoned")
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound(id.clone()))
    }
}

impl Session {
    /// When the session is idle for `idle` if nothing happens meanwhile.
    fn idle_until(&self, idle: Duration) -> Instant {
        self.began + Duration::from_millis(self.active_at.load(Ordering::Relaxed)) + idle
    }

    fn touch(&self) {
        let now = self.began.elapsed().as_millis() as u64;
        self.active_at.store(now, Ordering::Relaxed);
    }

    /// Queues a client message for the service loop.
    fn deliver(&self, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        {
            let mut inbox = self.inbox.lock().expect("never poisoned");
            if inbox.ended {
                return Err(SessionError::Ended(self.id.clone()));
            }
            inbox.queue.push_back(message);
        }
        self.touch();
        self.arrived.notify_one();
        Ok(())
    }

    /// Opens a stream for a client's request (with its priming event if
    /// `prime`), then queues the request.
    fn open_request(
        self: &Arc<Self>,
        message: ClientJsonRpcMessage,
        prime: bool,
    ) -> Result<Receiver, SessionError> {
        let end = {
            let mut routes = self.routes.lock().expect("never poisoned");
            if routes.is_ended() {
                return Err(SessionError::Ended(self.id.clone()));
            }
            let (number, connection, rx) = routes.open_request(&message, prime);
            self.receiver(rx, Some((number, connection)))
        };
        self.deliver(message)?;
        Ok(end)
    }

    /// A response's events, reported to the routes when its connection
    /// ends: `request` is a request's stream and its connection's number,
    /// `None` for a standalone stream.
    fn receiver(self: &Arc<Self>, rx: Outlet, request: Option<(u64, u64)>) -> Receiver {
        let end = StreamEnd {
            session: Arc::downgrade(self),
            request,
            complete: false,
        };
        Receiver { rx, end }
    }

    /// Ends the session, as `end` does, unless it was active within `idle`,
    /// a request is being answered or a message waits; whether it ended.
    /// All is decided with the routes locked: a request that opened its
    /// stream first keeps the session busy, one after finds it ended, and
    /// a message queued first is read, not dropped.
    fn end_if_idle(&self, idle: Duration) -> bool {
        let mut routes = self.routes.lock().expect("never poisoned");
        if routes.busy() || self.idle_until(idle) > Instant::now() {
            return false;
        }
        {
            let mut inbox = self.inbox.lock().expect("never poisoned");
            if !inbox.queue.is_empty() {
                return false;
            }
            inbox.ended = true;
        }
        routes.end();
        true
    }

    /// Ends the session: the service loop sees no more messages and every
    /// open stream ends.
    fn end(&self) {
        self.inbox.lock().expect("never poisoned").ended = true;
        self.arrived.notify_one();
        self.routes.lock().expect("never poisoned").end();
    }
}

/// A stream of events for one HTTP response.
pub struct Receiver {
    rx: Outlet,
    /// Whom to tell when the connection ends.
    end: StreamEnd,
}

struct StreamEnd {
    session: Weak<Session>,
    /// A request's stream and its connection's number; `None` for a
    /// standalone stream.
    request: Option<(u64, u64)>,
    complete: bool,
}

impl StreamEnd {
    fn report(&self, complete: bool, rx: &Outlet) {
        let Some(session) = self.session.upgrade() else {
            return;
        };
        let mut routes = session.routes.lock().expect("never poisoned");
        match self.request {
            Some((stream, connection)) => routes.connection_ended(stream, connection, complete),
            None => routes.standalone_ended(rx),
        }
    }
}

impl Stream for Receiver {
    type Item = ServerSseMessage;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<ServerSseMessage>> {
        let polled = Pin::new(&mut self.rx).poll_next(cx);
        if let std::task::Poll::Ready(None) = polled
            && !self.end.complete
        {
            self.end.complete = true;
            // A cut pipe ends too, though its connection missed events.
            self.end.report(!self.rx.is_cut(), &self.rx);
        }
        polled
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if !self.end.complete {
            self.end.report(false, &self.rx);
        }
    }
}

impl SessionManager for Sessions {
    type Error = SessionError;
    type Transport = SessionTransport;

    async fn create_session(&self) -> Result<(SessionId, SessionTransport), SessionError> {
        let id = session_id();
        let routes = Routes::new(self.ledger.clone());
        let session = Arc::new(Session {
            id: id.clone(),
            inbox: Mutex::default(),
            arrived: Notify::new(),
            routes: Mutex::new(routes),
            began: Instant::now(),
            active_at: AtomicU64::new(0),
        });
        self.live
            .write()
            .expect("never poisoned")
            .insert(id.clone(), session.clone());
        let transport = SessionTransport {
            session,
            idle: self.idle,
            idle_timer: Box::pin(tokio::time::sleep(self.idle)),
        };
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        use futures::StreamExt;
        let session = self.get(id)?;
        let mut answers = session.open_request(message, false)?;
        let answer = tokio::time::timeout(INITIALIZE_WITHIN, answers.next())
            .await
            .map_err(|_| SessionError::InitializeTimedOut(INITIALIZE_WITHIN))?
            .and_then(|event| event.message)
            .ok_or_else(|| SessionError::Ended(id.clone()))?;
        // The answer ended the stream; reading its end lets it go at once.
        let _ = answers.next().await;
        Ok(Arc::unwrap_or_clone(answer))
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.contains(id))
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        let session = self.live.write().expect("never poisoned").remove(id);
        if let Some(session) = session {
            session.end();
        }
        Ok(())
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        self.get(id)?.open_request(message, true)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), SessionError> {
        let session = self.get(id)?;
        // Active from now: ending the stream below may leave the session
        // with no request in flight, and the idle timer must not end it
        // before the cancellation is queued.
        session.touch();
        // A request the client cancelled gets no answer (rmcp's service
        // drops it), so its stream ends here.
        if let JsonRpcMessage::Notification(notification) = &message
            && let ClientNotification::CancelledNotification(cancelled) = &notification.notification
            && let Some(request) = &cancelled.params.request_id
        {
            session
                .routes
                .lock()
                .expect("never poisoned")
                .cancelled(request);
        }
        session.deliver(message)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let session = self.get(id)?;
        session.touch();
        let mut routes = session.routes.lock().expect("never poisoned");
        if routes.is_ended() {
            return Err(SessionError::Ended(id.clone()));
        }
        let rx = routes.open_standalone(None);
        Ok(session.receiver(rx, None))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        let (after, stream) = parse_event_id(&last_event_id)
            .ok_or_else(|| SessionError::BadEventId(last_event_id.chars().take(64).collect()))?;
        let session = self.get(id)?;
        session.touch();
        let mut routes = session.routes.lock().expect("never poisoned");
        if routes.is_ended() {
            return Err(SessionError::Ended(id.clone()));
        }
        let Some(number) = stream else {
            let rx = routes.open_standalone(Some(after));
            return Ok(session.receiver(rx, None));
        };
        let (connection, rx) = routes
            .resume(number, after)
            .ok_or(SessionError::NoStream(number))?;
        Ok(session.receiver(rx, Some((number, connection))))
    }
}

impl Transport<RoleServer> for SessionTransport {
    type Error = Infallible;

    fn send(
        &mut self,
        message: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Infallible>> + Send + 'static {
        // Routed here, in the service loop's own task: the answer is in the
        // request's stream before this returns.
        self.session.touch();
        self.session
            .routes
            .lock()
            .expect("never poisoned")
            .route(message);
        std::future::ready(Ok(()))
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            {
                let mut inbox = self.session.inbox.lock().expect("never poisoned");
                if let Some(message) = inbox.queue.pop_front() {
                    return Some(message);
                }
                if inbox.ended {
                    return None;
                }
            }
            tokio::select! {
                () = self.session.arrived.notified() => {}
                () = self.idle_timer.as_mut() => {
                    // The timer is moved on only when it fires, not at every
                    // message: resetting a timer costs more than reading a clock.
                    let idle_until = self.session.idle_until(self.idle);
                    if idle_until > Instant::now() {
                        self.idle_timer.as_mut().reset(idle_until.into());
                    } else if self.session.end_if_idle(self.idle) {
                        tracing::info!(session = %self.session.id, "closing a session idle for {:?}", self.idle);
                        return None;
                    } else {
                        // Busy, or active a moment ago: look again later.
                        self.idle_timer.as_mut().reset((Instant::now() + self.idle).into());
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Infallible> {
        self.session.end();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::routes::tests::{answer, call, list_changed, ping, progress};
    use super::*;
    use crate::mcp::http::pipe::QUEUE_LIMIT;
    use futures::StreamExt;
    use serde_json::json;

    fn message(value: serde_json::Value) -> ClientJsonRpcMessage {
        serde_json::from_value(value).unwrap()
    }

    #[tokio::test]
    async fn an_idle_end_waits_for_answers_and_queued_messages_and_refuses_what_follows() {
        let sessions = Sessions::new(Duration::ZERO);
        let (id, mut transport) = sessions.create_session().await.unwrap();
        let session = sessions.get(&id).unwrap();

        let mut stream = sessions.create_stream(&id, ping(1)).await.unwrap();
        assert!(
            !session.end_if_idle(Duration::ZERO),
            "ended with the request unread"
        );
        assert!(transport.receive().await.is_some());
        assert!(
            !session.end_if_idle(Duration::ZERO),
            "ended while a request was answered"
        );
        transport.send(answer(1)).await.unwrap();
        let mut events = 0;
        while stream.next().await.is_some() {
            events += 1;
        }
        assert_eq!(events, 2, "the priming event and the answer");
        drop(stream);

        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        sessions
            .accept_message(&id, message(initialized))
            .await
            .unwrap();
        assert!(
            !session.end_if_idle(Duration::ZERO),
            "ended with a message unread"
        );
        assert!(transport.receive().await.is_some());

        assert!(session.end_if_idle(Duration::ZERO));
        assert!(!sessions.has_session(&id).await.unwrap());
        assert!(sessions.create_stream(&id, ping(2)).await.is_err());
    }

    #[tokio::test]
    async fn the_idle_timer_closes_an_idle_session_but_not_one_answering_a_request() {
        let idle = Duration::from_millis(50);
        let sessions = Sessions::new(idle);
        let (id, mut transport) = sessions.create_session().await.unwrap();
        let mut stream = sessions.create_stream(&id, ping(1)).await.unwrap();
        assert!(transport.receive().await.is_some());

        // The timer fires several times while the request is answered.
        let waited = tokio::time::timeout(idle * 6, transport.receive()).await;
        assert!(waited.is_err(), "closed while a request was answered");
        assert!(sessions.has_session(&id).await.unwrap());

        transport.send(answer(1)).await.unwrap();
        while stream.next().await.is_some() {}
        drop(stream);
        let closed = tokio::time::timeout(Duration::from_secs(10), transport.receive())
            .await
            .expect("an idle session stayed open");
        assert!(closed.is_none());
        assert!(!sessions.has_session(&id).await.unwrap());
    }

    #[tokio::test]
    async fn when_the_standalone_connection_ends_an_extra_one_gets_what_it_had_not_taken() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let (id, mut transport) = sessions.create_session().await.unwrap();
        let mut first = sessions.create_standalone_stream(&id).await.unwrap();
        transport.send(list_changed()).await.unwrap();
        transport.send(list_changed()).await.unwrap();
        let taken = first.next().await.unwrap();
        assert_eq!(taken.event_id.as_deref(), Some("1"));
        let mut extra = sessions.create_standalone_stream(&id).await.unwrap();
        drop(first);
        let resent = tokio::time::timeout(Duration::from_secs(10), extra.next())
            .await
            .expect("the extra stream got nothing")
            .unwrap();
        assert_eq!(resent.event_id.as_deref(), Some("2"));
    }

    #[tokio::test]
    async fn a_cancellation_ends_its_request_s_stream_and_still_reaches_the_service() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let (id, mut transport) = sessions.create_session().await.unwrap();
        let mut stream = sessions.create_stream(&id, ping(1)).await.unwrap();
        assert!(transport.receive().await.is_some());
        let cancelled = json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": 1 }
        });
        sessions
            .accept_message(&id, message(cancelled))
            .await
            .unwrap();
        let primed = stream.next().await.unwrap();
        assert!(primed.message.is_none(), "the priming event");
        let end = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
        assert!(
            end.expect("the stream still waits for an answer").is_none(),
            "an event after the priming one"
        );
        let delivered = tokio::time::timeout(Duration::from_secs(10), transport.receive())
            .await
            .expect("the cancellation did not reach the service");
        assert!(matches!(delivered, Some(JsonRpcMessage::Notification(_))));
        // An answer that comes anyway goes nowhere; the session is not busy.
        transport.send(answer(1)).await.unwrap();
        let session = sessions.get(&id).unwrap();
        assert!(!session.routes.lock().unwrap().busy(), "still busy");
    }

    #[tokio::test]
    async fn a_request_s_connection_cut_off_unread_leaves_its_answer_to_resume() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let (id, mut transport) = sessions.create_session().await.unwrap();
        let mut stream = sessions.create_stream(&id, call(1, "t")).await.unwrap();
        assert!(transport.receive().await.is_some());
        // With the priming event, one more than the connection may leave
        // unread.
        for step in 0..QUEUE_LIMIT {
            transport.send(progress("t", step)).await.unwrap();
        }
        transport.send(answer(1)).await.unwrap();
        // Read only now: cut off, it ends without the answer, which stays
        // kept for the client to resume.
        assert!(stream.next().await.is_none(), "the queue was kept");
        drop(stream);
        // Resuming after the last progress event, which the stream keeps
        // with the answer.
        let after = format!("{QUEUE_LIMIT}/0");
        let mut resumed = sessions
            .resume(&id, after)
            .await
            .expect("the answer was not kept");
        let answered = resumed.next().await.unwrap();
        assert!(answered.message.is_some(), "not the answer");
        assert!(resumed.next().await.is_none());
    }
}
