//! Components from an OCI registry (a real one: the CNCF distribution
//! server, Debian's `docker-registry`, started per test on loopback) and
//! signatures: push, pin by tag, serve by digest, restart offline; a
//! tampered blob and a wrong digest; signers required, untrusted, removed
//! from trust; upgrades and a downgrade held against the lock; a host
//! stopped while a registry keeps it waiting.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// A registry on a free loopback port, storing in its own folder; stopped
/// when dropped.
struct Registry {
    child: Option<Child>,
    address: String,
    dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry is installed (`just services-setup`, part of `just test`)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the registry did not listen"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Registry {
            child: Some(child),
            address,
            dir,
        }
    }

    fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.address)
    }

    /// Where the registry keeps the blob with this sha256 (hex).
    fn blob(&self, sha256: &str) -> PathBuf {
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&sha256[..2])
            .join(sha256)
            .join("data")
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs `toolhost ARGS`, asserting success; its stdout.
fn run(args: &[&str]) -> String {
    let out = toolhost().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "toolhost {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Pushes `file` to `tagged`; the digest reference printed.
fn push(file: &Path, tagged: &str) -> String {
    let printed = run(&["plugin", "push", file.to_str().unwrap(), tagged]);
    let pinned = printed.trim().to_string();
    assert!(pinned.contains("@sha256:"), "{pinned}");
    pinned
}

/// A key pair in `dir`: (private, public).
fn keygen(dir: &Path, name: &str, algorithm: &str) -> (PathBuf, PathBuf) {
    let prefix = dir.join(name);
    run(&[
        "plugin",
        "keygen",
        prefix.to_str().unwrap(),
        "--algorithm",
        algorithm,
    ]);
    (prefix.with_extension("key"), prefix.with_extension("pub"))
}

fn sign(component: &str, key: &Path) {
    run(&["plugin", "sign", component, "--key", key.to_str().unwrap()]);
}

/// `entry` with its component from `reference` (no sha256 pin).
fn from_registry(mut entry: PluginEntry, reference: &str) -> PluginEntry {
    entry.component = PathBuf::from(reference);
    entry.sha256 = String::new();
    entry
}

fn boxed() -> PluginEntry {
    PluginEntry::fixture_as("box", "config = { prefix = \"box\" }")
}

/// Writes the manifest for `plugins` and `[[trust]]` (name, public key) at
/// `path`, or in a new folder.
fn write_manifest(
    path: Option<&Path>,
    plugins: Vec<PluginEntry>,
    trust: &[(&str, &Path)],
) -> Option<TestManifest> {
    let fresh = manifest(plugins);
    let mut text = std::fs::read_to_string(&fresh.path).unwrap();
    for (name, key) in trust {
        text.push_str(&format!(
            "[[trust]]\nname = \"{name}\"\nkey = {:?}\n\n",
            key.display().to_string()
        ));
    }
    match path {
        Some(path) => {
            std::fs::write(path, text).unwrap();
            None
        }
        None => {
            std::fs::write(&fresh.path, text).unwrap();
            Some(fresh)
        }
    }
}

fn vet(m: &TestManifest) -> std::process::Output {
    toolhost().arg("vet").arg(&m.path).output().unwrap()
}

/// The host's log line refusing `plugin`.
fn refusal(m: &TestManifest, plugin: &str) -> String {
    let exit = start_and_exit(m, &[]);
    refusal_line(&exit.stderr, plugin).to_string()
}

async fn sorted_names(m: &TestManifest) -> Vec<String> {
    let mut names = served_names(m).await;
    names.sort();
    names
}

#[tokio::test]
async fn a_pushed_component_is_pinned_by_tag_served_by_digest_and_restarts_offline() {
    let mut registry = Registry::start();
    let tagged = registry.reference("tools/box:1.0");
    let pushed = push(&wasm("fixture"), &tagged);
    let m = write_manifest(None, vec![from_registry(boxed(), &tagged)], &[]).unwrap();

    // A tag can move: it is refused until pinned.
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("pinned by tag only") && refused.contains("toolhost pin"),
        "{refused}"
    );
    let pinned = run(&["pin", "--manifest", m.path.to_str().unwrap()]);
    assert!(pinned.contains(&pushed), "{pinned}");
    let text = std::fs::read_to_string(&m.path).unwrap();
    assert!(
        text.contains(&format!("component = \"{pushed}\"")),
        "{text}"
    );

    assert!(vet(&m).status.success());
    assert_eq!(sorted_names(&m).await, ["box_echo_get", "box_fault_run"]);
    let digest = pushed.rsplit_once("sha256:").unwrap().1;
    let cached = m
        .path
        .parent()
        .unwrap()
        .join(".toolhost/oci/sha256")
        .join(digest);
    assert_eq!(
        std::fs::read(cached.join("component.wasm")).unwrap(),
        std::fs::read(wasm("fixture")).unwrap()
    );

    // Without the registry, the cache serves the pinned digest.
    registry.stop();
    assert_eq!(sorted_names(&m).await, ["box_echo_get", "box_fault_run"]);
    let client = stdio(&m, &[]).await;
    let result = call(&client, "box_echo_get", serde_json::json!({"text": "hi"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    client.cancel().await.unwrap();

    // A damaged cache entry is never loaded: with the registry gone, the
    // plugin is refused rather than served from it.
    let mut bytes = std::fs::read(cached.join("component.wasm")).unwrap();
    bytes[100] ^= 0x01;
    std::fs::write(cached.join("component.wasm"), bytes).unwrap();
    let refused = refusal(&m, "box");
    assert!(
        refused.contains(&pushed[..pushed.find('@').unwrap()]),
        "{refused}"
    );
}

#[test]
fn a_tampered_blob_and_a_wrong_digest_are_refused() {
    let registry = Registry::start();
    let pushed = push(&wasm("fixture"), &registry.reference("tools/box:1.0"));
    // Someone with write access to the registry's storage changes the
    // component's bytes (same length).
    let blob = registry.blob(&sha256(&wasm("fixture")));
    let mut bytes = std::fs::read(&blob).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let m = write_manifest(None, vec![from_registry(boxed(), &pushed)], &[]).unwrap();
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("altered or corrupted") && refused.contains("was not used"),
        "{refused}"
    );
    let digest = pushed.rsplit_once("sha256:").unwrap().1;
    let cached = m
        .path
        .parent()
        .unwrap()
        .join(".toolhost/oci/sha256")
        .join(digest);
    assert!(!cached.exists(), "a tampered artifact was cached");

    // A digest the registry does not hold.
    let wrong = format!(
        "{}@sha256:{}",
        &pushed[..pushed.find('@').unwrap()],
        "0".repeat(64)
    );
    let m = write_manifest(None, vec![from_registry(boxed(), &wrong)], &[]).unwrap();
    let refused = refusal(&m, "box");
    assert!(refused.contains(&"0".repeat(64)), "{refused}");

    // A sha256 pin beside the reference must match the component too.
    let other = push(&wasm("helpdesk"), &registry.reference("tools/helpdesk:1.0"));
    let mut entry = from_registry(PluginEntry::helpdesk(), &other);
    entry.sha256 = "1".repeat(64);
    let m = write_manifest(None, vec![entry], &[]).unwrap();
    let refused = refusal(&m, "helpdesk");
    assert!(refused.contains("but the manifest pins 1111"), "{refused}");
}

#[tokio::test]
async fn a_required_signer_untrusted_keys_and_a_key_removed_from_trust() {
    let mut registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (vendor, vendor_pub) = keygen(keys.path(), "vendor", "ed25519");
    let (team, team_pub) = keygen(keys.path(), "team", "p256");
    let (stranger, _) = keygen(keys.path(), "stranger", "ed25519");
    let trust = [
        ("vendor", vendor_pub.as_path()),
        ("team", team_pub.as_path()),
    ];
    let pushed = push(&wasm("fixture"), &registry.reference("tools/box:1.0"));
    let helpdesk = push(&wasm("helpdesk"), &registry.reference("tools/helpdesk:1.0"));
    let either = "signed_by = [\"vendor\", \"team\"]";
    let plugins = || {
        vec![
            from_registry(boxed(), &pushed).with(either),
            from_registry(PluginEntry::helpdesk(), &helpdesk).with(either),
        ]
    };
    let m = write_manifest(None, plugins(), &trust).unwrap();

    // Unsigned.
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("requires a signature by `vendor` or `team`")
            && refused.contains("no signature at all"),
        "{refused}"
    );
    // Signed, but by a key nobody trusts: the cache is refreshed from the
    // registry, and what it found is named.
    sign(&pushed, &stranger);
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("a signature by untrusted key sha256:"),
        "{refused}"
    );

    // The vendor signs box; vendor and team sign the helpdesk.
    sign(&pushed, &vendor);
    sign(&helpdesk, &vendor);
    sign(&helpdesk, &team);
    let out = vet(&m);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lock = std::fs::read_to_string(m.path.with_extension("lock")).unwrap();
    assert!(lock.contains("signers = [\"vendor\"]"), "{lock}");
    assert!(
        lock.contains("signers = [\n    \"team\",\n    \"vendor\",\n]")
            || lock.contains("signers = [\"team\", \"vendor\"]"),
        "{lock}"
    );
    let mut served = sorted_names(&m).await;
    served.retain(|n| n.starts_with("box_"));
    assert_eq!(served, ["box_echo_get", "box_fault_run"]);
    // The signatures were cached with the component: the required signer
    // is found without the registry.
    registry.stop();
    let mut served = sorted_names(&m).await;
    served.retain(|n| n.starts_with("box_"));
    assert_eq!(served, ["box_echo_get", "box_fault_run"]);

    // The vendor's key leaves [[trust]]: what only it signed is refused at
    // the next start; what the team signed too is still served.
    write_manifest(Some(&m.path), plugins(), &[("team", team_pub.as_path())]);
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("`vendor` (no longer in [[trust]]) or `team`")
            && refused.contains("untrusted key"),
        "{refused}"
    );
    let served = sorted_names(&m).await;
    assert!(
        served.iter().any(|n| n == "helpdesk_ticket_get"),
        "{served:?}"
    );
    assert!(!served.iter().any(|n| n.starts_with("box_")), "{served:?}");
}

#[tokio::test]
async fn a_component_file_carries_its_signatures_beside_it() {
    let keys = tempfile::tempdir().unwrap();
    let (team, team_pub) = keygen(keys.path(), "team", "p256");
    let (vendor, _) = keygen(keys.path(), "vendor", "ed25519");
    // Copies, so no signature is written beside the shared build.
    let file = keys.path().join("box.wasm");
    std::fs::copy(wasm("fixture"), &file).unwrap();
    let other = keys.path().join("other.wasm");
    std::fs::copy(wasm("helpdesk"), &other).unwrap();
    let mut entry = boxed().with("signed_by = [\"team\"]");
    entry.component = file.clone();
    let m = write_manifest(None, vec![entry], &[("team", team_pub.as_path())]).unwrap();
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("box.wasm.sig had no signature at all"),
        "{refused}"
    );

    // Another component's signature, copied beside this one, does not verify.
    sign(other.to_str().unwrap(), &team);
    std::fs::copy(
        keys.path().join("other.wasm.sig"),
        keys.path().join("box.wasm.sig"),
    )
    .unwrap();
    let refused = refusal(&m, "box");
    assert!(
        refused.contains("an invalid signature naming key"),
        "{refused}"
    );

    // The vendor's signature is valid but not the one required.
    std::fs::remove_file(keys.path().join("box.wasm.sig")).unwrap();
    sign(file.to_str().unwrap(), &vendor);
    let refused = refusal(&m, "box");
    assert!(refused.contains("untrusted key"), "{refused}");
    sign(file.to_str().unwrap(), &team);
    // A line this host cannot read (another tool's signature format) is
    // skipped; the team's signature still counts.
    let sig = keys.path().join("box.wasm.sig");
    let mut text = std::fs::read_to_string(&sig).unwrap();
    text.push_str("MEUCIQDv3oFm2cFcZ5xLx1s4sYQ0Lw==\n");
    std::fs::write(&sig, text).unwrap();
    assert!(vet(&m).status.success());
    assert_eq!(sorted_names(&m).await, ["box_echo_get", "box_fault_run"]);
}

#[tokio::test]
async fn an_upgrade_in_the_registry_is_diffed_refused_until_vetted_and_so_is_a_downgrade() {
    let registry = Registry::start();
    let keys = tempfile::tempdir().unwrap();
    let (vendor, vendor_pub) = keygen(keys.path(), "vendor", "ed25519");
    let (team, team_pub) = keygen(keys.path(), "team", "p256");
    let trust = [
        ("vendor", vendor_pub.as_path()),
        ("team", team_pub.as_path()),
    ];
    let v1 = push(&wasm("fixture"), &registry.reference("tools/box:1.0"));
    let v2_tag = registry.reference("tools/box:2.0");
    let v2 = push(&wasm("spy"), &v2_tag);
    sign(&v1, &vendor);
    sign(&v2_tag, &team);
    // One plugin, `spy`: first the fixture under that name, then the spy.
    let old = || {
        from_registry(
            PluginEntry::fixture_as("spy", "config = { prefix = \"spy\" }"),
            &v1,
        )
    };
    let new = || from_registry(PluginEntry::spy(), &v2);
    let m = write_manifest(None, vec![old()], &trust).unwrap();
    assert!(vet(&m).status.success());

    // The reviewer compares the vetted plugin with the candidate, by tag.
    let out = toolhost()
        .args([
            "plugin",
            "diff",
            "spy",
            &v2_tag,
            "--format",
            "json",
            "--manifest",
        ])
        .arg(&m.path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["new"], v2.as_str());
    let differences = report["differences"].as_array().unwrap();
    let has = |kind: &str, test: &dyn Fn(&Value) -> bool| {
        differences.iter().any(|d| d["kind"] == kind && test(d))
    };
    assert!(
        has("import", &|d| d["gained"] == true
            && d["widens"] == "network sockets"
            && d["name"]
                .as_str()
                .unwrap()
                .starts_with("wasi:sockets/tcp@")),
        "{report:#}"
    );
    assert!(has("tool_added", &|d| d["tool"] == "spy_socket_open"));
    assert!(has("signers", &|d| d["old"]
        == serde_json::json!(["vendor"])
        && d["new"] == serde_json::json!(["team"])));
    // No grant changes: the candidate is judged under the vetted grants.
    assert!(!has("grant", &|_| true), "{report:#}");
    assert!(!report["lint"].as_array().unwrap().is_empty());

    // Two registry references, for people.
    let shown = run(&[
        "plugin",
        "diff",
        &v1,
        &v2_tag,
        "--manifest",
        m.path.to_str().unwrap(),
    ]);
    assert!(
        shown.contains("[WIDENS: network sockets]") && shown.contains("~ signed by vendor -> team"),
        "{shown}"
    );

    // Upgraded in the manifest, refused with the difference until vetted.
    write_manifest(Some(&m.path), vec![new()], &trust);
    let refused = refusal(&m, "spy");
    assert!(
        refused.contains("+ import wasi:sockets/tcp@")
            && refused.contains("[WIDENS: network sockets]"),
        "{refused}"
    );
    assert!(vet(&m).status.success());
    assert!(
        sorted_names(&m)
            .await
            .contains(&"spy_socket_open".to_string())
    );

    // Back to the older, signed version: refused too until vetted again.
    write_manifest(Some(&m.path), vec![old()], &trust);
    let refused = refusal(&m, "spy");
    assert!(
        refused.contains("- import wasi:sockets/tcp@")
            && refused.contains("- tool spy_socket_open"),
        "{refused}"
    );
    assert!(vet(&m).status.success());
    assert_eq!(sorted_names(&m).await, ["spy_echo_get", "spy_fault_run"]);
}

/// Sets the modification time of `path` (a file or folder) to `age` ago.
fn age(path: &Path, age: std::time::Duration) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - age)
        .unwrap();
}

/// `toolhost cache prune` on `m`: what it printed.
fn prune(m: &TestManifest) -> String {
    run(&["cache", "prune", "--manifest", m.path.to_str().unwrap()])
}

/// A pulled artifact a load keeps reading stays; once no load has read it
/// for a month it is removed, and the next load pulls it again. Folders of
/// writes cut short go too, those of a write going on stay.
#[test]
fn pruning_removes_artifacts_no_load_read_for_a_while() {
    let registry = Registry::start();
    let pushed = push(&wasm("fixture"), &registry.reference("tools/box:1.0"));
    let m = write_manifest(None, vec![from_registry(boxed(), &pushed)], &[]).unwrap();
    assert!(start_and_exit(&m, &[]).success);
    let folder = m.path.parent().unwrap().join(".toolhost/oci/sha256");
    let entry = folder.join(pushed.rsplit_once("sha256:").unwrap().1);
    assert!(entry.join("component.wasm").is_file());
    // 30 days, and the day a mark may lag, and then some.
    let month = std::time::Duration::from_secs(33 * 24 * 60 * 60);
    let two_hours = std::time::Duration::from_secs(7200);
    // Writes cut short two hours ago (a staging folder, a signatures file
    // in the entry), one going on now, and what the cache did not write.
    let id = || uuid::Uuid::new_v4().to_string();
    let cut_short = folder.join(format!(".new-{}", id()));
    let going_on = folder.join(format!(".old-{}", id()));
    let signatures = entry.join(format!(".signatures.jsonl.{}", id()));
    std::fs::create_dir(&cut_short).unwrap();
    std::fs::create_dir(&going_on).unwrap();
    std::fs::write(&signatures, b"half").unwrap();
    age(&cut_short, two_hours);
    age(&signatures, two_hours);
    std::fs::write(folder.join("notes.txt"), b"mine").unwrap();
    std::fs::create_dir(folder.join(".new-mine")).unwrap();
    age(&folder.join(".new-mine"), two_hours);

    // Read by a load since it was last marked: kept.
    age(&entry, month);
    assert!(start_and_exit(&m, &[]).success);
    let marked = std::fs::metadata(&entry).unwrap().modified().unwrap();
    let said = prune(&m);
    let line = said
        .lines()
        .find(|l| l.starts_with("registry artifacts"))
        .unwrap();
    assert!(
        line.contains("removed 0 entries")
            && line.contains("and 2 unfinished writes")
            && line.contains("kept 1 entry")
            && line.contains("left alone 2 files or folders"),
        "{said}"
    );
    assert!(entry.is_dir() && going_on.is_dir() && folder.join(".new-mine").is_dir());
    assert!(!cut_short.exists() && !signatures.exists());
    // Sweeping the entry is not a use of it.
    assert_eq!(
        std::fs::metadata(&entry).unwrap().modified().unwrap(),
        marked
    );

    // Unread for a month: removed, and pulled again by the next load.
    age(&entry, month);
    let said = prune(&m);
    let line = said
        .lines()
        .find(|l| l.starts_with("registry artifacts"))
        .unwrap();
    assert!(line.contains("removed 1 entry"), "{said}");
    assert!(!entry.exists() && folder.join("notes.txt").is_file());
    let start = start_and_exit(&m, &[]);
    assert!(start.success, "{}", start.stderr);
    assert!(entry.join("component.wasm").is_file());
}

#[test]
fn a_host_stopped_while_it_pulls_a_component_records_its_stop() {
    // A registry that takes connections and never answers: the host's
    // start-up waits in the pull, up to its deadline.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap();
    let (accepted, asked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for connection in silent.incoming() {
            held.push(connection);
            let _ = accepted.send(());
        }
    });
    // Pinned by digest, as a host serves only those (any digest will do:
    // nothing is ever sent back).
    let reference = format!(
        "oci://{address}/tools/box:1.0@sha256:{}",
        sha256(&wasm("fixture"))
    );
    let m = write_manifest(None, vec![from_registry(boxed(), &reference)], &[]).unwrap();
    let mut host = toolhost()
        .env("TOOLHOST_LOG", "info")
        .args(["serve", "--stdio", "--manifest"])
        .arg(&m.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    asked
        .recv_timeout(Duration::from_secs(60))
        .expect("the host asks the registry");
    terminate(&host);
    // It stops at once, not when the pull gives up.
    let deadline = Instant::now() + Duration::from_secs(20);
    while host.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the host did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = host.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("stopped while loading the catalog"), "{log}");
    // The trail ends as a stopped host's does.
    let trail = crate::audit::records(&m.path.parent().unwrap().join(".toolhost"));
    let events: Vec<&str> = trail.iter().filter_map(|r| r["event"].as_str()).collect();
    assert_eq!(events.first(), Some(&"host_started"), "{events:?}");
    assert_eq!(events.last(), Some(&"host_stopped"), "{events:?}");
}
