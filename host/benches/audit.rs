//! What the audit trail costs a write call, against the real release binary
//! (`just bench` builds it first; this program builds nothing).
//!
//! A granted write (`notes_note_save`) is on disk in the trail twice before
//! its result returns: its start (before the plugin runs) and its outcome,
//! each fsynced; concurrent calls share fsyncs (group commit). Reads are
//! written without waiting. This measures granted write calls/s and read
//! calls/s at 1 and 16 concurrent Streamable HTTP sessions with the state
//! directory (trail and store) on the disk and on a tmpfs (`/dev/shm`),
//! where fsync costs nothing: the difference is the price of durability.
//! Prints a markdown table and writes `target/bench/audit.json`.
//! `--quick` runs fewer calls.

// The table on stdout is this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::{
    HttpHost, Row, Setup, cpu_time, open_task, print_rows, save, scratch_manifest, summary,
};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let calls = if quick { 300 } else { 3_000 };
    let Setup {
        root,
        binary,
        manifest,
    } = Setup::find();
    let places = [
        ("disk", root.join("target/bench/audit-scratch")),
        (
            "tmpfs",
            PathBuf::from(format!("/dev/shm/toolhost-bench-{}", std::process::id())),
        ),
    ];
    let mut rows = Vec::new();
    for (place, scratch) in &places {
        if *place == "tmpfs" && !Path::new("/dev/shm").is_dir() {
            println!("(no /dev/shm: tmpfs rows skipped)");
            continue;
        }
        let _ = std::fs::remove_dir_all(scratch);
        let scratch_manifest = scratch_manifest(&root, &manifest, scratch);
        let token = open_task(&binary, &scratch_manifest, &["notes_note_save"]);
        let host = HttpHost::start(&binary, &scratch_manifest);
        for clients in [1, 16] {
            for write in [true, false] {
                let kind = if write { "granted writes" } else { "reads" };
                let mut row =
                    level(&host.url, &token, host.child.id(), clients, calls, write).await;
                row.name = format!("{kind}, {clients} concurrent, state on {place}");
                rows.push(row);
            }
        }
        drop(host);
        let _ = std::fs::remove_dir_all(scratch);
    }

    print_rows(&format!("audit trail, {calls} calls per row"), &rows);
    let results: Vec<Value> = rows.iter().map(Row::json).collect();
    save(
        &root,
        "audit.json",
        &json!({ "calls_per_row": calls, "results": results }),
    );
}

async fn connect(url: &str, token: &str) -> Client {
    let config = StreamableHttpClientTransportConfig::with_uri(url.to_string())
        .auth_header(token.to_string());
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize")
}

/// `clients` sessions calling until `total` calls are done.
async fn level(url: &str, token: &str, pid: u32, clients: usize, total: usize, write: bool) -> Row {
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(connect(url, token).await);
    }
    let next = Arc::new(AtomicUsize::new(0));
    let cpu_before = cpu_time(pid);
    let started = Instant::now();
    let tasks: Vec<_> = connected
        .into_iter()
        .map(|client| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    if n >= total {
                        break;
                    }
                    let t = Instant::now();
                    call(&client, clients, n, write).await;
                    samples.push(t.elapsed());
                }
                let _ = client.cancel().await;
                samples
            })
        })
        .collect();
    let mut samples = Vec::with_capacity(total);
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time(pid) - cpu_before;
    let done = samples.len();
    let (p50, p99) = summary(&mut samples);
    Row {
        name: String::new(),
        calls_per_sec: done as f64 / elapsed.as_secs_f64(),
        p50,
        p99,
        cpu_per_call: cpu / done as u32,
    }
}

/// The `n`th call of the row with `clients` sessions: each write creates a
/// note of its own; reads get the first note of the one-session row.
async fn call(client: &Client, clients: usize, n: usize, write: bool) {
    let (tool, arguments) = if write {
        (
            "notes_note_save",
            json!({ "slug": format!("bench-{clients}-{n}"), "title": "Bench", "body": "A note.", "tags": [] }),
        )
    } else {
        ("notes_note_get", json!({ "slug": "bench-1-0" }))
    };
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{tool}: {result:?}");
}
