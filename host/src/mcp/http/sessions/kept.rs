//! Answers kept for clients whose connection broke before it took them,
//! counted over all sessions.
//!
//! Each session bounds what it keeps itself (see [`super::routes`]); this
//! is the bound over all of them. When it is exceeded the oldest kept
//! answer goes first, whichever session holds it, so one client that
//! breaks off many requests over many sessions pushes out its own old
//! answers and others' equally, rather than leave no room for anyone
//! else's. A kept answer's events live here, not in its session's routes,
//! so giving one up frees its memory without the session's lock, and an
//! expired answer of a session nobody uses any more is freed as soon as
//! any session keeps one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::transport::common::server_side_http::ServerSseMessage;

/// How long a request's stream is kept after its answer when the client's
/// connection did not take it.
pub const KEEP_UNDELIVERED: Duration = Duration::from_secs(60);

/// At most this many bytes of messages are kept over all sessions.
pub const UNDELIVERED_BYTES_ALL: usize = 64 << 20;

/// Given-up entries tolerated in the ledger's queue before it is
/// compacted; they cost a pointer each until then.
const DEAD_TOLERATED: usize = 64;

/// The kept answers of every session, oldest first.
pub(super) struct Ledger {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Bytes of the entries whose events are still held.
    bytes: usize,
    entries: VecDeque<Arc<Kept>>,
    /// Entries in `entries` whose events were released by their session.
    dead: usize,
}

/// One finished stream's events, kept for its client to resume.
pub(super) struct Kept {
    at: Instant,
    bytes: usize,
    /// `None` once the stream was delivered, ended with its session, or
    /// given up.
    events: Mutex<Option<VecDeque<ServerSseMessage>>>,
}

impl Default for Ledger {
    fn default() -> Ledger {
        Ledger::with_budget(UNDELIVERED_BYTES_ALL)
    }
}

impl Ledger {
    /// A ledger that keeps at most `budget` bytes of messages.
    pub(super) fn with_budget(budget: usize) -> Ledger {
        Ledger {
            budget,
            inner: Mutex::default(),
        }
    }

    /// Bytes of messages kept now, over all sessions.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        self.inner.lock().expect("never poisoned").bytes
    }

    /// Keeps a finished stream's events; gives up expired entries, and the
    /// oldest while the budget is exceeded (this one last).
    pub(super) fn keep(&self, events: VecDeque<ServerSseMessage>) -> Arc<Kept> {
        let kept = Arc::new(Kept {
            at: Instant::now(),
            bytes: size(&events),
            events: Mutex::new(Some(events)),
        });
        let mut inner = self.inner.lock().expect("never poisoned");
        inner.bytes += kept.bytes;
        inner.entries.push_back(kept.clone());
        while let Some(oldest) = inner.entries.front() {
            if inner.bytes <= self.budget && !oldest.expired() && oldest.is_held() {
                break;
            }
            let oldest = inner.entries.pop_front().expect("just looked");
            if oldest.take() {
                inner.bytes -= oldest.bytes;
            } else {
                inner.dead -= 1;
            }
        }
        if inner.dead > DEAD_TOLERATED && inner.dead * 2 > inner.entries.len() {
            inner.entries.retain(|kept| kept.is_held());
            inner.dead = 0;
        }
        kept
    }

    /// Events kept [`KEEP_UNDELIVERED`] ago, and not given up since: what
    /// [`Ledger::keep`] would have kept then, the oldest entry.
    #[cfg(test)]
    pub(super) fn keep_expired(&self, events: VecDeque<ServerSseMessage>) -> Arc<Kept> {
        let at = Instant::now()
            .checked_sub(KEEP_UNDELIVERED)
            .expect("the clock has run for a minute");
        let kept = Arc::new(Kept {
            at,
            bytes: size(&events),
            events: Mutex::new(Some(events)),
        });
        let mut inner = self.inner.lock().expect("never poisoned");
        inner.bytes += kept.bytes;
        inner.entries.push_front(kept.clone());
        kept
    }

    /// Lets a kept stream's events go: its client took them, or its
    /// session gave it up or ended.
    pub(super) fn release(&self, kept: &Kept) {
        let mut inner = self.inner.lock().expect("never poisoned");
        // Under the ledger's lock, so `dead` counts exactly the entries
        // still queued whose events are gone.
        if kept.take() {
            inner.bytes -= kept.bytes;
            inner.dead += 1;
        }
    }
}

impl Kept {
    /// Whether it is older than [`KEEP_UNDELIVERED`].
    pub(super) fn expired(&self) -> bool {
        self.at.elapsed() >= KEEP_UNDELIVERED
    }

    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether its events are still held.
    pub(super) fn is_held(&self) -> bool {
        self.events.lock().expect("never poisoned").is_some()
    }

    /// A copy of its events, if they are still held.
    pub(super) fn events(&self) -> Option<VecDeque<ServerSseMessage>> {
        self.events.lock().expect("never poisoned").clone()
    }

    /// Drops its events; whether they were still held.
    fn take(&self) -> bool {
        self.events.lock().expect("never poisoned").take().is_some()
    }
}

/// About how many bytes the events' messages take: their JSON.
fn size(events: &VecDeque<ServerSseMessage>) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    for message in events.iter().filter_map(|e| e.message.as_deref()) {
        let _ = serde_json::to_writer(&mut count, message);
    }
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(bytes: usize) -> VecDeque<ServerSseMessage> {
        let message = serde_json::from_value(serde_json::json!({
            "jsonrpc": "2.0", "id": 1,
            "result": { "content": [{ "type": "text", "text": "x".repeat(bytes) }] }
        }))
        .unwrap();
        VecDeque::from([ServerSseMessage::new("0/0".to_owned(), message)])
    }

    #[test]
    fn the_oldest_goes_first_and_released_entries_are_compacted_away() {
        // Three answers of a little over 1 MiB fit, four do not.
        let ledger = Ledger::with_budget(7 << 19);
        let kept: Vec<_> = (0..4).map(|_| ledger.keep(events(1 << 20))).collect();
        assert!(!kept[0].is_held(), "the oldest was given up");
        assert!(kept[1..].iter().all(|k| k.is_held()));
        assert!(ledger.bytes() <= 7 << 19);

        for kept in &kept {
            ledger.release(kept);
        }
        assert_eq!(ledger.bytes(), 0);
        // Many kept and released at once leave no trail of entries behind.
        for _ in 0..1000 {
            let kept = ledger.keep(events(10));
            ledger.release(&kept);
        }
        let inner = ledger.inner.lock().unwrap();
        assert!(
            inner.entries.len() <= 2 * DEAD_TOLERATED + 2,
            "{}",
            inner.entries.len()
        );
        assert_eq!(inner.bytes, 0);
    }

    #[test]
    fn an_expired_answer_is_given_up_when_any_other_is_kept() {
        let ledger = Ledger::default();
        let old = ledger.keep_expired(events(10));
        assert!(old.expired());
        assert!(old.is_held(), "nothing gave it up yet");
        let new = ledger.keep(events(10));
        assert!(!old.is_held(), "the expired answer is still held");
        assert!(new.is_held() && !new.expired());
        assert_eq!(ledger.bytes(), new.bytes());
    }
}
