//! The audit trail: what a session leaves behind, that `verify` catches
//! every kind of tampering, `export`'s filters, and a trail that survives
//! `kill -9`.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::approvals::Human;
use crate::support::*;

/// The manifest's state_dir (the default, beside it).
fn state_dir(m: &TestManifest) -> PathBuf {
    m.path.parent().unwrap().join(".toolhost")
}

/// Segment files in order, each with its lines.
fn segments(state: &Path) -> Vec<(PathBuf, Vec<String>)> {
    let dir = state.join("audit");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("segment-")
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let lines = text.lines().map(str::to_string).collect();
            (path, lines)
        })
        .collect()
}

pub(crate) fn records(state: &Path) -> Vec<Value> {
    segments(state)
        .into_iter()
        .flat_map(|(_, lines)| lines)
        .map(|line| serde_json::from_str(&line).unwrap())
        .collect()
}

/// Waits until the trail holds a record of `event` (the host writes its
/// last records as it shuts down).
pub(crate) fn wait_for(state: &Path, event: &str) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if state.join("audit").exists() {
            // A read may catch the host's write half done: the trail is
            // read again until every line is whole.
            let read: Result<Vec<Value>, _> = segments(state)
                .into_iter()
                .flat_map(|(_, lines)| lines)
                .map(|line| serde_json::from_str::<Value>(&line))
                .collect();
            if let Ok(all) = read
                && all.iter().any(|r| r["event"] == event)
            {
                return all;
            }
        }
        assert!(Instant::now() < deadline, "no {event} record in the trail");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn audit_cli(manifest: &Path, args: &[&str]) -> Output {
    toolhost()
        .arg("audit")
        .args(args)
        .arg("--manifest")
        .arg(manifest)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A copy of a trail (segments, checkpoints, key) under a manifest of its
/// own, edited by `edit`: the original stays intact for the next case.
struct TrailCopy {
    _dir: tempfile::TempDir,
    manifest: PathBuf,
    state: PathBuf,
}

fn copy_trail(state: &Path) -> TrailCopy {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("state");
    std::fs::create_dir_all(copy.join("audit")).unwrap();
    for entry in std::fs::read_dir(state.join("audit")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, copy.join("audit").join(path.file_name().unwrap())).unwrap();
    }
    let manifest = dir.path().join("tools-manifest.toml");
    std::fs::write(&manifest, "[host]\nstate_dir = \"state\"\n").unwrap();
    TrailCopy {
        _dir: dir,
        manifest,
        state: copy,
    }
}

/// Every line of a trail, in order, with the index of its segment.
type Lines = Vec<(usize, String)>;

/// Rewrites the copy's segments through `edit`.
fn edit_lines(copy: &TrailCopy, edit: impl FnOnce(&mut Lines)) {
    let segs = segments(&copy.state);
    let mut lines: Lines = segs
        .iter()
        .enumerate()
        .flat_map(|(i, (_, lines))| lines.iter().map(move |l| (i, l.clone())))
        .collect();
    edit(&mut lines);
    for (i, (path, _)) in segs.iter().enumerate() {
        let text: String = lines
            .iter()
            .filter(|(s, _)| *s == i)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        std::fs::write(path, text).unwrap();
    }
}

fn verify_copy(copy: &TrailCopy, key: &str) -> (i32, String) {
    let out = audit_cli(&copy.manifest, &["verify", "--key", key]);
    (out.status.code().unwrap(), stdout(&out))
}

/// The rows that matter of a record, for comparing sequences.
fn row(record: &Value) -> String {
    let event = record["event"].as_str().unwrap();
    match event {
        "tool_call" | "tool_call_started" => format!(
            "{event} {} {}",
            record["tool"].as_str().unwrap(),
            record["outcome"].as_str().unwrap_or("-")
        ),
        "approval_decided" => format!(
            "{event} {} by={}",
            record["decision"].as_str().unwrap(),
            record["channel"].as_str().unwrap()
        ),
        "plugin_loaded" | "plugin_refused" => {
            format!("{event} {}", record["plugin"].as_str().unwrap())
        }
        _ => event.to_string(),
    }
}

/// The helpdesk and notes catalog, with small segments so the session
/// spans several of them.
fn small_segments() -> TestManifest {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::notes()]);
    let text = std::fs::read_to_string(&m.path).unwrap();
    std::fs::write(&m.path, format!("[host]\naudit_segment_kib = 2\n\n{text}")).unwrap();
    m
}

/// Opens a task, runs a scripted stdio session against it, and waits for
/// the host to stop. Returns the task.
async fn scripted_session(m: &TestManifest) -> OpenedTask {
    let task = open_task(
        m,
        &[
            "notes_note_save",
            "notes_note_delete",
            "helpdesk_ticket_close",
        ],
        &["--approve-in-client"],
    );
    let client = stdio_with(
        m,
        &[],
        &[("TOOLHOST_TASK_TOKEN", task.token.as_str())],
        Human::new(true),
    )
    .await;
    let read = call_as(&client, "helpdesk_ticket_get", json!({ "key": "T-1046" })).await;
    assert_eq!(read.is_error, Some(false));
    // Refusals: bad arguments (a huge one, cut in the record), no grant.
    let huge = "q".repeat(200_000);
    let bad = call_as(&client, "helpdesk_ticket_search", json!({ "query": huge })).await;
    assert_eq!(content(&bad)["code"], "invalid_arguments");
    let ungranted = call_as(
        &client,
        "helpdesk_ticket_escalate",
        json!({ "key": "T-1047", "team": "legal", "reason": "The customer threatens legal action." }),
    )
    .await;
    assert_eq!(content(&ungranted)["code"], "not_granted");
    let save = call_as(
        &client,
        "notes_note_save",
        json!({ "slug": "plan", "title": "Plan", "body": "ship it", "tags": [] }),
    )
    .await;
    assert_eq!(save.is_error, Some(false), "{:?}", content(&save));
    // Destructive: asked for, approved by the human, then run.
    let delete = call_as(&client, "notes_note_delete", json!({ "slug": "plan" })).await;
    assert_eq!(delete.is_error, Some(false), "{:?}", content(&delete));
    client.cancel().await.unwrap();
    wait_for(&state_dir(m), "host_stopped");
    task
}

#[tokio::test]
async fn a_session_is_recorded_decision_by_decision_and_verifies() {
    let m = small_segments();
    let task = scripted_session(&m).await;
    let state = state_dir(&m);
    let all = records(&state);
    let rows: Vec<String> = all.iter().map(row).collect();
    assert_eq!(
        rows,
        [
            "task_opened",
            "host_started",
            "plugin_loaded helpdesk",
            "plugin_loaded notes",
            "session_opened",
            "tool_call helpdesk_ticket_get ok",
            "tool_call helpdesk_ticket_search invalid_arguments",
            "tool_call helpdesk_ticket_escalate not_granted",
            "tool_call_started notes_note_save -",
            "tool_call notes_note_save ok",
            "approval_requested",
            "tool_call notes_note_delete approval_required",
            "approval_decided approved by=elicitation",
            "tool_call_started notes_note_delete -",
            "tool_call notes_note_delete ok",
            "session_closed",
            "host_stopped",
        ],
        "{all:#?}"
    );
    // Seq, chain and the details an auditor reads.
    for (i, record) in all.iter().enumerate() {
        assert_eq!(record["seq"], i as u64 + 1);
    }
    let session = &all[4];
    assert_eq!(session["client"], "approving-test-client");
    assert_eq!(session["transport"], "stdio");
    assert_eq!(session["task"], task.id.as_str());
    let save = &all[9];
    assert_eq!(save["risk"], "write");
    assert_eq!(save["task"], task.id.as_str());
    assert_eq!(save["arguments"]["slug"], "plan");
    assert_eq!(save["plugin"], "notes");
    assert_eq!(save["plugin_sha256"].as_str().unwrap().len(), 64);
    assert!(save["duration_us"].as_u64().is_some());
    assert_eq!(all[8]["call"], save["call"]);
    let cut = all[6]["arguments"]["query"].as_str().unwrap();
    assert!(cut.ends_with("…[cut: 200000 bytes]"), "{cut}");
    // The destructive call names the human decision it asked for and used.
    let approval = format!("approval:{}", all[10]["approval"].as_str().unwrap());
    assert_eq!(all[11]["grant"], approval.as_str());
    assert_eq!(all[12]["approval"], all[10]["approval"]);
    assert_eq!(all[13]["grant"], approval.as_str());
    assert_eq!(all[14]["grant"], approval.as_str());
    assert_eq!(save["grant"], "task");
    assert_eq!(all[0]["grants"].as_array().unwrap().len(), 3);
    assert!(segments(&state).len() > 2, "2 KiB segments rotate");

    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).starts_with("OK: 17 records"),
        "{}",
        stdout(&out)
    );

    // No secret in any byte of the trail: not the token, not its secret half.
    // Everything after the id: the base64url secret may itself hold `_`.
    let secret = task.token.splitn(3, '_').nth(2).unwrap();
    assert!(secret.len() >= 40, "{secret}");
    for entry in std::fs::read_dir(state.join("audit")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(&task.token) && !text.contains(secret));
    }
}

#[tokio::test]
async fn verify_catches_every_kind_of_tampering() {
    let m = small_segments();
    scripted_session(&m).await;
    let state = state_dir(&m);
    let key = stdout(&audit_cli(&m.path, &["key"])).trim().to_string();
    assert!(key.starts_with("ed25519:"), "{key}");
    let copy = copy_trail(&state);
    assert_eq!(verify_copy(&copy, &key).0, 0, "an untouched copy verifies");

    let broken = |edit: &dyn Fn(&mut Lines)| {
        let copy = copy_trail(&state);
        edit_lines(&copy, edit);
        verify_copy(&copy, &key)
    };
    let expect_broken = |(code, out): (i32, String), what: &str, says: &str| {
        assert_eq!(code, 1, "{what}: {out}");
        assert!(out.starts_with("BROKEN: "), "{what}: {out}");
        assert!(out.contains(says), "{what}: expected {says:?} in {out}");
    };

    // A record with neighbours in its own segment, so that each edit below
    // is caught by the chain itself rather than by a segment's checkpoint.
    let segment_of: Vec<usize> = segments(&state)
        .iter()
        .enumerate()
        .flat_map(|(i, (_, lines))| std::iter::repeat_n(i, lines.len()))
        .collect();
    let at = (1..segment_of.len() - 2)
        .find(|&i| {
            segment_of[i - 1] == segment_of[i]
                && segment_of[i + 1] == segment_of[i + 2]
                && segment_of[i] == segment_of[i + 1]
        })
        .expect("a segment with four records");
    let (this, next) = (at + 1, at + 2);

    // One byte changed (a digit of a timestamp, still valid JSON).
    expect_broken(
        broken(&|lines| {
            let line = &mut lines[at].1;
            let at = line.find("\"time\":\"2").unwrap() + 9;
            let digit = line.as_bytes()[at];
            let other = if digit == b'0' { "1" } else { "0" };
            line.replace_range(at..at + 1, other);
        }),
        "one byte changed",
        &format!("(seq {next}): prev does not match"),
    );
    expect_broken(
        broken(&|lines| {
            lines.remove(at);
        }),
        "a record deleted",
        &format!("seq {next} where {this} belongs"),
    );
    expect_broken(
        broken(&|lines| {
            lines.swap(at, at + 1);
        }),
        "two records swapped",
        &format!("seq {next} where {this} belongs"),
    );
    expect_broken(
        broken(&|lines| {
            let copy = lines[at].clone();
            lines.insert(at + 1, copy);
        }),
        "a record inserted",
        &format!("seq {this} where {next} belongs"),
    );
    // A careful forger re-chains everything after an inserted record; only
    // the signed checkpoints can tell.
    expect_broken(
        broken(&|lines| {
            let mut forged: Value = serde_json::from_str(&lines[at].1).unwrap();
            forged["outcome"] = json!("ok");
            forged["tool"] = json!("notes_note_delete");
            lines.insert(at + 1, (lines[at].0, forged.to_string()));
            let mut prev = String::new();
            for (i, (_, line)) in lines.iter_mut().enumerate() {
                let mut record: Value = serde_json::from_str(line).unwrap();
                record["seq"] = json!(i + 1);
                if i > 0 {
                    record["prev"] = json!(prev);
                }
                *line = toolhost::audit::record::canonical(&record);
                prev = toolhost::audit::record::sha256_hex(line.as_bytes());
            }
        }),
        "a record inserted and the chain rebuilt",
        "does not match the record",
    );
    // From the last segment (cutting into a closed one is caught as well,
    // by its missing end checkpoint).
    let in_last = segments(&state).last().unwrap().1.len().min(3);
    assert!(in_last > 0);
    expect_broken(
        broken(&|lines| {
            let keep = lines.len() - in_last;
            lines.truncate(keep);
        }),
        "the last records cut off",
        "records were cut off the end",
    );
    expect_broken(
        broken(&|lines| {
            let last_segment = lines.last().unwrap().0;
            lines.retain(|(segment, _)| *segment != last_segment);
            let closed = lines.last().unwrap().0;
            let end = lines.iter().rposition(|(s, _)| *s == closed).unwrap();
            lines.remove(end);
        }),
        "the end of a closed segment cut off",
        "records were cut from its end",
    );

    // A forged checkpoint: altered, or signed with another key.
    let forged = copy_trail(&state);
    let checkpoints = forged.state.join("audit/checkpoints.jsonl");
    let text = std::fs::read_to_string(&checkpoints).unwrap();
    let mut first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    first["seq"] = json!(first["seq"].as_u64().unwrap() + 1);
    let rest: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    std::fs::write(&checkpoints, format!("{first}\n{rest}")).unwrap();
    let (code, out) = verify_copy(&forged, &key);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("forged or altered checkpoint"), "{out}");

    let other_key = tempfile::tempdir().unwrap();
    let other_manifest = other_key.path().join("tools-manifest.toml");
    std::fs::write(&other_manifest, "").unwrap();
    let other = stdout(&audit_cli(&other_manifest, &["key"]))
        .trim()
        .to_string();
    let (code, out) = verify_copy(&copy_trail(&state), &other);
    assert_eq!(code, 1, "another key does not verify this trail: {out}");
}

#[tokio::test]
async fn export_filters_by_time_task_tool_and_risk() {
    let m = small_segments();
    let task = scripted_session(&m).await;
    let export = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["export"];
        all.extend(args);
        let out = audit_cli(&m.path, &all);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(export(&[]).len(), 17);
    let by_task = export(&["--task", &task.id]);
    assert!(by_task.iter().all(|r| r["task"] == task.id.as_str()));
    assert_eq!(by_task.len(), 12, "{by_task:#?}");
    let by_tool = export(&["--tool", "notes_note_delete"]);
    assert_eq!(
        by_tool.iter().map(row).collect::<Vec<_>>(),
        [
            "approval_requested",
            "tool_call notes_note_delete approval_required",
            "approval_decided approved by=elicitation",
            "tool_call_started notes_note_delete -",
            "tool_call notes_note_delete ok",
        ]
    );
    let writes = export(&["--risk", "write"]);
    assert_eq!(
        writes.iter().map(row).collect::<Vec<_>>(),
        [
            "tool_call helpdesk_ticket_escalate not_granted",
            "tool_call_started notes_note_save -",
            "tool_call notes_note_save ok",
        ]
    );
    // Time: everything is from the last minute, nothing from the future.
    assert_eq!(export(&["--since", "1m"]).len(), 17);
    assert_eq!(export(&["--until", "1m"]).len(), 0);
    let middle = export(&[])[8]["time"].as_str().unwrap().to_string();
    let later = export(&["--since", &middle]);
    assert!(
        later
            .iter()
            .all(|r| r["time"].as_str().unwrap() >= middle.as_str())
    );
    assert!(!later.is_empty() && later.len() < 17);

    let csv = audit_cli(
        &m.path,
        &["export", "--format", "csv", "--tool", "notes_note_save"],
    );
    let csv = stdout(&csv);
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "seq,time,event,task,tool,risk,outcome,grant,session,approval,by,detail"
    );
    assert_eq!(lines.count(), 2);
    // tail: the newest records, then (with -f) each new one as it lands.
    let tail = stdout(&audit_cli(&m.path, &["tail", "-n", "2"]));
    let last: Vec<Value> = tail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(last.len(), 2);
    assert_eq!(last[1]["event"], "host_stopped");
    let mut follow = toolhost()
        .args(["audit", "tail", "-n", "1", "-f", "--manifest"])
        .arg(&m.path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(follow.stdout.take().unwrap());
    // The newest record first: once it is printed, the follower has read
    // to the end, so the revocation below is a new record to it (with
    // `-n 0` a slow start could take it for an old one, and wait forever).
    let mut line = String::new();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    let newest: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(newest["event"], "host_stopped");
    cli(&m, &["task", "revoke", &task.id]);
    line.clear();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    let _ = follow.kill();
    let _ = follow.wait();
    let revoked: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(revoked["event"], "task_revoked");

    let bad = audit_cli(&m.path, &["export", "--since", "yesterday-ish"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("is not a time"));
}

#[test]
fn a_half_written_record_is_reported_then_saved_and_recorded_on_start() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    assert!(start_and_exit(&m, &[]).success);
    let state = state_dir(&m);
    let (last, _) = segments(&state).pop().unwrap();
    let torn = br#"{"event":"tool_call","seq":99,"tool":"half"#;
    let mut bytes = std::fs::read(&last).unwrap();
    bytes.extend_from_slice(torn);
    std::fs::write(&last, bytes).unwrap();

    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("half-written record"),
        "{}",
        stdout(&out)
    );

    assert!(start_and_exit(&m, &[]).success);
    let all = records(&state);
    let repair = all
        .iter()
        .find(|r| r["event"] == "audit_repaired")
        .expect("the repair is recorded");
    assert_eq!(repair["bytes"], torn.len());
    let saved = state
        .join("audit")
        .join(repair["saved_as"].as_str().unwrap());
    assert_eq!(std::fs::read(saved).unwrap(), torn);
    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(!stdout(&out).contains("half-written"));
}

/// A note as `notes_note_save` takes it.
fn note(slug: &str) -> Value {
    json!({ "slug": slug, "title": "t", "body": "b", "tags": [] })
}

/// A host serving the notes plugin over HTTP, and a client of a task that
/// may save notes, which has saved one ("before").
async fn saving() -> (
    TestManifest,
    OpenedTask,
    HttpHost,
    rmcp::service::RunningService<rmcp::RoleClient, ()>,
) {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &["notes_note_save"], &[]);
    let host = http(&m, &[]);
    let client = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let first = call_as(&client, "notes_note_save", note("before")).await;
    assert_eq!(first.is_error, Some(false));
    (m, task, host, client)
}

/// Makes the write call `save` until it succeeds, for at most `within`.
async fn writes_come_back<H: rmcp::ClientHandler>(
    client: &rmcp::service::RunningService<rmcp::RoleClient, H>,
    save: Value,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let again = call_as(client, "notes_note_save", save.clone()).await;
        if again.is_error == Some(false) {
            return;
        }
        assert!(Instant::now() < deadline, "writes never came back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn writes_are_refused_while_the_trail_cannot_be_written() {
    let (m, task, host, client) = saving().await;
    // The HTTP session is on record with its client and task.
    let opened = records(&state_dir(&m))
        .into_iter()
        .find(|r| r["event"] == "session_opened")
        .expect("session_opened");
    assert_eq!(opened["transport"], "http");
    assert_eq!(opened["task"], task.id.as_str());
    assert!(opened["client"].as_str().is_some_and(|c| !c.is_empty()));

    // The trail's folder is swapped for a file: nothing can be appended.
    let audit = state_dir(&m).join("audit");
    let aside = state_dir(&m).join("audit.aside");
    std::fs::rename(&audit, &aside).unwrap();
    std::fs::write(&audit, "not a folder").unwrap();
    let refused = call_as(&client, "notes_note_save", note("during")).await;
    let body = content(&refused);
    assert_eq!(body["code"], "audit_unavailable", "{body}");
    assert_eq!(body["retryable"], true);
    // Reads need no record on disk first and keep working.
    let read = call_as(&client, "notes_note_get", json!({ "slug": "before" })).await;
    assert_eq!(read.is_error, Some(false));
    let store = toolhost::store::SqliteStore::open(&state_dir(&m)).unwrap();
    use toolhost::store::Store;
    assert!(
        store
            .state_get("notes", "note/during")
            .await
            .unwrap()
            .is_none()
    );

    // Back in place: writes work again, and the records held meanwhile are in.
    std::fs::remove_file(&audit).unwrap();
    std::fs::rename(&aside, &audit).unwrap();
    writes_come_back(&client, note("after"), Duration::from_secs(10)).await;
    let rows: Vec<String> = records(&state_dir(&m)).iter().map(row).collect();
    assert!(
        rows.contains(&"tool_call notes_note_save audit_unavailable".to_string()),
        "{rows:#?}"
    );
    assert!(rows.contains(&"tool_call notes_note_get ok".to_string()));
    assert!(rows.contains(&"audit_resumed".to_string()), "{rows:#?}");
    drop(host);
    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// Another process that holds the trail's lock and never lets go (stopped
/// mid-append) makes write calls `audit_unavailable` after a while, not
/// stuck; reads go on, writes come back once it lets go, and a stop still
/// ends.
#[tokio::test]
async fn a_trail_lock_held_elsewhere_refuses_writes_instead_of_holding_them() {
    let (m, _, mut host, client) = saving().await;

    let hold = || {
        let lock = std::fs::File::options()
            .write(true)
            .open(state_dir(&m).join("audit/.lock"))
            .unwrap();
        lock.lock().unwrap();
        lock
    };
    let held = hold();
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        call_as(&client, "notes_note_save", note("during")),
    )
    .await
    .expect("a write call ends while the lock is held elsewhere");
    let body = content(&refused);
    assert_eq!(body["code"], "audit_unavailable", "{body}");
    assert_eq!(body["retryable"], true);
    let read = call_as(&client, "notes_note_get", json!({ "slug": "before" })).await;
    assert_eq!(read.is_error, Some(false));

    drop(held);
    writes_come_back(&client, note("after"), Duration::from_secs(30)).await;

    // A stop while the lock is held elsewhere ends too, though it cannot
    // record `host_stopped`.
    let held = hold();
    terminate(&host.child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while host.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the host did not stop");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(held);
    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_never_loses_an_acknowledged_write_from_the_trail() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &["notes_note_save"], &[]);
    let state = state_dir(&m);
    let mut acknowledged = Vec::new();
    for run in 0..20u64 {
        let mut host = http(&m, &[]);
        let client = std::sync::Arc::new(
            connect_with(&host.url, Some(&task.token), ())
                .await
                .unwrap(),
        );
        let writers: Vec<_> = (0..3)
            .map(|w| tokio::spawn(save_until_it_fails(client.clone(), format!("r{run}-w{w}"))))
            .collect();
        // A different moment in every run.
        let delay = 100 + (run * 7919) % 400;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        host.child.kill().unwrap(); // SIGKILL
        host.child.wait().unwrap();
        for writer in writers {
            acknowledged.extend(writer.await.unwrap());
        }
        let out = audit_cli(&m.path, &["verify"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "run {run}: the trail must verify after kill -9: {}",
            stdout(&out)
        );
    }
    assert!(acknowledged.len() > 20, "the burst wrote too little");
    let recorded: std::collections::HashSet<String> = records(&state)
        .iter()
        .filter(|r| r["event"] == "tool_call" && r["outcome"] == "ok")
        .filter_map(|r| r["arguments"]["slug"].as_str().map(str::to_string))
        .collect();
    for slug in &acknowledged {
        assert!(
            recorded.contains(slug),
            "acknowledged write {slug} has no record"
        );
    }
}

#[test]
fn a_lost_signing_key_is_not_silently_replaced() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    assert!(start_and_exit(&m, &[]).success);
    std::fs::remove_file(state_dir(&m).join("audit.key")).unwrap();
    // A new key would make every earlier checkpoint look forged.
    let exit = start_and_exit(&m, &[]);
    assert!(!exit.success);
    assert!(
        exit.stderr
            .contains("missing, but the audit trail beside it exists"),
        "{}",
        exit.stderr
    );
}

#[tokio::test]
async fn revocation_extension_and_expiry_are_recorded_with_who_did_them() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &["notes_note_save"], &[]);
    let client = stdio_with(&m, &[], &[("TOOLHOST_TASK_TOKEN", task.token.as_str())], ()).await;
    // The client is ready once the host has answered `initialize`; the host
    // records the session when the `initialized` notice that follows
    // arrives, so the extension waits for that record to keep the order.
    wait_for(&state_dir(&m), "session_opened");
    cli(&m, &["task", "extend", &task.id, "--ttl", "1s"]);
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let save = json!({ "slug": "late", "title": "t", "body": "b", "tags": [] });
    let late = call_as(&client, "notes_note_save", save).await;
    assert_eq!(content(&late)["code"], "grant_expired");
    cli(&m, &["task", "revoke", &task.id]);
    client.cancel().await.unwrap();
    let all = wait_for(&state_dir(&m), "host_stopped");
    let of_task: Vec<&Value> = all
        .iter()
        .filter(|r| r["task"] == task.id.as_str())
        .collect();
    let events: Vec<&str> = of_task
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "task_opened",
            "session_opened",
            "task_extended",
            "task_expired",
            "tool_call",
            "task_revoked"
        ],
        "{of_task:#?}"
    );
    assert!(of_task[2]["by"].as_str().unwrap().starts_with("cli:"));
    assert!(of_task[5]["by"].as_str().unwrap().starts_with("cli:"));
    assert_eq!(of_task[4]["outcome"], "grant_expired");
}

#[tokio::test]
async fn a_serving_host_signs_a_checkpoint_at_its_interval() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let text = std::fs::read_to_string(&m.path).unwrap();
    std::fs::write(
        &m.path,
        format!("[host]\naudit_checkpoint_secs = 1\n\n{text}"),
    )
    .unwrap();
    let host = http(&m, &[]);
    let client = connect(&host.url).await;
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1046" })).await;
    // A read's record is batched: it reaches the file within a second.
    let call_seq = wait_for(&state_dir(&m), "tool_call")
        .iter()
        .find(|r| r["event"] == "tool_call")
        .map(|r| r["seq"].as_u64().unwrap())
        .expect("the call is recorded");
    // No stop, no rotation: only the interval can sign this record.
    let checkpoints = state_dir(&m).join("audit/checkpoints.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let signed = std::fs::read_to_string(&checkpoints)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .any(|c| c["seq"].as_u64() >= Some(call_seq));
        if signed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no checkpoint within the interval"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    drop(host);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_trail_holds_up_write_calls_but_not_reads() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &["notes_note_save"], &[]);
    let host = http(&m, &[]);
    let agent = std::sync::Arc::new(
        connect_with(&host.url, Some(&task.token), ())
            .await
            .unwrap(),
    );
    let reader = connect_with(&host.url, None, ()).await.unwrap();
    let save = |slug: &str| json!({ "slug": slug, "title": "t", "body": "b", "tags": [] });
    let first = call_as(&*agent, "notes_note_save", save("before")).await;
    assert_eq!(first.is_error, Some(false));

    // The disk stalls: every append waits for the trail's lock, held here.
    let stall = std::fs::File::open(state_dir(&m).join("audit/.lock")).unwrap();
    stall.lock().unwrap();
    // A write call waits for its start record to be on disk...
    let during = tokio::spawn({
        let agent = agent.clone();
        async move { call_as(&*agent, "notes_note_save", note("during")).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !during.is_finished(),
        "a write call ran before its start was on record"
    );
    // ...while reads, which never wait for the trail, are answered.
    for _ in 0..5 {
        let read = tokio::time::timeout(
            Duration::from_secs(30),
            call_as(&reader, "notes_note_get", json!({ "slug": "before" })),
        )
        .await
        .expect("a read waited for the stalled trail");
        assert_eq!(read.is_error, Some(false), "{read:?}");
    }
    assert!(!during.is_finished());

    // The disk comes back: the write runs, and every record is written.
    stall.unlock().unwrap();
    let during = during.await.unwrap();
    assert_eq!(during.is_error, Some(false), "{during:?}");
    drop(host);
    let rows: Vec<String> = records(&state_dir(&m)).iter().map(row).collect();
    let reads = rows
        .iter()
        .filter(|r| *r == "tool_call notes_note_get ok")
        .count();
    assert_eq!(reads, 5, "{rows:#?}");
    assert_eq!(
        rows.iter()
            .filter(|r| *r == "tool_call notes_note_save ok")
            .count(),
        2,
        "{rows:#?}"
    );
    let out = audit_cli(&m.path, &["verify"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}
