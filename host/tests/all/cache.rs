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

#[test]
fn a_restart_loads_compiled_components_from_the_cache() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let cold = start_once(&m);
    assert_eq!(cold.matches("origin=Compiled").count(), 2, "{cold}");
    let warm = start_once(&m);
    assert_eq!(warm.matches("origin=Cache").count(), 2, "{warm}");

    let dir = m.path.parent().unwrap().join(".toolhost/cache/components");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 4, "code and seal per component: {entries:?}");
    for entry in entries {
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", entry.display());
    }
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

    let log = start_once(&m);
    assert!(log.contains("does not match its recorded digest"), "{log}");
    assert!(log.contains("origin=Compiled"), "{log}");
    // The entry was rewritten, so the next start uses it again.
    assert!(start_once(&m).contains("origin=Cache"));
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
