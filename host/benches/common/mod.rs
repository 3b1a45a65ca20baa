//! What the benchmark programs share: where the binary is, reading a
//! process's CPU time, and printing durations.

use std::path::PathBuf;
use std::time::Duration;

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
