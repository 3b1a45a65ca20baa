//! The five tools as the notes plugin describes them: names, descriptions
//! and JSON Schemas. Bounds live here, so the host refuses bad arguments
//! before the plugin runs, and checks every result against its promise.

use serde_json::{Map, Value, json};

use crate::note::{
    BODY_MAX, MAX_VERSION, SLUG_MAX, TAG_MAX, TAGS_MAX, TIMESTAMP_MAX, TITLE_MAX, TRASH_DAYS,
};
use crate::notebook::{COUNT_MAX, TAGS_LISTED_MAX};
use crate::text::SNIPPET_MAX;

pub struct Tool {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub input: Value,
    pub output: Option<Value>,
}

/// Search and list return at most this many notes per call.
const PAGE_MAX: u64 = 50;

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

fn slug() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", SLUG_MAX - 1),
        "maxLength": SLUG_MAX,
        "description": "The note's slug: its unique name, e.g. deploy-checklist."
    })
}

fn tag() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[a-z0-9][a-z0-9-]{{0,{}}}$", TAG_MAX - 1),
        "maxLength": TAG_MAX
    })
}

fn tags() -> Value {
    json!({ "type": "array", "items": tag(), "maxItems": TAGS_MAX, "uniqueItems": true })
}

fn title() -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": TITLE_MAX })
}

fn version() -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": MAX_VERSION })
}

fn expected_version() -> Value {
    json!({
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_VERSION,
        "description": "The version you read with notes_note_get; 0 or absent means the note must not exist yet."
    })
}

fn timestamp() -> Value {
    json!({ "type": "string", "maxLength": TIMESTAMP_MAX, "description": "RFC 3339, UTC." })
}

fn count() -> Value {
    json!({ "type": "integer", "minimum": 0, "maximum": COUNT_MAX })
}

fn limit(default: u64) -> Value {
    json!({ "type": "integer", "minimum": 1, "maximum": PAGE_MAX, "default": default })
}

/// A note without its body, as list shows it; search adds a snippet.
fn row_properties() -> Map<String, Value> {
    let mut props = Map::new();
    props.insert("slug".into(), slug());
    props.insert("title".into(), title());
    props.insert("tags".into(), tags());
    props.insert("version".into(), version());
    props.insert("updated_at".into(), timestamp());
    props
}

const ROW_REQUIRED: [&str; 5] = ["slug", "title", "tags", "version", "updated_at"];

fn list_row() -> Value {
    object(Value::Object(row_properties()), &ROW_REQUIRED)
}

fn search_row() -> Value {
    let mut props = row_properties();
    props.insert(
        "snippet".into(),
        json!({ "type": "string", "maxLength": SNIPPET_MAX }),
    );
    let mut required = ROW_REQUIRED.to_vec();
    required.push("snippet");
    object(Value::Object(props), &required)
}

pub fn tools() -> Vec<Tool> {
    vec![
        Tool {
            name: "notes_note_search",
            title: "Search notes",
            description: "Searches the team's shared notes for every word of the query \
                (case-insensitive) in each note's slug, title, body and tags. Returns up to \
                limit matches (default 10, at most 50), most recently updated first, each with \
                slug, title, tags, version, updated_at and a snippet of at most 200 characters \
                around the first match in the body; not the full body (read that with \
                notes_note_get). total counts all matches. Changes nothing.",
            input: object(
                json!({
                    "query": { "type": "string", "minLength": 1, "maxLength": 200 },
                    "limit": limit(10)
                }),
                &["query"],
            ),
            output: Some(object(
                json!({
                    "notes": { "type": "array", "items": search_row(), "maxItems": PAGE_MAX },
                    "total": count()
                }),
                &["notes", "total"],
            )),
        },
        Tool {
            name: "notes_note_get",
            title: "Read a note",
            description: "Reads one note of the team's shared notes by its slug: title, full \
                body, tags, version, created_at and updated_at. To change the note, pass this \
                version as expected_version to notes_note_save. An unknown slug gives not_found. \
                Changes nothing.",
            input: object(json!({ "slug": slug() }), &["slug"]),
            output: Some(object(
                json!({
                    "slug": slug(),
                    "title": title(),
                    "body": { "type": "string", "maxLength": BODY_MAX },
                    "tags": tags(),
                    "version": version(),
                    "created_at": timestamp(),
                    "updated_at": timestamp()
                }),
                &[
                    "slug",
                    "title",
                    "body",
                    "tags",
                    "version",
                    "created_at",
                    "updated_at",
                ],
            )),
        },
        Tool {
            name: "notes_note_list",
            title: "List notes",
            description: "Lists the team's shared notes, most recently updated first, without \
                their bodies: slug, title, tags, version and updated_at. With tag, only notes \
                carrying that tag. Returns up to limit notes (default 20, at most 50); total \
                counts all that match. Also returns every tag in use across all notes with how \
                many notes carry it, sorted by tag (the 1000 most used if there are more). \
                Changes nothing.",
            input: object(
                json!({
                    "limit": limit(20),
                    "tag": tag()
                }),
                &[],
            ),
            output: Some(object(
                json!({
                    "notes": { "type": "array", "items": list_row(), "maxItems": PAGE_MAX },
                    "tags": {
                        "type": "array",
                        "items": object(
                            json!({
                                "tag": tag(),
                                "count": { "type": "integer", "minimum": 1, "maximum": COUNT_MAX }
                            }),
                            &["tag", "count"],
                        ),
                        "maxItems": TAGS_LISTED_MAX
                    },
                    "total": count()
                }),
                &["notes", "tags", "total"],
            )),
        },
        Tool {
            name: "notes_note_save",
            title: "Save a note",
            description: "Creates or updates one note in the team's shared notes, which persist \
                across sessions and restarts and are read by everyone using these tools. To \
                create, give a new slug without expected_version. To update, give the version \
                you read with notes_note_get as expected_version; title, body and tags are \
                replaced by what you send, so send the whole merged text. If the note exists \
                when you create, or changed since you read it, nothing is written and you get \
                conflict: read it again, merge your change, and save with its current version. \
                An update keeps the version it replaces for 30 days, counted against the notes' \
                storage quota; only an operator can restore it, and no tool can. Also removes \
                replaced versions older than 30 days for good. Returns the slug, the new \
                version and whether the note was created.",
            input: object(
                json!({
                    "slug": slug(),
                    "title": title(),
                    "body": { "type": "string", "maxLength": BODY_MAX },
                    "tags": tags(),
                    "expected_version": expected_version()
                }),
                &["slug", "title", "body", "tags"],
            ),
            output: Some(object(
                json!({
                    "slug": slug(),
                    "version": version(),
                    "created": { "type": "boolean" }
                }),
                &["slug", "version", "created"],
            )),
        },
        Tool {
            name: "notes_note_delete",
            title: "Delete note",
            description: "Deletes one note of the team's shared notes by its slug: moves the \
                note to a trash kept 30 days; only an operator can restore it, and no tool can. \
                Give expected_version (from notes_note_get) to delete only the version you \
                read: if the note changed since, you get conflict and nothing is deleted. Also \
                removes trash entries and replaced versions older than 30 days for good. An \
                unknown slug gives not_found.",
            input: object(
                json!({
                    "slug": slug(),
                    "expected_version": expected_version()
                }),
                &["slug"],
            ),
            output: Some(object(
                json!({
                    "slug": slug(),
                    "trashed": { "const": true },
                    "kept_days": { "type": "integer", "minimum": TRASH_DAYS, "maximum": TRASH_DAYS },
                    "restore": { "enum": ["only an operator can restore it"] }
                }),
                &["slug", "trashed", "kept_days", "restore"],
            )),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::HISTORY_DAYS;

    /// Walks a schema and checks the rules every schema here keeps: closed
    /// objects with `required`, and a bound on every string, integer and
    /// array.
    fn check(schema: &Value, at: &str) {
        let kind = schema.get("type").and_then(Value::as_str);
        let has = |k: &str| schema.get(k).is_some();
        match kind {
            Some("object") => {
                assert_eq!(schema["additionalProperties"], false, "{at}");
                let props = schema["properties"].as_object().expect(at);
                let required = schema["required"].as_array().expect(at);
                for r in required {
                    assert!(props.contains_key(r.as_str().unwrap()), "{at}: {r}");
                }
                for (name, p) in props {
                    check(p, &format!("{at}.{name}"));
                }
            }
            Some("string") => assert!(has("maxLength") || has("pattern"), "{at}"),
            Some("integer") => assert!(has("minimum") && has("maximum"), "{at}"),
            Some("array") => {
                assert!(has("maxItems"), "{at}");
                check(&schema["items"], &format!("{at}[]"));
            }
            Some("boolean") => {}
            Some(other) => panic!("{at}: unexpected type {other}"),
            None => assert!(has("const") || has("enum"), "{at}"),
        }
    }

    #[test]
    fn every_schema_is_closed_and_bounded() {
        for t in tools() {
            check(&t.input, t.name);
            check(
                t.output.as_ref().expect("every tool promises a result"),
                t.name,
            );
        }
    }

    #[test]
    fn the_five_tools() {
        let names: Vec<&str> = tools().iter().map(|t| t.name).collect();
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
        let described = |name: &str| tools().into_iter().find(|t| t.name == name).unwrap();
        let list = described("notes_note_list").description;
        assert!(list.contains(&format!("the {TAGS_LISTED_MAX} most used")));
        let save = described("notes_note_save").description;
        assert!(save.contains(&format!("replaces for {HISTORY_DAYS} days")));
        assert!(save.contains("only an operator can restore it"));
        let delete = described("notes_note_delete").description;
        assert!(delete.contains(&format!("trash kept {TRASH_DAYS} days")));
    }

    #[test]
    fn patterns_match_the_code() {
        assert_eq!(slug()["pattern"], "^[a-z0-9][a-z0-9-]{0,63}$");
        assert_eq!(tag()["pattern"], "^[a-z0-9][a-z0-9-]{0,39}$");
    }
}
