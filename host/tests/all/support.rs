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

/// A plugin component built from `plugins/` or the test fixtures.
pub fn wasm(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/wasm32-wasip2/release")
        .join(format!("{name}.wasm"));
    assert!(
        path.exists(),
        "{} is missing: build the plugins first (`just plugins`, or run the suite with `just test`)",
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
}

impl PluginEntry {
    /// The helpdesk, pinned to its real digest, with its nine tools.
    pub fn helpdesk() -> PluginEntry {
        let component = wasm("helpdesk");
        PluginEntry {
            name: "helpdesk".into(),
            sha256: sha256(&component),
            component,
            extra: String::new(),
            tools: HELPDESK_TOOLS
                .iter()
                .map(|(n, r)| (n.to_string(), r.to_string()))
                .collect(),
        }
    }

    /// The misbehaving test plugin with its two tools.
    pub fn fixture() -> PluginEntry {
        let component = wasm("fixture");
        PluginEntry {
            name: "fixture".into(),
            sha256: sha256(&component),
            component,
            extra: String::new(),
            tools: vec![
                ("fixture_echo_get".into(), "read".into()),
                ("fixture_fault_run".into(), "read".into()),
            ],
        }
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
        text.push_str(&format!(
            "[[plugin]]\nname = \"{}\"\ncomponent = {:?}\nsha256 = \"{}\"\n{}\n",
            p.name,
            p.component.display().to_string(),
            p.sha256,
            p.extra
        ));
        for (tool, risk) in p.tools {
            text.push_str(&format!(
                "[[plugin.tool]]\nname = \"{tool}\"\nrisk = \"{risk}\"\n\n"
            ));
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

pub fn toolhost() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "warn");
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
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "warn")
        .arg("serve")
        .arg("--stdio")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    ().serve(transport).await.expect("initialize over stdio")
}

/// A running `toolhost serve --http`, killed on drop.
pub struct HttpHost {
    child: Child,
    pub url: String,
}

impl Drop for HttpHost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `toolhost serve --http 127.0.0.1:0` and waits for its URL.
pub fn http(manifest: &TestManifest, args: &[&str]) -> HttpHost {
    let mut child = toolhost()
        .arg("serve")
        .arg("--http")
        .arg("127.0.0.1:0")
        .arg("--manifest")
        .arg(&manifest.path)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    HttpHost { child, url }
}

/// A 2025-11-25 client: `initialize`, then a session id on every request.
pub async fn connect(url: &str) -> Client {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_string()))
        .await
        .expect("initialize over HTTP")
}

/// A 2026-07-28 client: no `initialize`, every request stands alone.
pub async fn connect_stateless(url: &str) -> Client {
    ().serve_with_lifecycle(
        StreamableHttpClientTransport::from_uri(url.to_string()),
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
