//! The floor: what one `helpdesk_ticket_get` costs inside one process, with
//! no transport, no MCP and no policy, through the same sandbox layer the
//! host uses (limits, epoch deadline, a WASI context that grants nothing):
//! a call into a live instance, a fresh instance from the pre-linked
//! component, and the two together. Every other figure reads as "host
//! overhead over this floor".

use std::sync::Arc;
use std::time::Instant;

use toolhost::catalog;
use toolhost::manifest::Manifest;
use toolhost::sandbox::{CallContext, EngineSettings, Sandbox};
use toolhost::store::{SqliteStore, Store};

use crate::Bench;
use crate::common::scratch_manifest;
use crate::report::{Figure, Target};

const SECTION: &str = "floor, in-process";

pub fn run(bench: &Bench) -> Vec<Figure> {
    let iterations = if bench.quick { 2_000 } else { 20_000 };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(measure(bench, iterations))
}

async fn measure(bench: &Bench, iterations: usize) -> Vec<Figure> {
    let scratch = bench.root.join("target/bench/floor-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let manifest = Manifest::load(&scratch_manifest(&bench.root, &bench.manifest, &scratch))
        .expect("the example manifest loads");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&manifest.state_dir).expect("a scratch store"));
    let sandbox = Sandbox::new(None, EngineSettings::of(&manifest)).expect("the sandbox engine");
    let network = toolhost::gate::Network::closed();
    let catalog = catalog::load(&manifest, &sandbox, &store, &network).await;
    let tool = catalog
        .tool("helpdesk_ticket_get")
        .expect("the helpdesk is in the catalog (run `just build` to pin it)");
    let prepared = &catalog.plugins[tool.plugin].prepared;
    let arguments = r#"{"key":"T-1041"}"#;
    let context = CallContext {
        session_id: "bench".into(),
        task_id: None,
        call_id: "bench".into(),
    };

    let mut live = prepared.instantiate().await.unwrap();
    let mut reused = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        let out = live.call(tool.name.as_str(), arguments, &context).await;
        reused.push(t.elapsed());
        assert!(matches!(out, Ok(Ok(_))), "the call succeeds");
    }
    let mut instantiate = Vec::with_capacity(iterations);
    let mut fresh = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        let mut instance = prepared.instantiate().await.unwrap();
        instantiate.push(t.elapsed());
        let out = instance.call(tool.name.as_str(), arguments, &context).await;
        fresh.push(t.elapsed());
        assert!(matches!(out, Ok(Ok(_))), "the call succeeds");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let mut observe = metrics_per_call(iterations);
    let live = Figure::of(SECTION, "call into a live instance", &mut reused).key("floor.live");
    let metrics = Figure::of(SECTION, "metrics: counting one read call", &mut observe);
    let share = metrics.p50_time().as_secs_f64() / live.p50_time().as_secs_f64();
    // Held against the smallest thing a call does, the guest call itself
    // (a served call costs tens of times more than this floor).
    let metrics = metrics.target(Target::at_most(
        format!(
            "metrics ≤ 10% of a live instance call ({:.1}%)",
            share * 100.0
        ),
        share,
        0.10,
    ));
    vec![
        live,
        metrics,
        Figure::of(
            SECTION,
            "fresh instance (instantiate only)",
            &mut instantiate,
        ),
        Figure::of(SECTION, "fresh instance + call", &mut fresh),
    ]
}

/// What the metrics add to each call: counting the call's outcome record
/// (a counter and a histogram, found by labels). Timed per batch of 100, as
/// one is below the clock's resolution.
fn metrics_per_call(iterations: usize) -> Vec<std::time::Duration> {
    use toolhost::audit::{CallRecord, Event};
    let metrics = toolhost::metrics::Metrics::new();
    let event = Event::ToolCall(CallRecord {
        call: "bench".into(),
        session: "bench".into(),
        transport: "stdio".into(),
        tool: "helpdesk_ticket_get".into(),
        risk: Some("read".into()),
        task: None,
        arguments: serde_json::json!({ "key": "T-1041" }),
        arguments_sha256: String::new(),
        plugin: Some("helpdesk".into()),
        plugin_sha256: None,
        outcome: Some("ok".into()),
        retryable: None,
        duration_us: Some(40),
        grant: None,
        outcome_by_plugin: false,
    });
    const BATCH: u32 = 100;
    (0..iterations / 10)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..BATCH {
                metrics.observe(std::hint::black_box(&event));
            }
            t.elapsed() / BATCH
        })
        .collect()
}
