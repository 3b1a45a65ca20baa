//! Start-up and memory of the real binary.
//!
//! Start-up: spawn → `initialize` → first `tools/list` answered over stdio,
//! for the example catalog and for a generated catalog of 50 plugins (the
//! fixture component under 50 names), each with a cold compiled-component
//! cache (emptied before every run) and a warm one.
//!
//! Memory (RSS from /proc): idle after start-up (with its anonymous part
//! beside it), the same after a start that compiled the catalog (a cold
//! cache), after 100 000 calls (16 in flight on one stdio session),
//! and with 1 000 live Streamable HTTP sessions each holding its own
//! helpdesk instance (with PSS beside it).
//!
//! The warm start is held against the bench's own do-nothing stdio server
//! started the same way in the same run. Last, the binary's size with its
//! symbols stripped: the release binary under test and, if `just dist`
//! built it, the shipping one.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Bench;
use crate::client::{Call, Era, HttpClient};
use crate::common::{
    FAULT_RUN_ALLOW, HttpHost, Peer, anon_bytes, pss_bytes, rss_bytes, scratch_manifest,
};
use crate::http::client_runtime;
use crate::report::{Amount, Figure, Target};

pub fn run(bench: &Bench) -> Vec<Figure> {
    let runs = if bench.quick { 3 } else { 10 };
    let calls = if bench.quick { 10_000 } else { 100_000 };
    let sessions = if bench.quick { 100 } else { 1_000 };
    let scratch = bench.root.join("target/bench/footprint-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let example = scratch_manifest(&bench.root, &bench.manifest, &scratch.join("example"));
    let fifty = generated_catalog(bench, &scratch.join("fifty"), 50);
    let mut figures = Vec::new();

    // What starting any stdio server costs on this machine now: the
    // do-nothing server's spawn → first answer to `tools/list`.
    let mut null_samples: Vec<Duration> = (0..runs).map(|_| null_to_tools_list()).collect();
    let null = Figure::of(
        "start-up",
        "do-nothing stdio server: spawn → first tools/list",
        &mut null_samples,
    );
    let null_p50 = null.p50_time();
    figures.push(null);

    for (name, manifest) in [("example catalog", &example), ("50 plugins", &fifty)] {
        for warm in [false, true] {
            let mut samples: Vec<Duration> = (0..runs)
                .map(|_| {
                    if !warm {
                        let _ = std::fs::remove_dir_all(state_dir(manifest).join("cache"));
                    }
                    time_to_tools_list(bench, manifest)
                })
                .collect();
            let mut figure = Figure::of(
                "start-up",
                format!(
                    "spawn → first tools/list, {name}, {} cache",
                    if warm { "warm" } else { "cold" }
                ),
                &mut samples,
            );
            let ms = figure.p50_time().as_secs_f64() * 1e3;
            figure = match (warm, name) {
                (false, _) => figure,
                (true, "example catalog") => {
                    let times = figure.p50_time().as_secs_f64() / null_p50.as_secs_f64();
                    figure
                        .target(Target::at_most(
                            format!("≤ 8× do-nothing; is {times:.1}×"),
                            times,
                            8.0,
                        ))
                        .target(Target::at_most("≤ 10 ms (on a calm run)", ms, 10.0))
                }
                (true, _) => figure.target(Target::at_most("≤ 100 ms", ms, 100.0)),
            };
            figures.push(figure);
        }
    }

    let memory = |name: String, samples: Vec<u64>, limit_mib: Option<f64>| {
        let mut samples = samples;
        samples.sort();
        let median = samples[samples.len() / 2];
        let max = *samples.last().unwrap();
        let figure = Figure::new(
            "memory (RSS)",
            name,
            Amount::Bytes(median),
            Amount::Bytes(max),
        );
        match limit_mib {
            Some(limit) => figure.target(Target::at_most(
                format!("≤ {limit} MiB"),
                median as f64 / MIB,
                limit,
            )),
            None => figure,
        }
    };
    let repeats = if bench.quick { 1 } else { 3 };
    let (rss, anon): (Vec<u64>, Vec<u64>) = (0..runs).map(|_| idle(bench, &example)).unzip();
    figures.push(memory(
        "idle, example catalog (stdio)".into(),
        rss,
        Some(12.0),
    ));
    // Beside the target: the rest of an idle host's RSS is pages mapped
    // from the binary and the C library. How many of those a process maps
    // depends on the page cache as much as on the host (the kernel maps
    // whole cached windows and folios around each page it faults in).
    figures.push(memory(
        "idle, example catalog (stdio): anonymous (the host's own)".into(),
        anon,
        None,
    ));
    // A host that compiled its catalog (a cold cache) compiled it in
    // compiler processes, so it should hold about what a warm one does.
    let (rss, anon): (Vec<u64>, Vec<u64>) = (0..repeats)
        .map(|_| {
            let _ = std::fs::remove_dir_all(state_dir(&example).join("cache"));
            idle(bench, &example)
        })
        .unzip();
    figures.push(memory(
        "after a cold start, example catalog (stdio)".into(),
        rss,
        None,
    ));
    figures.push(memory(
        "after a cold start, example catalog (stdio): anonymous".into(),
        anon,
        None,
    ));
    figures.push(memory(
        format!("after {calls} calls (stdio, 16 in flight)"),
        (0..repeats)
            .map(|_| after_calls(bench, &example, calls))
            .collect(),
        None,
    ));
    let (rss, pss): (Vec<u64>, Vec<u64>) = (0..repeats)
        .map(|_| with_sessions(bench, &example, sessions))
        .unzip();
    figures.push(memory(
        format!("{sessions} HTTP sessions, each with a helpdesk instance"),
        rss,
        (sessions == 1_000).then_some(80.0),
    ));
    // Beside the target: each instance maps the component's data image
    // copy-on-write, and the kernel maps all of a 64 KiB window of it at
    // the first read (fault-around). Those pages are shared, in memory
    // once, but RSS counts them once per instance; PSS counts them once.
    figures.push(memory(
        format!("{sessions} HTTP sessions, each with a helpdesk instance: PSS"),
        pss,
        None,
    ));
    let dist = bench.root.join("target/dist/toolhost");
    let dist = (dist.exists() && dist != bench.binary).then_some(&dist);
    for binary in std::iter::once(&bench.binary).chain(dist) {
        figures.push(binary_size(bench, binary, &scratch));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    figures
}

const MIB: f64 = (1 << 20) as f64;

/// The bench's own do-nothing server (see `stdio::null_server`), answering
/// `tools/list` with one tool: spawn → that answer.
fn null_to_tools_list() -> Duration {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    command.arg(crate::NULL_SERVER_FLAG).env(
        crate::NULL_RESULT_ENV,
        json!({ "tools": [{ "name": "null", "inputSchema": { "type": "object" } }] }).to_string(),
    );
    let started = Instant::now();
    let mut peer = Peer::start(command);
    let listed = peer.request("tools/list", json!({}));
    let elapsed = started.elapsed();
    assert_eq!(listed["result"]["tools"][0]["name"], "null", "{listed}");
    drop(peer.stdin);
    peer.child.wait().unwrap();
    elapsed
}

/// The size of `binary` with its symbols stripped (what a package ships),
/// by binutils' `strip` into the scratch directory.
fn binary_size(bench: &Bench, binary: &Path, scratch: &Path) -> Figure {
    let stripped = scratch.join("toolhost.stripped");
    let status = std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(binary)
        .status()
        .expect("binutils' strip (Debian's binutils, which cargo's linker needs too)");
    assert!(status.success(), "strip failed on {}", binary.display());
    let bytes = std::fs::metadata(&stripped).unwrap().len();
    let name = binary
        .strip_prefix(&bench.root)
        .unwrap_or(binary)
        .display()
        .to_string();
    Figure::new(
        "binary",
        format!("{name}, stripped"),
        Amount::Bytes(bytes),
        Amount::Bytes(bytes),
    )
    .target(Target::at_most(
        "≤ 20 MB (19.1 MiB)",
        bytes as f64 / 1e6,
        20.0,
    ))
}

fn state_dir(manifest: &Path) -> PathBuf {
    manifest.parent().unwrap().join("state")
}

/// A manifest of `count` plugins, all the fixture component under other
/// names, so start-up loads and vets `count` plugins.
fn generated_catalog(bench: &Bench, dir: &Path, count: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let component = bench.root.join("target/wasm32-wasip2/plugin/fixture.wasm");
    assert!(
        component.exists(),
        "{} is missing: run `just test-plugins`",
        component.display()
    );
    let mut text = String::from("[host]\nstate_dir = \"state\"\n\n");
    for i in 0..count {
        let name = format!("gen{i:02}");
        text.push_str(&format!(
            "[[plugin]]\nname = \"{name}\"\ncomponent = {:?}\nsha256 = \"{}\"\nconfig = {{ prefix = \"{name}\" }}\n\n\
             [[plugin.tool]]\nname = \"{name}_echo_get\"\nrisk = \"read\"\n\n\
             [[plugin.tool]]\nname = \"{name}_fault_run\"\nrisk = \"read\"\n{FAULT_RUN_ALLOW}\n\n",
            component.display().to_string(),
            "0".repeat(64),
        ));
    }
    let path = dir.join("tools-manifest.toml");
    std::fs::write(&path, text).unwrap();
    bench.pin(&path);
    path
}

/// Spawn → `initialize` → the first `tools/list` answered, over stdio.
pub fn time_to_tools_list(bench: &Bench, manifest: &Path) -> Duration {
    let started = Instant::now();
    let mut peer = Peer::start(bench.host_command(manifest, None));
    let listed = peer.request("tools/list", json!({}));
    let elapsed = started.elapsed();
    assert!(
        !listed["result"]["tools"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    drop(peer.stdin);
    peer.child.wait().unwrap();
    elapsed
}

/// RSS, and its anonymous part, of a host idle after `tools/list`.
fn idle(bench: &Bench, manifest: &Path) -> (u64, u64) {
    let mut peer = Peer::start(bench.host_command(manifest, None));
    peer.request("tools/list", json!({}));
    std::thread::sleep(Duration::from_millis(500));
    let pid = peer.child.id();
    let read = (rss_bytes(pid), anon_bytes(pid));
    drop(peer.stdin);
    peer.child.wait().unwrap();
    read
}

fn after_calls(bench: &Bench, manifest: &Path, calls: usize) -> u64 {
    let mut peer = Peer::start(bench.host_command(manifest, None));
    let get = json!({ "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } });
    crate::stdio::pipelined(&mut peer, &get, calls, 16);
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_bytes(peer.child.id());
    drop(peer.stdin);
    peer.child.wait().unwrap();
    rss
}

/// Opens `count` 2025-11-25 sessions over one keep-alive connection and
/// makes one call in each, so each holds its own helpdesk instance; RSS and
/// PSS are read while all are live.
fn with_sessions(bench: &Bench, manifest: &Path, count: usize) -> (u64, u64) {
    let host = HttpHost::start_with_env(&bench.binary, manifest, &crate::ENV);
    let runtime = client_runtime();
    runtime.block_on(async {
        let call = Call::new("helpdesk_ticket_get", json!({ "key": "T-1041" }));
        let mut client = HttpClient::connect(&host.url, Era::Sessions, None).await;
        client.call(&call, true).await;
        for _ in 1..count {
            client.open_session().await;
            client.call(&call, true).await;
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    (rss_bytes(host.child.id()), pss_bytes(host.child.id()))
}
