//! The process's one SQLite connection, and how operations take turns on it
//! without ever blocking a runtime thread.
//!
//! A runtime thread that blocks stops every task queued on it, reads without
//! a task included. Two waits could block one here: SQLite's own busy wait,
//! which sleeps inside a statement while another process holds the write
//! lock, and a mutex held by another worker's operation, which is normally
//! one statement but can be longer (a slow disk). Neither is waited for on
//! the thread: a try that finds the database locked gives up at once and
//! tries again after a pause asleep, and a task that finds the connection
//! taken waits asleep until it is let go, while its thread runs other tasks.
//! The one wait left on a thread is the operation's own work, which does
//! not include a checkpoint (`checkpoint`).

use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::Notify;

use crate::store::StoreError;

/// How long an operation waits for another process's write lock (a
/// `toolhost task …` command, a `sqlite3` shell in a transaction), or for
/// the connection, before it fails.
pub(in crate::store) const BUSY_WAIT: Duration = Duration::from_secs(5);
/// The pauses between tries double from the first to the last.
const FIRST_PAUSE: Duration = Duration::from_millis(1);
const LAST_PAUSE: Duration = Duration::from_millis(50);

thread_local! {
    /// Whether the operation [`Shared::run`] is running on this thread found
    /// the database locked. SQLite's busy handler is a plain function, so
    /// this is how it tells; the operation runs to its end without an
    /// `await`, so no other task runs on the thread meanwhile.
    static MET_BUSY: Cell<bool> = const { Cell::new(false) };
}

/// SQLite's busy handler once the database is open: notes the lock and
/// gives up at once, so that [`Shared::run`] waits for it asleep on the
/// runtime instead of on the thread.
fn give_up_on_busy(_attempt: i32) -> bool {
    MET_BUSY.set(true);
    false
}

/// The connection, held for one try of one operation at a time.
pub(super) struct Shared {
    slot: Arc<Slot>,
}

/// The connection and the news that it is free again.
pub(super) struct Slot {
    // A plain mutex, only ever tried on the runtime: tokio's fair one
    // hands it over in turn and made a task-bound call 1.1x the CPU. Here
    // whoever tries first after a release gets it, and one waiter is woken.
    conn: Mutex<Connection>,
    freed: Notify,
    /// Set while the checkpoint thread waits for the connection: tries on
    /// the runtime step back meanwhile, so that a busy host cannot keep it
    /// from ever getting a turn.
    checkpoint_waits: AtomicBool,
}

/// The connection while an operation holds it. Letting go wakes one
/// waiter, after the lock is released, also when the operation panicked.
struct Held<'a> {
    conn: Option<MutexGuard<'a, Connection>>,
    freed: &'a Notify,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.conn.take();
        self.freed.notify_one();
    }
}

impl Slot {
    fn held<'a>(&'a self, conn: MutexGuard<'a, Connection>) -> Held<'a> {
        Held {
            conn: Some(conn),
            freed: &self.freed,
        }
    }

    /// Runs `op` holding the connection, waiting for it on this thread, and
    /// ahead of the runtime's tries: for the checkpoint thread, never the
    /// runtime. (A checkpoint never meets another process's lock, so
    /// `MET_BUSY` is not kept here.)
    pub(super) fn hold<R>(&self, op: impl FnOnce(&mut Connection) -> R) -> R {
        self.checkpoint_waits.store(true, Ordering::Release);
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        self.checkpoint_waits.store(false, Ordering::Release);
        let mut held = self.held(conn);
        op(held.conn.as_mut().expect("held until dropped"))
    }

    /// One try of `op`, if the connection is free. A panic while holding it
    /// leaves no half transaction behind (rusqlite rolls back on drop), so
    /// a poisoned lock is still usable.
    fn try_once<T, E>(
        &self,
        op: &mut impl FnMut(&mut Connection) -> Result<T, E>,
    ) -> Option<Result<T, E>> {
        if self.checkpoint_waits.load(Ordering::Acquire) {
            return None;
        }
        let conn = match self.conn.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let mut held = self.held(conn);
        MET_BUSY.set(false);
        Some(op(held.conn.as_mut().expect("held until dropped")))
    }
}

impl Shared {
    /// Takes over an open (and migrated) connection to the database at
    /// `path`: from here on, SQLite gives up at once when another process
    /// holds the lock, and checkpoints are made by their own thread.
    pub(super) fn new(mut conn: Connection, path: &Path) -> rusqlite::Result<Shared> {
        conn.busy_handler(Some(give_up_on_busy))?;
        let mut installed = Ok(());
        let slot = Arc::new_cyclic(|slot| {
            installed = super::checkpoint::install(&mut conn, path, slot.clone());
            Slot {
                conn: Mutex::new(conn),
                freed: Notify::new(),
                checkpoint_waits: AtomicBool::new(false),
            }
        });
        installed?;
        Ok(Shared { slot })
    }

    /// Runs `op` on the connection, without ever blocking the thread:
    /// - while another worker (or the checkpoint thread) holds the
    ///   connection, this task waits asleep until it is let go;
    /// - if another process holds the write lock, SQLite gives up at once
    ///   ([`give_up_on_busy`]) and `op` is run again after a pause spent
    ///   asleep.
    ///
    /// Either wait ends after [`BUSY_WAIT`]: then the operation is `busy`
    /// (or SQLite's error stands). So `op` must be safe to run again after
    /// failing: reads, one transaction (which the failure rolled back), or
    /// writes that change nothing when repeated.
    pub(super) async fn run<T, E: From<StoreError>>(
        &self,
        mut op: impl FnMut(&mut Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        let slot = &*self.slot;
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            let outcome = match slot.try_once(&mut op) {
                Some(outcome) => outcome,
                None => {
                    // Registered before the second try, so a release
                    // between the two is not missed.
                    let freed = slot.freed.notified();
                    tokio::pin!(freed);
                    freed.as_mut().enable();
                    match slot.try_once(&mut op) {
                        Some(outcome) => outcome,
                        None => {
                            let left = BUSY_WAIT.saturating_sub(started.elapsed());
                            if tokio::time::timeout(left, freed).await.is_err() {
                                return Err(StoreError::Busy(BUSY_WAIT).into());
                            }
                            continue;
                        }
                    }
                }
            };
            match outcome {
                Err(_) if MET_BUSY.get() && started.elapsed() < BUSY_WAIT => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LAST_PAUSE);
                }
                outcome => return outcome,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared::new(Connection::open_in_memory().unwrap(), Path::new(":memory:")).unwrap()
    }

    fn one(conn: &mut Connection) -> Result<i64, StoreError> {
        Ok(conn.query_row("SELECT 1", [], |r| r.get(0))?)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_held_connection_never_blocks_the_runtime_thread() {
        let shared = std::sync::Arc::new(shared());
        // Another thread holds the connection for a while, as the checkpoint
        // thread on a slow disk would.
        let (held, release) = std::sync::mpsc::channel::<()>();
        let (taken, is_taken) = std::sync::mpsc::channel();
        let holder = {
            let shared = shared.clone();
            std::thread::spawn(move || {
                shared.slot.hold(|_| {
                    taken.send(()).unwrap();
                    // A runtime thread blocked by the wait would never send
                    // the release: fail rather than hang.
                    release
                        .recv_timeout(Duration::from_secs(30))
                        .expect("the runtime thread was blocked");
                })
            })
        };
        is_taken.recv().unwrap();
        let waiting = tokio::spawn({
            let shared = shared.clone();
            async move { shared.run(one).await }
        });
        // The one runtime thread still runs other tasks meanwhile.
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(!waiting.is_finished());
        held.send(()).unwrap();
        holder.join().unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    // Held on purpose: the test is the one holding the connection.
    #[allow(clippy::await_holding_lock)]
    async fn a_connection_held_past_the_wait_is_busy() {
        let shared = std::sync::Arc::new(shared());
        let _conn = shared.slot.conn.lock().unwrap();
        let started = Instant::now();
        let outcome = shared.run(one).await;
        assert!(matches!(outcome, Err(StoreError::Busy(_))), "{outcome:?}");
        assert!(started.elapsed() >= BUSY_WAIT);
    }
}
