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
use crate::report::Figure;

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
    vec![
        Figure::of(SECTION, "call into a live instance", &mut reused),
        Figure::of(
            SECTION,
            "fresh instance (instantiate only)",
            &mut instantiate,
        ),
        Figure::of(SECTION, "fresh instance + call", &mut fresh),
    ]
}
