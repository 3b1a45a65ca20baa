//! What each tool does, over a `Store`: the host's `state` import in the
//! component, an in-memory map in the tests.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
#[cfg(test)]
use serde_json::Value;
use serde_json::json;

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

/// `state-error`, without the bindings' types.
#[derive(Debug)]
pub enum StoreError {
    InvalidKey,
    QuotaExceeded,
    Unavailable(String),
}

/// The most tags list reports: keeps its result bounded however many
/// notes there are.
pub const TAGS_LISTED_MAX: usize = 1_000;
/// Bound of every count in a result; far above what a quota admits.
pub const COUNT_MAX: u64 = 1_000_000;
/// A second copy with the same name within the same second needs another
/// key (a note deleted, created again and deleted again; or created again
/// and updated from the same version again); the next free second is taken,
/// a few at most.
const COPY_KEY_TRIES: u64 = 10;

/// A failure of a tool, with the code the model sees.
#[derive(Debug)]
pub enum NoteError {
    NotFound(String),
    /// The message, built where the reason is known.
    Conflict(String),
    Unreadable(String),
    VersionLimit(String),
    BadArguments(String),
    QuotaExceeded,
    InvalidKey,
    Unavailable(String),
}

impl NoteError {
    pub fn code(&self) -> &'static str {
        match self {
            NoteError::NotFound(_) => "not_found",
            NoteError::Conflict(_) => "conflict",
            NoteError::Unreadable(_) => "note_unreadable",
            NoteError::VersionLimit(_) => "version_limit",
            NoteError::BadArguments(_) | NoteError::InvalidKey => "invalid_arguments",
            NoteError::QuotaExceeded => "quota_exceeded",
            NoteError::Unavailable(_) => "state_unavailable",
        }
    }

    /// Only a store outage passes by itself; every other failure needs the
    /// model to change the call (or a person to step in).
    pub fn retryable(&self) -> bool {
        matches!(self, NoteError::Unavailable(_))
    }
}

impl fmt::Display for NoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoteError::NotFound(slug) => write!(
                f,
                "There is no note {slug}. Use notes_note_search or notes_note_list to find existing notes."
            ),
            NoteError::Conflict(message) => f.write_str(message),
            NoteError::Unreadable(slug) => write!(
                f,
                "The stored note {slug} is not in a form this plugin can read (it was probably \
                 edited outside the tools), so it was left as it is. Tell the operator."
            ),
            NoteError::VersionLimit(slug) => write!(
                f,
                "Note {slug} has reached the highest version ({}); it cannot be saved again. \
                 Save the text under a new slug instead.",
                note::MAX_VERSION
            ),
            NoteError::BadArguments(e) => write!(f, "The arguments do not fit the tool: {e}"),
            NoteError::QuotaExceeded => f.write_str(
                "The notes store is full: the operator's storage quota for notes is used up, and \
                 nothing was written. Delete notes that are no longer needed with \
                 notes_note_delete (deleted notes, and the earlier versions that saves \
                 replaced, keep counting for 30 days), save a shorter text, or ask the operator \
                 for a larger quota.",
            ),
            NoteError::InvalidKey => f.write_str(
                "The store refused the slug as a key. Use lowercase letters, digits and hyphens, \
                 at most 64 characters.",
            ),
            NoteError::Unavailable(detail) => write!(
                f,
                "The notes store is unavailable right now ({detail}); the call did not complete. \
                 Try again shortly."
            ),
        }
    }
}

impl From<StoreError> for NoteError {
    fn from(e: StoreError) -> NoteError {
        match e {
            StoreError::InvalidKey => NoteError::InvalidKey,
            StoreError::QuotaExceeded => NoteError::QuotaExceeded,
            StoreError::Unavailable(detail) => NoteError::Unavailable(detail),
        }
    }
}

/// Search and list return at most this many notes per call.
const PAGE_MAX: usize = 50;

/// Arguments of notes_note_search.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words that must all appear in a note's slug, title, body or tags.
    #[schemars(length(min = 1, max = 200))]
    query: String,
    /// Matches at most.
    #[serde(default = "default_search_limit")]
    #[schemars(range(min = 1, max = PAGE_MAX))]
    limit: usize,
}

fn default_search_limit() -> usize {
    10
}

/// Arguments that name one note.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlugArgs {
    /// The note's slug: its unique name, e.g. deploy-checklist.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,63}$"), length(max = note::SLUG_MAX))]
    slug: String,
}

/// Arguments of notes_note_list.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Notes at most.
    #[serde(default = "default_list_limit")]
    #[schemars(range(min = 1, max = PAGE_MAX))]
    limit: usize,
    /// Only notes carrying this tag.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,39}$"), length(max = note::TAG_MAX))]
    tag: Option<String>,
}

fn default_list_limit() -> usize {
    20
}

/// Arguments of notes_note_save.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    /// The note's slug: its unique name, e.g. deploy-checklist.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,63}$"), length(max = note::SLUG_MAX))]
    slug: String,
    /// The note's title.
    #[schemars(length(min = 1, max = note::TITLE_MAX))]
    title: String,
    /// The whole text of the note.
    #[schemars(length(max = note::BODY_MAX))]
    body: String,
    /// Tags, each lowercase letters, digits and hyphens.
    #[schemars(
        length(max = note::TAGS_MAX),
        inner(regex(pattern = "^[a-z0-9][a-z0-9-]{0,39}$"), length(max = note::TAG_MAX)),
        extend("uniqueItems" = true)
    )]
    tags: Vec<String>,
    /// The version you read with notes_note_get; 0 or absent means the note must not exist yet.
    #[schemars(range(min = 0, max = note::MAX_VERSION))]
    expected_version: Option<u64>,
}

/// Arguments of notes_note_delete.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// The note's slug: its unique name, e.g. deploy-checklist.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,63}$"), length(max = note::SLUG_MAX))]
    slug: String,
    /// The version you read with notes_note_get: the note is deleted only if it is still at this version, otherwise you get conflict and nothing is deleted. Absent: the note is deleted whatever its version.
    #[schemars(range(min = 1, max = note::MAX_VERSION))]
    expected_version: Option<u64>,
}

/// One note in full, as notes_note_get returns it.
#[derive(Serialize, JsonSchema)]
pub struct FullNote {
    slug: String,
    title: String,
    body: String,
    tags: Vec<String>,
    version: u64,
    /// RFC 3339, UTC.
    created_at: String,
    /// RFC 3339, UTC.
    updated_at: String,
}

/// A note without its body, as list shows it.
#[derive(Serialize, JsonSchema)]
pub struct Row {
    slug: String,
    title: String,
    tags: Vec<String>,
    version: u64,
    /// RFC 3339, UTC.
    updated_at: String,
}

/// A note without its body, with a snippet of the body.
#[derive(Serialize, JsonSchema)]
pub struct SearchRow {
    #[serde(flatten)]
    row: Row,
    snippet: String,
}

/// What notes_note_search found.
#[derive(Serialize, JsonSchema)]
pub struct Found {
    notes: Vec<SearchRow>,
    /// All matches, not only those returned.
    total: u64,
}

/// A tag in use, and how many notes carry it.
#[derive(Serialize, JsonSchema)]
pub struct TagCount {
    tag: String,
    count: u64,
}

/// What notes_note_list returns.
#[derive(Serialize, JsonSchema)]
pub struct Listed {
    notes: Vec<Row>,
    tags: Vec<TagCount>,
    /// All notes that match, not only those returned.
    total: u64,
}

/// What notes_note_save did.
#[derive(Serialize, JsonSchema)]
pub struct Saved {
    slug: String,
    version: u64,
    created: bool,
}

/// What notes_note_delete did.
#[derive(Serialize, JsonSchema)]
pub struct Trashed {
    slug: String,
    trashed: bool,
    kept_days: u64,
    restore: String,
}

#[cfg(test)]
fn parse<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T, NoteError> {
    T::deserialize(args).map_err(|e| NoteError::BadArguments(e.to_string()))
}

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

/// Runs `tool` with `args` at the Unix time `now`, as the component does.
#[cfg(test)]
pub fn dispatch(
    store: &mut impl Store,
    tool: &str,
    args: &Value,
    now: u64,
) -> Result<Value, NoteError> {
    fn value<T: Serialize>(r: Result<T, NoteError>) -> Result<Value, NoteError> {
        r.map(|v| serde_json::to_value(v).expect("results are JSON"))
    }
    match tool {
        "notes_note_search" => value(search(store, parse(args)?, now)),
        "notes_note_get" => value(get(store, parse(args)?, now)),
        "notes_note_list" => value(list(store, parse(args)?, now)),
        "notes_note_save" => value(save(store, parse(args)?, now)),
        "notes_note_delete" => value(delete(store, parse(args)?, now)),
        other => panic!("no tool {other}"),
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
        Some(old) => Some(keep_replaced(store, old, now)?),
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
/// history key of its own, and returns the key.
fn keep_replaced(store: &mut impl Store, old: &Note, now: u64) -> Result<String, NoteError> {
    let mut copy = serde_json::to_value(old).map_err(|e| NoteError::BadArguments(e.to_string()))?;
    copy["replaced_at"] = json!(rfc3339(now));
    let keys =
        (now..now + COPY_KEY_TRIES).map(|secs| note::history_key(&old.slug, old.version, secs));
    write_copy(
        store,
        keys,
        &copy.to_string(),
        "too many saves of this note at once",
    )
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
    let trash = write_copy(
        store,
        keys,
        &copy,
        "too many deletions of this note at once",
    )?;

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
/// key. Each try is a compare-and-set on an absent key, so no kept copy is
/// ever overwritten.
fn write_copy(
    store: &mut impl Store,
    keys: impl IntoIterator<Item = String>,
    copy: &str,
    busy: &str,
) -> Result<String, NoteError> {
    for key in keys {
        if store.compare_and_set(&key, None, copy)? {
            return Ok(key);
        }
    }
    Err(NoteError::Unavailable(busy.into()))
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
mod tests {
    use super::*;

    type Hook = Box<dyn FnMut(&mut BTreeMap<String, String>)>;

    /// The state interface's behaviour, in memory. `before_write` runs just
    /// before each compare-and-set, to stage a concurrent writer. `quota`
    /// bounds the bytes of all keys and values, counted as the host does.
    #[derive(Default)]
    struct Memory {
        map: BTreeMap<String, String>,
        before_write: Option<Hook>,
        quota: Option<usize>,
    }

    impl Memory {
        fn used(&self) -> usize {
            self.map.iter().map(|(k, v)| k.len() + v.len()).sum()
        }

        fn keys(&self, prefix: &str) -> Vec<String> {
            self.map
                .keys()
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect()
        }
    }

    impl Store for Memory {
        fn get(&mut self, key: &str) -> Result<Option<String>, StoreError> {
            Ok(self.map.get(key).cloned())
        }

        fn compare_and_set(
            &mut self,
            key: &str,
            expected: Option<&str>,
            value: &str,
        ) -> Result<bool, StoreError> {
            if let Some(hook) = self.before_write.as_mut() {
                hook(&mut self.map);
            }
            let current = self.map.get(key);
            if current.map(String::as_str) != expected {
                return Ok(false);
            }
            let freed = current.map_or(0, |v| key.len() + v.len());
            let after = self.used() - freed + key.len() + value.len();
            if self.quota.is_some_and(|quota| after > quota) {
                return Err(StoreError::QuotaExceeded);
            }
            self.map.insert(key.to_string(), value.to_string());
            Ok(true)
        }

        fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
            Ok(self.map.remove(key).is_some())
        }

        fn list(&mut self, prefix: &str) -> Result<Vec<String>, StoreError> {
            Ok(self.keys(prefix))
        }
    }

    const T0: u64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    fn call(m: &mut Memory, tool: &str, args: Value, now: u64) -> Result<Value, NoteError> {
        dispatch(m, tool, &args, now)
    }

    fn save_note(
        m: &mut Memory,
        slug: &str,
        body: &str,
        expected: Option<u64>,
        now: u64,
    ) -> Result<Value, NoteError> {
        let mut args = json!({ "slug": slug, "title": format!("Title of {slug}"), "body": body, "tags": ["ops"] });
        if let Some(v) = expected {
            args["expected_version"] = json!(v);
        }
        call(m, "notes_note_save", args, now)
    }

    fn code(r: Result<Value, NoteError>) -> &'static str {
        r.expect_err("expected an error").code()
    }

    #[test]
    fn create_update_and_get() {
        let mut m = Memory::default();
        let r = save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        assert_eq!(
            r,
            json!({ "slug": "runbook", "version": 1, "created": true })
        );
        let r = save_note(&mut m, "runbook", "v2", Some(1), T0 + 60).unwrap();
        assert_eq!(
            r,
            json!({ "slug": "runbook", "version": 2, "created": false })
        );
        let got = call(
            &mut m,
            "notes_note_get",
            json!({ "slug": "runbook" }),
            T0 + 61,
        )
        .unwrap();
        assert_eq!(got["body"], "v2");
        assert_eq!(got["version"], 2);
        assert_eq!(got["created_at"], "2026-01-01T00:00:00Z");
        assert_eq!(got["updated_at"], "2026-01-01T00:01:00Z");
    }

    #[test]
    fn an_update_keeps_the_version_it_replaces() {
        let mut m = Memory::default();
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        assert!(m.keys("history/").is_empty(), "a create replaces nothing");
        save_note(&mut m, "runbook", "v2", Some(1), T0 + 60).unwrap();
        save_note(&mut m, "runbook", "v3", Some(2), T0 + 120).unwrap();
        assert_eq!(
            m.keys("history/"),
            [
                note::history_key("runbook", 1, T0 + 60),
                note::history_key("runbook", 2, T0 + 120)
            ]
        );
        let copy: Value =
            serde_json::from_str(&m.map[&note::history_key("runbook", 1, T0 + 60)]).unwrap();
        assert_eq!(copy["body"], "v1");
        assert_eq!(copy["version"], 1);
        assert_eq!(copy["updated_at"], "2026-01-01T00:00:00Z");
        assert_eq!(copy["replaced_at"], "2026-01-01T00:01:00Z");

        // An operator's restore: the current note moved aside, the copy
        // renamed back. It reads as the note it was, and saves on from there.
        m.map.remove("note/runbook").unwrap();
        let copy = m
            .map
            .remove(&note::history_key("runbook", 1, T0 + 60))
            .unwrap();
        m.map.insert("note/runbook".into(), copy);
        let got = call(
            &mut m,
            "notes_note_get",
            json!({ "slug": "runbook" }),
            T0 + 180,
        )
        .unwrap();
        assert_eq!(got["body"], "v1");
        assert_eq!(got["version"], 1);
        assert!(got.get("replaced_at").is_none());
        save_note(&mut m, "runbook", "v2 again", Some(1), T0 + 200).unwrap();
        assert!(
            !m.map["note/runbook"].contains("replaced_at"),
            "the saved note is not marked replaced"
        );
        assert!(
            m.map
                .contains_key(&note::history_key("runbook", 1, T0 + 200))
        );

        // Versions start over when a deleted note is created again, so the
        // same version can be replaced twice in one second; both are kept.
        for _ in 0..2 {
            call(
                &mut m,
                "notes_note_delete",
                json!({ "slug": "runbook" }),
                T0 + 300,
            )
            .unwrap();
            save_note(&mut m, "runbook", "new", None, T0 + 300).unwrap();
            save_note(&mut m, "runbook", "newer", Some(1), T0 + 300).unwrap();
        }
        assert!(
            m.map
                .contains_key(&note::history_key("runbook", 1, T0 + 300))
        );
        assert!(
            m.map
                .contains_key(&note::history_key("runbook", 1, T0 + 301))
        );
    }

    #[test]
    fn saves_and_deletes_purge_history_kept_thirty_days() {
        let mut m = Memory::default();
        let day = 86_400;
        let old = note::history_key("old", 4, T0 - 31 * day);
        let young = note::history_key("young", 4, T0 - 29 * day);
        for key in [&old, &young, &"history/operator-copy".to_string()] {
            m.map.insert(key.clone(), "{}".into());
        }
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        assert!(!m.map.contains_key(&old));
        assert!(m.map.contains_key(&young));
        assert!(m.map.contains_key("history/operator-copy"));

        save_note(&mut m, "runbook", "v2", Some(1), T0).unwrap();
        call(
            &mut m,
            "notes_note_delete",
            json!({ "slug": "runbook" }),
            T0 + 2 * day,
        )
        .unwrap();
        assert!(!m.map.contains_key(&young), "a delete purges history too");
        assert_eq!(
            m.keys("history/"),
            [
                "history/operator-copy".to_string(),
                note::history_key("runbook", 1, T0)
            ]
        );
    }

    #[test]
    fn a_full_store_leaves_the_note_unchanged() {
        let mut m = Memory::default();
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        let before = m.map.clone();
        let writes = std::rc::Rc::new(std::cell::Cell::new(0));
        let counter = writes.clone();
        m.before_write = Some(Box::new(move |_| counter.set(counter.get() + 1)));

        // No room for the copy: nothing is written.
        m.quota = Some(m.used() + 10);
        let e = save_note(&mut m, "runbook", "v2", Some(1), T0 + 60).unwrap_err();
        assert_eq!(e.code(), "quota_exceeded");
        assert!(!e.retryable());
        assert_eq!(writes.get(), 1);
        assert_eq!(m.map, before);

        // Room for the copy but not for the longer note: the copy goes again.
        writes.set(0);
        m.quota = Some(m.used() + 1_000);
        let long = "x".repeat(2_000);
        let e = save_note(&mut m, "runbook", &long, Some(1), T0 + 60).unwrap_err();
        assert_eq!(e.code(), "quota_exceeded");
        assert_eq!(writes.get(), 2, "the copy was written before the note");
        assert_eq!(m.map, before);

        m.quota = None;
        save_note(&mut m, "runbook", &long, Some(1), T0 + 60).unwrap();
        assert_eq!(m.keys("history/").len(), 1);
    }

    #[test]
    fn stale_and_blind_saves_conflict() {
        let mut m = Memory::default();
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        save_note(&mut m, "runbook", "v2", Some(1), T0).unwrap();
        let e = save_note(&mut m, "runbook", "lost?", Some(1), T0).unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(!e.retryable());
        assert!(e.to_string().contains("version 2"));
        assert!(e.to_string().contains("notes_note_get"));
        assert_eq!(
            code(save_note(&mut m, "runbook", "again", None, T0)),
            "conflict"
        );
        assert_eq!(
            code(save_note(&mut m, "other", "x", Some(4), T0)),
            "conflict"
        );
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_get",
                json!({ "slug": "other" }),
                T0
            )),
            "not_found"
        );
    }

    #[test]
    fn a_concurrent_save_wins_and_the_loser_is_told() {
        let mut m = Memory::default();
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        // Another instance saves version 2 between our read and our write.
        let theirs = m.map["note/runbook"]
            .replace("\"v1\"", "\"theirs\"")
            .replace("\"version\":1", "\"version\":2");
        let mut once = Some(theirs);
        let their_copy = note::history_key("runbook", 1, T0);
        let staged_copy = their_copy.clone();
        m.before_write = Some(Box::new(move |map| {
            if let Some(v) = once.take() {
                // Saved in the same second, so theirs took the history key
                // this save would have used.
                map.insert(staged_copy.clone(), "their copy of v1".into());
                map.insert("note/runbook".into(), v);
            }
        }));
        let e = save_note(&mut m, "runbook", "mine", Some(1), T0).unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(e.to_string().contains("version 2"), "{e}");
        let got = call(&mut m, "notes_note_get", json!({ "slug": "runbook" }), T0).unwrap();
        assert_eq!(got["body"], "theirs");
        // This save's own copy of v1 is gone again; theirs is kept.
        assert_eq!(m.keys("history/"), std::slice::from_ref(&their_copy));
        assert_eq!(m.map[&their_copy], "their copy of v1");
    }

    #[test]
    fn delete_moves_to_trash_and_purges_old_entries() {
        let mut m = Memory::default();
        m.map
            .insert(note::trash_key("old", T0 - 31 * 86_400), "{}".into());
        m.map
            .insert(note::trash_key("young", T0 - 29 * 86_400), "{}".into());
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        let r = call(
            &mut m,
            "notes_note_delete",
            json!({ "slug": "runbook" }),
            T0 + 5,
        )
        .unwrap();
        assert_eq!(r["trashed"], true);
        assert_eq!(r["kept_days"], 30);
        assert!(!m.map.contains_key("note/runbook"));
        assert!(
            !m.map
                .contains_key(&note::trash_key("old", T0 - 31 * 86_400))
        );
        assert!(
            m.map
                .contains_key(&note::trash_key("young", T0 - 29 * 86_400))
        );
        let copy: Value =
            serde_json::from_str(&m.map[&note::trash_key("runbook", T0 + 5)]).unwrap();
        assert_eq!(copy["body"], "v1");
        assert_eq!(copy["deleted_at"], "2026-01-01T00:00:05Z");
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_get",
                json!({ "slug": "runbook" }),
                T0 + 6
            )),
            "not_found"
        );

        // Deleted, re-created and deleted again in the same second: both copies kept.
        save_note(&mut m, "runbook", "v1 again", None, T0 + 5).unwrap();
        call(
            &mut m,
            "notes_note_delete",
            json!({ "slug": "runbook" }),
            T0 + 5,
        )
        .unwrap();
        assert!(m.map.contains_key(&note::trash_key("runbook", T0 + 6)));

        // An operator's restore: the trash copy renamed back.
        let copy = m.map.remove(&note::trash_key("runbook", T0 + 5)).unwrap();
        m.map.insert("note/runbook".into(), copy);
        let got = call(
            &mut m,
            "notes_note_get",
            json!({ "slug": "runbook" }),
            T0 + 7,
        )
        .unwrap();
        assert_eq!(got["body"], "v1");
        assert!(got.get("deleted_at").is_none());
        save_note(&mut m, "runbook", "restored", Some(1), T0 + 8).unwrap();
    }

    #[test]
    fn delete_refuses_a_changed_note_and_keeps_it() {
        let mut m = Memory::default();
        save_note(&mut m, "runbook", "v1", None, T0).unwrap();
        save_note(&mut m, "runbook", "v2", Some(1), T0).unwrap();
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_delete",
                json!({ "slug": "runbook", "expected_version": 1 }),
                T0
            )),
            "conflict"
        );
        // A save lands between the delete's read and its claim on the note.
        let theirs = m.map["note/runbook"]
            .replace("\"v2\"", "\"v3\"")
            .replace("\"version\":2", "\"version\":3");
        let mut writes = 0;
        m.before_write = Some(Box::new(move |map| {
            writes += 1;
            // The first write is the trash copy, the second the claim.
            if writes == 2 {
                map.insert("note/runbook".into(), theirs.clone());
            }
        }));
        let e = call(
            &mut m,
            "notes_note_delete",
            json!({ "slug": "runbook" }),
            T0,
        )
        .unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(
            e.to_string()
                .contains("delete again with expected_version 3"),
            "{e}"
        );
        m.before_write = None;
        let got = call(&mut m, "notes_note_get", json!({ "slug": "runbook" }), T0).unwrap();
        assert_eq!(got["body"], "v3");
        assert!(
            m.map.keys().all(|k| !k.starts_with("trash/")),
            "the copy is rolled back"
        );
    }

    #[test]
    fn markers_block_saves_until_stale() {
        let mut m = Memory::default();
        m.map.insert("note/runbook".into(), note::marker(T0));
        assert_eq!(
            code(save_note(&mut m, "runbook", "x", None, T0 + 1)),
            "conflict"
        );
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_get",
                json!({ "slug": "runbook" }),
                T0
            )),
            "not_found"
        );
        let list = call(&mut m, "notes_note_list", json!({}), T0).unwrap();
        assert_eq!(list["total"], 0);
        let later = T0 + note::MARKER_STALE_SECS;
        let r = save_note(&mut m, "runbook", "x", None, later).unwrap();
        assert_eq!(r["created"], true);
    }

    #[test]
    fn list_sorts_filters_and_counts_tags() {
        let mut m = Memory::default();
        let args = |slug: &str, tags: Value| json!({ "slug": slug, "title": slug, "body": "", "tags": tags });
        call(
            &mut m,
            "notes_note_save",
            args("b", json!(["ops", "db"])),
            T0,
        )
        .unwrap();
        call(&mut m, "notes_note_save", args("a", json!(["ops"])), T0).unwrap();
        call(&mut m, "notes_note_save", args("c", json!([])), T0 + 10).unwrap();
        m.map.insert("note/junk".into(), "not json".into());
        let r = call(&mut m, "notes_note_list", json!({}), T0 + 20).unwrap();
        let slugs: Vec<&str> = r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["slug"].as_str().unwrap())
            .collect();
        assert_eq!(slugs, ["c", "a", "b"]);
        assert_eq!(r["total"], 3);
        assert_eq!(
            r["tags"],
            json!([{ "tag": "db", "count": 1 }, { "tag": "ops", "count": 2 }])
        );
        assert!(r["notes"][0].get("body").is_none());
        let r = call(
            &mut m,
            "notes_note_list",
            json!({ "tag": "ops", "limit": 1 }),
            T0 + 20,
        )
        .unwrap();
        assert_eq!(r["total"], 2);
        assert_eq!(r["notes"].as_array().unwrap().len(), 1);
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_get",
                json!({ "slug": "junk" }),
                T0
            )),
            "note_unreadable"
        );
    }

    #[test]
    fn search_returns_snippets_not_bodies() {
        let mut m = Memory::default();
        let body = format!(
            "{} the canary runs for an hour {}",
            "x".repeat(300),
            "y".repeat(300)
        );
        save_note(&mut m, "release", &body, None, T0).unwrap();
        save_note(&mut m, "other", "nothing here", None, T0).unwrap();
        let r = call(
            &mut m,
            "notes_note_search",
            json!({ "query": "Canary" }),
            T0,
        )
        .unwrap();
        assert_eq!(r["total"], 1);
        let hit = &r["notes"][0];
        assert_eq!(hit["slug"], "release");
        assert!(hit.get("body").is_none());
        let snippet = hit["snippet"].as_str().unwrap();
        assert!(snippet.contains("canary") && snippet.chars().count() <= text::SNIPPET_MAX);
        assert_eq!(
            code(call(
                &mut m,
                "notes_note_search",
                json!({ "query": "  " }),
                T0
            )),
            "invalid_arguments"
        );
    }

    #[test]
    fn state_errors_map_to_tool_errors() {
        let mut m = Memory {
            quota: Some(0),
            ..Memory::default()
        };
        let e = save_note(&mut m, "runbook", "v1", None, T0).unwrap_err();
        assert_eq!(e.code(), "quota_exceeded");
        assert!(!e.retryable());
        let e = NoteError::from(StoreError::Unavailable("db locked".into()));
        assert_eq!(e.code(), "state_unavailable");
        assert!(e.retryable());
        assert_eq!(
            NoteError::from(StoreError::InvalidKey).code(),
            "invalid_arguments"
        );
    }

    #[test]
    fn slugs_cannot_reach_other_keys() {
        let mut m = Memory::default();
        assert_eq!(
            code(save_note(&mut m, "../trash/x", "", None, T0)),
            "invalid_arguments"
        );
        assert_eq!(
            code(call(&mut m, "notes_note_get", json!({ "slug": "a@1" }), T0)),
            "invalid_arguments"
        );
    }
}
