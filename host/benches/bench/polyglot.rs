//! The same tool host, three guest languages: a Rust plugin (crm), a Python
//! one (billing, componentize-py) and a JavaScript one (kb,
//! componentize-js), each making one HTTP request to its demo upstream
//! through the gate per call. Per language: the component's size, its cold
//! compile and warm start (spawn → first `tools/list` of a catalog of that
//! plugin alone), a call with a fresh instance each (`instance = "call"`)
//! against a call on the session's instance (the difference is what a fresh
//! instance costs), the server CPU per call, and the resident memory each
//! live instance adds. The Rust row is the baseline the others are read
//! against, in the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Bench;
use crate::client::{Call, Era, HttpClient};
use crate::common::{HttpHost, Peer, cpu_time, rss_bytes};
use crate::footprint::time_to_tools_list;
use crate::report::{Amount, Figure};

const SECTION: &str = "languages";

/// The token both demo upstreams demand: the one the bench's hosts hold.
const TOKEN: &str = crate::ENV[0].1;

struct Guest {
    lang: &'static str,
    plugin: &'static str,
    component: PathBuf,
    tools: &'static [(&'static str, &'static str)],
    /// Manifest lines for its upstream at the given base URL.
    grants: fn(&str) -> String,
    call: (&'static str, Value),
}

fn credentialed(secret: &str) -> impl Fn(&str) -> String + '_ {
    move |base: &str| {
        format!(
            "config = {{ base_url = \"{base}\" }}\n\
             network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}] }}\n\
             credentials = [{{ destination = \"{base}\", secret = \"{secret}\", header = \"Authorization\", format = \"Bearer {{secret}}\" }}]\n"
        )
    }
}

fn guests(root: &Path) -> Vec<Guest> {
    vec![
        Guest {
            lang: "Rust",
            plugin: "crm",
            component: root.join("target/wasm32-wasip2/plugin/crm.wasm"),
            tools: &[
                ("crm_contact_search", "read"),
                ("crm_contact_get", "read"),
                ("crm_contact_update", "write"),
                ("crm_contact_delete", "destructive"),
            ],
            grants: |base| credentialed("crm_token")(base),
            call: ("crm_contact_get", json!({ "id": "c_1001" })),
        },
        Guest {
            lang: "Python",
            plugin: "billing",
            component: root.join("target/polyglot/billing.wasm"),
            tools: &[
                ("billing_charge_list", "read"),
                ("billing_duplicate_check", "read"),
                ("billing_double_charge_refund", "write"),
            ],
            grants: |base| credentialed("billing_token")(base),
            call: ("billing_charge_list", json!({ "order": "88231" })),
        },
        Guest {
            lang: "JavaScript",
            plugin: "kb",
            component: root.join("target/polyglot/kb.wasm"),
            tools: &[("kb_article_search", "read"), ("kb_article_read", "read")],
            grants: |base| {
                format!(
                    "config = {{ base_url = \"{base}\" }}\n\
                     network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}] }}\n"
                )
            },
            call: ("kb_article_read", json!({ "id": "battery" })),
        },
    ]
}

pub fn run(bench: &Bench) -> Vec<Figure> {
    let (runs, calls, instances) = if bench.quick {
        (2, 200, 10)
    } else {
        (3, 1_000, 20)
    };
    // The upstreams run on a runtime of their own for the whole section.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (_crm, _billing, _docs, bases) = runtime.block_on(async {
        let bind = || async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() };
        let crm = crm_upstream::Upstream::start(
            bind().await,
            crm_upstream::Config {
                token: TOKEN.into(),
                test_routes: false,
            },
        )
        .await
        .unwrap();
        let (billing_app, _) = backoffice_upstream::billing::router(TOKEN).unwrap();
        let billing = backoffice_upstream::Server::start(bind().await, billing_app).unwrap();
        let docs =
            backoffice_upstream::Server::start(bind().await, backoffice_upstream::docs::router())
                .unwrap();
        let bases = [crm.addr(), billing.addr(), docs.addr()].map(|a| format!("http://{a}"));
        (crm, billing, docs, bases)
    });
    let scratch = bench.root.join("target/bench/languages-scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    let mut figures = Vec::new();
    for (guest, base) in guests(&bench.root).into_iter().zip(bases) {
        assert!(
            guest.component.exists(),
            "{} is missing: run `just build`",
            guest.component.display()
        );
        let label = format!("{} ({})", guest.lang, guest.plugin);
        let size = std::fs::metadata(&guest.component).unwrap().len();
        figures.push(Figure::new(
            SECTION,
            format!("{label}: component size"),
            Amount::Bytes(size),
            Amount::Bytes(size),
        ));
        let per_call = manifest(bench, &scratch, &guest, &base, "call");
        let per_session = manifest(bench, &scratch, &guest, &base, "session");

        let mut cold: Vec<Duration> = (0..runs)
            .map(|_| {
                let _ = std::fs::remove_dir_all(per_call.parent().unwrap().join("state/cache"));
                time_to_tools_list(bench, &per_call)
            })
            .collect();
        figures.push(Figure::of(
            SECTION,
            format!("{label}: cold compile, spawn → first tools/list"),
            &mut cold,
        ));
        let mut warm: Vec<Duration> = (0..runs * 3)
            .map(|_| time_to_tools_list(bench, &per_call))
            .collect();
        figures.push(Figure::of(
            SECTION,
            format!("{label}: warm start, spawn → first tools/list"),
            &mut warm,
        ));

        let fresh = calls_on(bench, &per_call, &guest.call, calls);
        let reused = calls_on(bench, &per_session, &guest.call, calls);
        let fresh_cost = fresh.p50.saturating_sub(reused.p50);
        figures.push(
            Figure::new(
                SECTION,
                format!("{label}: call, fresh instance each"),
                Amount::Time(fresh.p50),
                Amount::Time(fresh.p99),
            )
            .cpu(fresh.cpu),
        );
        figures.push(
            Figure::new(
                SECTION,
                format!("{label}: call on the session's instance"),
                Amount::Time(reused.p50),
                Amount::Time(reused.p99),
            )
            .cpu(reused.cpu),
        );
        figures.push(Figure::new(
            SECTION,
            format!("{label}: a fresh instance (difference of the two p50s)"),
            Amount::Time(fresh_cost),
            Amount::Time(fresh_cost),
        ));
        let per_instance = rss_per_instance(bench, &per_session, &guest.call, instances);
        figures.push(Figure::new(
            SECTION,
            format!("{label}: RSS per live instance ({instances} sessions)"),
            Amount::Bytes(per_instance),
            Amount::Bytes(per_instance),
        ));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    figures
}

/// A catalog of `guest` alone with instance mode `mode`, pinned.
fn manifest(bench: &Bench, scratch: &Path, guest: &Guest, base: &str, mode: &str) -> PathBuf {
    let dir = scratch.join(format!("{}-{mode}", guest.plugin));
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = format!(
        "[host]\nstate_dir = \"state\"\n\n[[plugin]]\nname = \"{}\"\ncomponent = {:?}\nsha256 = \"{}\"\ninstance = \"{mode}\"\n{}\n",
        guest.plugin,
        guest.component.display().to_string(),
        "0".repeat(64),
        (guest.grants)(base),
    );
    for (tool, risk) in guest.tools {
        text.push_str(&format!(
            "[[plugin.tool]]\nname = \"{tool}\"\nrisk = \"{risk}\"\n\n"
        ));
    }
    let path = dir.join("tools-manifest.toml");
    std::fs::write(&path, text).unwrap();
    bench.pin(&path);
    path
}

struct Calls {
    p50: Duration,
    p99: Duration,
    cpu: Duration,
}

/// `calls` sequential calls on one stdio session, after one to warm up.
fn calls_on(bench: &Bench, manifest: &Path, call: &(&str, Value), calls: usize) -> Calls {
    let mut peer = Peer::start(bench.host_command(manifest, None));
    let params = json!({ "name": call.0, "arguments": call.1 });
    let first = peer.request("tools/call", params.clone());
    assert_eq!(first["result"]["isError"], false, "{first}");
    let before = cpu_time(peer.child.id());
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        peer.request("tools/call", params.clone());
        samples.push(t.elapsed());
    }
    let cpu = (cpu_time(peer.child.id()) - before) / calls as u32;
    drop(peer.stdin);
    peer.child.wait().unwrap();
    let (p50, p99) = crate::common::summary(&mut samples);
    Calls { p50, p99, cpu }
}

/// Resident memory each live session instance adds: `count` HTTP sessions
/// each make one call and keep their instance; the growth over one session
/// is divided by the sessions added.
fn rss_per_instance(bench: &Bench, manifest: &Path, call: &(&str, Value), count: usize) -> u64 {
    let host = HttpHost::start_with_env(&bench.binary, manifest, &crate::ENV);
    let runtime = crate::http::client_runtime();
    let call = Call::new(call.0, call.1.clone());
    let mut client = runtime.block_on(async {
        let mut client = HttpClient::connect(&host.url, Era::Sessions, None).await;
        client.call(&call, true).await;
        client
    });
    std::thread::sleep(Duration::from_millis(300));
    let one = rss_bytes(host.child.id());
    runtime.block_on(async {
        for _ in 1..count {
            client.open_session().await;
            client.call(&call, true).await;
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let all = rss_bytes(host.child.id());
    all.saturating_sub(one) / (count as u64 - 1).max(1)
}
