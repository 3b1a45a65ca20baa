//! A note as stored, the storage keys, and the rules that decide whether a
//! save or delete may go ahead. Nothing here touches the store, so all of it
//! is tested natively.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const NOTE_PREFIX: &str = "note/";
pub const TRASH_PREFIX: &str = "trash/";
pub const HISTORY_PREFIX: &str = "history/";

/// The bounds of the input schemas, repeated so that a note changed by hand
/// in the store cannot make a result fail the output schema (the host would
/// then refuse the whole list, not just that note).
pub const SLUG_MAX: usize = 64;
pub const TAG_MAX: usize = 40;
pub const TITLE_MAX: usize = 120;
pub const BODY_MAX: usize = 20_000;
pub const TAGS_MAX: usize = 10;
/// `expected_version` cannot name a higher version, so no note may reach one.
pub const MAX_VERSION: u64 = 1_000_000;
/// Timestamps are `YYYY-MM-DDTHH:MM:SSZ`; the slack is for years past 9999.
pub const TIMESTAMP_MAX: usize = 32;

pub const TRASH_DAYS: u64 = 30;
const TRASH_SECS: u64 = TRASH_DAYS * 86_400;
/// What a save replaces is kept as long as what a delete removes: a save
/// needs only a task grant, a delete a person's approval, so a save must not
/// destroy more than a delete does.
pub const HISTORY_DAYS: u64 = TRASH_DAYS;
const HISTORY_SECS: u64 = HISTORY_DAYS * 86_400;

/// A deletion parks a marker under the note's key between claiming the note
/// and removing the key (see `notebook::delete`). A marker older than this
/// belongs to a call that the host has long since ended, so it reads as no
/// note at all; the host's call timeouts are seconds, not minutes.
pub const MARKER_STALE_SECS: u64 = 600;

/// One note, as JSON text under `note/<slug>`.
///
/// Unknown fields are ignored on purpose: an operator restores a note by
/// renaming its trash or history key back, and those copies carry
/// `deleted_at` or `replaced_at`, which must not mark the restored note as
/// deleted or replaced.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub slug: String,
    pub title: String,
    pub body: String,
    pub tags: Vec<String>,
    pub version: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl Note {
    fn fits_bounds(&self) -> bool {
        let title_len = self.title.chars().count();
        let mut tags = self.tags.clone();
        tags.sort();
        tags.dedup();
        (1..=TITLE_MAX).contains(&title_len)
            && self.body.chars().count() <= BODY_MAX
            && self.tags.len() <= TAGS_MAX
            && tags.len() == self.tags.len()
            && self.tags.iter().all(|t| valid_tag(t))
            && (1..=MAX_VERSION).contains(&self.version)
            && self.created_at.len() <= TIMESTAMP_MAX
            && self.updated_at.len() <= TIMESTAMP_MAX
    }
}

/// What the text under a `note/` key turned out to be.
#[derive(Debug, PartialEq)]
pub enum Stored {
    Live(Note),
    /// A deletion is (or was) under way since these Unix seconds.
    Deleting {
        since: u64,
    },
    /// Not a note this plugin wrote, or one edited out of bounds by hand.
    Unreadable,
}

/// Reads the text under `note/<slug>`. The key names the note, whatever
/// slug the text says: an operator may restore a trash copy under a new key.
pub fn classify(slug: &str, raw: &str) -> Stored {
    let Ok(value) = serde_json::from_str::<Value>(raw) else {
        return Stored::Unreadable;
    };
    if let Some(since) = value.get(MARKER_FIELD) {
        return match since.as_u64() {
            Some(since) => Stored::Deleting { since },
            None => Stored::Unreadable,
        };
    }
    match Note::deserialize(value) {
        Ok(mut note) if note.fits_bounds() => {
            note.slug = slug.to_string();
            Stored::Live(note)
        }
        _ => Stored::Unreadable,
    }
}

const MARKER_FIELD: &str = "deleting_since";

/// The text a deletion parks under the note's key. It has no note fields, so
/// nothing mistakes it for a note, and its one field is not one a note has.
pub fn marker(now: u64) -> String {
    serde_json::json!({ MARKER_FIELD: now }).to_string()
}

/// Whether a marker may still belong to a running deletion.
pub fn marker_is_fresh(since: u64, now: u64) -> bool {
    now.saturating_sub(since) < MARKER_STALE_SECS
}

pub fn note_key(slug: &str) -> String {
    format!("{NOTE_PREFIX}{slug}")
}

/// `trash/<slug>@<unix seconds>`: the suffix is the deletion time, so the
/// purge can judge age from the key list alone, without reading values.
pub fn trash_key(slug: &str, secs: u64) -> String {
    format!("{TRASH_PREFIX}{slug}@{secs}")
}

/// The deletion time in a trash key, if the key has the expected shape.
/// Slugs cannot contain `@`, so the last `@` starts the suffix.
pub fn trash_secs(key: &str) -> Option<u64> {
    let (_, secs) = key.strip_prefix(TRASH_PREFIX)?.rsplit_once('@')?;
    digits(secs)
}

/// Whether a trash entry has been kept its 30 days. Keys of another shape
/// (an operator's, say) are never purged.
pub fn trash_expired(key: &str, now: u64) -> bool {
    trash_secs(key).is_some_and(|secs| now.saturating_sub(secs) > TRASH_SECS)
}

/// `history/<slug>@<version>@<unix seconds>`: the version of the note that a
/// save replaced, and when. The version alone would not make the key unique
/// (a deleted note that is created again starts over at version 1), and the
/// time lets the purge judge age from the key list alone, as for the trash.
pub fn history_key(slug: &str, version: u64, secs: u64) -> String {
    format!("{HISTORY_PREFIX}{slug}@{version}@{secs}")
}

/// The replacement time in a history key, if the key has the expected shape:
/// an operator's `history/<slug>@<n>` must not pass for one replaced at `n`.
pub fn history_secs(key: &str) -> Option<u64> {
    let (rest, secs) = key.strip_prefix(HISTORY_PREFIX)?.rsplit_once('@')?;
    let (_, version) = rest.rsplit_once('@')?;
    digits(version)?;
    digits(secs)
}

/// Whether a replaced version has been kept its 30 days. As with the trash,
/// keys of another shape are never purged.
pub fn history_expired(key: &str, now: u64) -> bool {
    history_secs(key).is_some_and(|secs| now.saturating_sub(secs) > HISTORY_SECS)
}

/// A number as this plugin writes it in keys: ASCII digits only, so that
/// `+5` or ` 5` in a hand-made key is not taken for one.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `^[a-z0-9][a-z0-9-]{0,63}$`, without a regex engine.
pub fn valid_slug(s: &str) -> bool {
    valid_name(s, SLUG_MAX)
}

/// `^[a-z0-9][a-z0-9-]{0,39}$`.
pub fn valid_tag(s: &str) -> bool {
    valid_name(s, TAG_MAX)
}

fn valid_name(s: &str, max: usize) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= max
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
}

/// What a save will do.
#[derive(Debug, PartialEq)]
pub enum Plan {
    Create,
    Update { next: u64 },
}

/// Why a save or delete may not go ahead on what was read.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// A create, but the note exists.
    Exists { current: u64 },
    /// An update of a version, but there is no note.
    Missing { expected: u64 },
    /// The note is at another version than the caller read.
    Stale { current: u64, expected: u64 },
    /// The note is at the highest version `expected_version` can name.
    VersionLimit,
}

/// Decides a save from the note's current version (none: no note) and the
/// caller's `expected_version` (none or 0: "I think it does not exist").
pub fn plan_save(current: Option<u64>, expected: Option<u64>) -> Result<Plan, Refusal> {
    match (current, expected.unwrap_or(0)) {
        (None, 0) => Ok(Plan::Create),
        (None, expected) => Err(Refusal::Missing { expected }),
        (Some(current), 0) => Err(Refusal::Exists { current }),
        (Some(current), expected) if expected != current => {
            Err(Refusal::Stale { current, expected })
        }
        (Some(current), _) if current >= MAX_VERSION => Err(Refusal::VersionLimit),
        (Some(current), _) => Ok(Plan::Update { next: current + 1 }),
    }
}

/// Decides a delete of a note at `current`: without `expected_version` any
/// version goes; with it, only that one.
pub fn check_delete(current: u64, expected: Option<u64>) -> Result<(), Refusal> {
    match expected {
        Some(expected) if expected != current => Err(Refusal::Stale { current, expected }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(version: u64) -> Note {
        Note {
            slug: "deploy-checklist".into(),
            title: "Deploy checklist".into(),
            body: "1. Tag the release.".into(),
            tags: vec!["ops".into(), "release".into()],
            version,
            created_at: "2026-01-01T00:00:00Z".into(),
            updated_at: "2026-01-02T00:00:00Z".into(),
        }
    }

    #[test]
    fn create_only_when_absent_and_expected_absent_or_zero() {
        assert_eq!(plan_save(None, None), Ok(Plan::Create));
        assert_eq!(plan_save(None, Some(0)), Ok(Plan::Create));
        assert_eq!(
            plan_save(None, Some(3)),
            Err(Refusal::Missing { expected: 3 })
        );
    }

    #[test]
    fn update_only_at_the_version_read() {
        assert_eq!(plan_save(Some(4), Some(4)), Ok(Plan::Update { next: 5 }));
        assert_eq!(
            plan_save(Some(4), Some(3)),
            Err(Refusal::Stale {
                current: 4,
                expected: 3
            })
        );
        assert_eq!(
            plan_save(Some(4), Some(5)),
            Err(Refusal::Stale {
                current: 4,
                expected: 5
            })
        );
        assert_eq!(
            plan_save(Some(1), None),
            Err(Refusal::Exists { current: 1 })
        );
        assert_eq!(
            plan_save(Some(1), Some(0)),
            Err(Refusal::Exists { current: 1 })
        );
        assert_eq!(
            plan_save(Some(MAX_VERSION), Some(MAX_VERSION)),
            Err(Refusal::VersionLimit)
        );
    }

    #[test]
    fn delete_checks_the_version_only_when_given() {
        assert_eq!(check_delete(7, None), Ok(()));
        assert_eq!(check_delete(7, Some(7)), Ok(()));
        assert_eq!(
            check_delete(7, Some(6)),
            Err(Refusal::Stale {
                current: 7,
                expected: 6
            })
        );
    }

    #[test]
    fn restored_notes_read_as_live_under_their_key() {
        for field in ["deleted_at", "replaced_at"] {
            let mut value = serde_json::to_value(note(3)).unwrap();
            value[field] = "2026-02-01T00:00:00Z".into();
            let raw = value.to_string();
            let Stored::Live(read) = classify("renamed", &raw) else {
                panic!("a note restored with {field} must be live");
            };
            assert_eq!(read.slug, "renamed");
            assert_eq!(read.version, 3);
            // Saving it again does not write the field back.
            assert!(!serde_json::to_string(&read).unwrap().contains(field));
        }
    }

    #[test]
    fn markers_and_junk_are_not_notes() {
        assert_eq!(
            classify("x", &marker(1_000)),
            Stored::Deleting { since: 1_000 }
        );
        assert_eq!(classify("x", "not json"), Stored::Unreadable);
        assert_eq!(classify("x", "{\"title\":\"t\"}"), Stored::Unreadable);
        let mut long = note(1);
        long.title = "t".repeat(TITLE_MAX + 1);
        let raw = serde_json::to_string(&long).unwrap();
        assert_eq!(classify("x", &raw), Stored::Unreadable);
        let mut dup = note(1);
        dup.tags = vec!["ops".into(), "ops".into()];
        let raw = serde_json::to_string(&dup).unwrap();
        assert_eq!(classify("x", &raw), Stored::Unreadable);
    }

    #[test]
    fn markers_go_stale() {
        assert!(marker_is_fresh(1_000, 1_000));
        assert!(marker_is_fresh(1_000, 1_000 + MARKER_STALE_SECS - 1));
        assert!(!marker_is_fresh(1_000, 1_000 + MARKER_STALE_SECS));
        // A clock that went back keeps the marker fresh rather than reviving the note early.
        assert!(marker_is_fresh(2_000, 1_000));
    }

    #[test]
    fn trash_keys_carry_their_age() {
        let key = trash_key("deploy-checklist", 1_700_000_000);
        assert_eq!(key, "trash/deploy-checklist@1700000000");
        assert_eq!(trash_secs(&key), Some(1_700_000_000));
        assert_eq!(trash_secs("trash/a@"), None);
        assert_eq!(trash_secs("trash/a@+5"), None);
        assert_eq!(trash_secs("trash/a@12x"), None);
        assert_eq!(trash_secs("trash/a"), None);
        assert_eq!(trash_secs("note/a@5"), None);
        assert_eq!(trash_secs("trash/a@99999999999999999999999"), None);
    }

    #[test]
    fn trash_is_purged_after_thirty_days() {
        let deleted = 1_700_000_000;
        let key = trash_key("a", deleted);
        let thirty_days = 30 * 86_400;
        assert!(!trash_expired(&key, deleted));
        assert!(!trash_expired(&key, deleted + thirty_days));
        assert!(trash_expired(&key, deleted + thirty_days + 1));
        // Keys in the future (clock skew, or a bumped suffix) are young.
        assert!(!trash_expired(&key, deleted - 10));
        assert!(!trash_expired("trash/operator-copy", u64::MAX));
    }

    #[test]
    fn history_keys_carry_version_and_age() {
        let key = history_key("deploy-checklist", 7, 1_700_000_000);
        assert_eq!(key, "history/deploy-checklist@7@1700000000");
        assert_eq!(history_secs(&key), Some(1_700_000_000));
        // A key without both numbers (an operator's copy, say) has no age.
        assert_eq!(history_secs("history/a@1700000000"), None);
        assert_eq!(history_secs("history/a@x@5"), None);
        assert_eq!(history_secs("history/a@@5"), None);
        assert_eq!(history_secs("history/a@1@"), None);
        assert_eq!(history_secs("history/a@1@+5"), None);
        assert_eq!(history_secs("trash/a@1@5"), None);
    }

    #[test]
    fn history_is_purged_after_thirty_days() {
        let replaced = 1_700_000_000;
        let key = history_key("a", 3, replaced);
        let thirty_days = 30 * 86_400;
        assert!(!history_expired(&key, replaced));
        assert!(!history_expired(&key, replaced + thirty_days));
        assert!(history_expired(&key, replaced + thirty_days + 1));
        assert!(!history_expired(&key, replaced - 10));
        assert!(!history_expired("history/operator-copy", u64::MAX));
        assert!(!history_expired("history/a@3", u64::MAX));
    }

    #[test]
    fn slugs_and_tags() {
        assert!(valid_slug("a"));
        assert!(valid_slug("0-day"));
        assert!(valid_slug(&"a".repeat(64)));
        assert!(!valid_slug(&"a".repeat(65)));
        assert!(!valid_slug(""));
        assert!(!valid_slug("-a"));
        assert!(!valid_slug("A"));
        assert!(!valid_slug("a/b"));
        assert!(!valid_slug("a@1"));
        assert!(!valid_slug("ä"));
        assert!(valid_tag(&"t".repeat(40)));
        assert!(!valid_tag(&"t".repeat(41)));
    }
}
