//! Bearer tokens the store has already vouched for, and the task each names.
//!
//! A token names one task for that task's whole life: the store issues it
//! with the task, never issues another for it, and never deletes a task. So
//! once the store has checked a token, a later request inside a session can
//! be bound to its task without asking again, which spares every task-bound
//! call a store lookup (two statements on SQLite, a round trip to
//! PostgreSQL) on top of its charge. Nothing that changes is remembered:
//! whether the task is still open, and what is left of its budget, are
//! read by the charge of every call. A request that opens a session always
//! asks the store, because whether it is refused depends on the task's state.
//! An entry is trusted for a minute, then the store is asked again: should
//! an operator replace the database under a running host (restore an older
//! copy, recreate it), a token whose task is gone is refused with 401 again
//! within that minute rather than binding calls to a task that no longer
//! exists (those are refused by the charge meanwhile, never run).
//!
//! Entries are keyed by the SHA-256 of the whole token, so the host's memory
//! holds no usable token, and how long a lookup of a guessed token takes
//! depends only on a digest the guesser cannot aim. Tokens the store did not
//! vouch for are never kept, so unknown tokens cannot fill the table.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// How many tokens are remembered at most. When the table is full it is
/// emptied: the next use of each token asks the store once more.
const MAX_TOKENS: usize = 4_096;

/// How long the store's word on a token is taken without asking again.
const TRUSTED_FOR: Duration = Duration::from_secs(60);

/// The tokens checked so far: for each, its task's id and when the store
/// vouched for it.
pub(super) struct KnownTokens {
    tasks: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    trusted_for: Duration,
}

impl Default for KnownTokens {
    fn default() -> KnownTokens {
        KnownTokens::trusting_for(TRUSTED_FOR)
    }
}

impl KnownTokens {
    fn trusting_for(trusted_for: Duration) -> KnownTokens {
        KnownTokens {
            tasks: Mutex::default(),
            trusted_for,
        }
    }

    /// The task `token` names, if the store has vouched for it within the
    /// last minute.
    pub(super) fn task_of(&self, token: &str) -> Option<String> {
        let key = digest(token);
        let tasks = self.lock();
        let (task, vouched) = tasks.get(&key)?;
        (vouched.elapsed() < self.trusted_for).then(|| task.clone())
    }

    /// Remembers that the store vouched for `token` as naming `task`, now.
    pub(super) fn remember(&self, token: &str, task: &str) {
        let key = digest(token);
        let mut tasks = self.lock();
        if tasks.len() >= MAX_TOKENS && !tasks.contains_key(&key) {
            tasks.clear();
        }
        tasks.insert(key, (task.to_string(), Instant::now()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (String, Instant)>> {
        // The map is whole after any panic (each change is one call on it).
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_only_what_it_was_told() {
        let known = KnownTokens::default();
        assert_eq!(known.task_of("tht_a"), None);
        known.remember("tht_a", "task-a");
        assert_eq!(known.task_of("tht_a").as_deref(), Some("task-a"));
        // One character off is another token.
        assert_eq!(known.task_of("tht_b"), None);
        assert_eq!(known.task_of("tht_a "), None);
    }

    #[test]
    fn the_store_is_asked_again_once_an_entry_is_old() {
        // Trusted for no time at all: every entry is already too old.
        let known = KnownTokens::trusting_for(Duration::ZERO);
        known.remember("tht_a", "task-a");
        assert_eq!(known.task_of("tht_a"), None);
        let known = KnownTokens::default();
        known.remember("tht_a", "task-a");
        assert_eq!(known.task_of("tht_a").as_deref(), Some("task-a"));
    }

    #[test]
    fn a_full_table_starts_over_and_keeps_the_newest() {
        let known = KnownTokens::default();
        for i in 0..MAX_TOKENS {
            known.remember(&format!("tht_{i}"), "t");
        }
        assert_eq!(known.lock().len(), MAX_TOKENS);
        // Remembering one already known does not empty it.
        known.remember("tht_0", "t");
        assert_eq!(known.lock().len(), MAX_TOKENS);
        known.remember("tht_new", "t-new");
        assert_eq!(known.lock().len(), 1);
        assert_eq!(known.task_of("tht_new").as_deref(), Some("t-new"));
        assert_eq!(known.task_of("tht_0"), None);
    }
}
