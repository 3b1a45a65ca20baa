//! Start-up and memory of the real release binary (`just bench` builds it;
//! this program builds nothing).
//!
//! Start-up: spawn → `initialize` → first `tools/list` answered over stdio,
//! for the example catalog and for a generated catalog of 50 plugins (the
//! fixture component under 50 names), each with a cold compiled-component
//! cache (emptied before every run) and a warm one.
//!
//! Memory (RSS from /proc): idle after start-up, after 100 000 calls (16 in
//! flight on one stdio session), and with 1 000 live Streamable HTTP
//! sessions each holding its own helpdesk instance.
//!
//! Prints markdown tables and writes `target/bench/footprint.json`.
//! `--quick` runs fewer of everything.

// The tables on stdout are this program's output.
#![allow(clippy::print_stdout)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{FAULT_RUN_ALLOW, HttpHost, Peer, Setup, rss_bytes, save, scratch_manifest, summary};
use serde_json::{Value, json};

/// The demo CRM's secret, so the crm plugin loads like the others.
const ENV: [(&str, &str); 1] = [("TOOLHOST_SECRET_CRM_TOKEN", "benchmark-token-not-secret")];

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let runs = if quick { 3 } else { 10 };
    let calls = if quick { 10_000 } else { 100_000 };
    let sessions = if quick { 100 } else { 1_000 };
    let Setup {
        root,
        binary,
        manifest,
    } = Setup::find();
    let scratch = root.join("target/bench/footprint-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let example = scratch_manifest(&root, &manifest, &scratch.join("example"));
    let fifty = generated_catalog(&root, &scratch.join("fifty"), 50);

    let mut startup = Vec::new();
    for (name, manifest) in [("example catalog", &example), ("50 plugins", &fifty)] {
        for warm in [false, true] {
            let mut samples: Vec<Duration> = (0..runs)
                .map(|_| {
                    if !warm {
                        let _ = std::fs::remove_dir_all(state_dir(manifest).join("cache"));
                    }
                    time_to_tools_list(&binary, manifest)
                })
                .collect();
            let (p50, p99) = summary(&mut samples);
            startup.push((
                format!("{name}, {} cache", if warm { "warm" } else { "cold" }),
                p50,
                p99,
            ));
        }
    }

    println!("| start-up: spawn → first tools/list | p50 | p99 |");
    println!("| --- | ---: | ---: |");
    for (name, p50, p99) in &startup {
        println!("| {name} | {} | {} |", millis(*p50), millis(*p99));
    }
    println!();

    let memory = [
        (
            "idle, example catalog (stdio)".to_string(),
            idle(&binary, &example),
        ),
        (
            format!("after {calls} calls (stdio, 16 in flight)"),
            after_calls(&binary, &example, calls),
        ),
        (
            format!("{sessions} HTTP sessions, each with a helpdesk instance"),
            with_sessions(&binary, &example, sessions),
        ),
    ];
    println!("| memory | RSS |");
    println!("| --- | ---: |");
    for (name, rss) in &memory {
        println!("| {name} | {:.1} MiB |", *rss as f64 / (1 << 20) as f64);
    }
    let _ = std::fs::remove_dir_all(&scratch);

    save(
        &root,
        "footprint.json",
        &json!({
            "runs": runs,
            "startup": startup.iter().map(|(name, p50, p99)| json!({
                "name": name,
                "p50_ms": p50.as_secs_f64() * 1e3,
                "p99_ms": p99.as_secs_f64() * 1e3,
            })).collect::<Vec<Value>>(),
            "memory": memory.iter().map(|(name, rss)| json!({
                "name": name,
                "rss_bytes": rss,
            })).collect::<Vec<Value>>(),
        }),
    );
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn state_dir(manifest: &Path) -> PathBuf {
    manifest.parent().unwrap().join("state")
}

/// A manifest of `count` plugins, all the fixture component under other
/// names, so start-up compiles and vets `count` plugins.
fn generated_catalog(root: &Path, dir: &Path, count: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let component = root.join("target/wasm32-wasip2/release/fixture.wasm");
    let bytes = std::fs::read(&component).expect("the fixture component (`just plugins`)");
    let sha256 = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    let mut text = String::from("[host]\nstate_dir = \"state\"\n\n");
    for i in 0..count {
        let name = format!("gen{i:02}");
        text.push_str(&format!(
            "[[plugin]]\nname = \"{name}\"\ncomponent = \"{}\"\nsha256 = \"{sha256}\"\nconfig = {{ prefix = \"{name}\" }}\n\n\
             [[plugin.tool]]\nname = \"{name}_echo_get\"\nrisk = \"read\"\n\n\
             [[plugin.tool]]\nname = \"{name}_fault_run\"\nrisk = \"read\"\n{FAULT_RUN_ALLOW}\n\n",
            component.display()
        ));
    }
    let path = dir.join("tools-manifest.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn time_to_tools_list(binary: &Path, manifest: &Path) -> Duration {
    let started = Instant::now();
    let mut peer = Peer::spawn(binary, manifest, &ENV);
    let listed = peer.request("tools/list", json!({}));
    let elapsed = started.elapsed();
    assert!(
        !listed["result"]["tools"].as_array().unwrap().is_empty(),
        "{listed}"
    );
    drop(peer.stdin);
    peer.child.wait().unwrap();
    elapsed
}

fn idle(binary: &Path, manifest: &Path) -> u64 {
    let mut peer = Peer::spawn(binary, manifest, &ENV);
    peer.request("tools/list", json!({}));
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_bytes(peer.child.id());
    drop(peer.stdin);
    peer.child.wait().unwrap();
    rss
}

fn after_calls(binary: &Path, manifest: &Path, calls: usize) -> u64 {
    let mut peer = Peer::spawn(binary, manifest, &ENV);
    let get = json!({ "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } });
    let depth = 16;
    let mut sent = 0;
    let mut received = 0;
    while sent < depth.min(calls) {
        peer.send("tools/call", get.clone());
        sent += 1;
    }
    while received < calls {
        peer.receive();
        received += 1;
        if sent < calls {
            peer.send("tools/call", get.clone());
            sent += 1;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let rss = rss_bytes(peer.child.id());
    drop(peer.stdin);
    peer.child.wait().unwrap();
    rss
}

/// Opens `count` 2025-11-25 sessions over plain HTTP requests (a few
/// keep-alive connections carry them all) and makes one call in each, so
/// each holds its own helpdesk instance; RSS is read while all are live.
fn with_sessions(binary: &Path, manifest: &Path, count: usize) -> u64 {
    let host = HttpHost::start_with_env(binary, manifest, &ENV);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let http = reqwest::Client::new();
        let post = |session: Option<String>, body: Value| {
            let mut request = http
                .post(&host.url)
                .header("Accept", "application/json, text/event-stream")
                .header("Content-Type", "application/json")
                .body(body.to_string());
            if let Some(session) = session {
                request = request
                    .header("Mcp-Session-Id", session)
                    .header("Mcp-Protocol-Version", "2025-11-25");
            }
            request.send()
        };
        for _ in 0..count {
            let opened = post(
                None,
                json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "bench", "version": "0" } } }),
            )
            .await
            .unwrap();
            let session = opened
                .headers()
                .get("mcp-session-id")
                .expect("a session id")
                .to_str()
                .unwrap()
                .to_string();
            opened.bytes().await.unwrap();
            post(
                Some(session.clone()),
                json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            )
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
            let called = post(
                Some(session),
                json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "helpdesk_ticket_get", "arguments": { "key": "T-1041" } } }),
            )
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
            assert!(called.contains("\"isError\":false"), "{called}");
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    rss_bytes(host.child.id())
}
