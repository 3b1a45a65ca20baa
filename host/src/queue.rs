//! Per-plugin call slots: at most `limits.concurrent` calls of one plugin
//! run at once, at most `limits.queue` more wait for a slot, and anything
//! beyond is refused at once with `busy`. A slow or hostile plugin thus
//! holds a bounded share of the host, and a client learns to back off
//! instead of waiting on a pile-up.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of one plugin.
pub struct CallQueue {
    running: Arc<Semaphore>,
    /// Calls admitted, running or waiting: never above `concurrent + queue`.
    admitted: AtomicU32,
    concurrent: u32,
    queue: u32,
}

/// Why a call got no slot.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("all {concurrent} call slots of the plugin are taken and {queue} more calls are waiting")]
pub struct Full {
    pub concurrent: u32,
    pub queue: u32,
}

/// Held while a call runs; frees its place when dropped.
pub struct Slot<'a> {
    _permit: OwnedSemaphorePermit,
    _place: Place<'a>,
}

/// A call's place among the admitted ones; given back when dropped, also
/// when a waiting call is dropped before it runs (its client went away).
struct Place<'a>(&'a AtomicU32);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CallQueue {
    pub fn new(concurrent: u32, queue: u32) -> CallQueue {
        CallQueue {
            running: Arc::new(Semaphore::new(concurrent as usize)),
            admitted: AtomicU32::new(0),
            concurrent,
            queue,
        }
    }

    /// Waits for a slot if there is room in the queue, or refuses at once.
    pub async fn enter(&self) -> Result<Slot<'_>, Full> {
        let capacity = self.concurrent.saturating_add(self.queue);
        self.admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < capacity).then_some(n + 1)
            })
            .map_err(|_| Full {
                concurrent: self.concurrent,
                queue: self.queue,
            })?;
        let place = Place(&self.admitted);
        let permit = self
            .running
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        Ok(Slot {
            _permit: permit,
            _place: place,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn beyond_the_queue_a_call_is_refused_and_places_come_back() {
        let queue = CallQueue::new(1, 1);
        let running = queue.enter().await.unwrap();
        // The second waits; the third finds the queue full.
        let waiting = queue.enter();
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let full = queue.enter().await.err().unwrap();
        assert_eq!((full.concurrent, full.queue), (1, 1));
        drop(running);
        let second = waiting.await.unwrap();
        // A waiter dropped before it ran gives its place back: with the
        // queue full again, a new call is refused until it is dropped.
        let mut abandoned = Box::pin(queue.enter());
        assert!(futures::poll!(abandoned.as_mut()).is_pending());
        assert!(queue.enter().await.is_err());
        drop(abandoned);
        let waiting_again = queue.enter();
        tokio::pin!(waiting_again);
        assert!(futures::poll!(waiting_again.as_mut()).is_pending());
        drop(second);
        waiting_again.await.unwrap();
        queue.enter().await.unwrap();
    }
}
