//! The store under load: task-bound read calls over Streamable HTTP (16
//! sessions per host, each session an agent with its own task; every call
//! is one check-and-charge transaction) on SQLite and on PostgreSQL, with
//! one replica and with three, against unbound calls of the same host, and
//! once with all sessions on one task; then unbound reads while the database is
//! stopped, against the same reads with it up. Every figure is a ratio
//! against its baseline in this run; server CPU is the hosts' own (the
//! PostgreSQL server's is not counted).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::Bench;
use crate::client::{Call, Era, HttpClient};
use crate::common::postgres::Postgres;
use crate::common::{HttpHost, cpu_time, open_task_with_env, scratch_manifest};
use crate::http::{Load, client_runtime, run_clients};
use crate::report::{Figure, Target};

const SECTION: &str = "Store";
const SESSIONS: usize = 16;
const TOOL: &str = "helpdesk_ticket_get";

pub fn run(bench: &Bench) -> Vec<Figure> {
    let calls = if bench.quick { 3_000 } else { 20_000 };
    let runtime = client_runtime();
    let scratch = bench.root.join("target/bench/store-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let manifest = scratch_manifest(&bench.root, &bench.manifest, &scratch);
    let mut figures = Vec::new();

    // SQLite: unbound, then bound to a task, on one host.
    let sqlite = HttpHost::start_with_env(&bench.binary, &manifest, &crate::ENV);
    let tokens = open_tasks(bench, &manifest, &[], 3 * SESSIONS);
    let unbound = measure(&runtime, &[&sqlite], &[], calls);
    let bound_sqlite = measure(&runtime, &[&sqlite], &tokens, calls);
    drop(sqlite);
    figures.push(unbound.figure("unbound reads, SQLite host, 16 sessions"));
    let ratio = bound_sqlite.cpu_per_call().as_secs_f64() / unbound.cpu_per_call().as_secs_f64();
    figures.push(
        bound_sqlite
            .figure("task-bound reads, SQLite, 16 sessions")
            .target(Target::at_most(
                format!("CPU ≤ 1.5× unbound; is {ratio:.2}×"),
                ratio,
                1.5,
            )),
    );

    // PostgreSQL: one replica, then three.
    let pg = Postgres::start();
    let replica = |n: usize| {
        let state = scratch.join(format!("replica-{n}"));
        let mut env: Vec<(String, String)> = pg.env(&state, &format!("replica-{n}"));
        env.extend(
            crate::ENV
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        HttpHost::start_with_env(&bench.binary, &manifest, &env)
    };
    let one = replica(1);
    let tokens = open_tasks(
        bench,
        &manifest,
        &pg.env(&scratch.join("operator"), "operator"),
        3 * SESSIONS,
    );
    let bound_pg = measure(&runtime, &[&one], &tokens, calls);
    let ratio = bound_pg.cpu_per_call().as_secs_f64() / bound_sqlite.cpu_per_call().as_secs_f64();
    let rate_ratio = bound_pg.rate() / bound_sqlite.rate();
    figures.push(bound_pg.figure(format!(
        "task-bound reads, PostgreSQL, 1 replica × 16 sessions (CPU {ratio:.2}×, calls/s {rate_ratio:.2}× SQLite)"
    )));
    // Every session on one task: its charges queue on the task's row lock.
    let shared = measure(&runtime, &[&one], &tokens[..1], calls);
    let rate_ratio = shared.rate() / bound_pg.rate();
    figures.push(shared.figure(format!(
        "the same, all 16 sessions on one task (calls/s {rate_ratio:.2}× a task each)"
    )));
    let (two, three) = (replica(2), replica(3));
    let all = measure(&runtime, &[&one, &two, &three], &tokens, calls);
    let rate_ratio = all.rate() / bound_pg.rate();
    figures.push(all.figure(format!(
        "task-bound reads, PostgreSQL, 3 replicas × 16 sessions (calls/s {rate_ratio:.2}× 1 replica; 2 cores shared by all)"
    )));
    drop((two, three));

    // Unbound reads need no database: stopping it changes nothing.
    let up = measure(&runtime, &[&one], &[], calls);
    pg.stop();
    let down = measure(&runtime, &[&one], &[], calls);
    pg.resume();
    drop(one);
    let ratio = down.rate() / up.rate();
    figures.push(up.figure("unbound reads, PostgreSQL host, database up"));
    figures.push(
        down.figure("unbound reads, PostgreSQL host, database stopped")
            .target(Target::at_least(
                format!("calls/s ≥ 0.8× database up; is {ratio:.2}×"),
                ratio,
                0.8,
            )),
    );
    let _ = std::fs::remove_dir_all(&scratch);
    figures
}

/// Opens `count` tasks on the store `env` names and returns their tokens.
fn open_tasks(
    bench: &Bench,
    manifest: &std::path::Path,
    env: &[(String, String)],
    count: usize,
) -> Vec<String> {
    (0..count)
        .map(|_| {
            // Read calls need no grant, but a bound call is charged; a task
            // needs one grant all the same.
            open_task_with_env(&bench.binary, manifest, &["helpdesk_ticket_answer"], env)
        })
        .collect()
}

/// A load spread over several hosts, and their CPU.
struct Measured {
    load: Load,
    cpu: Duration,
}

impl Measured {
    fn cpu_per_call(&self) -> Duration {
        self.cpu / self.load.samples.len() as u32
    }

    fn rate(&self) -> f64 {
        self.load.samples.len() as f64 / self.load.elapsed.as_secs_f64()
    }

    fn figure(&self, name: impl Into<String>) -> Figure {
        let mut samples = self.load.samples.clone();
        Figure::of(SECTION, name, &mut samples)
            .rate(self.rate())
            .cpu(self.cpu_per_call())
    }
}

/// `SESSIONS` session clients per host, each bound to the next of
/// `tokens` in turn (none: unbound), calling until `total` calls are done
/// between them.
fn measure(
    runtime: &tokio::runtime::Runtime,
    hosts: &[&HttpHost],
    tokens: &[String],
    total: usize,
) -> Measured {
    let call = Arc::new(Call::new(TOOL, json!({ "key": "T-1041" })));
    let pids: Vec<u32> = hosts.iter().map(|h| h.child.id()).collect();
    let cpu = |pids: &[u32]| pids.iter().map(|&p| cpu_time(p)).sum::<Duration>();
    runtime.block_on(async {
        let mut clients = Vec::new();
        for (h, host) in hosts.iter().enumerate() {
            for s in 0..SESSIONS {
                let token = (!tokens.is_empty())
                    .then(|| tokens[(h * SESSIONS + s) % tokens.len()].as_str());
                let mut client = HttpClient::connect(&host.url, Era::Sessions, token).await;
                client.call(&call, true).await;
                clients.push(client);
            }
        }
        let before = cpu(&pids);
        let load = run_clients(clients, move |_| call.clone(), total, pids[0]).await;
        Measured {
            load,
            cpu: cpu(&pids) - before,
        }
    })
}
