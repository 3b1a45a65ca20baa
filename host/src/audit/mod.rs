//! The audit trail: the host's tamper-evident record of every decision.
//!
//! `record` builds and bounds one line, `trail` keeps the chained segments
//! and signed checkpoints on disk, `verify` and `export` read them back for
//! operators (`browse` from the newest end, for the console), `store`
//! records what operators change. This module is the handle the rest of
//! the host uses: a writer thread that batches records, so concurrent read
//! calls share one write (and one fsync when a write call needs it).

pub mod browse;
mod event;
pub mod export;
mod files;
pub mod key;
pub mod record;
pub mod store;
pub mod trail;
pub mod verify;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::redact::Redactor;
pub use event::{CallRecord, Event, ToolTextSha256};
pub use trail::{Trail, TrailOptions};

/// Records waiting longer than this reach disk even with no write call to
/// force them: the bound on what a power cut can take of read records.
const SYNC_EVERY: Duration = Duration::from_secs(1);
/// Records taken from the queue into one write.
const BATCH: usize = 512;
/// How long the writer lets records nobody waits for gather before it
/// writes them: one wake-up and one write for many read calls, instead of a
/// thread switch and a write(2) per call. A record someone waits for ends
/// the wait at once.
const GATHER: Duration = Duration::from_millis(2);
/// How often a writer whose last write failed tries again.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Unwritten records kept for a retry; beyond this the oldest are dropped
/// and their number recorded once the trail is back.
const MAX_PENDING: usize = 100_000;
/// Records queued for a writer that is still working (a slow disk) beyond
/// which calls are refused: reads never wait for the trail, so without a
/// bound their records would pile up in memory for as long as it is slow.
const MAX_BACKLOG: usize = 100_000;

/// Why the trail cannot be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit trail {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("audit key {}: {reason}", path.display())]
    Key { path: PathBuf, reason: String },
    #[error("audit trail {}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "audit segment {} vanished or was replaced while the host was writing it",
        path.display()
    )]
    Vanished { path: PathBuf },
    #[error("the audit writer has stopped")]
    Stopped,
}

impl AuditError {
    /// Turns an I/O error on `path` into one of these, for `map_err`.
    fn io_at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> AuditError + '_ {
        move |source| AuditError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Where the writer sends the outcome of a durable record.
enum Ack {
    Async(tokio::sync::oneshot::Sender<Result<u64, String>>),
    Blocking(mpsc::SyncSender<Result<u64, String>>),
}

impl Ack {
    fn send(self, outcome: Result<u64, String>) {
        match self {
            Ack::Async(tx) => {
                let _ = tx.send(outcome);
            }
            Ack::Blocking(tx) => {
                let _ = tx.send(outcome);
            }
        }
    }
}

enum Message {
    Record {
        event: Event,
        /// Present when the caller waits until the record is on disk.
        ack: Option<Ack>,
    },
    Stop {
        last: Event,
        done: mpsc::SyncSender<Result<(), String>>,
    },
    /// Records taken after this one are redacted with it.
    RedactWith(Arc<Redactor>),
}

/// A handle on the trail; cheap to clone.
#[derive(Clone)]
pub struct Audit {
    inner: Arc<Inner>,
    /// Told of every event as it is recorded (the host's metrics).
    observer: Arc<OnceLock<Observer>>,
    /// [`MAX_BACKLOG`], smaller in tests.
    max_backlog: usize,
}

/// What [`Audit::observe_with`] installs.
pub type Observer = Arc<dyn Fn(&Event) + Send + Sync>;

enum Inner {
    /// The serving host: one writer thread owns the trail.
    Writer {
        tx: Mutex<Option<mpsc::Sender<Message>>>,
        thread: Mutex<Option<JoinHandle<()>>>,
        /// Unparked, with `urgent` set, when a record someone waits for is
        /// queued, so it ends a gathering wait at once.
        writer: std::thread::Thread,
        flags: Arc<Flags>,
    },
    /// A short-lived CLI command: each record is written, synced and
    /// checkpointed before the command goes on.
    Direct(Box<Mutex<Direct>>),
}

/// The trail of a CLI command, and what its records are redacted with.
struct Direct {
    trail: Trail,
    redactor: Arc<Redactor>,
}

impl Audit {
    /// Starts the writer thread of a serving host.
    pub fn start(trail: Trail, checkpoint_every: Duration) -> Audit {
        let (tx, rx) = mpsc::channel();
        let flags = Arc::new(Flags {
            healthy: AtomicBool::new(true),
            urgent: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            unqueued: AtomicU64::new(0),
        });
        let thread = std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn({
                let flags = flags.clone();
                move || write_loop(trail, rx, &flags, checkpoint_every)
            })
            .expect("spawning the audit writer thread");
        Audit {
            observer: Arc::default(),
            max_backlog: MAX_BACKLOG,
            inner: Arc::new(Inner::Writer {
                tx: Mutex::new(Some(tx)),
                writer: thread.thread().clone(),
                flags,
                thread: Mutex::new(Some(thread)),
            }),
        }
    }

    /// For a CLI command: writes in the calling thread.
    pub fn direct(trail: Trail) -> Audit {
        Audit {
            observer: Arc::default(),
            max_backlog: MAX_BACKLOG,
            inner: Arc::new(Inner::Direct(Box::new(Mutex::new(Direct {
                trail,
                redactor: Arc::default(),
            })))),
        }
    }

    /// Redacts every record made from now on with `redactor`: the host
    /// reads its secrets after its trail is open, and records its start
    /// before that.
    pub fn redact_with(&self, redactor: Arc<Redactor>) {
        match &*self.inner {
            Inner::Writer { .. } => {
                if self.send(Message::RedactWith(redactor)).is_err() {
                    tracing::error!("the audit writer has stopped before it got the redactor");
                }
            }
            Inner::Direct(direct) => {
                direct.lock().unwrap_or_else(|p| p.into_inner()).redactor = redactor;
            }
        }
    }

    /// Tells `observer` of every event recorded from now on (once; a second
    /// observer is ignored).
    pub fn observe_with(&self, observer: Observer) {
        let _ = self.observer.set(observer);
    }

    fn observe(&self, event: &Event) {
        if let Some(observer) = self.observer.get() {
            observer(event);
        }
    }

    /// Records waiting for the writer thread to take them (its backlog).
    pub fn queued(&self) -> usize {
        match &*self.inner {
            Inner::Writer { flags, .. } => flags.queued.load(Ordering::Relaxed),
            Inner::Direct(_) => 0,
        }
    }

    /// How many records wait for the writer, if that is so many that calls
    /// are to be refused until it catches up (its disk is that slow).
    pub fn behind(&self) -> Option<usize> {
        let queued = self.queued();
        (queued >= self.max_backlog).then_some(queued)
    }

    /// Whether the last write succeeded; write calls are refused while not.
    pub fn healthy(&self) -> bool {
        match &*self.inner {
            Inner::Writer { flags, .. } => flags.healthy.load(Ordering::Acquire),
            Inner::Direct(_) => true,
        }
    }

    /// Records `event` without waiting: it is written with the next batch
    /// and synced within a second, or at a clean stop.
    pub fn record(&self, event: Event) {
        self.observe(&event);
        match &*self.inner {
            Inner::Writer { flags, .. } if self.behind().is_some() => {
                // Calls are refused meanwhile (`dispatch`); what is still
                // recorded (those refusals, sessions opening and closing) is
                // counted, not queued, so the backlog cannot grow without end.
                flags.unqueued.fetch_add(1, Ordering::Relaxed);
            }
            Inner::Writer { .. } => {
                if self.send(Message::Record { event, ack: None }).is_err() {
                    tracing::error!("audit record lost: the audit writer has stopped");
                }
            }
            Inner::Direct(_) => {
                if let Err(e) = self.write_blocking(event) {
                    tracing::error!("audit record lost: {e}");
                }
            }
        }
    }

    /// Records `event` and returns once it is on disk, with its seq.
    pub async fn record_durable(&self, event: Event) -> Result<u64, String> {
        self.observe(&event);
        match &*self.inner {
            Inner::Writer { .. } => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                self.send(Message::Record {
                    event,
                    ack: Some(Ack::Async(tx)),
                })
                .map_err(|e| e.to_string())?;
                rx.await
                    .unwrap_or_else(|_| Err(AuditError::Stopped.to_string()))
            }
            Inner::Direct(_) => self.write_blocking(event),
        }
    }

    /// [`Audit::record_durable`] for synchronous code; blocks the thread.
    pub fn record_blocking(&self, event: Event) -> Result<u64, String> {
        self.observe(&event);
        self.write_blocking(event)
    }

    fn write_blocking(&self, event: Event) -> Result<u64, String> {
        match &*self.inner {
            Inner::Writer { .. } => {
                let (tx, rx) = mpsc::sync_channel(1);
                self.send(Message::Record {
                    event,
                    ack: Some(Ack::Blocking(tx)),
                })
                .map_err(|e| e.to_string())?;
                rx.recv()
                    .unwrap_or_else(|_| Err(AuditError::Stopped.to_string()))
            }
            Inner::Direct(direct) => {
                let mut direct = direct.lock().unwrap_or_else(|p| p.into_inner());
                let Direct { trail, redactor } = &mut *direct;
                let appended = trail
                    .append(&mut [event.into_map(redactor)], true)
                    .map_err(|e| e.error.to_string())?;
                trail.checkpoint().map_err(|e| e.to_string())?;
                Ok(appended.last_seq)
            }
        }
    }

    /// Writes `last`, syncs, signs a final checkpoint and stops the writer.
    /// Records sent after this are lost (and logged).
    pub fn stop(&self, last: Event) -> Result<(), String> {
        let Inner::Writer { tx, thread, .. } = &*self.inner else {
            return Ok(());
        };
        let Some(sender) = tx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        let (done_tx, done_rx) = mpsc::sync_channel(1);
        if sender
            .send(Message::Stop {
                last,
                done: done_tx,
            })
            .is_err()
        {
            return Err(AuditError::Stopped.to_string());
        }
        drop(sender);
        self.wake_writer();
        let outcome = done_rx
            .recv()
            .unwrap_or_else(|_| Err(AuditError::Stopped.to_string()));
        if let Some(handle) = thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = handle.join();
        }
        outcome
    }

    /// Ends a gathering wait of the writer: something waits for it.
    fn wake_writer(&self) {
        if let Inner::Writer { writer, flags, .. } = &*self.inner {
            flags.urgent.store(true, Ordering::Release);
            writer.unpark();
        }
    }

    fn send(&self, message: Message) -> Result<(), AuditError> {
        let Inner::Writer { tx, flags, .. } = &*self.inner else {
            return Err(AuditError::Stopped);
        };
        let is_urgent = matches!(message, Message::Record { ack: Some(_), .. });
        let is_record = matches!(message, Message::Record { .. });
        let guard = tx.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(sender) => {
                // Counted before it is sent, so the writer's decrement never
                // comes first.
                if is_record {
                    flags.queued.fetch_add(1, Ordering::Relaxed);
                }
                if sender.send(message).is_err() {
                    if is_record {
                        flags.queued.fetch_sub(1, Ordering::Relaxed);
                    }
                    return Err(AuditError::Stopped);
                }
            }
            None => return Err(AuditError::Stopped),
        }
        drop(guard);
        if is_urgent {
            self.wake_writer();
        }
        Ok(())
    }
}

type Acks = Vec<Option<Ack>>;

/// Adds one queued message to the batch being written.
fn take(
    message: Message,
    queued: &AtomicUsize,
    redactor: &mut Arc<Redactor>,
    events: &mut Vec<Map<String, Value>>,
    acks: &mut Acks,
    stop: &mut Option<mpsc::SyncSender<Result<(), String>>>,
) {
    match message {
        Message::Record { event, ack } => {
            queued.fetch_sub(1, Ordering::Relaxed);
            events.push(event.into_map(redactor));
            acks.push(ack);
        }
        Message::Stop { last, done } => {
            events.push(last.into_map(redactor));
            acks.push(None);
            *stop = Some(done);
        }
        Message::RedactWith(new) => *redactor = new,
    }
}

/// What the writer thread shares with the handles.
struct Flags {
    /// Whether the last write succeeded.
    healthy: AtomicBool,
    /// Set when a record someone waits for is queued.
    urgent: AtomicBool,
    /// Records sent and not yet taken by the writer.
    queued: AtomicUsize,
    /// Records not queued because the writer was far behind, for the writer
    /// to report (`audit_records_lost`).
    unqueued: AtomicU64,
}

fn write_loop(
    mut trail: Trail,
    rx: mpsc::Receiver<Message>,
    flags: &Flags,
    checkpoint_every: Duration,
) {
    let Flags {
        healthy,
        urgent,
        queued,
        unqueued,
    } = flags;
    let mut next_checkpoint = Instant::now() + checkpoint_every;
    let mut unsynced_since: Option<Instant> = None;
    // Records nobody waits for, kept across a failed write and written with
    // the next batch that succeeds.
    let mut pending: Vec<Map<String, Value>> = Vec::new();
    let mut dropped = 0u64;
    // Nothing to redact until the host has read its secrets.
    let mut redactor = Arc::<Redactor>::default();
    loop {
        let now = Instant::now();
        let mut wake = next_checkpoint;
        if let Some(since) = unsynced_since {
            wake = wake.min(since + SYNC_EVERY);
        }
        if !healthy.load(Ordering::Acquire) {
            wake = wake.min(now + RETRY_EVERY);
        }
        let first = match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(message) => Some(message),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut events = Vec::new();
        let mut acks = Vec::new();
        let mut stop = None;
        if let Some(message) = first {
            take(
                message,
                queued,
                &mut redactor,
                &mut events,
                &mut acks,
                &mut stop,
            );
            if stop.is_none() && acks.iter().all(Option::is_none) {
                // The flag, not the park token, says a waited-for record
                // came: the channel itself may have used the token.
                let until = Instant::now() + GATHER;
                while !urgent.swap(false, Ordering::AcqRel) {
                    let now = Instant::now();
                    if now >= until {
                        break;
                    }
                    std::thread::park_timeout(until - now);
                }
            }
            while events.len() < BATCH {
                match rx.try_recv() {
                    Ok(message) => take(
                        message,
                        queued,
                        &mut redactor,
                        &mut events,
                        &mut acks,
                        &mut stop,
                    ),
                    Err(_) => break,
                }
            }
        }
        let mut stop_failed = None;
        dropped += unqueued.swap(0, Ordering::Relaxed);
        if !events.is_empty() || !pending.is_empty() {
            // Written ahead of what waits: that the trail is back after a
            // failure, and how many records were dropped meanwhile.
            let recovering = !healthy.load(Ordering::Acquire);
            let mut batch = Vec::new();
            if recovering {
                let mut resumed = Map::new();
                resumed.insert("event".into(), "audit_resumed".into());
                batch.push(resumed);
            }
            if dropped > 0 {
                let mut lost = Map::new();
                lost.insert("event".into(), "audit_records_lost".into());
                lost.insert("records".into(), dropped.into());
                batch.push(lost);
            }
            let prefix = batch.len();
            batch.append(&mut pending);
            let carried = batch.len();
            batch.append(&mut events);
            // A recovery counts only once it is synced.
            let durable = recovering || stop.is_some() || acks.iter().any(Option::is_some);
            let outcome = trail.append(&mut batch, durable);
            healthy.store(outcome.is_ok(), Ordering::Release);
            if let (Some(_), Err(e)) = (&stop, &outcome) {
                stop_failed = Some(e.error.to_string());
            }
            match &outcome {
                Ok(_) => {
                    dropped = 0;
                    if durable {
                        unsynced_since = None;
                    } else {
                        unsynced_since.get_or_insert_with(Instant::now);
                    }
                }
                Err(e) => {
                    tracing::error!(landed = e.landed, "audit trail not written: {}", e.error);
                    // Records nobody waits for and that did not reach the
                    // file are retried; a waiting caller is told now and
                    // acts on the failure.
                    // The prefix is made afresh for the next try.
                    pending = batch
                        .into_iter()
                        .enumerate()
                        .skip(e.landed.max(prefix))
                        .filter(|(i, _)| *i < carried || acks[*i - carried].is_none())
                        .map(|(_, event)| event)
                        .collect();
                    if e.landed >= prefix {
                        dropped = 0;
                    }
                    if pending.len() > MAX_PENDING {
                        let excess = pending.len() - MAX_PENDING;
                        pending.drain(..excess);
                        dropped += excess as u64;
                    }
                }
            }
            for (i, ack) in acks.into_iter().enumerate() {
                if let Some(ack) = ack {
                    ack.send(match &outcome {
                        Ok(appended) => Ok(appended.first_seq + (carried + i) as u64),
                        Err(e) => Err(e.error.to_string()),
                    });
                }
            }
        } else if !healthy.load(Ordering::Acquire) {
            // Nothing to write: a real, synced record shows whether the
            // trail is back.
            healthy.store(trail.resume().is_ok(), Ordering::Release);
        }
        let now = Instant::now();
        if unsynced_since.is_some_and(|since| now >= since + SYNC_EVERY) {
            match trail.sync() {
                Ok(()) => unsynced_since = None,
                Err(e) => {
                    healthy.store(false, Ordering::Release);
                    tracing::error!("audit trail not synced: {e}");
                }
            }
        }
        if stop.is_some() || now >= next_checkpoint {
            if let Err(e) = trail.checkpoint() {
                tracing::error!("audit checkpoint not written: {e}");
            }
            next_checkpoint = now + checkpoint_every;
        }
        if let Some(done) = stop {
            if let Some(e) = &stop_failed {
                let _ = done.send(Err(e.clone()));
                return;
            }
            if !pending.is_empty() {
                tracing::error!(
                    records = pending.len(),
                    "audit records lost at stop: the trail could not be written"
                );
            }
            let _ = done.send(trail.sync().map_err(|e| e.to_string()));
            return;
        }
    }
    // Every handle dropped without a stop: keep what was written.
    if !pending.is_empty() {
        tracing::error!(
            records = pending.len(),
            "audit records lost: the trail could not be written"
        );
    }
    let _ = trail.sync();
    let _ = trail.checkpoint();
}

#[cfg(test)]
mod tests {
    use zeroize::Zeroizing;

    use super::*;

    /// A disk so slow that the writer falls far behind: calls are refused
    /// (`Audit::behind`), what is still recorded is counted instead of
    /// queued, and once the writer catches up the count is on record.
    #[test]
    fn a_writer_far_behind_its_disk_refuses_calls_until_it_catches_up() {
        let dir = tempfile::tempdir().unwrap();
        let trail = Trail::open(dir.path(), TrailOptions::default()).unwrap();
        let mut audit = Audit::start(trail, Duration::from_secs(60));
        audit.max_backlog = 50;
        let revoked = |n: usize| Event::TaskRevoked {
            task: format!("t{n}"),
            by: "test".into(),
        };
        let first = audit.record_blocking(revoked(0)).unwrap();
        assert_eq!(audit.behind(), None);
        // The disk stalls: every append waits for the trail's lock, held
        // here. The writer takes the first record, gathers for `GATHER` and
        // then waits on the lock, so the backlog that follows queues up to
        // the limit and is counted beyond it (sent sooner, the limit's worth
        // could go into the writer's batch and leave nothing queued).
        let stall = std::fs::File::open(dir.path().join(trail::AUDIT_DIR).join(".lock")).unwrap();
        stall.lock().unwrap();
        audit.record(revoked(1));
        let taken = std::time::Instant::now();
        while audit.queued() > 0 {
            assert!(taken.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(GATHER * 100);
        for n in 2..=600 {
            audit.record(revoked(n));
        }
        let queued = audit.behind().expect("far behind");
        assert!(queued >= 50, "{queued}");
        audit.record(revoked(601));
        assert_eq!(audit.queued(), queued, "queued while far behind");
        let Inner::Writer { flags, .. } = &*audit.inner else {
            unreachable!()
        };
        let lost = flags.unqueued.load(Ordering::Relaxed);
        assert!(lost >= 1);
        stall.unlock().unwrap();
        let caught_up = std::time::Instant::now();
        while audit.queued() > 0 {
            assert!(caught_up.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(audit.behind(), None);
        // Every record sent was written or counted, and the count is on
        // record (one `audit_records_lost`) before what came after it.
        let last = audit.record_blocking(revoked(602)).unwrap();
        assert_eq!(last, first + (601 - lost) + 2);
    }

    /// A serving host records its start before it has read its secrets:
    /// what was recorded before `redact_with` is kept as it was, and every
    /// record after it is redacted, by the writer thread and in a CLI
    /// command alike.
    #[test]
    fn records_are_redacted_from_redact_with_on() {
        let secret = "s3cr3t-value-1234";
        for writer in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let trail = Trail::open(dir.path(), TrailOptions::default()).unwrap();
            let audit = if writer {
                Audit::start(trail, Duration::from_secs(60))
            } else {
                Audit::direct(trail)
            };
            let revoked = |by: &str| Event::TaskRevoked {
                task: "t".into(),
                by: by.into(),
            };
            audit
                .record_blocking(revoked(&format!("before {secret}")))
                .unwrap();
            audit.redact_with(Arc::new(Redactor::new(&[(
                "token".into(),
                Zeroizing::new(secret.into()),
            )])));
            audit
                .record_blocking(revoked(&format!("after {secret}")))
                .unwrap();
            audit.stop(revoked("stop")).unwrap();
            let segment = dir
                .path()
                .join(trail::AUDIT_DIR)
                .join(trail::segment_name(1));
            let text = std::fs::read_to_string(segment).unwrap();
            assert!(text.contains(&format!("before {secret}")), "{text}");
            assert!(text.contains("after [REDACTED:token]"), "{text}");
            assert!(!text.contains(&format!("after {secret}")), "{text}");
        }
    }
}
