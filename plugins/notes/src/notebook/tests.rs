use super::*;
use serde::Serialize;
use serde_json::Value;

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

fn parse<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T, NoteError> {
    T::deserialize(args).map_err(|e| NoteError::BadArguments(e.to_string()))
}

/// Runs `tool` with `args` at the Unix time `now`, as the component does.
fn dispatch(
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
    let mut args =
        json!({ "slug": slug, "title": format!("Title of {slug}"), "body": body, "tags": ["ops"] });
    if let Some(v) = expected {
        args["expected_version"] = json!(v);
    }
    call(m, "notes_note_save", args, now)
}

fn delete_note(
    m: &mut Memory,
    slug: &str,
    expected: Option<u64>,
    now: u64,
) -> Result<Value, NoteError> {
    let mut args = json!({ "slug": slug });
    if let Some(v) = expected {
        args["expected_version"] = json!(v);
    }
    call(m, "notes_note_delete", args, now)
}

fn get_note(m: &mut Memory, slug: &str, now: u64) -> Result<Value, NoteError> {
    call(m, "notes_note_get", json!({ "slug": slug }), now)
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
    let got = get_note(&mut m, "runbook", T0 + 61).unwrap();
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
    let got = get_note(&mut m, "runbook", T0 + 180).unwrap();
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
        delete_note(&mut m, "runbook", None, T0 + 300).unwrap();
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
    delete_note(&mut m, "runbook", None, T0 + 2 * day).unwrap();
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
    assert_eq!(code(get_note(&mut m, "other", T0)), "not_found");
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
    let got = get_note(&mut m, "runbook", T0).unwrap();
    assert_eq!(got["body"], "theirs");
    // This save's own copy of v1 is gone again; theirs is kept.
    assert_eq!(m.keys("history/"), std::slice::from_ref(&their_copy));
    assert_eq!(m.map[&their_copy], "their copy of v1");
}

/// Takes every key that a save or delete of `runbook` at `now` would keep
/// its copy under (`key` names them), as that many other calls would.
fn take_copy_keys(m: &mut Memory, key: fn(&str, u64) -> String, now: u64) {
    for secs in now..now + COPY_KEY_TRIES {
        m.map
            .insert(key("runbook", secs), "another call's copy".into());
    }
}

/// Stages another call's save of version 2 ("theirs") of `runbook`, at
/// version 1 now, just before this call's next write.
fn theirs_lands_at_the_next_write(m: &mut Memory) {
    let theirs = m.map["note/runbook"]
        .replace("\"v1\"", "\"theirs\"")
        .replace("\"version\":1", "\"version\":2");
    let mut once = Some(theirs);
    m.before_write = Some(Box::new(move |map| {
        if let Some(v) = once.take() {
            map.insert("note/runbook".into(), v);
        }
    }));
}

fn history_v1(slug: &str, secs: u64) -> String {
    note::history_key(slug, 1, secs)
}

#[test]
fn a_save_with_every_copy_key_taken_lost_the_race_if_the_note_changed() {
    let mut m = Memory::default();
    save_note(&mut m, "runbook", "v1", None, T0).unwrap();
    take_copy_keys(&mut m, history_v1, T0 + 5);
    // One of the others lands while this save looks for a free key.
    theirs_lands_at_the_next_write(&mut m);
    let keys_before = m.keys("");
    let e = save_note(&mut m, "runbook", "mine", Some(1), T0 + 5).unwrap_err();
    assert_eq!(e.code(), "conflict", "{e}");
    assert!(e.to_string().contains("version 2"), "{e}");
    assert_eq!(m.keys(""), keys_before, "nothing was written");
    let got = get_note(&mut m, "runbook", T0 + 5).unwrap();
    assert_eq!(got["body"], "theirs");
}

#[test]
fn a_save_with_every_copy_key_taken_may_retry_if_the_note_is_unchanged() {
    let mut m = Memory::default();
    save_note(&mut m, "runbook", "v1", None, T0).unwrap();
    take_copy_keys(&mut m, history_v1, T0 + 5);
    let keys_before = m.keys("");
    let e = save_note(&mut m, "runbook", "mine", Some(1), T0 + 5).unwrap_err();
    assert_eq!(e.code(), "state_unavailable", "{e}");
    assert!(e.retryable());
    assert!(e.to_string().contains("too many saves"), "{e}");
    assert_eq!(m.keys(""), keys_before, "nothing was written");
    // Once the seconds those keys stand for are past, the save goes through.
    save_note(&mut m, "runbook", "mine", Some(1), T0 + 15).unwrap();
}

#[test]
fn a_delete_with_every_trash_key_taken_lost_the_race_if_the_note_changed() {
    let mut m = Memory::default();
    save_note(&mut m, "runbook", "v1", None, T0).unwrap();
    take_copy_keys(&mut m, note::trash_key, T0 + 5);
    let e = delete_note(&mut m, "runbook", Some(1), T0 + 5).unwrap_err();
    assert_eq!(e.code(), "state_unavailable", "{e}");
    // This time a save lands while the delete looks for a free key: the
    // delete lost the race.
    theirs_lands_at_the_next_write(&mut m);
    let keys_before = m.keys("");
    let e = delete_note(&mut m, "runbook", Some(1), T0 + 5).unwrap_err();
    assert_eq!(e.code(), "conflict", "{e}");
    assert!(e.to_string().contains("version 2"), "{e}");
    assert_eq!(m.keys(""), keys_before, "nothing was written");
}

#[test]
fn delete_moves_to_trash_and_purges_old_entries() {
    let mut m = Memory::default();
    m.map
        .insert(note::trash_key("old", T0 - 31 * 86_400), "{}".into());
    m.map
        .insert(note::trash_key("young", T0 - 29 * 86_400), "{}".into());
    save_note(&mut m, "runbook", "v1", None, T0).unwrap();
    let r = delete_note(&mut m, "runbook", None, T0 + 5).unwrap();
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
    let copy: Value = serde_json::from_str(&m.map[&note::trash_key("runbook", T0 + 5)]).unwrap();
    assert_eq!(copy["body"], "v1");
    assert_eq!(copy["deleted_at"], "2026-01-01T00:00:05Z");
    assert_eq!(code(get_note(&mut m, "runbook", T0 + 6)), "not_found");

    // Deleted, re-created and deleted again in the same second: both copies kept.
    save_note(&mut m, "runbook", "v1 again", None, T0 + 5).unwrap();
    delete_note(&mut m, "runbook", None, T0 + 5).unwrap();
    assert!(m.map.contains_key(&note::trash_key("runbook", T0 + 6)));

    // An operator's restore: the trash copy renamed back.
    let copy = m.map.remove(&note::trash_key("runbook", T0 + 5)).unwrap();
    m.map.insert("note/runbook".into(), copy);
    let got = get_note(&mut m, "runbook", T0 + 7).unwrap();
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
        code(delete_note(&mut m, "runbook", Some(1), T0)),
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
    let e = delete_note(&mut m, "runbook", None, T0).unwrap_err();
    assert_eq!(e.code(), "conflict");
    assert!(
        e.to_string()
            .contains("delete again with expected_version 3"),
        "{e}"
    );
    m.before_write = None;
    let got = get_note(&mut m, "runbook", T0).unwrap();
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
    assert_eq!(code(get_note(&mut m, "runbook", T0)), "not_found");
    let list = call(&mut m, "notes_note_list", json!({}), T0).unwrap();
    assert_eq!(list["total"], 0);
    let later = T0 + note::MARKER_STALE_SECS;
    let r = save_note(&mut m, "runbook", "x", None, later).unwrap();
    assert_eq!(r["created"], true);
}

#[test]
fn list_sorts_filters_and_counts_tags() {
    let mut m = Memory::default();
    let args =
        |slug: &str, tags: Value| json!({ "slug": slug, "title": slug, "body": "", "tags": tags });
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
    assert_eq!(code(get_note(&mut m, "junk", T0)), "note_unreadable");
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
    assert_eq!(code(get_note(&mut m, "a@1", T0)), "invalid_arguments");
}
