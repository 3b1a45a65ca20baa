//! What each tool takes and answers: the shapes its schema is made from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::note;

/// Search and list return at most this many notes per call.
const PAGE_MAX: usize = 50;

/// Arguments of notes_note_search.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// Words that must all appear in a note's slug, title, body or tags.
    #[schemars(length(min = 1, max = 200))]
    pub(super) query: String,
    /// Matches at most.
    #[serde(default = "default_search_limit")]
    #[schemars(range(min = 1, max = PAGE_MAX))]
    pub(super) limit: usize,
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
    pub(super) slug: String,
}

/// Arguments of notes_note_list.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Notes at most.
    #[serde(default = "default_list_limit")]
    #[schemars(range(min = 1, max = PAGE_MAX))]
    pub(super) limit: usize,
    /// Only notes carrying this tag.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,39}$"), length(max = note::TAG_MAX))]
    pub(super) tag: Option<String>,
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
    pub(super) slug: String,
    /// The note's title.
    #[schemars(length(min = 1, max = note::TITLE_MAX))]
    pub(super) title: String,
    /// The whole text of the note.
    #[schemars(length(max = note::BODY_MAX))]
    pub(super) body: String,
    /// Tags, each lowercase letters, digits and hyphens.
    #[schemars(
        length(max = note::TAGS_MAX),
        inner(regex(pattern = "^[a-z0-9][a-z0-9-]{0,39}$"), length(max = note::TAG_MAX)),
        extend("uniqueItems" = true)
    )]
    pub(super) tags: Vec<String>,
    /// The version you read with notes_note_get; 0 or absent means the note must not exist yet.
    #[schemars(range(min = 0, max = note::MAX_VERSION))]
    pub(super) expected_version: Option<u64>,
}

/// Arguments of notes_note_delete.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteArgs {
    /// The note's slug: its unique name, e.g. deploy-checklist.
    #[schemars(regex(pattern = "^[a-z0-9][a-z0-9-]{0,63}$"), length(max = note::SLUG_MAX))]
    pub(super) slug: String,
    /// The version you read with notes_note_get: the note is deleted only if it is still at this version, otherwise you get conflict and nothing is deleted. Absent: the note is deleted whatever its version.
    #[schemars(range(min = 1, max = note::MAX_VERSION))]
    pub(super) expected_version: Option<u64>,
}

/// One note in full, as notes_note_get returns it.
#[derive(Serialize, JsonSchema)]
pub struct FullNote {
    pub(super) slug: String,
    pub(super) title: String,
    pub(super) body: String,
    pub(super) tags: Vec<String>,
    pub(super) version: u64,
    /// RFC 3339, UTC.
    pub(super) created_at: String,
    /// RFC 3339, UTC.
    pub(super) updated_at: String,
}

/// A note without its body, as list shows it.
#[derive(Serialize, JsonSchema)]
pub struct Row {
    pub(super) slug: String,
    pub(super) title: String,
    pub(super) tags: Vec<String>,
    pub(super) version: u64,
    /// RFC 3339, UTC.
    pub(super) updated_at: String,
}

/// A note without its body, with a snippet of the body.
#[derive(Serialize, JsonSchema)]
pub struct SearchRow {
    #[serde(flatten)]
    pub(super) row: Row,
    pub(super) snippet: String,
}

/// What notes_note_search found.
#[derive(Serialize, JsonSchema)]
pub struct Found {
    pub(super) notes: Vec<SearchRow>,
    /// All matches, not only those returned.
    pub(super) total: u64,
}

/// A tag in use, and how many notes carry it.
#[derive(Serialize, JsonSchema)]
pub struct TagCount {
    pub(super) tag: String,
    pub(super) count: u64,
}

/// What notes_note_list returns.
#[derive(Serialize, JsonSchema)]
pub struct Listed {
    pub(super) notes: Vec<Row>,
    pub(super) tags: Vec<TagCount>,
    /// All notes that match, not only those returned.
    pub(super) total: u64,
}

/// What notes_note_save did.
#[derive(Serialize, JsonSchema)]
pub struct Saved {
    pub(super) slug: String,
    pub(super) version: u64,
    pub(super) created: bool,
}

/// What notes_note_delete did.
#[derive(Serialize, JsonSchema)]
pub struct Trashed {
    pub(super) slug: String,
    pub(super) trashed: bool,
    pub(super) kept_days: u64,
    pub(super) restore: String,
}
