//! Streamable HTTP: 1/4/16/64 concurrent clients, each on its own keep-alive
//! connection, in both protocol eras (2025-11-25 sessions, 2026-07-28
//! stateless requests): calls/s, latency p50/p99 and server CPU per call.
//! Then the latency of normal sessions while another session's plugin spins
//! to its deadline, against the same sessions calm.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::client::{Call, Era, HttpClient};
use crate::common::{FAULT_RUN_ALLOW, HttpHost, cpu_time, scratch_manifest};
use crate::report::{Figure, Target};
use crate::{Bench, cpu_target};

const SECTION: &str = "Streamable HTTP";

/// Calls/s with 16 sessions in the last full run before the footprint
/// issue (docs/performance-before.md), which asks for twice as many. That run
/// was on another day, so read the verdict with the machine's drift in
/// mind.
const BEFORE_16_SESSIONS: u32 = 12_493;

pub fn run(bench: &Bench) -> Vec<Figure> {
    let calls = if bench.quick { 4_000 } else { 40_000 };
    let runtime = client_runtime();
    let host = HttpHost::start_with_env(&bench.binary, &bench.manifest, &crate::ENV);
    let mut figures = Vec::new();
    for era in [Era::Sessions, Era::Stateless] {
        for clients in [1, 4, 16, 64] {
            let load = runtime.block_on(load(&host, era, clients, calls));
            let cpu = (cpu_time(host.child.id()) - load.cpu_before) / load.samples.len() as u32;
            let mut samples = load.samples;
            let rate = samples.len() as f64 / load.elapsed.as_secs_f64();
            let mut figure = Figure::of(
                SECTION,
                format!("{}, {clients} concurrent", era.label()),
                &mut samples,
            )
            .rate(rate)
            .cpu(cpu);
            figure = if clients >= 16 {
                figure.target(Target::at_least("≥ 25 000 calls/s", rate, 25_000.0))
            } else {
                figure.target(cpu_target(cpu))
            };
            // Ratios find the row by its era and load.
            let era_name = match era {
                Era::Sessions => "sessions",
                Era::Stateless => "stateless",
            };
            figure = figure.key(format!("http.{era_name}.{clients}"));
            if era == Era::Sessions && clients == 16 {
                figure = figure.target(Target::at_least(
                    format!(
                        "≥ 2× the {BEFORE_16_SESSIONS} calls/s before the footprint issue (another run)"
                    ),
                    rate,
                    2.0 * BEFORE_16_SESSIONS as f64,
                ));
            }
            figures.push(figure);
        }
    }
    drop(host);
    figures.extend(spin(bench, &runtime));
    figures
}

/// A runtime for the clients: one thread, so the client takes at most one
/// of the two cores and never wakes another thread.
pub fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

pub struct Load {
    pub samples: Vec<Duration>,
    pub elapsed: Duration,
    /// The host's CPU time when the clock started (the caller reads it again
    /// at the end: it knows the pid).
    pub cpu_before: Duration,
}

/// `clients` clients calling `helpdesk_ticket_get` until `total` calls are
/// done between them. One warm-up call each creates its session instance
/// before the clock starts.
pub async fn load(host: &HttpHost, era: Era, clients: usize, total: usize) -> Load {
    let call = Arc::new(Call::new("helpdesk_ticket_get", json!({ "key": "T-1041" })));
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut client = HttpClient::connect(&host.url, era, None).await;
        client.call(&call, true).await;
        connected.push(client);
    }
    run_clients(connected, move |_| call.clone(), total, host.child.id()).await
}

/// Runs `clients` until `total` calls are done between them; the `n`th
/// call of the run is `call(n)`.
pub async fn run_clients<F>(clients: Vec<HttpClient>, call: F, total: usize, pid: u32) -> Load
where
    F: Fn(usize) -> Arc<Call> + Clone + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = cpu_time(pid);
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|mut client| {
            let next = next.clone();
            let call = call.clone();
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(total);
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let call = call(n);
                    let t = Instant::now();
                    client.call(&call, true).await;
                    samples.push(t.elapsed());
                }
                samples
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(total);
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    Load {
        samples,
        elapsed: started.elapsed(),
        cpu_before,
    }
}

/// Four normal sessions calling the helpdesk, calm and then while one more
/// session calls a plugin that spins until its deadline (the fixture's
/// `loop` fault, 500 ms), over and over.
fn spin(bench: &Bench, runtime: &tokio::runtime::Runtime) -> Vec<Figure> {
    let calls = if bench.quick { 4_000 } else { 40_000 };
    let scratch = bench.root.join("target/bench/spin-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let manifest = scratch_manifest(&bench.root, &bench.manifest, &scratch);
    let fixture = bench.root.join("target/wasm32-wasip2/plugin/fixture.wasm");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&format!(
        "\n[[plugin]]\nname = \"fixture\"\ncomponent = {:?}\nsha256 = \"{}\"\ninstance = \"call\"\n\
         limits = {{ call_timeout_ms = 500 }}\n\n\
         [[plugin.tool]]\nname = \"fixture_echo_get\"\nrisk = \"read\"\n\n\
         [[plugin.tool]]\nname = \"fixture_fault_run\"\nrisk = \"read\"\n{FAULT_RUN_ALLOW}\n",
        fixture.display().to_string(),
        "0".repeat(64)
    ));
    std::fs::write(&manifest, text).unwrap();
    bench.pin(&manifest);
    let host = HttpHost::start_with_env(&bench.binary, &manifest, &crate::ENV);

    let calm = runtime.block_on(load(&host, Era::Sessions, 4, calls));
    let spinning = Arc::new(AtomicBool::new(true));
    let spins = Arc::new(AtomicUsize::new(0));
    let attacker = {
        let (url, spinning, spins) = (host.url.clone(), spinning.clone(), spins.clone());
        runtime.spawn(async move {
            let fault = Call::new("fixture_fault_run", json!({ "fault": "loop" }));
            let mut client = HttpClient::connect(&url, Era::Sessions, None).await;
            while spinning.load(Ordering::Relaxed) {
                let answer = client.call(&fault, false).await;
                assert!(
                    crate::client::contains(&answer, br#""code":"timeout""#),
                    "{}",
                    String::from_utf8_lossy(&answer)
                );
                spins.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let attacked = runtime.block_on(async {
        // The spinning call is under way before the clock starts.
        tokio::time::sleep(Duration::from_millis(50)).await;
        load(&host, Era::Sessions, 4, calls).await
    });
    spinning.store(false, Ordering::Relaxed);
    runtime.block_on(attacker).unwrap();
    drop(host);
    let _ = std::fs::remove_dir_all(&scratch);

    let mut calm_samples = calm.samples;
    let calm_figure = Figure::of(SECTION, "4 sessions, calm", &mut calm_samples)
        .rate(calm_samples.len() as f64 / calm.elapsed.as_secs_f64());
    let mut attacked_samples = attacked.samples;
    let rate = attacked_samples.len() as f64 / attacked.elapsed.as_secs_f64();
    let attacked_figure = Figure::of(
        SECTION,
        format!(
            "4 sessions, while a 5th spins to its deadline ({} spins)",
            spins.load(Ordering::Relaxed)
        ),
        &mut attacked_samples,
    )
    .rate(rate);
    let ratio = attacked_figure.p99_time().as_secs_f64() / calm_figure.p99_time().as_secs_f64();
    let attacked_figure = attacked_figure.target(Target::at_most(
        format!("p99 ≤ 2× calm; is {ratio:.2}×"),
        ratio,
        2.0,
    ));
    vec![calm_figure, attacked_figure]
}
