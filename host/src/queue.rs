//! Per-plugin call slots: at most `limits.concurrent` calls of one plugin
//! run at once, at most `limits.queue` more wait for a slot, and anything
//! beyond is refused at once with `busy`. A slow or hostile plugin thus
//! holds a bounded share of the host, and a client learns to back off
//! instead of waiting on a pile-up.
//!
//! Those places are shared fairly when they run short: the last
//! `limits.session_share` places are kept for sessions holding fewer than
//! that many (and whose task holds fewer than `limits.task_share`), so a
//! client that floods a plugin with slow calls gets `busy` while other
//! clients are still served, and a client alone may still use the rest.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots of one plugin.
pub struct CallQueue {
    running: Arc<Semaphore>,
    places: Mutex<Places>,
    concurrent: u32,
    queue: u32,
    session_share: u32,
    task_share: u32,
}

/// Who holds the admitted places (running or waiting). Tenants holding
/// none are removed, so the maps hold only sessions and tasks with calls
/// in flight.
#[derive(Default)]
struct Places {
    admitted: u32,
    by_session: HashMap<Arc<str>, u32>,
    by_task: HashMap<Arc<str>, u32>,
}

/// Whom a call is for: its session and, if it has one, its task.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub session: Arc<str>,
    pub task: Option<Arc<str>>,
}

/// Why a call got no place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place of the plugin is taken.
    Plugin { concurrent: u32, queue: u32 },
    /// The call's session holds its whole share.
    SessionShare { share: u32 },
    /// The sessions of the call's task hold the task's whole share.
    TaskShare { share: u32 },
}

impl fmt::Display for Full {
    /// Worded for the model as well as the log: the reply shows it as is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Full::Plugin { concurrent, queue } => write!(
                f,
                "{concurrent} calls of its plugin run at once and {queue} more are already waiting; retry in a few seconds"
            ),
            Full::SessionShare { share } => write!(
                f,
                "this session already has {share} calls of the same plugin running or waiting, its fair share, and the places left are kept for other sessions; wait for one of them to finish, then retry"
            ),
            Full::TaskShare { share } => write!(
                f,
                "this task's sessions already have {share} calls of the same plugin running or waiting, the task's fair share, and the places left are kept for others; wait for one of them to finish, then retry"
            ),
        }
    }
}

impl std::error::Error for Full {}

/// A call's place among the admitted ones (running or waiting), taken at
/// once; given back when dropped, also when a waiting call is dropped
/// before it runs (its client went away).
pub struct Place<'a> {
    queue: &'a CallQueue,
    tenant: Tenant,
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut places = self.queue.lock();
        places.admitted -= 1;
        release(&mut places.by_session, &self.tenant.session);
        if let Some(task) = &self.tenant.task {
            release(&mut places.by_task, task);
        }
    }
}

fn release(held: &mut HashMap<Arc<str>, u32>, key: &Arc<str>) {
    if let Some(count) = held.get_mut(key) {
        *count -= 1;
        if *count == 0 {
            held.remove(key);
        }
    }
}

/// Held while a call runs; frees its slot and place when dropped.
pub struct Slot<'a> {
    _permit: OwnedSemaphorePermit,
    _place: Place<'a>,
}

impl CallQueue {
    pub fn new(concurrent: u32, queue: u32, session_share: u32, task_share: u32) -> CallQueue {
        CallQueue {
            running: Arc::new(Semaphore::new(concurrent as usize)),
            places: Mutex::new(Places::default()),
            concurrent,
            queue,
            session_share,
            task_share,
        }
    }

    /// Calls holding a place now: running, or waiting for a slot.
    pub fn admitted(&self) -> u32 {
        self.lock().admitted
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Places> {
        // The counts are updated whole under the lock, so a panic elsewhere
        // cannot leave them half-changed.
        self.places.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place for `tenant` if the plugin has room, or refuses at
    /// once. A tenant at or beyond its share (its session's, or its task's)
    /// gets a place only while the last `session_share` places stay free
    /// for the others. Taken before the call is admitted (and charged to
    /// its task), so a call refused for room has cost nothing.
    pub fn reserve(&self, tenant: Tenant) -> Result<Place<'_>, Full> {
        let mut places = self.lock();
        let capacity = self.concurrent.saturating_add(self.queue);
        if places.admitted >= capacity {
            return Err(Full::Plugin {
                concurrent: self.concurrent,
                queue: self.queue,
            });
        }
        let held =
            |map: &HashMap<Arc<str>, u32>, key: &Arc<str>| map.get(key).copied().unwrap_or(0);
        let beyond = if held(&places.by_session, &tenant.session) >= self.session_share {
            Some(Full::SessionShare {
                share: self.session_share,
            })
        } else {
            tenant
                .task
                .as_ref()
                .filter(|task| held(&places.by_task, task) >= self.task_share)
                .map(|_| Full::TaskShare {
                    share: self.task_share,
                })
        };
        // The places kept back, never all of them: a share as large as the
        // plugin keeps one place for the others.
        let reserve = self.session_share.min(capacity - 1);
        if let Some(full) = beyond
            && places.admitted + 1 + reserve > capacity
        {
            return Err(full);
        }
        places.admitted += 1;
        *places.by_session.entry(tenant.session.clone()).or_default() += 1;
        if let Some(task) = &tenant.task {
            *places.by_task.entry(task.clone()).or_default() += 1;
        }
        drop(places);
        Ok(Place {
            queue: self,
            tenant,
        })
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

    fn tenant(session: &str, task: Option<&str>) -> Tenant {
        Tenant {
            session: session.into(),
            task: task.map(Into::into),
        }
    }

    #[tokio::test]
    async fn beyond_the_queue_a_call_is_refused_and_places_come_back() {
        let queue = CallQueue::new(1, 1, 2, 2);
        let a = || tenant("a", None);
        let running = queue.reserve(a()).unwrap().run().await;
        // The second waits; the third finds the queue full.
        let waiting = queue.reserve(a()).unwrap().run();
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let full = queue.reserve(tenant("b", None)).err().unwrap();
        assert_eq!(
            full,
            Full::Plugin {
                concurrent: 1,
                queue: 1
            }
        );
        drop(running);
        let second = waiting.await;
        // A waiter dropped before it ran gives its place back: with the
        // queue full again, a new call is refused until it is dropped.
        let mut abandoned = Box::pin(queue.reserve(a()).unwrap().run());
        assert!(futures::poll!(abandoned.as_mut()).is_pending());
        assert!(queue.reserve(tenant("b", None)).is_err());
        drop(abandoned);
        let waiting_again = queue.reserve(a()).unwrap().run();
        tokio::pin!(waiting_again);
        assert!(futures::poll!(waiting_again.as_mut()).is_pending());
        drop(second);
        drop(waiting_again.await);
        queue.reserve(a()).unwrap().run().await;
        assert_eq!(queue.lock().admitted, 0);
        assert!(queue.lock().by_session.is_empty());
    }

    #[tokio::test]
    async fn beyond_its_share_a_tenant_cannot_take_the_last_places() {
        // Eight places; the last three are kept for tenants within their
        // share (three for a session, four for a task).
        let queue = CallQueue::new(2, 6, 3, 4);
        // Alone, a session may take all but the reserve: five places.
        let flood: Vec<_> = (0..5)
            .map(|_| queue.reserve(tenant("a", Some("t"))).unwrap())
            .collect();
        assert_eq!(
            queue.reserve(tenant("a", Some("t"))).err(),
            Some(Full::SessionShare { share: 3 })
        );
        // Another session of the same task: its task is beyond its share.
        assert_eq!(
            queue.reserve(tenant("b", Some("t"))).err(),
            Some(Full::TaskShare { share: 4 })
        );
        // A session of no task, or of another task, is served, down to the
        // last place.
        let others = [
            queue.reserve(tenant("c", None)).unwrap(),
            queue.reserve(tenant("d", Some("u"))).unwrap(),
            queue.reserve(tenant("e", None)).unwrap(),
        ];
        assert!(matches!(
            queue.reserve(tenant("f", None)).err(),
            Some(Full::Plugin { .. })
        ));
        // Places come back per tenant.
        drop(flood);
        assert!(queue.reserve(tenant("a", Some("t"))).is_ok());
        drop(others);
        assert_eq!(queue.lock().admitted, 0);
        assert!(queue.lock().by_task.is_empty() && queue.lock().by_session.is_empty());
    }

    #[test]
    fn a_lone_client_uses_every_place_but_the_reserve() {
        let queue = CallQueue::new(16, 64, 10, 40);
        let held: Vec<_> = (0..70)
            .map(|_| queue.reserve(tenant("only", None)).unwrap())
            .collect();
        assert_eq!(
            queue.reserve(tenant("only", None)).err(),
            Some(Full::SessionShare { share: 10 })
        );
        drop(held);
    }
}
