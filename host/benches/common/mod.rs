//! What the benchmark programs share: where the binary is, reading a
//! process's CPU time, and printing durations.

// Each benchmark program uses a different part of this module.
#![allow(dead_code)]

pub mod postgres;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// What every benchmark runs against: the repository root, the release
/// binary (`just bench` builds it; the programs build nothing) and the
/// example catalog, pinned to the build by `just build`.
pub struct Setup {
    pub root: PathBuf,
    pub binary: PathBuf,
    pub manifest: PathBuf,
}

impl Setup {
    pub fn find() -> Setup {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let binary = root.join("target/release/toolhost");
        assert!(
            binary.exists(),
            "{} is missing: run `just bench`",
            binary.display()
        );
        Setup {
            manifest: root.join("tools-manifest.toml"),
            root,
            binary,
        }
    }
}

/// CPU time of a process so far, in nanoseconds: the sum of its threads'
/// run time from `/proc/PID/task/*/schedstat` (the scheduler's own
/// accounting; `/proc/PID/stat` counts in 10 ms ticks, too coarse for short
/// runs). A thread that exited in between is not counted; the host's
/// runtime workers, writer threads and ticker live as long as it does.
pub fn cpu_time(pid: u32) -> Duration {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) {
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(total)
}

/// A duration in microseconds, for the tables.
pub fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// The example manifest with absolute component paths and a state_dir in
/// `scratch`, so a benchmark leaves nothing in the operator's store.
pub fn scratch_manifest(root: &Path, manifest: &Path, scratch: &Path) -> PathBuf {
    std::fs::create_dir_all(scratch).unwrap();
    let text = std::fs::read_to_string(manifest).unwrap();
    let absolute = format!("component = \"{}/target/", root.display());
    let text = text.replace("component = \"target/", &absolute);
    let path = scratch.join("tools-manifest.toml");
    std::fs::write(&path, format!("[host]\nstate_dir = \"state\"\n\n{text}")).unwrap();
    path
}

/// Opens a task granting `grants` with `toolhost task open --json` and
/// returns its token.
pub fn open_task(binary: &Path, manifest: &Path, grants: &[&str]) -> String {
    open_task_with_env(binary, manifest, grants, &[])
}

/// [`open_task`] on the store that `env` names (e.g. a PostgreSQL one).
pub fn open_task_with_env(
    binary: &Path,
    manifest: &Path,
    grants: &[&str],
    env: &[(String, String)],
) -> String {
    let mut command = Command::new(binary);
    command.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    command.args([
        "task",
        "open",
        "--json",
        "--purpose",
        "benchmark",
        "--ttl",
        "1h",
    ]);
    for grant in grants {
        command.args(["--grant", grant]);
    }
    let out = command.arg("--manifest").arg(manifest).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opened: Value = serde_json::from_slice(&out.stdout).unwrap();
    opened["token"].as_str().unwrap().to_string()
}

/// Pins every component of a generated `manifest` to this build
/// (`toolhost pin`).
pub fn pin(binary: &Path, manifest: &Path) {
    let pinned = Command::new(binary)
        .args(["pin", "--manifest"])
        .arg(manifest)
        .output()
        .unwrap();
    assert!(
        pinned.status.success(),
        "{}",
        String::from_utf8_lossy(&pinned.stderr)
    );
}

/// p50 and p99 of `samples` (sorted in place).
pub fn summary(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}

/// A `toolhost serve --http` on a free loopback port, killed when dropped
/// (also when a failed call ends the benchmark).
pub struct HttpHost {
    pub child: Child,
    pub url: String,
}

impl HttpHost {
    pub fn start_with_env(binary: &Path, manifest: &Path, env: &[(&str, &str)]) -> HttpHost {
        let mut child = Command::new(binary)
            .envs(env.iter().copied())
            .args(["serve", "--http", "127.0.0.1:0", "--manifest"])
            .arg(manifest)
            .env("TOOLHOST_LOG", "warn")
            .env_remove("TOOLHOST_CACHE_DIR")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("the host prints its URL")
            .to_string();
        HttpHost { child, url }
    }
}

impl Drop for HttpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `results` to `target/bench/<file>`.
pub fn save(root: &Path, file: &str, results: &Value) {
    let out = root.join("target/bench");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join(file),
        serde_json::to_string_pretty(results).unwrap(),
    )
    .unwrap();
}

/// A host on stdio driven line by line: the benchmarks' own client.
pub struct Peer {
    pub child: Child,
    pub stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Peer {
    /// Starts `command` as a stdio MCP server and completes the handshake.
    pub fn start(mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut peer = Peer {
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            next_id: 0,
        };
        peer.request(
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": { "name": "bench", "version": "0" } }),
        );
        peer.notify("notifications/initialized");
        peer
    }

    /// Sends a request without waiting; returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        id
    }

    /// The id of the next answer, which must be a success.
    pub fn receive(&mut self) -> u64 {
        let mut reply = String::new();
        loop {
            reply.clear();
            self.stdout.read_line(&mut reply).unwrap();
            let value: Value = serde_json::from_str(&reply).expect("a JSON-RPC line");
            if let Some(id) = value["id"].as_u64() {
                assert_eq!(value["result"]["isError"], false, "{value}");
                return id;
            }
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let line = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut reply = String::new();
        loop {
            reply.clear();
            self.stdout.read_line(&mut reply).unwrap();
            let value: Value = serde_json::from_str(&reply).expect("a JSON-RPC line");
            if value["id"] == id {
                assert!(value.get("error").is_none(), "{method} failed: {value}");
                return value;
            }
        }
    }

    pub fn notify(&mut self, method: &str) {
        writeln!(
            self.stdin,
            "{}",
            json!({ "jsonrpc": "2.0", "method": method })
        )
        .unwrap();
    }
}

/// Resident memory of a process, from /proc.
pub fn rss_bytes(pid: u32) -> u64 {
    proc_kib(&format!("/proc/{pid}/status"), "VmRSS:") << 10
}

/// The part of a process's resident memory that is its own (heap, stacks,
/// written pages), from /proc: RSS without the pages mapped from files,
/// which the page cache holds once for every process that maps them.
pub fn anon_bytes(pid: u32) -> u64 {
    proc_kib(&format!("/proc/{pid}/status"), "RssAnon:") << 10
}

/// Proportional resident memory of a process, from /proc: each resident
/// page divided by the number of mappings that share it. A page mapped
/// many times (a component's data image, copy-on-write in every
/// instance's memory) counts once here but once per mapping in RSS.
pub fn pss_bytes(pid: u32) -> u64 {
    proc_kib(&format!("/proc/{pid}/smaps_rollup"), "Pss:") << 10
}

/// The KiB figure on the line of `file` that starts with `key`.
fn proc_kib(file: &str, key: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {file}"))
}

/// What the benches' manifests accept of the test fixture's catch-all
/// fault tool (see docs/lint.md).
pub const FAULT_RUN_ALLOW: &str = "lint_allow = { name-vague-verb = \"test fixture: runs the fault its argument names\", action-switch = \"test fixture: one tool for every fault, reads and writes alike\" }";
