//! What the audit trail's durability costs a write call. A granted write
//! (`notes_note_save`) is on disk in the trail twice before it answers, its
//! start and its outcome, each fsynced; concurrent calls share fsyncs (group
//! commit). Reads are written without waiting. Granted writes and reads at
//! 1 and 16 concurrent sessions, with the state directory (trail and store)
//! on the disk and on a tmpfs (`/dev/shm`), where fsync costs nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use crate::Bench;
use crate::client::{Call, Era, HttpClient};
use crate::common::{HttpHost, cpu_time, open_task, scratch_manifest};
use crate::http::{client_runtime, run_clients};
use crate::report::Figure;

const SECTION: &str = "audit trail";

pub fn run(bench: &Bench) -> Vec<Figure> {
    let calls = if bench.quick { 300 } else { 3_000 };
    let runtime = client_runtime();
    let places = [
        ("disk", bench.root.join("target/bench/audit-scratch")),
        (
            "tmpfs",
            PathBuf::from(format!("/dev/shm/toolhost-bench-{}", std::process::id())),
        ),
    ];
    let mut figures = Vec::new();
    for (place, scratch) in &places {
        if *place == "tmpfs" && !Path::new("/dev/shm").is_dir() {
            eprintln!("no /dev/shm: the tmpfs rows are skipped");
            continue;
        }
        let _ = std::fs::remove_dir_all(scratch);
        let manifest = scratch_manifest(&bench.root, &bench.manifest, scratch);
        let token = open_task(&bench.binary, &manifest, &["notes_note_save"]);
        let host = HttpHost::start_with_env(&bench.binary, &manifest, &crate::ENV);
        for clients in [1, 16] {
            for write in [true, false] {
                let kind = if write { "granted writes" } else { "reads" };
                let mut figure = runtime.block_on(level(&host, &token, clients, calls, write));
                figure.name = format!("{kind}, {clients} concurrent, state on {place}");
                figures.push(figure);
            }
        }
        drop(host);
        let _ = std::fs::remove_dir_all(scratch);
    }
    figures
}

/// `clients` task-bound sessions calling until `total` calls are done. Each
/// write saves a note of its own; reads get the first note of the
/// one-session write row.
async fn level(host: &HttpHost, token: &str, clients: usize, total: usize, write: bool) -> Figure {
    let mut connected = Vec::with_capacity(clients);
    for _ in 0..clients {
        connected.push(HttpClient::connect(&host.url, Era::Sessions, Some(token)).await);
    }
    let call = move |n: usize| {
        Arc::new(if write {
            Call::new(
                "notes_note_save",
                json!({ "slug": format!("bench-{clients}-{n}"), "title": "Bench", "body": "A note.", "tags": [] }),
            )
        } else {
            Call::new("notes_note_get", json!({ "slug": "bench-1-0" }))
        })
    };
    let pid = host.child.id();
    let load = run_clients(connected, call, total, pid).await;
    let cpu = (cpu_time(pid) - load.cpu_before) / load.samples.len() as u32;
    let rate = load.samples.len() as f64 / load.elapsed.as_secs_f64();
    let mut samples = load.samples;
    Figure::of(SECTION, String::new(), &mut samples)
        .rate(rate)
        .cpu(cpu)
}
