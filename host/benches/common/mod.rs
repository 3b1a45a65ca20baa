//! What the benchmark programs share: where the binary is, reading a
//! process's CPU time, and printing durations.

// Each benchmark program uses a different part of this module.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

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

/// User + system CPU time of a process, from /proc (clock ticks of 10 ms).
pub fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name, which is in parentheses and may
    // contain spaces.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
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
    let mut command = Command::new(binary);
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

/// p50 and p99 of `samples` (sorted in place).
pub fn summary(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.99))
}
