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

/// A call's place among the admitted ones (running or waiting), taken at
/// once; given back when dropped, also when a waiting call is dropped
/// before it runs (its client went away).
pub struct Place<'a> {
    queue: &'a CallQueue,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.queue.admitted.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Held while a call runs; frees its slot and place when dropped.
pub struct Slot<'a> {
    _permit: OwnedSemaphorePermit,
    _place: Place<'a>,
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

    /// Takes a place if there is room, or refuses at once. Taken before
    /// the call is admitted (and charged to its task), so a call refused for
    /// room has cost nothing.
    pub fn reserve(&self) -> Result<Place<'_>, Full> {
        let capacity = self.concurrent.saturating_add(self.queue);
        self.admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < capacity).then_some(n + 1)
            })
            .map_err(|_| Full {
                concurrent: self.concurrent,
                queue: self.queue,
            })?;
        Ok(Place { queue: self })
    }
}

impl<'a> Place<'a> {
    /// Waits for one of the running slots.
    pub async fn run(self) -> Slot<'a> {
        let permit = self
            .queue
            .running
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        Slot {
            _permit: permit,
            _place: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn beyond_the_queue_a_call_is_refused_and_places_come_back() {
        let queue = CallQueue::new(1, 1);
        let running = queue.reserve().unwrap().run().await;
        // The second waits; the third finds the queue full.
        let waiting = queue.reserve().unwrap().run();
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let full = queue.reserve().err().unwrap();
        assert_eq!((full.concurrent, full.queue), (1, 1));
        drop(running);
        let second = waiting.await;
        // A waiter dropped before it ran gives its place back: with the
        // queue full again, a new call is refused until it is dropped.
        let mut abandoned = Box::pin(queue.reserve().unwrap().run());
        assert!(futures::poll!(abandoned.as_mut()).is_pending());
        assert!(queue.reserve().is_err());
        drop(abandoned);
        let waiting_again = queue.reserve().unwrap().run();
        tokio::pin!(waiting_again);
        assert!(futures::poll!(waiting_again.as_mut()).is_pending());
        drop(second);
        drop(waiting_again.await);
        queue.reserve().unwrap().run().await;
    }
}
