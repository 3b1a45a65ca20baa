//! The compiled-component cache: reused across restarts, private to the
//! host's user, and never trusted when its bytes were changed.

use std::os::unix::fs::PermissionsExt;

use crate::support::*;

/// Starts the host on `m` until the catalog is ready and returns its log.
fn start_once(m: &TestManifest) -> String {
    let out = start_and_exit(m, &["--strict"]);
    assert!(out.success, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    out.stderr
}

/// Runs `toolhost call TOOL` on `m`: its stdout and its log.
fn call_once(m: &TestManifest, tool: &str) -> (String, String) {
    let out = toolhost()
        .env("TOOLHOST_LOG", "info")
        .args(["call", tool, "--manifest"])
        .arg(&m.path)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    (String::from_utf8(out.stdout).unwrap(), log)
}

#[tokio::test]
async fn a_restart_serves_from_the_cache_and_makes_the_engine_and_maps_code_at_the_first_call() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let cold = start_once(&m);
    assert_eq!(cold.matches("origin=Compiled").count(), 2, "{cold}");
    // Each in a process of its own, so the host keeps none of the
    // compile's memory, and each one's code was used.
    assert_eq!(
        cold.matches("compiled a component in a compiler process")
            .count(),
        2,
        "{cold}"
    );
    assert!(!cold.contains("compiling in the host"), "{cold}");
    assert!(!cold.contains("unusable"), "{cold}");
    // The next start takes what each plugin offered from the cache: no
    // component is read, compiled, mapped or run before its first call.
    let warm = start_once(&m);
    assert_eq!(warm.matches("origin=Described").count(), 2, "{warm}");
    // Nor is the engine made, with its instance pool: the first call
    // makes it.
    assert!(cold.contains("instance pool ready"), "{cold}");
    assert!(!warm.contains("instance pool ready"), "{warm}");
    let (result, log) = call_once(&m, "helpdesk_ticket_list");
    assert!(result.contains("T-"), "{result}");
    assert!(log.contains("instance pool ready"), "{log}");
    let client = stdio(&m, &[]).await;
    let echo = call(
        &client,
        "fixture_echo_get",
        serde_json::json!({"text": "mapped"}),
    )
    .await;
    assert_eq!(echo.is_error, Some(false), "{echo:?}");
    client.cancel().await.unwrap();

    let dir = m.path.parent().unwrap().join(".toolhost/cache/components");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        entries.len(),
        8,
        "code, seal and description per component, the catalog's lint report and the engine's key: {entries:?}"
    );
    for entry in entries {
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", entry.display());
    }
}

/// What an earlier start checked and kept (a plugin's description, the
/// catalog's lint report) is taken only by the same build of the host: a
/// rebuilt binary (here a copy, which is another file) loads the compiled
/// code but describes and lints again.
#[test]
fn another_build_of_the_host_checks_again_what_an_earlier_one_kept() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    start_once(&m);
    let warm = start_once(&m);
    assert!(warm.contains("origin=Described"), "{warm}");
    assert!(warm.contains("catalog is unchanged"), "{warm}");

    let dir = tempfile::tempdir().unwrap();
    let rebuilt = dir.path().join("toolhost");
    std::fs::copy(env!("CARGO_BIN_EXE_toolhost"), &rebuilt).unwrap();
    let out = std::process::Command::new(&rebuilt)
        .env("TOOLHOST_LOG", "info")
        .args(["serve", "--stdio", "--strict", "--manifest"])
        .arg(&m.path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("origin=Cache"), "{log}");
    assert!(!log.contains("catalog is unchanged"), "{log}");
}

#[test]
fn a_changed_cache_entry_is_recompiled_not_loaded() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    start_once(&m);
    let dir = m.path.parent().unwrap().join(".toolhost/cache/components");
    let code = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap();
    let mut bytes = std::fs::read(&code).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&code, &bytes).unwrap();

    // Found at the first call, which compiles the component afresh.
    let (result, log) = call_once(&m, "helpdesk_ticket_list");
    assert!(log.contains("does not match its recorded digest"), "{log}");
    assert!(result.contains("T-"), "{result}");
    // The entry was rewritten, so the next call uses it again.
    let (_, log) = call_once(&m, "helpdesk_ticket_list");
    assert!(!log.contains("does not match"), "{log}");
}

#[test]
fn a_component_that_does_not_compile_is_refused_with_the_compilers_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("broken.wasm");
    // A component's preamble, then a section that ends too soon.
    std::fs::write(&file, b"\0asm\x0d\x00\x01\x00\x01\x7f\x00").unwrap();
    let mut entry = PluginEntry::helpdesk();
    entry.component = file.clone();
    entry.sha256 = sha256(&file);
    let m = manifest(vec![entry, PluginEntry::fixture()]);
    let out = start_and_exit(&m, &["--strict"]);
    assert!(!out.success, "{}", out.stderr);
    let refusal = refusal_line(&out.stderr, "helpdesk");
    assert!(refusal.contains("could not be compiled"), "{refusal}");
    // wasmtime's own reason, as the compiler process gave it, not a word
    // about the process.
    assert!(
        refusal.contains("failed to parse WebAssembly module"),
        "{refusal}"
    );
    assert!(!refusal.contains("compiler process"), "{refusal}");
    assert!(
        !out.stderr.contains("compiling in the host"),
        "{}",
        out.stderr
    );
    // Nothing of the failed compile is left in the cache.
    let cache = m.path.parent().unwrap().join(".toolhost/cache/components");
    let left: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The helpdesk from a copy of its component (so the shared build is never
/// touched): the copy's folder, its path and the manifest.
fn helpdesk_copy() -> (tempfile::TempDir, std::path::PathBuf, TestManifest) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("helpdesk.wasm");
    std::fs::copy(wasm("helpdesk"), &file).unwrap();
    let mut entry = PluginEntry::helpdesk();
    entry.component = file.clone();
    (dir, file, manifest(vec![entry]))
}

#[test]
fn a_component_file_changed_after_a_start_is_read_again_and_held_to_its_pin() {
    let (_dir, file, m) = helpdesk_copy();
    start_once(&m);
    assert!(start_once(&m).contains("origin=Described"));
    // Another component in its place: the stamp differs, so the file is
    // read, and refused for its digest.
    std::fs::copy(wasm("fixture"), &file).unwrap();
    let out = start_and_exit(&m, &[]);
    assert!(
        out.stderr.contains("but the manifest pins"),
        "{}",
        out.stderr
    );
    // The same bytes written again (a rebuild): read, match, described anew.
    std::fs::copy(wasm("helpdesk"), &file).unwrap();
    assert!(start_once(&m).contains("origin=Cache"));
    assert!(start_once(&m).contains("origin=Described"));
}

#[test]
fn a_cache_folder_of_another_user_is_refused_not_loaded() {
    use std::os::unix::fs::MetadataExt;
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let foreign = tempfile::tempdir().unwrap();
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    // Only root can hand a folder to another user; as anyone else the case
    // cannot be set up, and the check is the same.
    if me != 0 || std::os::unix::fs::chown(foreign.path(), Some(65534), Some(65534)).is_err() {
        return;
    }
    let start = || {
        toolhost()
            .env("TOOLHOST_LOG", "info")
            .env("TOOLHOST_CACHE_DIR", foreign.path())
            .args(["serve", "--stdio", "--strict", "--manifest"])
            .arg(&m.path)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let out = start();
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{log}");
        assert!(log.contains("belongs to another user"), "{log}");
        assert!(log.contains("origin=Compiled"), "{log}");
    }
    assert_eq!(std::fs::read_dir(foreign.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_first_call_that_cannot_load_the_code_fails_and_the_next_one_tries_again() {
    let (_dir, file, m) = helpdesk_copy();
    start_once(&m);
    let client = stdio(&m, &[]).await;
    // Started lazily; then the compiled code is lost and the file is
    // replaced by another component before the first call.
    let cache = m.path.parent().unwrap().join(".toolhost/cache/components");
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            std::fs::remove_file(path).unwrap();
        }
    }
    std::fs::copy(wasm("fixture"), &file).unwrap();
    let failed = call(&client, "helpdesk_ticket_list", serde_json::json!({})).await;
    assert_eq!(failed.is_error, Some(true), "{failed:?}");
    // The pinned file is back: the next call loads it.
    std::fs::copy(wasm("helpdesk"), &file).unwrap();
    let listed = call(&client, "helpdesk_ticket_list", serde_json::json!({})).await;
    assert_eq!(listed.is_error, Some(false), "{listed:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_accepted_output_schema_that_no_longer_compiles_refuses_the_call_before_it_runs() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    start_once(&m);
    // What a later start takes as accepted, changed as a validator that no
    // longer compiles the schema would see it (a string where the
    // meta-schema wants a number).
    let cache = m.path.parent().unwrap().join(".toolhost/cache/components");
    let record = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".described.json"))
        .expect("the helpdesk's description record");
    let mut described: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let tool = described["tools"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|t| t["name"] == "helpdesk_ticket_list")
        .expect("helpdesk_ticket_list is described");
    tool["output_schema"] = serde_json::json!(r#"{"type":"object","minProperties":"1"}"#);
    std::fs::write(&record, serde_json::to_vec(&described).unwrap()).unwrap();

    let client = stdio(&m, &[]).await;
    // Refused as a plugin that cannot load, before it runs (the reason is
    // in the host's log, not told to the model); a schema found broken only
    // after the call would read `invalid_output`.
    let error = refused(&client, "helpdesk_ticket_list", serde_json::json!({})).await;
    assert_eq!(error["code"], "plugin_trap", "{error}");
    // The other tools of the plugin are served.
    ok(
        &client,
        "helpdesk_ticket_get",
        serde_json::json!({ "key": "T-1041" }),
    )
    .await;
    client.cancel().await.unwrap();
}

/// `serve --stdio` on `m` with `TOOLHOST_CACHE_DIR` set to `cache`, until
/// the catalog is ready: its log.
fn start_with_cache(m: &TestManifest, cache: &std::path::Path) -> String {
    let out = toolhost()
        .env("TOOLHOST_LOG", "info")
        .env("TOOLHOST_CACHE_DIR", cache)
        .args(["serve", "--stdio", "--manifest"])
        .arg(&m.path)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    log
}

/// `toolhost call helpdesk_ticket_list` on `m` with `cache` as the cache,
/// which must succeed: its output, the log at `info`.
fn list_tickets_with_cache(m: &TestManifest, cache: &std::path::Path) -> std::process::Output {
    let out = toolhost()
        .env("TOOLHOST_LOG", "info")
        .env("TOOLHOST_CACHE_DIR", cache)
        .args(["call", "helpdesk_ticket_list", "--manifest"])
        .arg(&m.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The engine's key (wasmtime's hash of its configuration and the CPU's
/// features, which names the cache's entries) is worked out once and kept,
/// so a later start makes no engine before the first call. A kept key that
/// no longer fits, as after the CPU changed under the same binary, costs a
/// compile (wasmtime checks the code it maps against its own
/// configuration), and the engine made at the first call keeps the right
/// key for the next start.
#[test]
fn a_kept_engine_key_that_no_longer_fits_costs_a_compile_not_a_wrong_load() {
    let cache = tempfile::tempdir().unwrap();
    let keys = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".engine.json"))
            .collect()
    };
    const STALE: &str = "does not fit this machine";
    // Fuel metering is part of the engine's configuration, so the two
    // catalogs have two keys.
    let fuelled = manifest(vec![
        PluginEntry::helpdesk().with("limits = { fuel = 1000000000 }"),
    ]);
    let plain = manifest(vec![PluginEntry::helpdesk()]);
    let cold = start_with_cache(&fuelled, cache.path());
    // The key the engine without a pool gave is the pooled engine's.
    assert!(
        cold.contains("origin=Compiled") && !cold.contains(STALE),
        "{cold}"
    );
    let fuelled_key = keys();
    assert_eq!(fuelled_key.len(), 1, "{fuelled_key:?}");
    start_with_cache(&plain, cache.path());
    let plain_key = keys()
        .into_iter()
        .find(|k| *k != fuelled_key[0])
        .expect("a second key");
    assert!(start_with_cache(&plain, cache.path()).contains("origin=Described"));
    let first = list_tickets_with_cache(&plain, cache.path());
    assert!(!String::from_utf8_lossy(&first.stderr).contains(STALE));

    // The plain catalog's kept key now names the code compiled with fuel.
    std::fs::copy(&fuelled_key[0], &plain_key).unwrap();
    let out = list_tickets_with_cache(&plain, cache.path());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("is unusable") && log.contains(STALE), "{log}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("T-"));
    // The right key is kept again, naming the plain code compiled before.
    assert_ne!(
        std::fs::read(&plain_key).unwrap(),
        std::fs::read(&fuelled_key[0]).unwrap()
    );
    let out = list_tickets_with_cache(&plain, cache.path());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        !log.contains("is unusable") && !log.contains(STALE),
        "{log}"
    );
    assert!(
        log.contains("origin=Cache") || log.contains("origin=Described"),
        "{log}"
    );
}

#[test]
fn a_cache_folder_others_may_write_is_refused_not_repaired() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let open = tempfile::tempdir().unwrap();
    // Anything planted while it was open is not to be trusted, so the host
    // neither loads from it nor makes it private and carries on.
    std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    for _ in 0..2 {
        let log = start_with_cache(&m, open.path());
        assert!(
            log.contains("writable by its group or other users"),
            "{log}"
        );
        assert!(log.contains("origin=Compiled"), "{log}");
    }
    let mode = std::fs::metadata(open.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o777);
    assert_eq!(std::fs::read_dir(open.path()).unwrap().count(), 0);
}

#[test]
fn an_entry_others_may_write_is_compiled_afresh_not_loaded() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let cache = tempfile::tempdir().unwrap();
    start_with_cache(&m, cache.path());
    let code = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .unwrap();
    std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o666)).unwrap();
    // Code that fails the checks is not there as far as the host is
    // concerned: the component is read, compiled afresh and the entry
    // replaced.
    let out = list_tickets_with_cache(&m, cache.path());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("not a file only the host's user may write"),
        "{log}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("T-"));
    let mode = std::fs::metadata(&code).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Written files are private, and no temporary file is left behind.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", path.display());
        assert!(
            !path.to_string_lossy().contains(".tmp-"),
            "{}",
            path.display()
        );
    }
}

/// The fixture as plugin `name`, granted the directory `host` in `mode`.
fn granted(name: &str, host: &std::path::Path, mode: &str) -> PluginEntry {
    PluginEntry::fixture_as(
        name,
        &format!(
            "config = {{ prefix = \"{name}\" }}\nfiles = [{{ host = \"{}\", guest = \"/g\", mode = \"{mode}\" }}]",
            host.display()
        ),
    )
}

/// Asserts that `log` refuses `plugin` for a grant overlapping the cache.
fn refused_for_the_cache(log: &str, plugin: &str) {
    let refusal = refusal_line(log, plugin);
    assert!(refusal.contains("compiled-component cache"), "{refusal}");
}

#[test]
fn a_cache_reached_through_a_symlink_is_checked_and_used_where_it_really_is() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let real = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("cache");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    let log = start_with_cache(&m, &link);
    assert!(log.contains("origin=Compiled"), "{log}");
    assert!(
        std::fs::read_dir(real.path()).unwrap().count() > 0,
        "entries are written in the folder the link points to"
    );
    // A plugin granted that folder under another name is still refused.
    let m = manifest(vec![granted("reader", real.path(), "ro")]);
    refused_for_the_cache(&start_with_cache(&m, &link), "reader");
}

#[test]
fn no_plugin_may_be_granted_the_cache_folder_or_a_folder_around_it() {
    let place = tempfile::tempdir().unwrap();
    let cache = place.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    let m = manifest(vec![
        granted("inside", &cache, "rw"),
        granted("around", place.path(), "ro"),
    ]);
    let log = start_with_cache(&m, &cache);
    refused_for_the_cache(&log, "inside");
    refused_for_the_cache(&log, "around");
}

#[test]
fn a_cache_folder_that_cannot_be_used_may_not_be_granted_either() {
    // Refused as a cache (others may write it), it is still where a later
    // start would load native code from, once it is made private.
    let place = tempfile::tempdir().unwrap();
    let cache = place.path().join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let log = start_with_cache(&manifest(vec![granted("planter", &cache, "rw")]), &cache);
    assert!(
        log.contains("writable by its group or other users"),
        "{log}"
    );
    refused_for_the_cache(&log, "planter");
}

/// Sets the modification time of every file in `dir` to `age` ago.
fn age_all(dir: &std::path::Path, age: std::time::Duration) {
    let then = std::time::SystemTime::now() - age;
    for entry in std::fs::read_dir(dir).unwrap() {
        let file = std::fs::File::options()
            .write(true)
            .open(entry.unwrap().path())
            .unwrap();
        file.set_modified(then).unwrap();
    }
}

/// `toolhost cache prune ARGS` on `m` with `cache` as the cache: its output.
fn prune(m: &TestManifest, cache: &std::path::Path, args: &[&str]) -> std::process::Output {
    toolhost()
        .env("TOOLHOST_CACHE_DIR", cache)
        .args(["cache", "prune", "--manifest"])
        .arg(&m.path)
        .args(args)
        .output()
        .unwrap()
}

fn names(dir: &std::path::Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

/// One cache shared by two manifests: what the one still served uses stays,
/// what only the other used a month ago goes, and so do files of writes
/// that never finished; files the cache did not write are left alone.
#[test]
fn pruning_removes_what_no_host_used_for_a_while_and_keeps_what_a_start_used() {
    let cache = tempfile::tempdir().unwrap();
    let both = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let helpdesk = manifest(vec![PluginEntry::helpdesk()]);
    assert!(start_with_cache(&both, cache.path()).contains("origin=Compiled"));
    // 30 days, and the day a mark may lag, and then some.
    let month = std::time::Duration::from_secs(33 * 24 * 60 * 60);
    age_all(cache.path(), month);
    // A write cut short two hours ago, one going on now, and someone's file.
    let digest = "ab".repeat(32);
    let stale = cache.path().join(format!("{digest}.cwasm.tmp-00ff"));
    let live = cache.path().join(format!("{digest}.sha256.tmp-0a0b"));
    std::fs::write(&stale, b"half").unwrap();
    std::fs::write(&live, b"half").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200))
        .unwrap();
    std::fs::write(cache.path().join("notes.txt"), b"mine").unwrap();

    // A start of the helpdesk alone reads (and so marks) its description,
    // its code and seal, though it maps no code, and the engine's key; it
    // lints a new catalog.
    let log = start_with_cache(&helpdesk, cache.path());
    assert!(log.contains("origin=Described"), "{log}");
    let before = names(cache.path());
    assert_eq!(before.len(), 12, "{before:?}");

    let dry = prune(&helpdesk, cache.path(), &["--dry-run"]);
    let said = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{dry:?}");
    assert!(
        said.contains("would remove 3 entries unused for 30days"),
        "{said}"
    );
    assert!(said.contains("and 1 unfinished write"), "{said}");
    // The helpdesk's code and seal, its description, the new lint report,
    // the engine's key.
    assert!(said.contains("kept 4 entries"), "{said}");
    assert!(
        said.contains("left alone 1 file or folder the cache"),
        "{said}"
    );
    assert_eq!(names(cache.path()), before);

    let done = prune(&helpdesk, cache.path(), &[]);
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "{done:?}");
    assert!(said.contains("removed 3 entries"), "{said}");
    let after = names(cache.path());
    // The helpdesk's code, seal and description, the new lint report, the
    // engine's key, the write going on and the foreign file.
    assert_eq!(after.len(), 7, "{after:?}");
    assert!(after.contains("notes.txt") && after.contains(&format!("{digest}.sha256.tmp-0a0b")));
    assert!(!after.contains(&format!("{digest}.cwasm.tmp-00ff")));

    // The helpdesk starts warm still, and its first call maps the kept
    // code (a compile would have replaced the file); the fixture's entry
    // is gone, so it is compiled again.
    let log = start_with_cache(&helpdesk, cache.path());
    assert!(log.contains("origin=Described"), "{log}");
    let code = || {
        use std::os::unix::fs::MetadataExt;
        let [name] = names(cache.path())
            .into_iter()
            .filter(|n| n.ends_with(".cwasm"))
            .collect::<Vec<_>>()
            .try_into()
            .unwrap();
        std::fs::metadata(cache.path().join(&name)).unwrap().ino()
    };
    let kept = code();
    list_tickets_with_cache(&helpdesk, cache.path());
    assert_eq!(code(), kept);
    assert!(start_with_cache(&both, cache.path()).contains("origin=Compiled"));

    // A period shorter than the day use is recorded to is refused.
    let short = prune(&helpdesk, cache.path(), &["--unused-for", "2h"]);
    assert!(!short.status.success());
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 1d"));

    // A cache others may write is not pruned (nor trusted): said, exit 1.
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = names(cache.path());
    let open = prune(&helpdesk, cache.path(), &["--unused-for", "1d"]);
    assert!(!open.status.success());
    let said = String::from_utf8_lossy(&open.stderr);
    assert!(
        said.contains("writable by its group or other users")
            && said.contains("nothing was removed from it"),
        "{said}"
    );
    assert_eq!(names(cache.path()), before);
}

#[test]
fn the_compiler_process_offers_itself_first_to_the_oom_killer_and_says_why_a_component_failed() {
    // Run through a link named as the host's `/proc/self/exe` is, so the
    // kernel names the process `exe` until it renames itself.
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("exe");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_toolhost"), &exe).unwrap();
    let mut child = std::process::Command::new(&exe)
        .arg(toolhost::sandbox::COMPILE_COMMAND)
        .args(toolhost::sandbox::compile_arguments(
            &toolhost::sandbox::EngineSettings {
                largest_memory: 64 << 20,
                wasm_stack: 1 << 20,
                fuel: false,
            },
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // It waits for the component on stdin; meanwhile its score is set and
    // it names itself for `top` and the kernel's OOM report (not after
    // `/proc/self/exe`).
    let read = |what: &str| {
        std::fs::read_to_string(format!("/proc/{}/{what}", child.id()))
            .unwrap()
            .trim()
            .to_string()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while read("oom_score_adj") != "1000" || read("comm") != "toolhost" {
        assert!(
            std::time::Instant::now() < deadline,
            "score {}, name {}",
            read("oom_score_adj"),
            read("comm")
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(out.stdout.is_empty());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.starts_with("toolhost: failed to parse WebAssembly module"),
        "{said}"
    );
}
