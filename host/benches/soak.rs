//! The soak run (`just soak [SECONDS]`): the real release binary serving
//! the example catalog plus the hostile test fixture over Streamable HTTP,
//! with well-behaved sessions calling the helpdesk while hostile sessions
//! loop, hoard memory, trap, recurse, sleep and return junk, for as long as
//! asked. Reports failures of the normal calls, unexpected outcomes of the
//! hostile ones, the normal calls' latency (p50/p99, alone and under
//! attack) and the host's RSS at start and end. Exits non-zero on any
//! failure. Writes `target/bench/soak.json`.

// The report on stdout is this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{
    FAULT_RUN_ALLOW, HttpHost, Setup, micros, rss_bytes, save, scratch_manifest, summary,
};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const NORMAL_SESSIONS: usize = 4;
const HOSTILE_SESSIONS: usize = 2;
/// Each hostile fault and the code it must end with.
const FAULTS: [(&str, &str); 7] = [
    ("loop", "timeout"),
    ("memory", "out_of_memory"),
    ("trap", "plugin_trap"),
    ("recurse", "plugin_trap"),
    ("big-output", "output_too_large"),
    ("sleep", "timeout"),
    ("not-json", "invalid_output"),
];

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let seconds = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse::<u64>().expect("--seconds takes a number"))
        .unwrap_or(if args.iter().any(|a| a == "--quick") {
            10
        } else {
            60
        });
    let Setup {
        root,
        binary,
        manifest,
    } = Setup::find();
    let fixture = root.join("target/wasm32-wasip2/plugin/fixture.wasm");
    assert!(
        fixture.exists(),
        "{} is missing: run `just soak`",
        fixture.display()
    );

    let scratch = std::env::temp_dir().join(format!("toolhost-soak-{}", std::process::id()));
    let manifest = scratch_manifest(&root, &manifest, &scratch);
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str(&format!(
        "\n[[plugin]]\nname = \"fixture\"\ncomponent = {:?}\nsha256 = \"{}\"\ninstance = \"call\"\n\
         limits = {{ call_timeout_ms = 500, memory_mib = 64, output_kib = 64 }}\n\n\
         [[plugin.tool]]\nname = \"fixture_echo_get\"\nrisk = \"read\"\n\n\
         [[plugin.tool]]\nname = \"fixture_fault_run\"\nrisk = \"read\"\n{FAULT_RUN_ALLOW}\n",
        fixture.display().to_string(),
        "0".repeat(64)
    ));
    std::fs::write(&manifest, text).unwrap();
    common::pin(&binary, &manifest);

    // The crm plugin needs its secret to load; nothing here calls it.
    let host = HttpHost::start_with_env(
        &binary,
        &manifest,
        &[("TOOLHOST_SECRET_CRM_TOKEN", "soak-placeholder-token")],
    );
    let pid = host.child.id();
    let mut normal = Vec::new();
    for _ in 0..NORMAL_SESSIONS {
        normal.push(Arc::new(connect(&host.url).await));
    }
    // Calm first: the same normal sessions, with no hostile one running.
    let calm_for = Duration::from_secs(seconds.clamp(2, 20) / 2);
    let (mut calm, calm_failures) = normal_load(&normal, calm_for).await;
    assert!(calm_failures.is_empty(), "{calm_failures:?}");
    let rss_start = rss_bytes(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let mut hostile = Vec::new();
    for worker in 0..HOSTILE_SESSIONS {
        let client = connect(&host.url).await;
        let stop = stop.clone();
        hostile.push(tokio::spawn(async move {
            let (mut calls, mut unexpected) = (0u64, Vec::new());
            let mut i = worker;
            while !stop.load(Ordering::Relaxed) {
                let (fault, expected) = FAULTS[i % FAULTS.len()];
                i += 1;
                calls += 1;
                match fault_call(&client, fault).await {
                    Ok(code) if code == expected => {}
                    Ok(code) => unexpected.push(format!("{fault}: got {code}")),
                    Err(e) => unexpected.push(format!("{fault}: {e}")),
                }
            }
            (calls, unexpected)
        }));
    }
    let (mut samples, failures) = normal_load(&normal, Duration::from_secs(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut hostile_calls, mut unexpected) = (0, Vec::new());
    for worker in hostile {
        let (calls, u) = worker.await.unwrap();
        hostile_calls += calls;
        unexpected.extend(u);
    }
    // Let the host settle (freed slots decommitted, buffers returned).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_end = rss_bytes(pid);
    drop(host);
    let _ = std::fs::remove_dir_all(&scratch);

    let (calm_p50, calm_p99) = summary(&mut calm);
    let (p50, p99) = summary(&mut samples);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "| Soak, {seconds} s, {NORMAL_SESSIONS} normal and {HOSTILE_SESSIONS} hostile HTTP sessions | |"
    );
    println!("| --- | ---: |");
    println!("| normal calls | {} |", samples.len());
    println!("| normal calls failed | {} |", failures.len());
    println!(
        "| normal p50 / p99, calm | {} / {} |",
        micros(calm_p50),
        micros(calm_p99)
    );
    println!(
        "| normal p50 / p99, under attack | {} / {} |",
        micros(p50),
        micros(p99)
    );
    println!("| hostile calls | {hostile_calls} |");
    println!(
        "| hostile calls with an unexpected outcome | {} |",
        unexpected.len()
    );
    println!(
        "| host RSS start / end | {:.1} / {:.1} MiB |",
        mib(rss_start),
        mib(rss_end)
    );
    for line in failures.iter().chain(&unexpected).take(20) {
        println!("failure: {line}");
    }
    save(
        &root,
        "soak.json",
        &json!({
            "seconds": seconds,
            "normal_calls": samples.len(),
            "normal_failures": failures.len(),
            "calm_p50_us": calm_p50.as_secs_f64() * 1e6,
            "calm_p99_us": calm_p99.as_secs_f64() * 1e6,
            "p50_us": p50.as_secs_f64() * 1e6,
            "p99_us": p99.as_secs_f64() * 1e6,
            "hostile_calls": hostile_calls,
            "hostile_unexpected": unexpected.len(),
            "rss_start_bytes": rss_start,
            "rss_end_bytes": rss_end,
        }),
    );
    if !failures.is_empty() || !unexpected.is_empty() {
        std::process::exit(1);
    }
}

/// Every normal session calling in a loop for `length`: latencies and
/// failures.
async fn normal_load(normal: &[Arc<Client>], length: Duration) -> (Vec<Duration>, Vec<String>) {
    let until = Instant::now() + length;
    let workers: Vec<_> = normal
        .iter()
        .map(|client| {
            let client = client.clone();
            tokio::spawn(async move {
                let (mut samples, mut failures) = (Vec::new(), Vec::new());
                while Instant::now() < until {
                    let t = Instant::now();
                    match normal_call(&client).await {
                        Ok(()) => samples.push(t.elapsed()),
                        Err(e) => failures.push(e),
                    }
                }
                (samples, failures)
            })
        })
        .collect();
    let (mut samples, mut failures) = (Vec::new(), Vec::new());
    for worker in workers {
        let (s, f) = worker.await.unwrap();
        samples.extend(s);
        failures.extend(f);
    }
    (samples, failures)
}

async fn connect(url: &str) -> Client {
    toolhost::tls::install_process_default();
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .expect("initialize")
}

async fn normal_call(client: &Client) -> Result<(), String> {
    let Value::Object(arguments) = json!({ "key": "T-1041" }) else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("helpdesk_ticket_get").with_arguments(arguments))
        .await
        .map_err(|e| e.to_string())?;
    match result.is_error {
        Some(false) => Ok(()),
        _ => Err(format!("{:?}", result.structured_content)),
    }
}

/// The code a fault call ended with.
async fn fault_call(client: &Client, fault: &str) -> Result<String, String> {
    let Value::Object(arguments) = json!({ "fault": fault }) else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("fixture_fault_run").with_arguments(arguments))
        .await
        .map_err(|e| e.to_string())?;
    let content = result.structured_content.unwrap_or_default();
    Ok(content["code"].as_str().unwrap_or("ok").to_string())
}
