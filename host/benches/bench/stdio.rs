//! stdio: sequential `tools/call helpdesk_ticket_get` (latency, server CPU
//! per call), the same in a task-bound session, 4/16/64 requests in flight
//! on one session, and the same client against a do-nothing server, which
//! is what the sequential latency is held against.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Peer, cpu_time, open_task, scratch_manifest};
use crate::report::{Figure, Target};
use crate::{Bench, cpu_target};

const SECTION: &str = "stdio";

pub fn run(bench: &Bench) -> Vec<Figure> {
    let (runs, calls) = if bench.quick { (3, 500) } else { (10, 5_000) };
    let mut figures = Vec::new();

    let mut host = repeat(runs, calls, || bench.host_command(&bench.manifest, None));
    // The do-nothing server answers every call with the host's own answer,
    // so the client parses the same bytes.
    let mut null = repeat(runs, calls, || {
        let mut null = Command::new(std::env::current_exe().unwrap());
        null.arg(crate::NULL_SERVER_FLAG)
            .env(crate::NULL_RESULT_ENV, host.answer.to_string());
        null
    });
    let null = Figure::of(
        SECTION,
        "do-nothing stdio server, sequential (same client)",
        &mut null.steady,
    );
    let floor = null.p50_time();

    figures.push(Figure::of(
        SECTION,
        "spawn → initialize answered (warm cache)",
        &mut host.startup,
    ));
    figures.push(Figure::of(
        SECTION,
        "first helpdesk_ticket_get (creates the session instance)",
        &mut host.first_call,
    ));
    let seq = Figure::of(SECTION, "helpdesk_ticket_get, sequential", &mut host.steady);
    let ratio = seq.p50_time().as_secs_f64() / floor.as_secs_f64();
    let seq = seq.target(Target::at_most(
        format!(
            "p50 ≤ 1.2× do-nothing ({:.1} µs); is {ratio:.2}×",
            floor.as_secs_f64() * 1e6
        ),
        ratio,
        1.2,
    ));
    figures.push(seq);
    figures.push(null);
    figures.push(
        cpu_figure("server CPU per sequential call (over runs)", &mut host.cpu).key("stdio.cpu"),
    );

    // The same on a one-worker runtime (`--workers 1`), the lower-CPU
    // choice for one stdio session.
    let mut one = repeat(runs, calls, || {
        let mut command = bench.host_command(&bench.manifest, None);
        command.args(["--workers", "1"]);
        command
    });
    figures.push(Figure::of(
        SECTION,
        "helpdesk_ticket_get, sequential, --workers 1",
        &mut one.steady,
    ));
    figures.push(cpu_figure(
        "server CPU per sequential call, --workers 1 (over runs)",
        &mut one.cpu,
    ));

    // The same calls in a task-bound session (every call checks and charges
    // the task in the store), on a store of its own.
    let scratch = std::env::temp_dir().join(format!("toolhost-bench-{}", std::process::id()));
    let bound = scratch_manifest(&bench.root, &bench.manifest, &scratch);
    let token = open_task(&bench.binary, &bound, &["helpdesk_ticket_close"]);
    let mut bound_runs = repeat(runs, calls, || bench.host_command(&bound, Some(&token)));
    let _ = std::fs::remove_dir_all(&scratch);
    figures.push(Figure::of(
        SECTION,
        "helpdesk_ticket_get, task-bound session (charged per call)",
        &mut bound_runs.steady,
    ));
    figures.push(
        cpu_figure(
            "server CPU per task-bound call (over runs)",
            &mut bound_runs.cpu,
        )
        .key("stdio.bound"),
    );

    for (depth, key) in [(4, "stdio.4"), (16, "stdio.16"), (64, "stdio.64")] {
        figures.push(in_flight(bench, calls * runs, depth).key(key));
    }
    figures
}

/// A row whose samples are each run's server CPU per call; the median is
/// also its CPU per call.
fn cpu_figure(name: &str, per_run: &mut [Duration]) -> Figure {
    let figure = Figure::of(SECTION, name, per_run);
    let p50 = figure.p50_time();
    figure.cpu(p50).target(cpu_target(p50))
}

struct Sequential {
    startup: Duration,
    first_call: Duration,
    steady: Vec<Duration>,
    cpu_per_call: Duration,
    answer: Value,
}

/// What `runs` sequential runs of `calls` calls measured together; `answer`
/// is the last run's answer to the call.
struct Runs {
    startup: Vec<Duration>,
    first_call: Vec<Duration>,
    steady: Vec<Duration>,
    cpu: Vec<Duration>,
    answer: Value,
}

fn repeat(runs: usize, calls: usize, command: impl Fn() -> Command) -> Runs {
    let mut all = Runs {
        startup: Vec::new(),
        first_call: Vec::new(),
        steady: Vec::new(),
        cpu: Vec::new(),
        answer: Value::Null,
    };
    for _ in 0..runs {
        let run = sequential(command(), calls);
        all.startup.push(run.startup);
        all.first_call.push(run.first_call);
        all.cpu.push(run.cpu_per_call);
        all.steady.extend(run.steady);
        all.answer = run.answer;
    }
    all
}

fn sequential(command: Command, calls: usize) -> Sequential {
    let started = Instant::now();
    let mut peer = Peer::start(command);
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
    Sequential {
        startup,
        first_call,
        steady,
        cpu_per_call: cpu / calls as u32,
        answer: first["result"].clone(),
    }
}

/// `depth` requests kept in flight on one session: each answer is followed
/// at once by a new request.
fn in_flight(bench: &Bench, calls: usize, depth: usize) -> Figure {
    let mut peer = Peer::start(bench.host_command(&bench.manifest, None));
    let get = json!({ "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } });
    peer.request("tools/call", get.clone());
    let cpu_before = cpu_time(peer.child.id());
    let started = Instant::now();
    let mut latencies = pipelined(&mut peer, &get, calls, depth);
    let elapsed = started.elapsed();
    let cpu = (cpu_time(peer.child.id()) - cpu_before) / calls as u32;
    drop(peer.stdin);
    peer.child.wait().unwrap();
    Figure::of(SECTION, format!("{depth} in flight"), &mut latencies)
        .rate(calls as f64 / elapsed.as_secs_f64())
        .cpu(cpu)
        .target(cpu_target(cpu))
}

/// Makes `calls` calls of `call` with `depth` kept in flight (each answer is
/// followed at once by a new request); the latency of each.
pub fn pipelined(peer: &mut Peer, call: &Value, calls: usize, depth: usize) -> Vec<Duration> {
    let mut sent_at = std::collections::HashMap::with_capacity(depth);
    let mut latencies = Vec::with_capacity(calls);
    let mut sent = 0;
    while sent < depth.min(calls) {
        sent_at.insert(peer.send("tools/call", call.clone()), Instant::now());
        sent += 1;
    }
    while latencies.len() < calls {
        let id = peer.receive();
        let at = sent_at
            .remove(&id)
            .expect("an answer to a request in flight");
        latencies.push(at.elapsed());
        if sent < calls {
            sent_at.insert(peer.send("tools/call", call.clone()), Instant::now());
            sent += 1;
        }
    }
    latencies
}

/// The do-nothing server: reads JSON-RPC lines and answers each request at
/// once with `result` (the handshake with an empty capability set), writing
/// nothing else. It parses each line as the host does, to find the id.
pub fn null_server() {
    use std::io::{BufRead, Write};
    let result: Value = serde_json::from_str(
        &std::env::var(crate::NULL_RESULT_ENV).unwrap_or_else(|_| "{}".into()),
    )
    .expect("a JSON result");
    let initialized = json!({
        "protocolVersion": "2025-11-25",
        "capabilities": { "tools": {} },
        "serverInfo": { "name": "null", "version": "0" },
    });
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(id) = message.get("id") else {
            continue;
        };
        let answer = if message["method"] == "initialize" {
            &initialized
        } else {
            &result
        };
        let reply = json!({ "jsonrpc": "2.0", "id": id, "result": answer });
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            break;
        }
    }
}
