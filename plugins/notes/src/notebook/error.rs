//! How a tool fails: the store's errors and the codes and messages the
//! model sees.

use std::fmt;

use crate::note;

/// `state-error`, without the bindings' types.
#[derive(Debug)]
pub enum StoreError {
    InvalidKey,
    QuotaExceeded,
    Unavailable(String),
}

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
