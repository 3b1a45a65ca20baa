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

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures::Stream;
use rmcp::transport::common::server_side_http::ServerSseMessage;

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
    /// The outlet was dropped: nothing sent is read any more.
    abandoned: bool,
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
            shared.queue.push_back((index, event));
            shared.ended |= last;
            shared.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        true
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

impl Drop for Inlet {
    fn drop(&mut self) {
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
}
