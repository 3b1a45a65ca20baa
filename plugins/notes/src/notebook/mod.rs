//! What each tool does, over a `Store`: the host's `state` import in the
//! component, an in-memory map in the tests.

mod args;
mod error;

use std::collections::BTreeMap;

use serde_json::json;

pub use args::{
    DeleteArgs, Found, FullNote, ListArgs, Listed, Row, SaveArgs, Saved, SearchArgs, SearchRow,
    SlugArgs, TagCount, Trashed,
};
pub use error::{NoteError, StoreError};

use crate::note::{self, Note, Plan, Refusal, Stored};
use crate::text;
use crate::time::rfc3339;

/// The operations of the `state` interface that the tools need. There is
/// no plain `set`: every write that replaces a value says which value it
/// replaces, so no write can silently undo another.
pub trait Store {
    fn get(&mut self, key: &str) -> Result<Option<String>, StoreError>;
    fn compare_and_set(
        &mut self,
        key: &str,
        expected: Option<&str>,
        value: &str,
    ) -> Result<bool, StoreError>;
    fn delete(&mut self, key: &str) -> Result<bool, StoreError>;
    fn list(&mut self, prefix: &str) -> Result<Vec<String>, StoreError>;
}

/// The most tags list reports: keeps its result bounded however many
/// notes there are.
pub const TAGS_LISTED_MAX: usize = 1_000;
/// Bound of every count in a result; far above what a quota admits.
pub const COUNT_MAX: u64 = 1_000_000;
/// A second copy with the same name within the same second needs another
/// key (a note deleted, created again and deleted again; or created again
/// and updated from the same version again; or several calls replacing the
/// same version at once); the next free second is taken, a few at most
/// (`no_copy_key` says what finding none means).
const COPY_KEY_TRIES: u64 = 10;

/// The host checked the slug against the schema already; it is checked
/// again because it becomes part of a storage key, and a slug with `/` or
/// `@` would reach keys that are not this note's.
fn checked_slug(slug: String) -> Result<String, NoteError> {
    if note::valid_slug(&slug) {
        Ok(slug)
    } else {
        Err(NoteError::BadArguments(format!(
            "slug {slug:?} must be 1 to 64 lowercase letters, digits or hyphens, not starting \
             with a hyphen"
        )))
    }
}

/// notes_note_get.
pub fn get(store: &mut impl Store, a: SlugArgs, now: u64) -> Result<FullNote, NoteError> {
    let slug = checked_slug(a.slug)?;
    match read(store, &slug, now)? {
        Current::Live { note, .. } => Ok(full(&note)),
        Current::Absent { .. } | Current::Deleting => Err(NoteError::NotFound(slug)),
    }
}

/// The note under a key, as the tools see it.
enum Current {
    /// No note. `raw` is what the key holds, if anything (a stale marker):
    /// a create must replace exactly that.
    Absent {
        raw: Option<String>,
    },
    Live {
        note: Note,
        raw: String,
    },
    /// A deletion is under way right now.
    Deleting,
}

fn read(store: &mut impl Store, slug: &str, now: u64) -> Result<Current, NoteError> {
    let Some(raw) = store.get(&note::note_key(slug))? else {
        return Ok(Current::Absent { raw: None });
    };
    match note::classify(slug, &raw) {
        Stored::Live(note) => Ok(Current::Live { note, raw }),
        Stored::Deleting { since } if note::marker_is_fresh(since, now) => Ok(Current::Deleting),
        Stored::Deleting { .. } => Ok(Current::Absent { raw: Some(raw) }),
        Stored::Unreadable => Err(NoteError::Unreadable(slug.to_string())),
    }
}

/// Every readable note. Unreadable ones are left out rather than failing
/// the whole listing: `get` names them, and only an operator can fix them.
fn all_notes(store: &mut impl Store, now: u64) -> Result<Vec<Note>, NoteError> {
    let keys = store.list(note::NOTE_PREFIX)?;
    let mut notes = Vec::with_capacity(keys.len());
    for key in keys {
        let Some(slug) = key.strip_prefix(note::NOTE_PREFIX) else {
            continue;
        };
        // Keys an operator made by hand may not be slugs; results promise slugs.
        if !note::valid_slug(slug) {
            continue;
        }
        if let Ok(Current::Live { note, .. }) = read(store, slug, now) {
            notes.push(note);
        }
    }
    // Newest first; the slug breaks ties so the order is stable.
    notes.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.slug.cmp(&b.slug))
    });
    Ok(notes)
}

fn full(note: &Note) -> FullNote {
    FullNote {
        slug: note.slug.clone(),
        title: note.title.clone(),
        body: note.body.clone(),
        tags: note.tags.clone(),
        version: note.version,
        created_at: note.created_at.clone(),
        updated_at: note.updated_at.clone(),
    }
}

/// A note without its body, as list and search show it.
fn row(note: &Note) -> Row {
    Row {
        slug: note.slug.clone(),
        title: note.title.clone(),
        tags: note.tags.clone(),
        version: note.version,
        updated_at: note.updated_at.clone(),
    }
}

fn count(n: usize) -> u64 {
    (n as u64).min(COUNT_MAX)
}

/// notes_note_search.
pub fn search(store: &mut impl Store, a: SearchArgs, now: u64) -> Result<Found, NoteError> {
    let words = text::query_words(&a.query);
    if words.is_empty() {
        return Err(NoteError::BadArguments(
            "the query has no words; give at least one keyword".into(),
        ));
    }
    let matching: Vec<Note> = all_notes(store, now)?
        .into_iter()
        .filter(|n| text::matches(n, &words))
        .collect();
    let notes: Vec<SearchRow> = matching
        .iter()
        .take(a.limit)
        .map(|n| SearchRow {
            row: row(n),
            snippet: text::snippet(&n.body, &words),
        })
        .collect();
    Ok(Found {
        notes,
        total: count(matching.len()),
    })
}

/// notes_note_list.
pub fn list(store: &mut impl Store, a: ListArgs, now: u64) -> Result<Listed, NoteError> {
    let notes = all_notes(store, now)?;
    let mut tag_counts: BTreeMap<&str, u64> = BTreeMap::new();
    for tag in notes.iter().flat_map(|n| &n.tags) {
        *tag_counts.entry(tag).or_default() += 1;
    }
    let mut tags: Vec<(&str, u64)> = tag_counts.into_iter().collect();
    if tags.len() > TAGS_LISTED_MAX {
        // Keep the most used, which say most about what the notes cover.
        tags.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        tags.truncate(TAGS_LISTED_MAX);
        tags.sort_by(|a, b| a.0.cmp(b.0));
    }
    let matching: Vec<&Note> = notes
        .iter()
        .filter(|n| a.tag.as_ref().is_none_or(|t| n.tags.contains(t)))
        .collect();
    let notes: Vec<Row> = matching.iter().take(a.limit).map(|n| row(n)).collect();
    let tags: Vec<TagCount> = tags
        .into_iter()
        .map(|(tag, n)| TagCount {
            tag: tag.to_string(),
            count: n.min(COUNT_MAX),
        })
        .collect();
    Ok(Listed {
        notes,
        tags,
        total: count(matching.len()),
    })
}

/// The conflict message for a refused save of `slug`.
fn save_conflict(slug: &str, refusal: Refusal) -> NoteError {
    match refusal {
        Refusal::Exists { current } => NoteError::Conflict(format!(
            "Note {slug} already exists (current version {current}), so it was not created. \
             Call notes_note_get to read it, merge your change into the current text, and save \
             again with expected_version {current}; or pick another slug for a separate note."
        )),
        Refusal::Missing { expected } => NoteError::Conflict(format!(
            "Note {slug} does not exist (you gave expected_version {expected}); it may have been \
             deleted meanwhile. Call notes_note_get to check; to create it anew, save again \
             without expected_version (or with 0)."
        )),
        Refusal::Stale { current, expected } => NoteError::Conflict(format!(
            "Note {slug} is at version {current}, not {expected}: it changed since you read it, \
             and nothing was saved. Call notes_note_get, merge your change into the current \
             text, and save again with expected_version {current}."
        )),
        Refusal::VersionLimit => NoteError::VersionLimit(slug.to_string()),
    }
}

fn being_deleted(slug: &str) -> NoteError {
    NoteError::Conflict(format!(
        "Note {slug} is being deleted at this moment, and nothing was changed. Call \
         notes_note_get in a moment: if the note is gone, save it without expected_version to \
         create it anew."
    ))
}

/// What the caller was doing when another writer got in first.
#[derive(Clone, Copy)]
enum Attempt {
    Save,
    Delete,
}

/// The conflict for a compare-and-set that lost to another writer: says
/// what the note is now, read afresh, and how to go on.
fn lost_race(store: &mut impl Store, slug: &str, now: u64, attempt: Attempt) -> NoteError {
    let prefix = format!(
        "Note {slug} was changed by someone else at the same moment, so nothing was changed."
    );
    let message = match (read(store, slug, now), attempt) {
        (Ok(Current::Live { note, .. }), Attempt::Save) => format!(
            "{prefix} It is now at version {v}. Call notes_note_get, merge your change into the \
             current text, and save again with expected_version {v}.",
            v = note.version
        ),
        (Ok(Current::Live { note, .. }), Attempt::Delete) => format!(
            "{prefix} It is now at version {v}. Call notes_note_get to read the current text; \
             if it should still go, delete again with expected_version {v}.",
            v = note.version
        ),
        (Ok(Current::Absent { .. }), Attempt::Save) => format!(
            "{prefix} It does not exist any more. Call notes_note_get to check; to create it \
             anew, save without expected_version."
        ),
        (Ok(Current::Absent { .. }), Attempt::Delete) => {
            format!("{prefix} Someone else deleted it already.")
        }
        (Ok(Current::Deleting), _) => return being_deleted(slug),
        (Err(_), _) => format!(
            "{prefix} Call notes_note_get to read its current text and version, and decide \
             again from that."
        ),
    };
    NoteError::Conflict(message)
}

/// Creates or updates a note.
///
/// An update first copies the note it replaces, as read, to a new history
/// key: a save needs no person's approval, so it must not destroy text that
/// only an approved delete may remove (and that one keeps for 30 days). The
/// copy comes first so that the old text is kept whatever call fails; if the
/// note's own write then does not happen, the copy is removed again.
pub fn save(store: &mut impl Store, a: SaveArgs, now: u64) -> Result<Saved, NoteError> {
    let slug = checked_slug(a.slug)?;
    purge(store, note::HISTORY_PREFIX, note::history_expired, now)?;
    let stamp = rfc3339(now);
    let (replaced, expected_raw, created_at) = match read(store, &slug, now)? {
        Current::Live { note, raw } => {
            let created_at = note.created_at.clone();
            (Some(note), Some(raw), created_at)
        }
        Current::Absent { raw } => (None, raw, stamp.clone()),
        Current::Deleting => return Err(being_deleted(&slug)),
    };
    let plan = note::plan_save(replaced.as_ref().map(|n| n.version), a.expected_version)
        .map_err(|r| save_conflict(&slug, r))?;
    let version = match plan {
        Plan::Create => 1,
        Plan::Update { next } => next,
    };
    let note = Note {
        slug: slug.clone(),
        title: a.title,
        body: a.body,
        tags: a.tags,
        version,
        created_at,
        updated_at: stamp,
    };
    let text = serde_json::to_string(&note).map_err(|e| NoteError::BadArguments(e.to_string()))?;
    // Only an update replaces a note; a create replaces at most a stale
    // marker, which holds no text.
    let kept = match &replaced {
        Some(old) => Some(keep_replaced(store, old, now, expected_raw.as_deref())?),
        None => None,
    };
    // The exact text read is the condition: if anyone wrote in between,
    // even the same version number, this write does not happen.
    let stored = store.compare_and_set(&note::note_key(&slug), expected_raw.as_deref(), &text);
    if !matches!(stored, Ok(true)) {
        // This call replaced nothing, so its copy is a spare: the note is
        // unchanged, or the save or delete that changed it kept its own
        // copy. Should removing it fail, it is purged in 30 days; the model
        // needs to hear of the first failure, not of this one.
        if let Some(kept) = &kept {
            let _ = store.delete(kept);
        }
        return Err(match stored {
            Err(e) => e.into(),
            Ok(_) => lost_race(store, &slug, now, Attempt::Save),
        });
    }
    Ok(Saved {
        slug,
        version,
        created: plan == Plan::Create,
    })
}

/// Stores the note a save replaces, with the time it was replaced, under a
/// history key of its own, and returns the key. `raw` is the note's text as
/// the save read it.
fn keep_replaced(
    store: &mut impl Store,
    old: &Note,
    now: u64,
    raw: Option<&str>,
) -> Result<String, NoteError> {
    let mut copy = serde_json::to_value(old).map_err(|e| NoteError::BadArguments(e.to_string()))?;
    copy["replaced_at"] = json!(rfc3339(now));
    let keys =
        (now..now + COPY_KEY_TRIES).map(|secs| note::history_key(&old.slug, old.version, secs));
    match write_copy(store, keys, &copy.to_string())? {
        Some(key) => Ok(key),
        None => Err(no_copy_key(
            store,
            &old.slug,
            raw,
            now,
            Attempt::Save,
            "too many saves of this note at once",
        )),
    }
}

/// Moves a note to the trash.
///
/// The state interface has no conditional delete, so removing the key is
/// done in steps that never lose a concurrent save:
/// 1. copy the note, as read, to a new trash key (compare-and-set on an
///    absent key, so no other trash entry is overwritten);
/// 2. replace the note with a deletion marker by compare-and-set on the
///    exact text read: if anyone saved in between, this fails, the copy is
///    removed again and the caller gets `conflict`;
/// 3. delete the key. A save between 2 and 3 finds the marker and refuses
///    (`conflict`), so the unconditional delete removes only the marker.
///
/// The copy comes first so that the note's text is in the trash before the
/// note is gone, whatever call fails.
pub fn delete(store: &mut impl Store, a: DeleteArgs, now: u64) -> Result<Trashed, NoteError> {
    let slug = checked_slug(a.slug)?;
    purge(store, note::TRASH_PREFIX, note::trash_expired, now)?;
    purge(store, note::HISTORY_PREFIX, note::history_expired, now)?;
    let (note, raw) = match read(store, &slug, now)? {
        Current::Live { note, raw } => (note, raw),
        Current::Absent { .. } | Current::Deleting => return Err(NoteError::NotFound(slug)),
    };
    if let Err(Refusal::Stale { current, expected }) =
        note::check_delete(note.version, a.expected_version)
    {
        return Err(NoteError::Conflict(format!(
            "Note {slug} is at version {current}, not {expected}: it changed since you read it, \
             and nothing was deleted. Call notes_note_get to read the current text; if it \
             should still go, delete again with expected_version {current}."
        )));
    }
    let mut copy =
        serde_json::to_value(&note).map_err(|e| NoteError::BadArguments(e.to_string()))?;
    copy["deleted_at"] = json!(rfc3339(now));
    let copy = copy.to_string();
    let keys = (now..now + COPY_KEY_TRIES).map(|secs| note::trash_key(&slug, secs));
    let Some(trash) = write_copy(store, keys, &copy)? else {
        return Err(no_copy_key(
            store,
            &slug,
            Some(raw.as_str()),
            now,
            Attempt::Delete,
            "too many deletions of this note at once",
        ));
    };

    let key = note::note_key(&slug);
    if !store.compare_and_set(&key, Some(&raw), &note::marker(now))? {
        // The copy is of a version that was not deleted. Should removing it
        // fail, it is a spare copy in the trash, purged in 30 days.
        store.delete(&trash)?;
        return Err(lost_race(store, &slug, now, Attempt::Delete));
    }
    // If this fails the marker stays: it reads as "no note" (and, once
    // stale, is overwritten by the next create), and the text is in the
    // trash, so the note is deleted all the same.
    let _ = store.delete(&key);
    Ok(Trashed {
        slug,
        trashed: true,
        kept_days: note::TRASH_DAYS,
        restore: "only an operator can restore it".into(),
    })
}

/// Stores `copy` under the first of `keys` that is absent and returns that
/// key, or `None` if every one is taken. Each try is a compare-and-set on an
/// absent key, so no kept copy is ever overwritten.
fn write_copy(
    store: &mut impl Store,
    keys: impl IntoIterator<Item = String>,
    copy: &str,
) -> Result<Option<String>, NoteError> {
    for key in keys {
        if store.compare_and_set(&key, None, copy)? {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// Why a save or delete found every copy key taken. That many copies of the
/// same version within seconds means that many calls replacing it at once,
/// and only one of them can succeed: if the note is no longer the text this
/// call read, one did, and this call lost the race like any other loser.
/// Otherwise the others are still under way and a retry may get through.
fn no_copy_key(
    store: &mut impl Store,
    slug: &str,
    raw: Option<&str>,
    now: u64,
    attempt: Attempt,
    busy: &str,
) -> NoteError {
    match store.get(&note::note_key(slug)) {
        Ok(current) if current.as_deref() != raw => lost_race(store, slug, now, attempt),
        Ok(_) => NoteError::Unavailable(busy.into()),
        Err(e) => e.into(),
    }
}

/// Removes the trash or history entries kept 30 days. Only an operator
/// touches those keys otherwise, so an unconditional delete loses nothing.
fn purge(
    store: &mut impl Store,
    prefix: &str,
    expired: fn(&str, u64) -> bool,
    now: u64,
) -> Result<(), NoteError> {
    for key in store.list(prefix)? {
        if expired(&key, now) {
            store.delete(&key)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
