//! The floor: what one `helpdesk_ticket_get` costs inside the host process,
//! with no transport, no MCP and no policy, through the same sandbox layer
//! the host uses (limits, epoch deadline, WASI context that grants nothing).
//! Every other figure reads as "host overhead over this floor".
//!
//! Rows: a call into a live instance (what a session instance costs per
//! call), a fresh instance from the pre-linked component (what an
//! `instance = "call"` plugin or a stateless request pays before its call),
//! and the two together. Needs the release components (`just bench` builds
//! them); prints a markdown table and writes `target/bench/floor.json`.
//! `--quick` runs fewer iterations.

// The table on stdout is this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Setup, micros, save, scratch_manifest, summary};
use serde_json::{Value, json};
use toolhost::catalog;
use toolhost::manifest::Manifest;
use toolhost::sandbox::{CallContext, EngineSettings, Sandbox};
use toolhost::store::{SqliteStore, Store};

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iterations = if quick { 2_000 } else { 20_000 };
    let Setup { root, manifest, .. } = Setup::find();
    let scratch = root.join("target/bench/floor-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let manifest = Manifest::load(&scratch_manifest(&root, &manifest, &scratch))
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

    let rows: [(&str, (Duration, Duration)); 3] = [
        ("call into a live instance", summary(&mut reused)),
        (
            "fresh instance (instantiate only)",
            summary(&mut instantiate),
        ),
        ("fresh instance + call", summary(&mut fresh)),
    ];
    println!("| floor, in-process, {iterations} iterations | p50 | p99 |");
    println!("| --- | ---: | ---: |");
    for (name, (p50, p99)) in &rows {
        println!("| {name} | {} | {} |", micros(*p50), micros(*p99));
    }
    let results: Vec<Value> = rows
        .iter()
        .map(|(name, (p50, p99))| {
            json!({ "name": name, "p50_us": p50.as_secs_f64() * 1e6, "p99_us": p99.as_secs_f64() * 1e6 })
        })
        .collect();
    save(
        &root,
        "floor.json",
        &json!({ "iterations": iterations, "results": results }),
    );
}
