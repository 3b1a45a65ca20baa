//! Notes: a small, durable memory that a team's agents share. A note is a
//! titled text with tags under a slug; agents search, read, save and delete
//! notes, and what one session saves the next one finds.
//!
//! Why it is shaped this way:
//!
//! - The plugin holds nothing in instance memory. Every call reads and
//!   writes through the host's `state` import, so notes survive host
//!   restarts and every session and instance sees the same notes, whatever
//!   the manifest's `instance` setting.
//! - Instances run concurrently, so saves are optimistic: each note has a
//!   version, an update must name the version it was based on, and every
//!   write is a compare-and-set on the exact text that was read. Two agents
//!   editing one note cannot overwrite each other unnoticed; the later one
//!   gets `conflict` and is told to merge.
//! - Deleting moves a note to a trash kept 30 days, and there is no restore
//!   tool: an agent's mistaken delete can be undone by an operator, but an
//!   agent cannot bring back what someone else chose to delete.
//! - Updating keeps the version it replaces for 30 days too, and again only
//!   an operator restores it. Saving needs only a task grant while deleting
//!   needs a person's approval, so a save must not destroy text more
//!   thoroughly than an approved delete does.
//! - The tools' logic works on a small `Store` trait rather than on the
//!   bindings, so it is tested natively against an in-memory store; this
//!   file only connects that trait to the `state` import.

mod note;
mod notebook;
mod text;
mod time;

use notebook::{NoteError, Store, StoreError};
use toolhost_sdk::log::{self, Level};
use toolhost_sdk::state::{self, StateError};
use toolhost_sdk::{CallContext, ToolError, Toolbox};

/// Runs one tool's logic on the host's store at the current time.
fn run<A, R>(
    tool: fn(&mut HostState, A, u64) -> Result<R, NoteError>,
) -> impl Fn(&CallContext, A) -> Result<R, ToolError> {
    move |_, args| tool(&mut HostState, args, time::now_secs()).map_err(NoteError::into_tool_error)
}

fn toolbox() -> Toolbox {
    Toolbox::new()
        .tool(
            "notes_note_search",
            "Search notes",
            "Searches the team's shared notes for every word of the query (case-insensitive) in \
             each note's slug, title, body and tags. Returns up to limit matches (default 10, at \
             most 50), most recently updated first, each with slug, title, tags, version, \
             updated_at and a snippet: at most 200 characters of the body around the first place \
             a query word occurs in it (the body's start if none does), not the full body (read \
             that with notes_note_get). total counts all matches. \
             Changes nothing.",
            run(notebook::search),
        )
        .tool(
            "notes_note_get",
            "Read a note",
            "Reads one note of the team's shared notes by its slug: title, full body, tags, \
             version, created_at and updated_at. To change the note, pass this version as \
             expected_version to notes_note_save. An unknown slug gives not_found. Changes \
             nothing.",
            run(notebook::get),
        )
        .tool(
            "notes_note_list",
            "List notes",
            "Lists the team's shared notes, most recently updated first, without their bodies: \
             slug, title, tags, version and updated_at. With tag, only notes carrying that tag. \
             Returns up to limit notes (default 20, at most 50); total counts all that match. \
             Also returns every tag in use across all notes with how many notes carry it, sorted \
             by tag (the 1000 most used if there are more). Changes nothing.",
            run(notebook::list),
        )
        .tool(
            "notes_note_save",
            "Save a note",
            "Creates or updates one note in the team's shared notes, which persist across \
             sessions and restarts and are read by everyone using these tools. To create, give a \
             new slug without expected_version. To update, give the version you read with \
             notes_note_get as expected_version; title, body and tags are replaced by what you \
             send, so send the whole merged text. If the note exists when you create, or changed \
             since you read it, nothing is written and you get conflict: read it again, merge \
             your change, and save with its current version. An update keeps the version it \
             replaces for 30 days, counted against the notes' storage quota; only an operator \
             can restore it, and no tool can. Also removes replaced versions older than 30 days \
             for good. Returns the slug, the new version and whether the note was created.",
            run(notebook::save),
        )
        .tool(
            "notes_note_delete",
            "Delete note",
            "Deletes one note of the team's shared notes by its slug: moves the note to a trash \
             kept 30 days; only an operator can restore it, and no tool can. Give \
             expected_version (from notes_note_get) to delete only the version you read: if the \
             note changed since, you get conflict and nothing is deleted. Also removes trash \
             entries and replaced versions older than 30 days for good. An unknown slug gives \
             not_found.",
            run(notebook::delete),
        )
}

toolhost_sdk::export_plugin!(toolbox);

/// The host's `state` import as a `Store`.
struct HostState;

impl Store for HostState {
    fn get(&mut self, key: &str) -> Result<Option<String>, StoreError> {
        state::get(key).map_err(StoreError::from)
    }

    fn compare_and_set(
        &mut self,
        key: &str,
        expected: Option<&str>,
        value: &str,
    ) -> Result<bool, StoreError> {
        state::compare_and_set(key, expected, value).map_err(StoreError::from)
    }

    fn delete(&mut self, key: &str) -> Result<bool, StoreError> {
        state::delete(key).map_err(StoreError::from)
    }

    fn list(&mut self, prefix: &str) -> Result<Vec<String>, StoreError> {
        state::list_keys(prefix).map_err(StoreError::from)
    }
}

impl From<StateError> for StoreError {
    fn from(e: StateError) -> StoreError {
        match e {
            StateError::InvalidKey => StoreError::InvalidKey,
            StateError::QuotaExceeded => StoreError::QuotaExceeded,
            StateError::Unavailable(detail) => {
                // The model is told to retry; the operator needs the detail.
                log::write(Level::Warn, &format!("state unavailable: {detail}"));
                StoreError::Unavailable(detail)
            }
        }
    }
}

impl NoteError {
    fn into_tool_error(self) -> ToolError {
        ToolError {
            code: self.code().into(),
            message: self.to_string(),
            retryable: self.retryable(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use note::{HISTORY_DAYS, SLUG_MAX, TAG_MAX, TRASH_DAYS};
    use notebook::TAGS_LISTED_MAX;
    use serde_json::Value;
    use text::SNIPPET_MAX;

    fn spec(name: &str) -> toolhost_sdk::ToolSpec {
        toolbox()
            .specs()
            .into_iter()
            .find(|t| t.name == name)
            .unwrap()
    }

    #[test]
    fn the_five_tools() {
        let names: Vec<String> = toolbox().specs().into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "notes_note_search",
                "notes_note_get",
                "notes_note_list",
                "notes_note_save",
                "notes_note_delete"
            ]
        );
    }

    #[test]
    fn descriptions_state_the_code_s_bounds() {
        let list = spec("notes_note_list").description;
        assert!(list.contains(&format!("the {TAGS_LISTED_MAX} most used")));
        let save = spec("notes_note_save").description;
        assert!(save.contains(&format!("replaces for {HISTORY_DAYS} days")));
        assert!(save.contains("only an operator can restore it"));
        let delete = spec("notes_note_delete").description;
        assert!(delete.contains(&format!("trash kept {TRASH_DAYS} days")));
        let search = spec("notes_note_search").description;
        assert!(search.contains(&format!("at most {SNIPPET_MAX} characters of the body")));
    }

    /// Save and delete both take expected_version, with different rules:
    /// each tool's description of it states that tool's rule, not the other's.
    #[test]
    fn expected_version_says_what_each_tool_does_with_it() {
        let argument = |tool: &str| {
            let schema: Value = serde_json::from_str(&spec(tool).input_schema).unwrap();
            schema["properties"]["expected_version"].clone()
        };
        let save = argument("notes_note_save");
        let text = save["description"].as_str().unwrap();
        assert!(text.contains("0 or absent means the note must not exist yet"));
        assert_eq!(save["minimum"], 0);

        let delete = argument("notes_note_delete");
        let text = delete["description"].as_str().unwrap();
        assert!(!text.contains("must not exist"), "{text}");
        assert!(text.contains("deleted only if it is still at this version"));
        assert!(text.contains("conflict and nothing is deleted"));
        assert!(text.contains("Absent: the note is deleted whatever its version"));
        // No note is at version 0, so delete does not take it.
        assert_eq!(delete["minimum"], 1);
    }

    #[test]
    fn patterns_match_the_code() {
        let save: Value = serde_json::from_str(&spec("notes_note_save").input_schema).unwrap();
        let pattern = |max: usize| format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", max - 1);
        assert_eq!(save["properties"]["slug"]["pattern"], pattern(SLUG_MAX));
        assert_eq!(
            save["properties"]["tags"]["items"]["pattern"],
            pattern(TAG_MAX)
        );
        assert_eq!(save["properties"]["tags"]["uniqueItems"], true);
        assert_eq!(
            save["required"],
            serde_json::json!(["slug", "title", "body", "tags"])
        );
    }
}
