//! Throughput and latency of `tools/call helpdesk_ticket_get` over
//! Streamable HTTP, against the real release binary (`just bench` builds it
//! first; this program builds nothing).
//!
//! For 1, 4, 16 and 64 concurrent clients, each on its own keep-alive
//! connection, in both protocol eras (2025-11-25 sessions and stateless
//! 2026-07-28 requests): calls per second, latency p50/p99, and server CPU
//! per call from the host process's own CPU time. The clients are rmcp's, so
//! latency includes a client that parses what it receives; CPU per call is
//! the server's alone. Prints a markdown table and writes
//! `target/bench/http.json`. `--quick` runs fewer calls.

// The table on stdout is this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::time::Instant;

use common::{HttpHost, Row, Setup, cpu_time, print_rows, save};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const CONCURRENCY: [usize; 4] = [1, 4, 16, 64];

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let calls_per_level = if quick { 2_000 } else { 20_000 };
    let Setup {
        root,
        binary,
        manifest,
    } = Setup::find();

    let host = HttpHost::start(&binary, &manifest);
    let url = host.url.clone();

    let mut rows = Vec::new();
    for stateless in [false, true] {
        for clients in CONCURRENCY {
            let row = level(&url, host.child.id(), clients, calls_per_level, stateless).await;
            rows.push(row);
        }
    }
    drop(host);

    print_rows(
        &format!("Streamable HTTP, {calls_per_level} calls per row"),
        &rows,
    );
    let results: Vec<Value> = rows.iter().map(Row::json).collect();
    save(
        &root,
        "http.json",
        &json!({ "calls_per_row": calls_per_level, "results": results }),
    );
}

async fn connect(url: &str, stateless: bool) -> Client {
    let transport = StreamableHttpClientTransport::from_uri(url.to_string());
    if stateless {
        ().serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover")
    } else {
        ().serve(transport).await.expect("initialize")
    }
}

/// `clients` clients, each calling in a loop until `total` calls are done.
async fn level(url: &str, pid: u32, clients: usize, total: usize, stateless: bool) -> Row {
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(connect(url, stateless).await);
    }
    // One warm-up call per client creates its session instance.
    for client in &connected {
        call(client).await;
    }
    let per_client = total / clients;
    let cpu_before = cpu_time(pid);
    let started = Instant::now();
    let tasks: Vec<_> = connected
        .into_iter()
        .map(|client| {
            tokio::spawn(async move {
                let mut samples = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    let t = Instant::now();
                    call(&client).await;
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
    samples.sort();
    let done = samples.len();
    let era = if stateless {
        "2026-07-28 stateless"
    } else {
        "2025-11-25 sessions"
    };
    Row {
        name: format!("{era}, {clients} concurrent"),
        calls_per_sec: done as f64 / elapsed.as_secs_f64(),
        p50: samples[done / 2],
        p99: samples[(done * 99 / 100).min(done - 1)],
        cpu_per_call: cpu / done as u32,
    }
}

async fn call(client: &Client) {
    let Value::Object(arguments) = json!({ "key": "T-1041" }) else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("helpdesk_ticket_get").with_arguments(arguments))
        .await
        .expect("tools/call");
    assert_eq!(result.is_error, Some(false), "{result:?}");
}
