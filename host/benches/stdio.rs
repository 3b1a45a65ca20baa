//! Latency of `tools/call helpdesk_ticket_get` over stdio, against the real
//! release binary (`just bench` builds it first; this program builds nothing).
//!
//! Prints a markdown table and writes `target/bench/results.json`. Figures:
//! spawn → `initialize` answered, the first call (which creates the session's
//! instance), and steady-state calls (p50/p99 latency, server CPU per call
//! from the process's own CPU time), without a task and in a session bound
//! to a task (every call then checks and charges the task in the store),
//! and with 4, 16 and 64 requests in flight on one session (calls/s, latency,
//! server CPU per call). `--quick` runs fewer calls.

// The table on stdout is this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    Peer, Row, Setup, cpu_time, micros, open_task, print_rows, save, scratch_manifest, summary,
};
use serde_json::{Value, json};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 10 };
    let calls = if quick { 500 } else { 5_000 };
    let Setup {
        root,
        binary,
        manifest,
    } = Setup::find();

    let mut startup = Vec::new();
    let mut first_call = Vec::new();
    let mut steady = Vec::new();
    let mut cpu_per_call = Vec::new();
    for _ in 0..runs {
        let run = measure(&binary, &manifest, calls, None);
        startup.push(run.startup);
        first_call.push(run.first_call);
        cpu_per_call.push(run.cpu_per_call);
        steady.extend(run.steady);
    }

    // The same calls in a task-bound session, on a store of its own so the
    // benchmark leaves no task in the operator's.
    let scratch = std::env::temp_dir().join(format!("toolhost-bench-{}", std::process::id()));
    let bound_manifest = scratch_manifest(&root, &manifest, &scratch);
    let token = open_task(&binary, &bound_manifest, &["helpdesk_ticket_close"]);
    let mut bound_steady = Vec::new();
    let mut bound_cpu = Vec::new();
    for _ in 0..runs {
        let run = measure(&binary, &bound_manifest, calls, Some(&token));
        bound_cpu.push(run.cpu_per_call);
        bound_steady.extend(run.steady);
    }
    let _ = std::fs::remove_dir_all(&scratch);

    // Several requests in flight on one stdio session: a client that does
    // not wait for each answer before sending the next request.
    let pipelined: Vec<Row> = [4, 16, 64]
        .into_iter()
        .map(|depth| measure_in_flight(&binary, &manifest, calls * runs, depth))
        .collect();

    let rows = [
        ("spawn → initialize answered", summary(&mut startup)),
        (
            "first helpdesk_ticket_get (creates the instance)",
            summary(&mut first_call),
        ),
        (
            "steady helpdesk_ticket_get, sequential",
            summary(&mut steady),
        ),
        ("server CPU per steady call", summary(&mut cpu_per_call)),
        (
            "steady helpdesk_ticket_get, task-bound (charged per call)",
            summary(&mut bound_steady),
        ),
        (
            "server CPU per steady task-bound call",
            summary(&mut bound_cpu),
        ),
    ];
    println!("| stdio, {runs} runs × {calls} calls | p50 | p99 |");
    println!("| --- | ---: | ---: |");
    for (name, (p50, p99)) in &rows {
        println!("| {name} | {} | {} |", micros(*p50), micros(*p99));
    }
    println!();
    print_rows(&format!("stdio, {} calls", calls * runs), &pipelined);
    let mut results: Vec<Value> = rows
        .iter()
        .map(|(name, (p50, p99))| {
            json!({ "name": name, "p50_us": p50.as_secs_f64() * 1e6, "p99_us": p99.as_secs_f64() * 1e6 })
        })
        .collect();
    results.extend(pipelined.iter().map(Row::json));
    save(
        &root,
        "results.json",
        &json!({ "runs": runs, "calls": calls, "results": results }),
    );
}

/// `depth` requests kept in flight: each answer is followed at once by a
/// new request.
fn measure_in_flight(binary: &Path, manifest: &Path, calls: usize, depth: usize) -> Row {
    let mut peer = Peer::spawn(binary, manifest, &[]);
    let get = json!({ "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } });
    // The session instance exists before the clock starts.
    peer.request("tools/call", get.clone());
    let mut sent_at = std::collections::HashMap::with_capacity(depth);
    let mut latencies = Vec::with_capacity(calls);
    let cpu_before = cpu_time(peer.child.id());
    let started = Instant::now();
    let mut sent = 0;
    while sent < depth.min(calls) {
        sent_at.insert(peer.send("tools/call", get.clone()), Instant::now());
        sent += 1;
    }
    while latencies.len() < calls {
        let id = peer.receive();
        let at = sent_at
            .remove(&id)
            .expect("an answer to a request in flight");
        latencies.push(at.elapsed());
        if sent < calls {
            sent_at.insert(peer.send("tools/call", get.clone()), Instant::now());
            sent += 1;
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time(peer.child.id()) - cpu_before;
    drop(peer.stdin);
    peer.child.wait().unwrap();
    let (p50, p99) = summary(&mut latencies);
    Row {
        name: format!("{depth} in flight"),
        calls_per_sec: calls as f64 / elapsed.as_secs_f64(),
        p50,
        p99,
        cpu_per_call: cpu / calls as u32,
    }
}

struct Run {
    startup: Duration,
    first_call: Duration,
    steady: Vec<Duration>,
    cpu_per_call: Duration,
}

fn measure(binary: &Path, manifest: &Path, calls: usize, token: Option<&str>) -> Run {
    let started = Instant::now();
    let env: Vec<(&str, &str)> = token
        .map(|t| ("TOOLHOST_TASK_TOKEN", t))
        .into_iter()
        .collect();
    let mut peer = Peer::spawn(binary, manifest, &env);
    let startup = started.elapsed();

    let get = json!({ "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } });
    let t = Instant::now();
    let first = peer.request("tools/call", get.clone());
    let first_call = t.elapsed();
    assert_eq!(first["result"]["isError"], false, "{first}");

    let cpu_before = cpu_time(peer.child.id());
    let mut steady = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        peer.request("tools/call", get.clone());
        steady.push(t.elapsed());
    }
    let cpu = cpu_time(peer.child.id()) - cpu_before;
    drop(peer.stdin);
    peer.child.wait().unwrap();
    Run {
        startup,
        first_call,
        steady,
        cpu_per_call: cpu / calls as u32,
    }
}
