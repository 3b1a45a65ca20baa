//! Checkpoints of the write-ahead log, on a thread of their own.
//!
//! SQLite copies the WAL back into the database (a checkpoint) on the
//! connection whose commit took the WAL past 1 000 pages, inside that
//! commit. A checkpoint `fsync`s twice; on a slow disk that is seconds, and
//! they would be spent on a runtime thread, holding up every task queued on
//! it. Here the connection's WAL hook (which replaces SQLite's automatic
//! checkpoint) only wakes a thread, which takes the connection like any
//! operation and checkpoints. Meanwhile the runtime's workers serve other
//! calls, and an operation on the store waits asleep for the connection
//! (`conn`), as it did for the checkpoint before. The checkpoint is made on
//! the shared connection, between two operations, so it always finds the
//! whole WAL committed and the next commit writes the WAL from its start; a
//! connection of its own would race the commits and, under a steady load,
//! never catch up. The thread is started at the first checkpoint, so a host
//! that writes little never has one.

use std::os::raw::c_int;
use std::path::{Path, PathBuf};
use std::sync::Weak;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use rusqlite::hooks::Wal;
use rusqlite::wal::CheckpointMode;
use rusqlite::{Connection, MAIN_DB};

use super::conn::Slot;

/// The WAL's size in pages that asks for a checkpoint: SQLite's own default.
const CHECKPOINT_PAGES: c_int = 1000;
/// The WAL's size in pages past which the committing connection checkpoints
/// itself after all.
const LAST_RESORT_PAGES: c_int = 10 * CHECKPOINT_PAGES;

/// Hands the checkpoints of `conn` (the database at `path`, shared as
/// `shared`) to the checkpoint thread.
pub(super) fn install(
    conn: &mut Connection,
    path: &Path,
    shared: Weak<Slot>,
) -> rusqlite::Result<()> {
    let mut checkpoints = Checkpoints {
        path: path.to_path_buf(),
        shared,
        wake: None,
    };
    conn.wal_hook(Some(move |wal: &mut Wal, pages: c_int| {
        if (pages >= CHECKPOINT_PAGES && !checkpoints.ask()) || pages >= LAST_RESORT_PAGES {
            // No thread to do it (it could not start) or it falls far
            // behind: checkpoint here, as SQLite itself would, rather than
            // let the WAL grow without end.
            let _ = wal.checkpoint_v2(CheckpointMode::PASSIVE);
        }
        Ok(())
    }))
}

/// The connection's end of the checkpoint thread.
struct Checkpoints {
    path: PathBuf,
    shared: Weak<Slot>,
    /// Wakes the thread; `None` until the first checkpoint. Dropped with
    /// the connection, which ends the thread.
    wake: Option<SyncSender<()>>,
}

impl Checkpoints {
    /// Asks the thread for a checkpoint; false if there is no thread.
    fn ask(&mut self) -> bool {
        let wake = self
            .wake
            .get_or_insert_with(|| start(self.path.clone(), self.shared.clone()));
        // One waiting request is enough: the checkpoint it makes takes in
        // every commit before it.
        !matches!(wake.try_send(()), Err(TrySendError::Disconnected(())))
    }
}

/// The checkpoint thread, or (with a warning, once) a sender nobody
/// receives from if it cannot start.
fn start(path: PathBuf, shared: Weak<Slot>) -> SyncSender<()> {
    let (wake, woken) = sync_channel::<()>(1);
    let started = std::thread::Builder::new()
        .name("sqlite-checkpoint".into())
        .spawn(move || {
            while woken.recv().is_ok() {
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                // Waiting here is this thread's job; the runtime's tries
                // step back while it waits (`Slot::hold`).
                let done = shared
                    .hold(|conn| conn.wal_checkpoint_v2(Some(MAIN_DB), CheckpointMode::PASSIVE));
                match done {
                    Ok(_) => {}
                    // Another process (a `toolhost task …` command) is
                    // checkpointing; the next request will do.
                    Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy) => {
                        tracing::debug!(database = %path.display(), "checkpoint deferred: {e}");
                    }
                    Err(e) => {
                        tracing::warn!(database = %path.display(), "checkpoint failed: {e}");
                    }
                }
            }
        });
    if let Err(e) = started {
        tracing::warn!(
            "cannot start the checkpoint thread ({e}); checkpoints are made by the calls that fill the WAL"
        );
    }
    wake
}

#[cfg(test)]
mod tests {
    use super::super::conn::Shared;
    use super::*;
    use crate::store::StoreError;

    #[tokio::test(flavor = "current_thread")]
    async fn a_wal_past_the_mark_is_checkpointed_by_the_thread_and_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (b BLOB)").unwrap();
        let shared = Shared::new(conn, &path).unwrap();
        let wal = dir.path().join("db-wal");
        let page = 4096;
        // 3 600 pages in commits of about 300 each: without checkpoints the
        // WAL would hold them all. With them, once a checkpoint has taken
        // in the whole WAL, the next commit writes it from its start again.
        for _ in 0..12 {
            shared
                .run(|conn| -> Result<_, StoreError> {
                    Ok(conn.execute("INSERT INTO t VALUES (zeroblob(?1))", [300 * page])?)
                })
                .await
                .unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let size = std::fs::metadata(&wal).unwrap().len();
        assert!(size < 2_000 * page as u64, "the WAL holds {size} bytes");
        // The connection never checkpointed inside a commit: SQLite's own
        // automatic checkpoint is replaced by the hook.
        let autocheckpoint: i64 = shared
            .run(|conn| -> Result<_, StoreError> {
                Ok(conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))?)
            })
            .await
            .unwrap();
        assert_eq!(autocheckpoint, 0);
    }
}
