//! The console in a real browser: Debian's Chromium driven by Playwright
//! (`tests/fixtures/console/console.py`), beside the official MCP Python
//! SDK as the agent's client. `just console-setup` (part of `just test`)
//! installs both into the virtualenv `target/pysdk`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

const ADMIN_TOKEN: &str = "admin-token-for-console-tests-0123456789";
const METRICS_TOKEN: &str = "metrics-token-for-console-tests-01234567";

fn python() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pysdk/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run `just console-setup` (part of `just test`)",
        path.display()
    );
    path
}

/// Adds an operator through the CLI, the password on stdin.
fn add_operator(m: &TestManifest, name: &str, role: &str) {
    let mut child = toolhost()
        .args([
            "operator",
            "add",
            name,
            "--role",
            role,
            "--password-stdin",
            "--manifest",
        ])
        .arg(&m.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{name}-password-123").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "operator add {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn escalation_is_destructive() -> PluginEntry {
    let mut helpdesk = PluginEntry::helpdesk().risk("helpdesk_ticket_escalate", "destructive");
    helpdesk.tool_lines.push((
        "helpdesk_ticket_escalate".into(),
        "approval = \"hands ticket {key} to the {team} team, saying: {reason}\"".into(),
    ));
    helpdesk
}

#[tokio::test]
async fn an_approver_decides_in_the_browser_what_the_agent_asked_for() {
    let python = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/console/console.py");
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots");
    let m = manifest(vec![escalation_is_destructive()]);
    add_operator(&m, "alice", "admin");
    add_operator(&m, "carol", "approver");
    add_operator(&m, "dave", "approver");
    let listed = cli(&m, &["operator", "list"]);
    assert!(
        listed.contains("alice") && listed.contains("admin"),
        "{listed}"
    );

    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0"],
        &[
            ("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN),
            ("TOOLHOST_METRICS_TOKEN", METRICS_TOKEN),
        ],
    );
    let console = console_of(&host);

    let run = tokio::process::Command::new(python)
        .arg(&script)
        .arg(&console)
        .arg(&host.url)
        .arg(&shots)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    // A guard against a browser that hangs, not a measurement.
    let out = tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .expect("the browser session finishes within 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the browser session failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("one JSON object on stdout, got {stdout:?}: {e}"));
    let approval = report["approval"].as_str().unwrap();

    // What the trail says: the person, the channel and the note; one run
    // of the approved call; the refused sign-ins.
    let state = m.path.parent().unwrap().join(".toolhost");
    let records = crate::audit::records(&state);
    let decided: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "approval_decided")
        .collect();
    let first = decided
        .iter()
        .find(|r| r["approval"] == approval)
        .unwrap_or_else(|| panic!("no decision on {approval}: {decided:#?}"));
    assert_eq!(first["by"], "alice");
    assert_eq!(first["channel"], "console");
    assert_eq!(first["note"], "Checked with the billing lead.");
    assert!(
        decided
            .iter()
            .any(|r| r["decision"] == "denied" && r["by"] == "alice")
    );
    let ran: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["event"] == "tool_call"
                && r["tool"] == "helpdesk_ticket_escalate"
                && r["outcome"] == "ok"
        })
        .collect();
    // The session's approved call, and the 2026-07-28 client's.
    assert_eq!(ran.len(), 2, "each approved call ran once: {ran:#?}");
    assert_eq!(ran[0]["grant"], format!("approval:{approval}"));
    assert_eq!(report["modern_protocol"], "2026-07-28", "{report}");
    let asked = records
        .iter()
        .find(|r| r["event"] == "approval_requested" && r["approval"] == approval)
        .unwrap();
    assert_eq!(asked["task"], report["token_task"]);
    let refused: Vec<&str> = records
        .iter()
        .filter(|r| r["event"] == "console_sign_in_refused" && r["operator"] == "carol")
        .map(|r| r["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        refused,
        [
            "wrong_name_or_password",
            "wrong_name_or_password",
            "wrong_name_or_password",
            "wrong_name_or_password",
            "wrong_name_or_password",
            "rate_limited"
        ]
    );
    assert!(
        records
            .iter()
            .any(|r| r["event"] == "task_revoked" && r["by"] == "alice")
    );
    // The metrics count the scripted session: the admin token (or the
    // metrics token) reads them, nothing else does.
    let http = http_client();
    let scrape = |token: Option<&'static str>| {
        let mut request = http.get(format!("{console}/metrics"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    assert_eq!(scrape(None).await.unwrap().status(), 401);
    assert_eq!(
        scrape(Some("not-the-token-0123456789abcdef01234"))
            .await
            .unwrap()
            .status(),
        401
    );
    assert_eq!(scrape(Some(ADMIN_TOKEN)).await.unwrap().status(), 200);
    let metrics = scrape(Some(METRICS_TOKEN))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The metrics token reads metrics, and nothing else.
    let api = http
        .get(format!("{console}/v1/tasks"))
        .bearer_auth(METRICS_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 401);
    for line in [
        "toolhost_tool_calls_total{tool=\"helpdesk_ticket_escalate\",risk=\"destructive\",outcome=\"ok\"} 2",
        "toolhost_tool_calls_total{tool=\"helpdesk_ticket_escalate\",risk=\"destructive\",outcome=\"approval_denied\"} 1",
        "toolhost_tool_calls_total{tool=\"helpdesk_ticket_escalate\",risk=\"destructive\",outcome=\"grant_expired\"} 1",
        "toolhost_tool_call_duration_seconds_count{tool=\"helpdesk_ticket_escalate\"}",
        "toolhost_approval_decision_seconds_count{decision=\"approved\"} 2",
        "toolhost_approval_decision_seconds_count{decision=\"denied\"} 1",
        // The revocation ended the one left pending.
        "toolhost_approvals_pending 0",
        "toolhost_audit_unavailable 0",
        "toolhost_plugin_queue_depth{plugin=\"helpdesk\"} 0",
        "toolhost_store_charge_duration_seconds_count",
        "toolhost_audit_queued_records",
        "toolhost_instances_live",
        "toolhost_instances_created_total",
    ] {
        assert!(metrics.contains(line), "{line} is not in\n{metrics}");
    }
    let required = metrics
        .lines()
        .find(|l| l.starts_with("toolhost_tool_calls_total{tool=\"helpdesk_ticket_escalate\",risk=\"destructive\",outcome=\"approval_required\"}"))
        .unwrap_or_else(|| panic!("no approval_required count in\n{metrics}"));
    // At least one per approval asked for (URL-mode asks answer it first).
    let count: u64 = required.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 4, "{required}");
    for page in [
        "signin",
        "approvals",
        "approval",
        "approval-phone",
        "tasks",
        "catalog",
        "audit",
        "sessions",
    ] {
        assert!(
            shots.join(format!("{page}.png")).exists(),
            "screenshot of {page}"
        );
    }
    drop(host);
}

/// Each password check works in 19 MiB (argon2id). Once glibc's malloc has
/// seen a block that large freed it serves the next from its heap and
/// keeps it, one per thread arena that hashed, unless the host gives the
/// pages back.
#[tokio::test]
async fn signing_in_leaves_no_hash_memory_behind() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    add_operator(&m, "alice", "admin");
    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0"],
        &[("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let console = console_of(&host);
    toolhost::tls::install_process_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let sign_in = |password: &'static str| {
        client
            .post(format!("{console}/signin"))
            .header("content-type", "application/x-www-form-urlencoded")
            // (Letters, digits and dashes need no escaping.)
            .body(format!("name=alice&password={password}"))
            .send()
    };
    // The first check also hashes the decoy for unknown names.
    assert_eq!(sign_in("alice-password-123").await.unwrap().status(), 303);
    let before = status_kib(host.child.id(), "RssAnon");
    // Each reaches the password check: the right one signs in, the wrong
    // one is refused for the password, not turned away before it.
    for (password, status) in [
        ("alice-password-123", 303),
        ("wrong-password-000", 401),
        ("alice-password-123", 303),
    ] {
        assert_eq!(sign_in(password).await.unwrap().status(), status);
    }
    let after = status_kib(host.child.id(), "RssAnon");
    assert!(
        after < before + 8 * 1024,
        "anonymous memory went from {before} to {after} KiB over three sign-ins"
    );
    drop(host);
}

/// A webhook receiver on loopback: answers 503 to the first post and 200
/// to the rest, and keeps each post's headers and body.
async fn receiver() -> (
    String,
    tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut posts = 0;
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then as many body bytes as Content-Length says.
            let (head, body) = loop {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the post ended early");
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let head = text[..end].to_string();
                    let length: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if data.len() >= end + 4 + length {
                        break (
                            head,
                            String::from_utf8_lossy(&data[end + 4..end + 4 + length]).to_string(),
                        );
                    }
                }
            };
            posts += 1;
            let status = if posts == 1 {
                "503 Service Unavailable"
            } else {
                "200 OK"
            };
            let answer =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            stream.write_all(answer.as_bytes()).await.unwrap();
            let _ = tx.send((head, body));
        }
    });
    (url, rx)
}

#[tokio::test]
async fn each_pending_approval_is_posted_once_signed_and_retried() {
    let (url, mut posts) = receiver().await;
    let m = manifest(vec![escalation_is_destructive()]);
    let text = std::fs::read_to_string(&m.path).unwrap();
    std::fs::write(
        &m.path,
        format!(
            "[host]\nconsole_url = \"https://console.example.test\"\napproval_webhook = {{ url = \"{url}\", secret = \"hook_key\" }}\n\n{text}"
        ),
    )
    .unwrap();
    let secret = "webhook-signing-secret-123";
    let task = open_task(&m, &["helpdesk_ticket_escalate"], &[]);
    let host = http_env(&m, &[], &[("TOOLHOST_SECRET_HOOK_KEY", secret)]);
    let client = connect_with(&host.url, Some(&task.token), ())
        .await
        .unwrap();
    let arguments = serde_json::json!({ "key": "T-1041", "team": "billing", "reason": "a double charge to refund" });
    let first = refused(&client, "helpdesk_ticket_escalate", arguments.clone()).await;
    let again = refused(&client, "helpdesk_ticket_escalate", arguments).await;
    assert_eq!(first["code"], "approval_required");
    assert_eq!(
        first["approval_id"], again["approval_id"],
        "the same call asks the same approval"
    );
    let approval = first["approval_id"].as_str().unwrap().to_string();
    assert_eq!(
        first["approval_url"],
        format!("https://console.example.test/approvals/{approval}")
    );

    // Refused once, then taken: two posts of the same body, and no third
    // for the repeated call.
    let (_, refused_body) = next_post(&mut posts).await;
    let (head, body) = next_post(&mut posts).await;
    assert_eq!(refused_body, body);
    let post: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(post["approval"], approval.as_str());
    assert_eq!(post["tool"], "helpdesk_ticket_escalate");
    assert_eq!(post["task"], task.id.as_str());
    let link = format!("https://console.example.test/approvals/{approval}");
    assert_eq!(post["url"], link.as_str());
    let text = post["text"].as_str().unwrap();
    assert!(text.contains("T-1041") && text.contains(&link), "{text}");
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no {name} in {head}"))
    };
    let timestamp = header("x-toolhost-timestamp");
    assert_eq!(
        header("x-toolhost-signature"),
        toolhost::webhook::sign(secret, &timestamp, &body)
    );
    assert!(!body.contains(secret) && !head.contains(secret));

    let state = m.path.parent().unwrap().join(".toolhost");
    let records = crate::audit::wait_for(&state, "approval_notified");
    let notified: Vec<&Value> = records
        .iter()
        .filter(|r| r["event"] == "approval_notified")
        .collect();
    assert_eq!(notified.len(), 1, "{notified:#?}");
    assert_eq!(notified[0]["outcome"], "sent");
    assert_eq!(notified[0]["attempts"], 2);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(posts.try_recv().is_err(), "one approval, one delivery");
    client.cancel().await.unwrap();
    drop(host);
}

async fn next_post(
    posts: &mut tokio::sync::mpsc::UnboundedReceiver<(String, String)>,
) -> (String, String) {
    tokio::time::timeout(Duration::from_secs(20), posts.recv())
        .await
        .expect("a post within 20 s")
        .unwrap()
}
