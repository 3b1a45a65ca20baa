//! The events of one HTTP response, from the session that produces them to
//! the connection that writes them.
//!
//! A channel would do, but closing one is a second wake-up after the last
//! send: a request's answer is always its stream's last event, so every
//! request paid two wake-ups of its connection where one does. Here the
//! last event and the end are one step under one lock. Each event goes in
//! with its index in the stream, and the pipe remembers the last one the
//! connection took, so a stream whose connection broke knows which events
//! never left the pipe (those taken may still have been lost on the way).
//!
//! A connection that stops reading is cut off when an event comes with
//! [`QUEUE_LIMIT`] waiting for it: what was queued is dropped, the response
//! ends when it is next read, and the stream counts the connection as gone,
//! so a client that never reads cannot make the host hold its events
//! without end. A client that was only slow sees the response end and
//! resumes the stream as after any break: it gets back what the stream
//! still keeps, not all that was dropped.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use rmcp::transport::common::server_side_http::ServerSseMessage;

/// Events a connection may leave unread before it is cut off. The host's
/// streams carry few events (a request's stream: its priming event, any
/// approval asked for it and its answer; the standalone stream: an
/// approval's `elicitation/complete`), and a connection that reads at all
/// drains them into its socket at once.
pub const QUEUE_LIMIT: usize = 64;

/// Opens a pipe.
pub fn pipe() -> (Inlet, Outlet) {
    let shared = Arc::new(Mutex::new(Shared::default()));
    (Inlet(shared.clone()), Outlet(shared))
}

#[derive(Default)]
struct Shared {
    /// Events not yet taken, with their indices in the stream.
    queue: VecDeque<(u64, ServerSseMessage)>,
    /// The index of the last event the connection took.
    taken: Option<u64>,
    ended: bool,
    /// The outlet was dropped, or the pipe cut: nothing sent is read any
    /// more.
    abandoned: bool,
    /// The pipe was cut: its stream ends, but the connection may not have
    /// taken all of it.
    cut: bool,
    waker: Option<Waker>,
}

/// The session's end. Dropping it ends the stream.
pub struct Inlet(Arc<Mutex<Shared>>);

/// The connection's end: the events, then the end of the stream.
pub struct Outlet(Arc<Mutex<Shared>>);

impl Inlet {
    /// Sends event `index` of the stream, and ends the stream after it if
    /// `last`; `false` if nobody reads the pipe any more.
    pub fn send(&self, index: u64, event: ServerSseMessage, last: bool) -> bool {
        let waker = {
            let mut shared = self.0.lock().expect("never poisoned");
            if shared.abandoned {
                return false;
            }
            if shared.queue.len() >= QUEUE_LIMIT {
                shared.cut();
                return false;
            }
            shared.queue.push_back((index, event));
            shared.ended |= last;
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
    }

    /// Ends the stream after what was sent, keeping the pipe to cut.
    pub fn end(&self) {
        let waker = {
            let mut shared = self.0.lock().expect("never poisoned");
            if shared.ended {
                return;
            }
            shared.ended = true;
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Drops what the connection has not taken and ends its stream: a newer
    /// connection of the same client carries the stream now, so anything
    /// still queued here would reach the client twice.
    pub fn cut(self) {
        self.0.lock().expect("never poisoned").cut();
    }

    /// Whether the outlet is still read.
    pub fn is_open(&self) -> bool {
        !self.0.lock().expect("never poisoned").abandoned
    }

    /// Whether `outlet` is this pipe's other end.
    pub fn feeds(&self, outlet: &Outlet) -> bool {
        Arc::ptr_eq(&self.0, &outlet.0)
    }

    /// The index of the last event the connection took, if any: events sent
    /// after it were still queued when the connection went.
    pub fn taken(&self) -> Option<u64> {
        self.0.lock().expect("never poisoned").taken
    }
}

impl Shared {
    /// Drops the queue and ends the stream. Rare, so the reader is woken
    /// with the lock held.
    fn cut(&mut self) {
        self.queue.clear();
        self.abandoned = true;
        self.cut = true;
        self.ended = true;
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

impl Drop for Inlet {
    fn drop(&mut self) {
        self.end();
    }
}

impl Stream for Outlet {
    type Item = ServerSseMessage;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ServerSseMessage>> {
        let mut shared = self.0.lock().expect("never poisoned");
        if let Some((index, event)) = shared.queue.pop_front() {
            shared.taken = Some(index);
            return Poll::Ready(Some(event));
        }
        if shared.ended {
            return Poll::Ready(None);
        }
        if !shared
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            shared.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Outlet {
    /// Whether the pipe was cut: the stream ended, but the connection may
    /// not have taken all of it.
    pub fn is_cut(&self) -> bool {
        self.0.lock().expect("never poisoned").cut
    }
}

impl Drop for Outlet {
    fn drop(&mut self) {
        let mut shared = self.0.lock().expect("never poisoned");
        shared.abandoned = true;
        shared.queue.clear();
        shared.waker = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use std::time::Duration;

    fn event(n: u64) -> ServerSseMessage {
        ServerSseMessage::priming(n.to_string(), Duration::from_secs(1))
    }

    #[tokio::test]
    async fn events_arrive_in_order_and_the_last_one_ends_the_stream() {
        let (inlet, mut outlet) = pipe();
        assert!(inlet.send(0, event(0), false));
        assert!(inlet.send(1, event(1), true));
        assert_eq!(inlet.taken(), None);
        assert_eq!(outlet.next().await.unwrap().event_id.as_deref(), Some("0"));
        assert_eq!(inlet.taken(), Some(0));
        assert_eq!(outlet.next().await.unwrap().event_id.as_deref(), Some("1"));
        assert!(outlet.next().await.is_none());
        assert_eq!(inlet.taken(), Some(1));
    }

    #[tokio::test]
    async fn a_dropped_inlet_ends_the_stream_and_a_dropped_outlet_refuses_sends() {
        let (inlet, mut outlet) = pipe();
        let reader = tokio::spawn(async move { outlet.next().await.is_none() });
        tokio::task::yield_now().await;
        drop(inlet);
        assert!(reader.await.unwrap(), "the waiting reader saw the end");

        let (inlet, outlet) = pipe();
        assert!(inlet.is_open());
        drop(outlet);
        assert!(!inlet.is_open());
        assert!(!inlet.send(0, event(0), false));
    }

    #[tokio::test]
    async fn a_pipe_left_unread_is_cut_and_ends_without_its_queue() {
        let (inlet, mut outlet) = pipe();
        for n in 0..QUEUE_LIMIT as u64 {
            assert!(inlet.send(n, event(n), false));
        }
        assert!(!outlet.is_cut());
        assert!(!inlet.send(99, event(99), false), "sent past the limit");
        assert!(!inlet.is_open());
        assert!(outlet.is_cut());
        assert!(outlet.next().await.is_none(), "the queue was kept");
        assert_eq!(inlet.taken(), None);
    }

    #[tokio::test]
    async fn a_cut_pipe_drops_what_is_queued_and_ends() {
        let (inlet, mut outlet) = pipe();
        assert!(inlet.send(0, event(0), false));
        assert!(inlet.send(1, event(1), false));
        assert_eq!(outlet.next().await.unwrap().event_id.as_deref(), Some("0"));
        inlet.cut();
        assert!(outlet.next().await.is_none(), "event 1 was still sent");
        assert!(outlet.is_cut());
    }
}
