//! What each tool does, over a `Store`: the host's `state` import in the
//! component, an in-memory map in the tests.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::{Value, json};

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
/// A second deletion of the same slug within the same second needs another
/// trash key; the next free second is taken, a few at most.
const TRASH_KEY_TRIES: u64 = 10;

/// A failure of a tool, with the code the model sees.
#[derive(Debug)]
pub enum NoteError {
    NotFound(String),
    /// The message, built where the reason is known.
    Conflict(String),
    Unreadable(String),
    VersionLimit(String),
    UnknownTool(String),
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
            NoteError::UnknownTool(_) => "unknown_tool",
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
            NoteError::UnknownTool(tool) => write!(f, "The notes plugin has no tool {tool}."),
            NoteError::BadArguments(e) => write!(f, "The arguments do not fit the tool: {e}"),
            NoteError::QuotaExceeded => f.write_str(
                "The notes store is full: the operator's storage quota for notes is used up, and \
                 nothing was written. Delete notes that are no longer needed with \
                 notes_note_delete (deleted notes keep counting while they are in the 30-day \
                 trash), save a shorter text, or ask the operator for a larger quota.",
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

#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    #[serde(default = "default_search_limit")]
    limit: usize,
}

fn default_search_limit() -> usize {
    10
}

#[derive(Deserialize)]
struct SlugArgs {
    slug: String,
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default = "default_list_limit")]
    limit: usize,
    tag: Option<String>,
}

fn default_list_limit() -> usize {
    20
}

#[derive(Deserialize)]
struct SaveArgs {
    slug: String,
    title: String,
    body: String,
    tags: Vec<String>,
    expected_version: Option<u64>,
}

#[derive(Deserialize)]
struct DeleteArgs {
    slug: String,
    expected_version: Option<u64>,
}

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

/// Runs `tool` with `args` at the Unix time `now`.
pub fn dispatch(
    store: &mut impl Store,
    tool: &str,
    args: &Value,
    now: u64,
) -> Result<Value, NoteError> {
    match tool {
        "notes_note_search" => search(store, parse(args)?, now),
        "notes_note_get" => {
            let a: SlugArgs = parse(args)?;
            let slug = checked_slug(a.slug)?;
            match read(store, &slug, now)? {
                Current::Live { note, .. } => Ok(full(&note)),
                Current::Absent { .. } | Current::Deleting => Err(NoteError::NotFound(slug)),
            }
        }
        "notes_note_list" => list(store, parse(args)?, now),
        "notes_note_save" => save(store, parse(args)?, now),
        "notes_note_delete" => delete(store, parse(args)?, now),
        other => Err(NoteError::UnknownTool(other.to_string())),
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

fn full(note: &Note) -> Value {
    json!({
        "slug": note.slug,
        "title": note.title,
        "body": note.body,
        "tags": note.tags,
        "version": note.version,
        "created_at": note.created_at,
        "updated_at": note.updated_at,
    })
}

/// A note without its body, as list and search show it.
fn row(note: &Note) -> Value {
    json!({
        "slug": note.slug,
        "title": note.title,
        "tags": note.tags,
        "version": note.version,
        "updated_at": note.updated_at,
    })
}

fn count(n: usize) -> u64 {
    (n as u64).min(COUNT_MAX)
}

fn search(store: &mut impl Store, a: SearchArgs, now: u64) -> Result<Value, NoteError> {
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
    let rows: Vec<Value> = matching
        .iter()
        .take(a.limit)
        .map(|n| {
            let mut r = row(n);
            r["snippet"] = json!(text::snippet(&n.body, &words));
            r
        })
        .collect();
    Ok(json!({ "notes": rows, "total": count(matching.len()) }))
}

fn list(store: &mut impl Store, a: ListArgs, now: u64) -> Result<Value, NoteError> {
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
    let rows: Vec<Value> = matching.iter().take(a.limit).map(|n| row(n)).collect();
    let tags: Vec<Value> = tags
        .into_iter()
        .map(|(tag, n)| json!({ "tag": tag, "count": n.min(COUNT_MAX) }))
        .collect();
    Ok(json!({ "notes": rows, "tags": tags, "total": count(matching.len()) }))
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

fn save(store: &mut impl Store, a: SaveArgs, now: u64) -> Result<Value, NoteError> {
    let slug = checked_slug(a.slug)?;
    let stamp = rfc3339(now);
    let (current_version, expected_raw, created_at) = match read(store, &slug, now)? {
        Current::Live { note, raw } => (Some(note.version), Some(raw), note.created_at),
        Current::Absent { raw } => (None, raw, stamp.clone()),
        Current::Deleting => return Err(being_deleted(&slug)),
    };
    let plan = note::plan_save(current_version, a.expected_version)
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
    // The exact text read is the condition: if anyone wrote in between,
    // even the same version number, this write does not happen.
    let stored = store.compare_and_set(&note::note_key(&slug), expected_raw.as_deref(), &text)?;
    if !stored {
        return Err(lost_race(store, &slug, now, Attempt::Save));
    }
    Ok(json!({ "slug": slug, "version": version, "created": plan == Plan::Create }))
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
fn delete(store: &mut impl Store, a: DeleteArgs, now: u64) -> Result<Value, NoteError> {
    let slug = checked_slug(a.slug)?;
    purge_trash(store, now)?;
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
    let trash = write_trash(store, &slug, now, &copy)?;

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
    Ok(json!({
        "slug": slug,
        "trashed": true,
        "kept_days": note::TRASH_DAYS,
        "restore": "only an operator can restore it",
    }))
}

/// Stores `copy` under a trash key of its own and returns the key.
fn write_trash(
    store: &mut impl Store,
    slug: &str,
    now: u64,
    copy: &str,
) -> Result<String, NoteError> {
    for secs in now..now + TRASH_KEY_TRIES {
        let key = note::trash_key(slug, secs);
        if store.compare_and_set(&key, None, copy)? {
            return Ok(key);
        }
    }
    Err(NoteError::Unavailable(
        "too many deletions of this note at once".into(),
    ))
}

/// Removes trash entries kept 30 days. Only an operator touches trash keys
/// otherwise, so an unconditional delete loses nothing.
fn purge_trash(store: &mut impl Store, now: u64) -> Result<(), NoteError> {
    for key in store.list(note::TRASH_PREFIX)? {
        if note::trash_expired(&key, now) {
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
    /// before each compare-and-set, to stage a concurrent writer.
    #[derive(Default)]
    struct Memory {
        map: BTreeMap<String, String>,
        before_write: Option<Hook>,
        quota_full: bool,
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
            if self.quota_full {
                return Err(StoreError::QuotaExceeded);
            }
            if self.map.get(key).map(String::as_str) != expected {
                return Ok(false);
            }
            self.map.insert(key.to_string(), value.to_string());
            Ok(true)
        }

        fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
            Ok(self.map.remove(key).is_some())
        }

        fn list(&mut self, prefix: &str) -> Result<Vec<String>, StoreError> {
            Ok(self
                .map
                .keys()
                .filter(|k| k.starts_with(prefix))
                .cloned()
                .collect())
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
        m.before_write = Some(Box::new(move |map| {
            if let Some(v) = once.take() {
                map.insert("note/runbook".into(), v);
            }
        }));
        let e = save_note(&mut m, "runbook", "mine", Some(1), T0).unwrap_err();
        assert_eq!(e.code(), "conflict");
        assert!(e.to_string().contains("version 2"), "{e}");
        let got = call(&mut m, "notes_note_get", json!({ "slug": "runbook" }), T0).unwrap();
        assert_eq!(got["body"], "theirs");
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
            quota_full: true,
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
