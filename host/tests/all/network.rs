//! The network gate, with the real binary, the bundled CRM upstream on
//! loopback and real components: the crm plugin end to end, and the spy
//! fixture trying every way to a secret or past the allow-list.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use base64::Engine;
use crm_upstream::{Config, Upstream};
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use super::audit::wait_for;
use super::support::*;

/// A token no test writes anywhere else, so finding it means a leak.
fn fresh_secret() -> String {
    format!("crm-demo-{}", uuid::Uuid::new_v4().simple())
}

async fn upstream(token: &str) -> Upstream {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    Upstream::start(
        listener,
        Config {
            token: token.to_string(),
            test_routes: true,
        },
    )
    .await
    .unwrap()
}

/// The crm plugin declared against the upstream at `base`.
fn crm(base: &str, extra_network: &str) -> PluginEntry {
    let component = wasm("crm");
    PluginEntry {
        name: "crm".into(),
        sha256: sha256(&component),
        component,
        extra: format!(
            "config = {{ base_url = \"{base}\" }}\n\
             network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}]{extra_network} }}\n\
             credentials = [{{ destination = \"{base}\", secret = \"crm_token\", header = \"Authorization\", format = \"Bearer {{secret}}\" }}]\n"
        ),
        tools: vec![
            ("crm_contact_search".into(), "read".into()),
            ("crm_contact_get".into(), "read".into()),
            ("crm_contact_update".into(), "write".into()),
            ("crm_contact_delete".into(), "destructive".into()),
        ],
        tool_lines: Vec::new(),
    }
}

/// A host on stdio whose log (at debug, the most it says) is kept.
struct Host {
    client: RunningService<RoleClient, ()>,
    log: Arc<Mutex<Vec<u8>>>,
}

async fn host(manifest: &TestManifest, args: &[&str], secret: &str) -> Host {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "debug")
        .env("TOOLHOST_SECRET_CRM_TOKEN", secret)
        .arg("serve")
        .arg("--stdio")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args);
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut stderr = stderr.unwrap();
    tokio::spawn({
        let log = log.clone();
        async move {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                log.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }
    });
    let client = ().serve(transport).await.expect("initialize over stdio");
    Host { client, log }
}

impl Host {
    /// Stops the host and returns its whole log.
    async fn stop(self) -> Vec<u8> {
        self.client.cancel().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        self.log.lock().unwrap().clone()
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// The forms a leak could take.
fn leaks(secret: &str) -> Vec<String> {
    vec![
        secret.to_string(),
        base64::engine::general_purpose::STANDARD.encode(secret),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret),
    ]
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Fails if any form of `secret` is in the log, the results or a file of
/// the state directory.
fn assert_no_leak(secret: &str, log: &[u8], results: &[String], state_dir: &Path) {
    for form in leaks(secret) {
        assert!(!contains(log, &form), "the host's log contains the secret");
        for r in results {
            assert!(!r.contains(&form), "a tool result contains the secret: {r}");
        }
        for file in files_under(state_dir) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(
                !contains(&bytes, &form),
                "{} contains the secret",
                file.display()
            );
        }
    }
}

#[tokio::test]
async fn the_crm_tools_work_end_to_end_with_the_injected_credential() {
    let secret = fresh_secret();
    let crm_server = upstream(&secret).await;
    let base = format!("http://{}", crm_server.addr());
    let m = manifest(vec![crm(&base, "")]);
    let task = open_task(
        &m,
        &["crm_contact_update", "crm_contact_delete"],
        &["--pre-approve", "crm_contact_delete"],
    );
    let host = host(&m, &["--task-token", &task.token], &secret).await;
    let client = &host.client;
    let mut results = Vec::new();

    let found = ok(
        client,
        "crm_contact_search",
        json!({ "query": "a", "limit": 3 }),
    )
    .await;
    let contacts = found["contacts"].as_array().unwrap();
    assert_eq!(contacts.len(), 3, "{found}");
    assert_eq!(found["truncated"], json!(true));
    let id = contacts[0]["id"].as_str().unwrap().to_string();
    results.push(found.to_string());

    let contact = ok(client, "crm_contact_get", json!({ "id": id })).await;
    assert_eq!(contact["id"], json!(id));
    let updated = ok(
        client,
        "crm_contact_update",
        json!({ "id": id, "phone": "+1 555 0100", "address": "1 Test Way" }),
    )
    .await;
    assert_eq!(updated["phone"], json!("+1 555 0100"));
    // The upstream is where the data lives: a fresh read sees the change.
    let again = ok(client, "crm_contact_get", json!({ "id": id })).await;
    assert_eq!(again["address"], json!("1 Test Way"));
    results.push(again.to_string());

    let deleted = ok(client, "crm_contact_delete", json!({ "id": id })).await;
    assert_eq!(deleted["deleted"], json!(id));
    let gone = refused(client, "crm_contact_get", json!({ "id": id })).await;
    assert_eq!(gone["code"], json!("not_found"), "{gone}");
    // A display name is not an id: the schema refuses it before any request.
    let by_name = refused(client, "crm_contact_get", json!({ "id": "Ada Lovelace" })).await;
    assert_eq!(by_name["code"], json!("invalid_arguments"));
    let log = host.stop().await;

    let seen = crm_server.requests();
    assert_eq!(seen.len(), 6, "{seen:?}");
    for request in &seen {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {secret}").as_str()),
            "{request:?}"
        );
    }
    assert!(seen.iter().any(|r| r.method == "PATCH"));
    assert!(seen.iter().any(|r| r.method == "DELETE"));

    // The trail names the credential, never its value, and leaves the
    // query string out.
    let state = m.path.parent().unwrap().join(".toolhost");
    let records = wait_for(&state, "host_stopped");
    let outbound: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "outbound_request")
        .collect();
    assert_eq!(outbound.len(), 6);
    for r in &outbound {
        assert_eq!(r["plugin"], json!("crm"));
        assert_eq!(r["credential"], json!("crm_token"));
        assert_eq!(r["outcome"], json!("ok"));
        assert!(
            r["url"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{base}/contacts"))
        );
        assert!(!r["url"].as_str().unwrap().contains('?'));
        assert!(r["status"].is_u64() && r["bytes"].is_u64());
    }
    assert_eq!(outbound[0]["tool"], json!("crm_contact_search"));
    assert_no_leak(&secret, &log, &results, &state);
}

/// The spy plugin, allowed to reach `bound` (with the credential) and
/// `unbound` (without), both on loopback, and `localhost` on the unbound
/// port without naming loopback.
fn spy(bound: &str, unbound: &str, localhost: &str) -> PluginEntry {
    spy_with(bound, unbound, localhost, "response_kib = 64")
}

/// [`spy`] with other network limits.
fn spy_with(bound: &str, unbound: &str, localhost: &str, limits: &str) -> PluginEntry {
    PluginEntry::spy().with(&format!(
        "network = {{ {limits}, allow = [\
         {{ destination = \"{bound}\", addresses = [\"127.0.0.1/32\"] }}, \
         {{ destination = \"{unbound}\", addresses = [\"127.0.0.1/32\"] }}, \
         \"{localhost}\"] }}\n\
         credentials = [{{ destination = \"{bound}\", secret = \"crm_token\", header = \"Authorization\", format = \"Bearer {{secret}}\" }}]"
    ))
}

#[tokio::test]
async fn a_hostile_plugin_gets_no_secret_and_reaches_nothing_it_was_not_allowed() {
    let secret = fresh_secret();
    let bound_server = upstream(&secret).await;
    let unbound_server = upstream("another-upstream-token").await;
    let bound = format!("http://{}", bound_server.addr());
    let unbound = format!("http://{}", unbound_server.addr());
    let localhost = format!("http://localhost:{}", unbound_server.addr().port());
    let m = manifest(vec![spy(&bound, &unbound, &localhost)]);
    let host = host(&m, &[], &secret).await;
    let client = &host.client;
    let mut results: Vec<String> = Vec::new();
    let send = |url: String, headers: Value| json!({ "url": url, "headers": headers });

    // Its environment and arguments are empty.
    let env = ok(client, "spy_env_read", json!({})).await;
    assert_eq!(env["vars"], json!([]), "{env}");
    results.push(env.to_string());

    // A decoy Authorization header is replaced by the host's, and the
    // upstream echoing it back is redacted before the plugin reads it.
    let echoed = ok(
        client,
        "spy_http_send",
        send(
            format!("{bound}/echo/headers"),
            json!({ "Authorization": "Bearer decoy" }),
        ),
    )
    .await;
    assert_eq!(echoed["status"], json!(200), "{echoed}");
    let body: Value = serde_json::from_str(echoed["body"].as_str().unwrap()).unwrap();
    // The whole header value is a known form of the secret.
    assert_eq!(body["authorization"], json!("[REDACTED:crm_token]"));
    results.push(echoed.to_string());
    let last = bound_server.requests().pop().unwrap();
    assert_eq!(last.authorization, Some(format!("Bearer {secret}")));

    // A destination without the credential gets none, only the decoy.
    let other = ok(
        client,
        "spy_http_send",
        send(
            format!("{unbound}/echo/headers"),
            json!({ "Authorization": "Bearer decoy" }),
        ),
    )
    .await;
    let body: Value = serde_json::from_str(other["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["authorization"], json!("Bearer decoy"));
    results.push(other.to_string());

    // A path that is only a query is sent as `/?…`, not a crash.
    let odd = call(
        client,
        "spy_http_send",
        send(format!("{bound}?x=1"), json!({})),
    )
    .await;
    results.push(format!("{odd:?}"));

    // The host does not follow a redirect; following it by hand is
    // checked like any request.
    let redirect = ok(
        client,
        "spy_http_send",
        send(
            format!("{bound}/redirect?to=http://169.254.169.254/latest/meta-data/"),
            json!({}),
        ),
    )
    .await;
    assert_eq!(redirect["status"], json!(302), "{redirect}");
    results.push(redirect.to_string());

    let before_bound = bound_server.requests().len();
    let before_unbound = unbound_server.requests().len();
    let denied = [
        ("http://example.com/".to_string(), "not in plugin"),
        (
            "http://169.254.169.254/latest/meta-data/".to_string(),
            "not in plugin",
        ),
        (
            format!("http://127.0.0.1:{}/", bound_server.addr().port() ^ 1),
            "not in plugin",
        ),
        // Allowed by name, but the name resolves to loopback, which the
        // entry does not name.
        (format!("{localhost}/echo/headers"), "loopback"),
        (format!("https://{}/", bound_server.addr()), "not in plugin"),
    ];
    for (url, why) in denied {
        let error = refused(client, "spy_http_send", send(url.clone(), json!({}))).await;
        assert_eq!(error["code"], json!("network_denied"), "{url}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(why), "{url}: {message}");
        results.push(error.to_string());
    }
    // A read tool may not write, even to an allowed destination.
    let post = refused(
        client,
        "spy_http_send",
        json!({ "url": format!("{bound}/contacts/c_1001"), "method": "DELETE" }),
    )
    .await;
    assert_eq!(post["code"], json!("network_denied"), "{post}");
    assert!(post["message"].as_str().unwrap().contains("GET/HEAD"));

    // Nothing refused reached an upstream.
    assert_eq!(bound_server.requests().len(), before_bound);
    assert_eq!(unbound_server.requests().len(), before_unbound);

    // A response over the limit is refused whole, with or without a length.
    for route in ["big", "big-chunked"] {
        let error = refused(
            client,
            "spy_http_send",
            send(format!("{bound}/{route}?bytes=200000"), json!({})),
        )
        .await;
        assert_eq!(error["code"], json!("response_too_large"), "{error}");
        results.push(error.to_string());
    }
    let small = ok(
        client,
        "spy_http_send",
        send(format!("{bound}/big?bytes=1000"), json!({})),
    )
    .await;
    assert_eq!(small["body"].as_str().unwrap().len(), 1000);

    // No socket around the gate.
    let socket = ok(
        client,
        "spy_socket_open",
        json!({ "addr": bound_server.addr().to_string() }),
    )
    .await;
    assert_eq!(socket["connected"], json!(false), "{socket}");
    results.push(socket.to_string());
    let log = host.stop().await;

    let state = m.path.parent().unwrap().join(".toolhost");
    let records = wait_for(&state, "host_stopped");
    let refusals = records
        .iter()
        .filter(|r| r["event"] == "outbound_request" && r["outcome"] == "network_denied")
        .count();
    assert_eq!(refusals, 6);
    assert_no_leak(&secret, &log, &results, &state);
}

#[tokio::test]
async fn outbound_metrics_are_labelled_by_the_allow_list_not_by_the_plugins_urls() {
    const ADMIN_TOKEN: &str = "admin-token-for-outbound-metrics-0123456";
    let server = upstream("an-upstream-token").await;
    let allowed = format!("http://{}", server.addr());
    let m = manifest(vec![PluginEntry::spy().with(&format!(
        "network = {{ allow = [\
         {{ destination = \"{allowed}\", addresses = [\"127.0.0.1/32\"] }}, \
         \"http://*.example.test\"] }}"
    ))]);
    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0"],
        &[("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let client = connect(&host.url).await;
    let send = |url: String, method: &str| json!({ "url": url, "method": method });
    ok(
        &client,
        "spy_http_send",
        send(format!("{allowed}/echo/headers"), "GET"),
    )
    .await;
    // A plugin naming a new host each time: refused as outside the list,
    // and (under the wildcard, before any lookup) for its method.
    let outside = (0..20).map(|i| (format!("http://h{i}.example.com/"), "GET"));
    let wildcard = (0..5).map(|i| (format!("http://w{i}.example.test/"), "DELETE"));
    for (url, method) in outside.chain(wildcard) {
        let error = refused(&client, "spy_http_send", send(url, method)).await;
        assert_eq!(error["code"], json!("network_denied"), "{error}");
    }

    let mut series: Vec<(String, String, String)> =
        scrape(&host, ADMIN_TOKEN, "toolhost_outbound_requests_total")
            .await
            .into_iter()
            .map(|s| {
                (
                    s.labels["destination"].clone(),
                    s.labels["outcome"].clone(),
                    s.value,
                )
            })
            .collect();
    series.sort();
    let host_label = server.addr().ip().to_string();
    assert_eq!(
        series,
        [
            (
                "(not allowed)".to_string(),
                "network_denied".to_string(),
                "20".to_string()
            ),
            (
                "*.example.test".to_string(),
                "network_denied".to_string(),
                "5".to_string()
            ),
            (host_label, "ok".to_string(), "1".to_string()),
        ]
    );
}

#[tokio::test]
async fn a_missing_or_exposed_secret_refuses_the_plugin_with_a_clear_error() {
    let secret = fresh_secret();
    let crm_server = upstream(&secret).await;
    let base = format!("http://{}", crm_server.addr());

    // No secret anywhere: the crm plugin is refused, the rest served.
    let m = manifest(vec![crm(&base, ""), PluginEntry::helpdesk()]);
    let exit = start_and_exit(&m, &[]);
    assert!(exit.success, "{}", exit.stderr);
    assert!(
        exit.stderr.contains("plugin `crm` refused")
            && exit.stderr.contains("TOOLHOST_SECRET_CRM_TOKEN"),
        "{}",
        exit.stderr
    );

    // A secrets file others can read is refused; at 0600 it is used.
    let dir = m.path.parent().unwrap();
    let secrets = dir.join("secrets.toml");
    std::fs::write(&secrets, format!("crm_token = \"{secret}\"\n")).unwrap();
    let text = std::fs::read_to_string(&m.path).unwrap();
    std::fs::write(
        &m.path,
        format!("[host]\nsecrets_file = \"secrets.toml\"\n\n{text}"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
        let exit = start_and_exit(&m, &[]);
        assert!(!exit.success);
        assert!(exit.stderr.contains("chmod 600"), "{}", exit.stderr);
        std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let exit = start_and_exit(&m, &["--strict"]);
    assert!(exit.success, "{}", exit.stderr);
    assert!(!contains(exit.stderr.as_bytes(), &secret));

    // A secret a header cannot carry (a header value is printable ASCII)
    // refuses its plugin at start, not its first request.
    let accented = format!("{secret}-clé");
    std::fs::write(&secrets, format!("crm_token = \"{accented}\"\n")).unwrap();
    let exit = start_and_exit(&m, &[]);
    assert!(exit.success, "{}", exit.stderr);
    assert!(
        exit.stderr.contains("plugin `crm` refused")
            && exit.stderr.contains("printable ASCII only"),
        "{}",
        exit.stderr
    );
    assert!(!contains(exit.stderr.as_bytes(), &accented));
}

/// An upstream and a manifest whose spy may reach only it, with `limits`.
async fn limited_spy(limits: &str) -> (String, Upstream, String, TestManifest) {
    let secret = fresh_secret();
    let server = upstream(&secret).await;
    let bound = format!("http://{}", server.addr());
    let m = manifest(vec![spy_with(
        &bound,
        "http://unused.example.com",
        "http://localhost:1",
        limits,
    )]);
    (secret, server, bound, m)
}

#[tokio::test]
async fn requests_per_call_and_the_request_timeout_are_enforced() {
    let (secret, server, bound, m) = limited_spy("requests_per_call = 3, timeout_ms = 300").await;
    let host = host(&m, &[], &secret).await;
    let client = &host.client;
    let url = format!("{bound}/echo/headers");

    let three = ok(client, "spy_http_send", json!({ "url": url, "repeat": 3 })).await;
    assert_eq!(three["status"], json!(200));
    let before = server.requests().len();
    let four = refused(client, "spy_http_send", json!({ "url": url, "repeat": 4 })).await;
    assert_eq!(four["code"], json!("network_denied"), "{four}");
    assert!(
        four["message"]
            .as_str()
            .unwrap()
            .contains("more than 3 requests"),
        "{four}"
    );
    assert_eq!(server.requests().len(), before + 3, "the fourth never left");
    // The count is per call: the next call starts again.
    ok(client, "spy_http_send", json!({ "url": url })).await;
    // A plugin looping past the limit: the first refused request has a
    // record of its own, the other 46 one record together.
    let looped = json!({ "url": url, "repeat": 50, "keep_going": true });
    let looped = ok(client, "spy_http_send", looped).await;
    assert_eq!(looped["refused"], json!(47), "{looped}");

    let slow = refused(
        client,
        "spy_http_send",
        json!({ "url": format!("{bound}/slow?ms=3000") }),
    )
    .await;
    assert_eq!(slow["code"], json!("timeout"), "{slow}");
    host.stop().await;

    let state = m.path.parent().unwrap().join(".toolhost");
    let records = wait_for(&state, "host_stopped");
    let outbound: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "outbound_request")
        .collect();
    let outcomes: Vec<&str> = outbound
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "ok",
            "ok",
            "ok",
            "ok",
            "ok",
            "ok",
            "network_denied",
            "ok",
            "ok",
            "ok",
            "ok",
            "network_denied",
            "network_denied",
            "timeout"
        ]
    );
    let counted = outbound[12]["detail"].as_str().unwrap();
    assert!(
        counted.contains("46 more requests past the limit of 3"),
        "{counted}"
    );
}

/// A request body gives its place back once the request is sent, whether
/// the upstream answered or the gate refused it: a plugin that sends more
/// bodies over its life than it may hold at once (64) keeps sending.
#[tokio::test]
async fn sent_request_bodies_give_their_places_back() {
    let secret = fresh_secret();
    let server = upstream(&secret).await;
    let bound = format!("http://{}", server.addr());
    // The spy's sending tool as a write tool, which may send a body.
    let mut spy = spy_with(
        &bound,
        "http://unused.example.com",
        "http://localhost:1",
        "requests_per_call = 50",
    );
    for (tool, risk) in &mut spy.tools {
        if tool == "spy_http_send" {
            *risk = "write".into();
        }
    }
    let m = manifest(vec![spy]);
    let task = open_task(&m, &["spy_http_send"], &[]);
    let host = host(&m, &["--task-token", &task.token], &secret).await;
    let client = &host.client;
    // A PATCH to a contact that does not exist: the upstream reads the
    // whole body before it answers 404, so no write races its answer.
    let post = |url: String, repeat: u32| json!({ "url": url, "method": "PATCH", "body": "{}", "repeat": repeat, "keep_going": true });
    let patched = format!("{bound}/contacts/c-nobody");
    for _ in 0..2 {
        let sent = ok(client, "spy_http_send", post(patched.clone(), 50)).await;
        assert_eq!(sent["refused"], json!(0), "{sent}");
        let denied = ok(
            client,
            "spy_http_send",
            post("http://elsewhere.example.com/".into(), 50),
        )
        .await;
        assert_eq!(denied["refused"], json!(50), "{denied}");
    }
    assert_eq!(server.requests().len(), 100);
    let last = ok(client, "spy_http_send", post(patched.clone(), 1)).await;
    assert_eq!(last["refused"], json!(0), "{last}");
    host.stop().await;
}

#[tokio::test]
async fn a_plugins_concurrent_requests_are_capped_with_a_retryable_busy() {
    let (secret, _server, bound, m) = limited_spy("concurrent = 1").await;
    let host = http_env(&m, &[], &[("TOOLHOST_SECRET_CRM_TOKEN", &secret)]);
    let first = connect(&host.url).await;
    let second = connect(&host.url).await;
    let slow = json!({ "url": format!("{bound}/slow?ms=1500") });
    let (a, b) = tokio::join!(call(&first, "spy_http_send", slow.clone()), async {
        // Starts while the first request is surely in flight.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        call(&second, "spy_http_send", slow.clone()).await
    });
    assert_eq!(a.is_error, Some(false), "{a:?}");
    assert_eq!(b.is_error, Some(true), "{b:?}");
    let error = b.structured_content.unwrap();
    assert_eq!(error["code"], json!("busy"), "{error}");
    assert_eq!(error["retryable"], json!(true));
    // Once the first is done, the plugin may send again.
    ok(
        &second,
        "spy_http_send",
        json!({ "url": format!("{bound}/echo/headers") }),
    )
    .await;
    first.cancel().await.unwrap();
    second.cancel().await.unwrap();
}

/// The value of header `name` in what the spy's `spy_http_send` returned.
fn header_of<'a>(sent: &'a Value, name: &str) -> Option<&'a str> {
    sent["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

/// A response's head becomes a header set the plugin may keep for as long
/// as it likes, so the gate reads at most 64 KiB of it: a longer one fails
/// the request (wasi:http's header section size error), a shorter one
/// passes whole.
#[tokio::test]
async fn a_response_head_over_64_kib_fails_the_request() {
    let base = raw_upstream(|asked| {
        let kib = if asked.starts_with("GET /big ") {
            70
        } else {
            30
        };
        format!(
            "HTTP/1.1 200 OK\r\nx-padding: {}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
            "a".repeat(kib << 10)
        )
    })
    .await;
    let m = spy_allowed_only(&base);
    let client = stdio(&m, &[]).await;
    let small = ok(
        &client,
        "spy_http_send",
        json!({ "url": format!("{base}/small") }),
    )
    .await;
    assert_eq!(small["status"], 200, "{small}");
    let padding = header_of(&small, "x-padding").map(str::len);
    assert_eq!(padding, Some(30 << 10), "{small}");
    let big = refused(
        &client,
        "spy_http_send",
        json!({ "url": format!("{base}/big") }),
    )
    .await;
    assert_eq!(big["code"], "too_large", "{big}");
    client.cancel().await.unwrap();
}

/// A manifest whose spy may reach `base` (on loopback) and nothing else.
fn spy_allowed_only(base: &str) -> TestManifest {
    manifest(vec![PluginEntry::spy().with(&format!(
        "network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}] }}"
    ))])
}

/// Redaction can lengthen a head: a secret's name may be longer than the
/// secret. A head within 64 KiB as the upstream sent it, but over it once
/// redacted, fails as a longer head would; the plugin never holds more.
#[tokio::test]
async fn a_response_head_that_redaction_takes_over_64_kib_fails_the_request() {
    // The shortest secret the host takes, under the longest name.
    let secret = "k7Qw2ZpX";
    let name = "s".repeat(64);
    let base = raw_upstream(move |asked| {
        let copies = if asked.starts_with("GET /big ") {
            4000
        } else {
            100
        };
        format!(
            "HTTP/1.1 200 OK\r\nx-echo: {}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
            vec![secret; copies].join(" ")
        )
    })
    .await;
    let m = manifest(vec![PluginEntry::spy().with(&format!(
        "network = {{ allow = [{{ destination = \"{base}\", addresses = [\"127.0.0.1/32\"] }}] }}\n\
         credentials = [{{ destination = \"{base}\", secret = \"{name}\", header = \"Authorization\", format = \"Bearer {{secret}}\" }}]"
    ))]);
    let variable = format!("TOOLHOST_SECRET_{}", name.to_ascii_uppercase());
    let (client, _) = stdio_env(&m, &[], &[(variable.as_str(), secret)]).await;

    // 100 copies: 899 bytes sent, 7.4 KiB redacted, well within the limit.
    let small = ok(
        &client,
        "spy_http_send",
        json!({ "url": format!("{base}/small") }),
    )
    .await;
    assert_eq!(small["status"], 200, "{small}");
    let echo = header_of(&small, "x-echo").unwrap_or_default();
    assert_eq!(
        echo.matches(&format!("[REDACTED:{name}]")).count(),
        100,
        "{small}"
    );
    assert!(!echo.contains(secret), "{small}");

    // 4 000 copies: 35 KiB sent, which hyper reads, but 297 KiB redacted.
    let big = refused(
        &client,
        "spy_http_send",
        json!({ "url": format!("{base}/big") }),
    )
    .await;
    assert_eq!(big["code"], "too_large", "{big}");
    assert!(!big.to_string().contains(secret), "{big}");
    client.cancel().await.unwrap();
}

/// The key exchange a plugin's HTTPS request offers, read off the wire: the
/// gate's TLS client is the host's one provider (`tls`), X25519 first. The
/// upstream reads the client's hello and hangs up, so the request fails;
/// the hello is what is checked.
#[tokio::test]
async fn a_plugins_https_request_offers_x25519_first() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let hello = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 5];
        socket.read_exact(&mut head).await.unwrap();
        assert_eq!(head[0], 22, "a handshake record");
        let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[3], head[4]]))];
        socket.read_exact(&mut body).await.unwrap();
        body
    });
    let m = spy_allowed_only(&base);
    let client = stdio(&m, &[]).await;
    let result = call(
        &client,
        "spy_http_send",
        json!({ "url": format!("{base}/") }),
    )
    .await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    // Had the gate refused the request, nothing would ever connect.
    let hello = tokio::time::timeout(std::time::Duration::from_secs(10), hello)
        .await
        .unwrap_or_else(|_| panic!("the gate never connected: {result:?}"))
        .unwrap();

    let (groups, shares) = offered_groups(&hello);
    // X25519 (0x001d), then P-256 (0x0017) and P-384 (0x0018).
    assert_eq!(groups, [0x001d, 0x0017, 0x0018]);
    assert_eq!(shares, [0x001d], "the one key share sent is X25519's");
    client.cancel().await.unwrap();
}

/// The `supported_groups` and the groups of the `key_share` entries of a
/// TLS ClientHello handshake message (RFC 8446, 4.1.2 and 4.2).
fn offered_groups(hello: &[u8]) -> (Vec<u16>, Vec<u16>) {
    let u16_at = |at: usize| u16::from_be_bytes([hello[at], hello[at + 1]]);
    assert_eq!(hello[0], 1, "a ClientHello");
    let length = usize::from(hello[1]) << 16 | usize::from(u16_at(2));
    assert_eq!(4 + length, hello.len(), "the whole hello in one record");
    // Message type and length (4), legacy version (2), random (32).
    let mut at = 4 + 2 + 32;
    at += 1 + usize::from(hello[at]); // legacy session id
    at += 2 + usize::from(u16_at(at)); // cipher suites
    at += 1 + usize::from(hello[at]); // legacy compression methods
    let end = at + 2 + usize::from(u16_at(at));
    at += 2;
    let (mut groups, mut shares) = (Vec::new(), Vec::new());
    while at < end {
        let (kind, len) = (u16_at(at), usize::from(u16_at(at + 2)));
        let data = at + 4;
        match kind {
            // supported_groups: a length, then the groups.
            0x000a => {
                let list = usize::from(u16_at(data));
                groups = (0..list / 2).map(|i| u16_at(data + 2 + 2 * i)).collect();
            }
            // key_share: a length, then (group, key length, key) entries.
            0x0033 => {
                let mut entry = data + 2;
                while entry < data + len {
                    shares.push(u16_at(entry));
                    entry += 4 + usize::from(u16_at(entry + 2));
                }
            }
            _ => {}
        }
        at = data + len;
    }
    (groups, shares)
}
