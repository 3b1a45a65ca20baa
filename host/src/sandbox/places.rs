//! A bounded count of what one plugin holds over all its instances (open
//! files, directory listings, outgoing HTTP bodies): a place is taken
//! before the host makes the thing and given back when it goes.

use std::sync::atomic::{AtomicU32, Ordering};

/// Up to `max` places, shared by a plugin's instances.
#[derive(Debug)]
pub struct Places {
    held: AtomicU32,
    max: u32,
}

impl Places {
    /// `max` places, none taken.
    pub fn new(max: u32) -> Places {
        Places {
            held: AtomicU32::new(0),
            max,
        }
    }

    /// How many places there are.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Takes a place, if one is left.
    pub(super) fn take(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < self.max).then_some(held + 1)
            })
            .is_ok()
    }

    /// Gives back `count` places, all in one update.
    pub(super) fn give_back(&self, count: usize) {
        let count = u32::try_from(count).expect("no more places given back than there are");
        self.held.fetch_sub(count, Ordering::AcqRel);
    }
}
