//! Starting the real `toolhost` binary on a manifest written for the test,
//! and talking to it through rmcp's client.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion, Tool};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};

pub type Client = RunningService<RoleClient, ()>;

pub const HELPDESK_TOOLS: [(&str, &str); 9] = [
    ("helpdesk_ticket_list", "read"),
    ("helpdesk_ticket_get", "read"),
    ("helpdesk_ticket_search", "read"),
    ("helpdesk_doc_read", "read"),
    ("helpdesk_stats_get", "read"),
    ("helpdesk_ticket_categorize", "write"),
    ("helpdesk_ticket_answer", "write"),
    ("helpdesk_ticket_escalate", "write"),
    ("helpdesk_ticket_close", "write"),
];

pub const NOTES_TOOLS: [(&str, &str); 5] = [
    ("notes_note_search", "read"),
    ("notes_note_get", "read"),
    ("notes_note_list", "read"),
    ("notes_note_save", "write"),
    ("notes_note_delete", "destructive"),
];

/// What the platform team accepts of the fixture's catch-all fault tool.
pub const FAULT_RUN_ALLOW: &str = "lint_allow = { name-vague-verb = \"test fixture: runs the fault its argument names\", \
     action-switch = \"test fixture: one tool for every fault, reads and writes alike\" }";

/// A plugin component built from `plugins/` or the test fixtures.
pub fn wasm(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm32-wasip2/plugin")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins first (`just plugins test-plugins`, or run the suite with `just test`)",
        path.display()
    );
    path
}

pub fn sha256(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// One `[[plugin]]` of a test manifest.
pub struct PluginEntry {
    pub name: String,
    pub component: PathBuf,
    pub sha256: String,
    pub extra: String,
    pub tools: Vec<(String, String)>,
    /// Extra TOML lines of one `[[plugin.tool]]`, by tool name.
    pub tool_lines: Vec<(String, String)>,
}

impl PluginEntry {
    /// The component `name` (built in target/), pinned to its real digest,
    /// with `tools` as (name, risk).
    pub fn pinned(name: &str, tools: &[(&str, &str)]) -> PluginEntry {
        let component = wasm(name);
        PluginEntry {
            name: name.into(),
            sha256: sha256(&component),
            component,
            extra: String::new(),
            tool_lines: Vec::new(),
            tools: tools
                .iter()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect(),
        }
    }

    /// The helpdesk with its nine tools.
    pub fn helpdesk() -> PluginEntry {
        PluginEntry::pinned("helpdesk", &HELPDESK_TOOLS)
    }

    /// The misbehaving test plugin with its two tools.
    pub fn fixture() -> PluginEntry {
        let mut entry = PluginEntry::pinned(
            "fixture",
            &[("fixture_echo_get", "read"), ("fixture_fault_run", "read")],
        );
        entry.tool_lines = vec![("fixture_fault_run".into(), FAULT_RUN_ALLOW.into())];
        entry
    }

    /// The fixture under another plugin name, its tools prefixed with it,
    /// with extra TOML lines (config other than `prefix`, limits, files).
    pub fn fixture_as(name: &str, extra: &str) -> PluginEntry {
        let mut entry = PluginEntry::fixture();
        entry.name = name.into();
        entry.tools = vec![
            (format!("{name}_echo_get"), "read".into()),
            (format!("{name}_fault_run"), "read".into()),
        ];
        entry.tool_lines = vec![(format!("{name}_fault_run"), FAULT_RUN_ALLOW.into())];
        entry.with(extra)
    }

    /// The spy plugin (environment, sockets, HTTP) with no network access.
    pub fn spy() -> PluginEntry {
        let mut entry = PluginEntry::pinned(
            "spy",
            &[
                ("spy_env_read", "read"),
                ("spy_http_send", "read"),
                ("spy_socket_open", "read"),
            ],
        );
        entry.tool_lines = vec![
            (
                "spy_http_send".into(),
                "lint_allow = { risk-verb = \"test fixture: sends whatever the test asks, as a read tool so no grant is needed\", \
                 schema-closed = \"test fixture: headers are free-form on purpose\", \
                 schema-free-object = \"test fixture: headers are free-form on purpose\" }"
                    .into(),
            ),
            (
                "spy_socket_open".into(),
                "lint_allow = { risk-verb = \"test fixture: tries to open a socket and reports that it could not\" }".into(),
            ),
        ];
        entry
    }

    /// The notes plugin with its five tools, one per call, as the example
    /// manifest declares it.
    pub fn notes() -> PluginEntry {
        let mut entry = PluginEntry::pinned("notes", &NOTES_TOOLS).with("instance = \"call\"");
        entry.tool_lines = vec![(
            "notes_note_delete".into(),
            "approval = \"moves the note `{slug}` to the trash\"".into(),
        )];
        entry
    }

    /// Adds raw TOML lines to the `[[plugin]]` table (config, limits, …).
    pub fn with(mut self, line: &str) -> PluginEntry {
        self.extra.push_str(line);
        self.extra.push('\n');
        self
    }

    pub fn risk(mut self, tool: &str, risk: &str) -> PluginEntry {
        let entry = self
            .tools
            .iter_mut()
            .find(|(n, _)| n == tool)
            .expect("known tool");
        entry.1 = risk.into();
        self
    }

    pub fn without_tool(mut self, tool: &str) -> PluginEntry {
        self.tools.retain(|(n, _)| n != tool);
        self
    }
}

/// A manifest in its own temporary folder.
pub struct TestManifest {
    /// Keeps the folder alive as long as the manifest is used.
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn manifest(plugins: Vec<PluginEntry>) -> TestManifest {
    let mut text = String::new();
    for p in plugins {
        // A registry artifact (`oci://…`) may go without a sha256 pin.
        let pin = match p.sha256.is_empty() {
            true => String::new(),
            false => format!("sha256 = \"{}\"\n", p.sha256),
        };
        text.push_str(&format!(
            "[[plugin]]\nname = \"{}\"\ncomponent = {:?}\n{pin}{}\n",
            p.name,
            p.component.display().to_string(),
            p.extra
        ));
        for (tool, risk) in p.tools {
            text.push_str(&format!(
                "[[plugin.tool]]\nname = \"{tool}\"\nrisk = \"{risk}\"\n"
            ));
            for (_, line) in p.tool_lines.iter().filter(|(t, _)| *t == tool) {
                text.push_str(line);
                text.push('\n');
            }
            text.push('\n');
        }
    }
    manifest_text(&text)
}

pub fn manifest_text(text: &str) -> TestManifest {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools-manifest.toml");
    std::fs::write(&path, text).unwrap();
    TestManifest { _dir: dir, path }
}

/// The host binary, with none of the environment a developer's shell may
/// carry that would point it elsewhere (a database, a shared cache): a test
/// that wants one sets it.
pub fn toolhost() -> Command {
    toolhost_under(&[])
}

/// [`toolhost`], run by `wrapper` (a program and its arguments, such as
/// `prlimit --nofile=N:N`) when it is not empty.
pub fn toolhost_under(wrapper: &[&str]) -> Command {
    let bin = env!("CARGO_BIN_EXE_toolhost");
    let mut cmd = match wrapper {
        [] => Command::new(bin),
        [program, args @ ..] => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(bin);
            cmd
        }
    };
    cmd.env("TOOLHOST_LOG", "warn")
        .env_remove("TOOLHOST_DATABASE_URL")
        .env_remove("TOOLHOST_CACHE_DIR");
    cmd
}

/// How a host started with stdin closed ended: it loads its catalog, finds
/// no client and exits (or refuses to start).
pub struct Exit {
    pub success: bool,
    pub stdout: Vec<u8>,
    /// The log, at `info`.
    pub stderr: String,
}

/// The line of a host's `log` that refuses `plugin`; panics, showing the
/// log, if there is none.
pub fn refusal_line<'a>(log: &'a str, plugin: &str) -> &'a str {
    log.lines()
        .find(|l| l.contains(&format!("plugin `{plugin}` refused")))
        .unwrap_or_else(|| panic!("`{plugin}` was not refused:\n{log}"))
}

/// Runs `toolhost serve --stdio --manifest M ARGS` with stdin closed.
pub fn start_and_exit(manifest: &TestManifest, args: &[&str]) -> Exit {
    let out = toolhost()
        .env("TOOLHOST_LOG", "info")
        .args(["serve", "--stdio", "--manifest"])
        .arg(&manifest.path)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Exit {
        success: out.status.success(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `toolhost serve --stdio` and connects rmcp's client to it.
pub async fn stdio(manifest: &TestManifest, args: &[&str]) -> Client {
    stdio_with_pid(manifest, args).await.0
}

/// [`stdio`], also giving the host's process id (to read its memory).
pub async fn stdio_with_pid(manifest: &TestManifest, args: &[&str]) -> (Client, u32) {
    stdio_env(manifest, args, &[]).await
}

/// [`stdio_with_pid`] with extra environment variables.
pub async fn stdio_env(
    manifest: &TestManifest,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "warn")
        .envs(env.iter().copied())
        .arg("serve")
        .arg("--stdio")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = transport.id().expect("the host is running");
    let client = ().serve(transport).await.expect("initialize over stdio");
    (client, pid)
}

/// The stdout of a command that must succeed; panics with both streams if
/// it did not.
pub fn succeeded(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends SIGTERM to `child`, as a service manager stopping it would.
pub fn terminate(child: &Child) {
    use rustix::process::{Pid, Signal, kill_process};
    kill_process(Pid::from_child(child), Signal::TERM).expect("the process is ours to signal");
}

/// Resident memory of a process, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS")
}

/// A figure of `/proc/PID/status` given in kB, such as `VmRSS` or
/// `RssAnon` (the heap and stacks, not the binary's pages, which the page
/// cache decides).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"))
}

/// Where `host`'s console is: the admin listener's root.
pub fn console_of(host: &HttpHost) -> String {
    let admin = host.admin.as_deref().expect("the admin listener is on");
    admin.trim_end_matches("/v1").to_string()
}

/// A running `toolhost serve --http`, killed on drop.
pub struct HttpHost {
    pub child: Child,
    pub url: String,
    /// The admin API's base URL, with `--admin`.
    pub admin: Option<String>,
}

impl Drop for HttpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `toolhost serve --http 127.0.0.1:0` and waits for its URL.
pub fn http(manifest: &TestManifest, args: &[&str]) -> HttpHost {
    http_env(manifest, args, &[])
}

/// [`http`] with extra environment variables.
pub fn http_env(manifest: &TestManifest, args: &[&str], env: &[(&str, &str)]) -> HttpHost {
    let mut cmd = toolhost();
    cmd.envs(env.iter().copied());
    http_by(cmd, manifest, args)
}

/// [`http`] run by `cmd`, a [`toolhost`] or [`toolhost_under`].
pub fn http_by(mut cmd: Command, manifest: &TestManifest, args: &[&str]) -> HttpHost {
    cmd.arg("serve")
        .arg("--http")
        .arg("127.0.0.1:0")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args);
    http_from(cmd)
}

/// Runs `cmd`, a `toolhost serve --http` of the caller's making, and waits
/// for its URL.
pub fn http_from(mut cmd: Command) -> HttpHost {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut admin = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("toolhost exited before printing its URL");
        }
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .to_string();
        if line.contains("admin API") {
            admin = Some(url);
            continue;
        }
        return HttpHost { child, url, admin };
    }
}

/// A 2025-11-25 client: `initialize`, then a session id on every request.
pub async fn connect(url: &str) -> Client {
    toolhost::tls::install_process_default();
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .expect("initialize over HTTP")
}

/// A 2026-07-28 client: no `initialize`, every request stands alone.
pub async fn connect_stateless(url: &str) -> Client {
    ().serve_with_lifecycle(
        {
            toolhost::tls::install_process_default();
            StreamableHttpClientTransport::from_uri(url.to_string())
        },
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("discover over HTTP")
}

pub async fn tools(client: &Client) -> Vec<Tool> {
    client.list_all_tools().await.expect("tools/list")
}

pub async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool}: {e}"))
}

/// The structured result of a call that must succeed, checked against its text.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(false), "{tool} failed: {result:?}");
    let structured = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(
        text_json(&result),
        structured,
        "text and structured content differ"
    );
    structured
}

/// The error object of a call that must fail with `isError: true`.
pub async fn refused(client: &Client, tool: &str, arguments: Value) -> Value {
    let result = call(client, tool, arguments).await;
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} should fail: {result:?}"
    );
    let error = result
        .structured_content
        .clone()
        .expect("structuredContent");
    assert_eq!(
        text_json(&result),
        error,
        "text and structured content differ"
    );
    assert_eq!(error["ok"], json!(false));
    assert!(
        error["code"].is_string()
            && error["message"].is_string()
            && error["retryable"].is_boolean()
    );
    error
}

fn text_json(result: &CallToolResult) -> Value {
    let text = result.content[0]
        .as_text()
        .expect("text content")
        .text
        .clone();
    serde_json::from_str(&text).expect("text content is JSON")
}

/// Runs a `toolhost` operator command (`task …`, `approval …`, `state …`)
/// on the manifest's store; panics with its stderr if it fails.
pub fn cli(manifest: &TestManifest, args: &[&str]) -> String {
    let out = cli_output(manifest, args);
    assert!(
        out.status.success(),
        "toolhost {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn cli_output(manifest: &TestManifest, args: &[&str]) -> std::process::Output {
    toolhost()
        .args(args)
        .arg("--manifest")
        .arg(&manifest.path)
        .output()
        .unwrap()
}

/// A task opened with `toolhost task open --json`.
pub struct OpenedTask {
    pub id: String,
    pub token: String,
}

/// Opens a task granting `grants`, for ten minutes unless `extra` says
/// otherwise (later flags win).
pub fn open_task(manifest: &TestManifest, grants: &[&str], extra: &[&str]) -> OpenedTask {
    let mut args = vec!["task", "open", "--json", "--purpose", "integration test"];
    for grant in grants {
        args.extend(["--grant", grant]);
    }
    if !extra.contains(&"--ttl") {
        args.extend(["--ttl", "10m"]);
    }
    args.extend(extra);
    let out: Value = serde_json::from_str(&cli(manifest, &args)).unwrap();
    OpenedTask {
        id: out["task"]["id"].as_str().unwrap().to_string(),
        token: out["token"].as_str().unwrap().to_string(),
    }
}

/// A task as `toolhost task show` prints it.
pub fn show_task(manifest: &TestManifest, id: &str) -> Value {
    serde_json::from_str(&cli(manifest, &["task", "show", id])).unwrap()
}

/// Runs `toolhost serve --stdio ARGS` with extra environment and connects
/// `handler` (an rmcp client handler) to it.
pub async fn stdio_with<H: rmcp::ClientHandler>(
    manifest: &TestManifest,
    args: &[&str],
    env: &[(&str, &str)],
    handler: H,
) -> RunningService<RoleClient, H> {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "warn")
        .envs(env.iter().copied())
        .arg("serve")
        .arg("--stdio")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    handler
        .serve(transport)
        .await
        .expect("initialize over stdio")
}

/// A 2025-11-25 HTTP session with `handler`, sending `token` as bearer.
pub async fn connect_with<H: rmcp::ClientHandler>(
    url: &str,
    token: Option<&str>,
    handler: H,
) -> Result<RunningService<RoleClient, H>, rmcp::service::ClientInitializeError> {
    handler.serve(http_transport(url, token)).await
}

/// A 2026-07-28 stateless client with `handler`, sending `token` as bearer.
pub async fn connect_stateless_with<H: rmcp::ClientHandler>(
    url: &str,
    token: Option<&str>,
    handler: H,
) -> RunningService<RoleClient, H> {
    handler
        .serve_with_lifecycle(
            http_transport(url, token),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover over HTTP")
}

fn http_transport(
    url: &str,
    token: Option<&str>,
) -> StreamableHttpClientTransport<reqwest::Client> {
    let mut config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.to_string(),
        );
    if let Some(token) = token {
        config = config.auth_header(token.to_string());
    }
    toolhost::tls::install_process_default();
    StreamableHttpClientTransport::from_config(config)
}

/// Calls through any client handler type.
pub async fn call_as<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("tools/call {tool}: {e}"))
}

/// The structured content of a result, success or not.
pub fn content(result: &CallToolResult) -> Value {
    result
        .structured_content
        .clone()
        .expect("structuredContent")
}

/// Saves notes `<prefix>-n0`, `-n1`, … through `client` until a call fails
/// or gets no answer in 2 s (the host was killed); returns the slugs whose
/// save was acknowledged.
pub async fn save_until_it_fails(client: std::sync::Arc<Client>, prefix: String) -> Vec<String> {
    let mut acknowledged = Vec::new();
    for i in 0..10_000 {
        let slug = format!("{prefix}-n{i}");
        let Value::Object(args) = json!({ "slug": slug, "title": "t", "body": "b", "tags": [] })
        else {
            unreachable!()
        };
        let request = CallToolRequestParams::new("notes_note_save").with_arguments(args);
        // The client may keep retrying a dead server; a call without an
        // answer in time is one that was not acknowledged.
        let answer =
            tokio::time::timeout(std::time::Duration::from_secs(2), client.call_tool(request))
                .await;
        match answer {
            Ok(Ok(result)) if result.is_error == Some(false) => acknowledged.push(slug),
            _ => break,
        }
    }
    acknowledged
}

/// The names of the tools a stdio client of `m` is served.
pub async fn served_names(m: &TestManifest) -> Vec<String> {
    let client = stdio(m, &[]).await;
    let names = tools(&client)
        .await
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    client.cancel().await.unwrap();
    names
}

/// The rule of each finding of a `--format json` lint report, in order.
pub fn finding_rules(report: &Value) -> Vec<&str> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect()
}

/// `host:port` of an `http://` URL.
pub fn authority(url: &str) -> &str {
    let rest = url.trim_start_matches("http://");
    rest.split_once('/')
        .map_or(rest, |(authority, _)| authority)
}

/// A raw HTTP/1.1 exchange that stops sending after `sent`; returns what
/// the host answered before it closed the connection.
pub async fn stall(url: &str, sent: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(authority(url))
        .await
        .unwrap();
    tcp.write_all(sent).await.unwrap();
    let mut answer = Vec::new();
    // A guard against a host that never closes, not a measurement.
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        tcp.read_to_end(&mut answer),
    )
    .await
    .expect("the host closes a stalled connection")
    .ok();
    String::from_utf8_lossy(&answer).into_owned()
}

/// A plain HTTP client for the tests. reqwest is built with rustls but no
/// crypto provider of its own (the host's registry client carries ring), so
/// the process's provider is set first.
pub fn http_client() -> reqwest::Client {
    toolhost::tls::install_process_default();
    reqwest::Client::new()
}

/// One series of a metric read from `/metrics`: its labels and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: std::collections::BTreeMap<String, String>,
    pub value: String,
}

/// The series of `metric` the host's admin listener reports, read with
/// `token`.
pub async fn scrape(host: &HttpHost, token: &str, metric: &str) -> Vec<Series> {
    let text = http_client()
        .get(format!("{}/metrics", console_of(host)))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("{metric}{{");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(|rest| {
            let (labels, value) = rest.rsplit_once("} ").expect("labels, then a value");
            // Label values here never hold `",`.
            let labels = labels
                .split("\",")
                .filter_map(|pair| pair.split_once("=\""))
                .map(|(k, v)| (k.to_string(), v.trim_end_matches('"').to_string()))
                .collect();
            Series {
                labels,
                value: value.to_string(),
            }
        })
        .collect()
}

/// An HTTP upstream on loopback that writes whatever `answer` makes of the
/// start of each request (its head, as text) and closes: for answers no
/// real server gives. Its base URL.
pub async fn raw_upstream(answer: impl Fn(&str) -> String + Send + Sync + 'static) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let text = answer(&String::from_utf8_lossy(&buf[..n]));
                let _ = socket.write_all(text.as_bytes()).await;
            });
        }
    });
    base
}
