//! `just bench`: the benchmark of the real `toolhost` binary, which this
//! program starts and drives with its own clients; it builds nothing
//! (`just bench` runs `just build` first).
//!
//! Sections, in order: the in-process floor, stdio, Streamable HTTP (both
//! protocol eras, and normal calls while another session's plugin spins),
//! the store (task-bound calls on SQLite and PostgreSQL, one replica and
//! three), the audit trail's cost, start-up and memory, and the guest
//! languages (Rust, Python, JavaScript) side by side. Prints one markdown table,
//! each figure as median and p99 over repeated runs and, where the speed
//! issue sets one, its target, met or missed by how much; writes the same to
//! `target/bench/results.json` with the machine it ran on.
//!
//! `--quick` runs fewer of everything; `--only floor,stdio,http,store,audit,footprint,languages`
//! runs some sections; `--binary PATH` measures another build of the host
//! than target/release/toolhost (e.g. `just dist`'s target/dist/toolhost;
//! relative to the repository).

// The table on stdout is this program's output.
#![allow(clippy::print_stdout)]

#[path = "../common/mod.rs"]
mod common;

mod audit;
mod client;
mod floor;
mod footprint;
mod http;
mod polyglot;
mod ratios;
mod report;
mod stdio;
mod store;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use report::{Figure, Target};

/// The demo upstreams' secrets, so the crm and billing plugins load like the
/// others (only the languages section calls them, with upstreams of its own).
pub const ENV: [(&str, &str); 2] = [
    ("TOOLHOST_SECRET_CRM_TOKEN", "benchmark-token-not-secret"),
    (
        "TOOLHOST_SECRET_BILLING_TOKEN",
        "benchmark-token-not-secret",
    ),
];

/// Run as the do-nothing stdio server (see [`stdio::null_server`]).
pub const NULL_SERVER_FLAG: &str = "--null-server";
/// The result the do-nothing server answers every call with.
pub const NULL_RESULT_ENV: &str = "TOOLHOST_BENCH_NULL_RESULT";

/// The target for the server's CPU per trivial read call.
pub const CPU_TARGET: Duration = Duration::from_micros(30);

pub fn cpu_target(per_call: Duration) -> Target {
    Target::at_most(
        "CPU ≤ 30 µs",
        per_call.as_secs_f64(),
        CPU_TARGET.as_secs_f64(),
    )
}

/// What every section runs against.
pub struct Bench {
    pub root: PathBuf,
    pub binary: PathBuf,
    pub manifest: PathBuf,
    pub quick: bool,
}

impl Bench {
    /// `toolhost serve --stdio` of `manifest`, quiet, with the demo secret
    /// and, given a token, bound to its task.
    pub fn host_command(&self, manifest: &Path, token: Option<&str>) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .args(["serve", "--stdio", "--manifest"])
            .arg(manifest)
            .env("TOOLHOST_LOG", "warn")
            // Each manifest's own cache, so cold means cold.
            .env_remove("TOOLHOST_CACHE_DIR")
            .envs(ENV);
        if let Some(token) = token {
            command.env("TOOLHOST_TASK_TOKEN", token);
        }
        command
    }

    /// Pins every component of a generated `manifest` to this build.
    pub fn pin(&self, manifest: &Path) {
        common::pin(&self.binary, manifest);
    }
}

/// A section of the benchmark: its figures, in table order.
type Section = fn(&Bench) -> Vec<Figure>;

const SECTIONS: [(&str, Section); 7] = [
    ("floor", floor::run),
    ("stdio", stdio::run),
    ("http", http::run),
    ("store", store::run),
    ("audit", audit::run),
    ("footprint", footprint::run),
    ("languages", polyglot::run),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == NULL_SERVER_FLAG) {
        stdio::null_server();
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<Vec<String>> = args.iter().position(|a| a == "--only").map(|i| {
        args.get(i + 1)
            .expect("--only takes a list of sections")
            .split(',')
            .map(str::to_string)
            .collect()
    });
    if let Some(only) = &only {
        for name in only {
            assert!(
                SECTIONS.iter().any(|(s, _)| s == name),
                "unknown section `{name}`: the sections are floor, stdio, http, store, audit, footprint, languages"
            );
        }
    }
    let common::Setup {
        root,
        mut binary,
        manifest,
    } = common::Setup::find();
    // `--binary PATH` measures another build of the host (e.g. `just dist`'s
    // target/dist/toolhost) with everything else the same.
    if let Some(i) = args.iter().position(|a| a == "--binary") {
        let path = args
            .get(i + 1)
            .expect("--binary takes the host binary's path");
        // Relative to the repository, like every path `just` passes.
        binary = root.join(path);
        assert!(binary.exists(), "{} is missing", binary.display());
    }
    let bench = Bench {
        root,
        binary,
        manifest,
        quick,
    };
    let mut figures = Vec::new();
    for (name, section) in SECTIONS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|s| s == name)) {
            continue;
        }
        eprintln!("bench: {name}…");
        figures.extend(section(&bench));
    }
    ratios::apply(&mut figures);
    println!("{}", report::table(&figures));
    common::save(
        &bench.root,
        "results.json",
        &report::results(&figures, quick, &bench.binary),
    );
}
