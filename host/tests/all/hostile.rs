//! The hostile-plugin suite: every attack a plugin can make on the host,
//! over both transports, while a well-behaved session keeps calling another
//! plugin. Each attack ends its own call with a structured error; the
//! other session sees no failure, and the host's memory comes back.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use serde_json::{Value, json};

use crate::support::*;

/// The hostile fixture with two granted directories, the spy with no
/// network, and the helpdesk as the well-behaved neighbour.
fn hostile_manifest() -> TestManifest {
    let m = manifest(vec![
        PluginEntry::fixture().with(
            "limits = { call_timeout_ms = 1000, memory_mib = 160, output_kib = 64, log_lines = 20 }\n\
             files = [{ host = \"kb\", guest = \"/kb\", mode = \"ro\" }, \
             { host = \"scratch\", guest = \"/scratch\", mode = \"rw\" }]",
        ),
        PluginEntry::helpdesk(),
        PluginEntry::spy(),
    ]);
    let dir = m.path.parent().unwrap();
    std::fs::create_dir(dir.join("kb")).unwrap();
    std::fs::create_dir(dir.join("scratch")).unwrap();
    std::fs::write(dir.join("kb/readme.txt"), "granted text").unwrap();
    // Links that point out of the granted directory: to a system file and
    // to the folder holding the manifest and the host's state.
    std::os::unix::fs::symlink("/etc/passwd", dir.join("kb/escape")).unwrap();
    std::os::unix::fs::symlink(dir, dir.join("kb/outside")).unwrap();
    m
}

/// What each attack must end with.
const FAULTS: [(&str, &str); 8] = [
    ("loop", "timeout"),
    ("sleep", "timeout"),
    ("memory", "out_of_memory"),
    ("recurse", "plugin_trap"),
    ("huge-output", "output_too_large"),
    ("big-output", "output_too_large"),
    ("trap", "plugin_trap"),
    ("not-json", "invalid_output"),
];

/// Runs every attack on `attacker` while `neighbour` calls the helpdesk;
/// returns how many neighbour calls succeeded.
async fn run_suite(attacker: &Client, neighbour: Arc<Client>, dir: &Path) -> u32 {
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicU32::new(0));
    let calls = {
        let (stop, served) = (stop.clone(), served.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let ticket = ok(
                    &neighbour,
                    "helpdesk_ticket_get",
                    json!({ "key": "T-1041" }),
                )
                .await;
                assert_eq!(ticket["key"], "T-1041");
                served.fetch_add(1, Ordering::Relaxed);
            }
        })
    };

    for (fault, code) in FAULTS {
        let error = refused(attacker, "fixture_fault_run", json!({ "fault": fault })).await;
        assert_eq!(error["code"], code, "{fault}: {error}");
        assert_eq!(error["ok"], false);
        assert_eq!(error["retryable"], code == "timeout", "{fault}: {error}");
        assert!(!error["message"].as_str().unwrap().is_empty());
    }

    // Files: only what the manifest granted, read-only where it said so.
    let file = |fault: &'static str, path: &'static str| {
        let args = json!({ "fault": fault, "path": path });
        async move { ok(attacker, "fixture_fault_run", args).await }
    };
    for path in [
        "/etc/passwd",
        "/kb/../etc/passwd",
        "/kb/../../../../etc/passwd",
        "/kb/escape",
        "/kb/outside/tools-manifest.toml",
        "/scratch/../kb/readme.txt",
    ] {
        let read = file("read-file", path).await;
        assert!(read.get("error").is_some(), "{path} was readable: {read}");
    }
    assert_eq!(
        file("read-file", "/kb/readme.txt").await["ok"],
        "granted text"
    );
    let listed = file("list-dir", "/kb").await;
    assert_eq!(listed["ok"], "escape,outside,readme.txt", "{listed}");
    let root = file("list-dir", "/").await;
    assert!(
        root.get("error").is_some() || !root["ok"].as_str().unwrap().contains("etc"),
        "{root}"
    );
    let denied = file("write-file", "/kb/new.txt").await;
    assert!(denied.get("error").is_some(), "{denied}");
    assert!(!dir.join("kb/new.txt").exists());
    let escaped = file("write-file", "/kb/outside/planted.txt").await;
    assert!(escaped.get("error").is_some(), "{escaped}");
    assert!(!dir.join("planted.txt").exists());
    assert_eq!(file("write-file", "/scratch/new.txt").await["ok"], "ok");
    assert_eq!(
        std::fs::read_to_string(dir.join("scratch/new.txt")).unwrap(),
        "written by the fixture"
    );

    // No environment, no sockets, no HTTP without an allow-list.
    let env = ok(attacker, "spy_env_read", json!({})).await;
    assert_eq!(env["vars"], json!([]), "{env}");
    let socket = ok(
        attacker,
        "spy_socket_open",
        json!({ "addr": "127.0.0.1:9" }),
    )
    .await;
    assert_eq!(socket["connected"], false, "{socket}");
    let http = refused(
        attacker,
        "spy_http_send",
        json!({ "url": "http://127.0.0.1:9/", "headers": {} }),
    )
    .await;
    assert_eq!(http["code"], "network_denied", "{http}");

    stop.store(true, Ordering::Relaxed);
    calls.await.expect("every neighbour call succeeded");
    served.load(Ordering::Relaxed)
}

/// The host's RSS may grow by this much over the whole suite: allocator
/// slack, not the 100 MB result or the plugin's memory bomb.
const RSS_SLACK_KIB: u64 = 64 << 10;

#[tokio::test]
async fn every_attack_ends_its_own_call_over_stdio() {
    let m = hostile_manifest();
    let (client, pid) = stdio_with_pid(&m, &[]).await;
    let client = Arc::new(client);
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    let baseline = rss_kib(pid);
    // Over stdio the neighbour shares the connection: its requests are in
    // flight at the same time as the attacks.
    let served = run_suite(&client, client.clone(), m.path.parent().unwrap()).await;
    assert!(served > 0);
    let after = rss_kib(pid);
    assert!(
        after < baseline + RSS_SLACK_KIB,
        "RSS {baseline} KiB before, {after} KiB after"
    );
    eprintln!("stdio: {served} neighbour calls; RSS {baseline} -> {after} KiB");
    let client = Arc::into_inner(client).expect("the neighbour is done");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn every_attack_ends_its_own_call_over_http() {
    let m = hostile_manifest();
    let host = http(&m, &[]);
    let attacker = connect(&host.url).await;
    let neighbour = Arc::new(connect(&host.url).await);
    ok(
        &neighbour,
        "helpdesk_ticket_get",
        json!({ "key": "T-1041" }),
    )
    .await;
    let pid = host.child.id();
    let baseline = rss_kib(pid);
    let served = run_suite(&attacker, neighbour.clone(), m.path.parent().unwrap()).await;
    assert!(served > 0);
    let after = rss_kib(pid);
    assert!(
        after < baseline + RSS_SLACK_KIB,
        "RSS {baseline} KiB before, {after} KiB after"
    );
    eprintln!("http: {served} neighbour calls; RSS {baseline} -> {after} KiB");
}

#[test]
fn hostile_describes_refuse_only_their_plugin() {
    let fixture = |name: &str, describe: &str| {
        PluginEntry::fixture_as(
            name,
            &format!(
                "limits = {{ call_timeout_ms = 500 }}\nconfig = {{ describe = \"{describe}\", prefix = \"{name}\" }}"
            ),
        )
    };
    let m = manifest(vec![
        fixture("many", "many"),
        fixture("extra", "extra-tool"),
        fixture("schema", "bad-schema"),
        fixture("stuck", "sleep"),
        PluginEntry::helpdesk(),
    ]);
    let out = start_and_exit(&m, &[]);
    let log = &out.stderr;
    let refusal = |plugin: &str| refusal_line(log, plugin).to_string();
    assert!(refusal("many").contains("many_n0_get"), "{log}");
    assert!(refusal("extra").contains("fixture_secret_run"), "{log}");
    assert!(refusal("schema").contains("JSON Schema"), "{log}");
    assert!(refusal("stuck").contains("500ms"), "{log}");
    assert!(
        log.contains("plugin loaded") && log.contains("helpdesk"),
        "{log}"
    );
}

#[test]
fn a_plugin_logging_a_gigabyte_writes_only_its_budget() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { call_timeout_ms = 60000, log_lines = 5 }"),
    ]);
    let out = toolhost()
        .env("TOOLHOST_LOG", "info")
        .args([
            "call",
            "fixture_fault_run",
            "--args",
            r#"{"fault":"log-flood"}"#,
        ])
        .arg("--manifest")
        .arg(&m.path)
        .output()
        .unwrap();
    let stdout: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stdout["flooded"], true, "{stdout}");
    let log = String::from_utf8_lossy(&out.stderr);
    let flood = log.lines().filter(|l| l.contains("yyyyyyyy")).count();
    assert!(flood <= 5, "{flood} flood lines logged");
    assert!(log.contains("log budget of 5 lines"), "{log}");
    // Each line that was logged is cut, not a megabyte long.
    assert!(log.len() < 64 << 10, "{} bytes of log", log.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_log_nobody_reads_keeps_serving() {
    use rmcp::ServiceExt;
    // A client that pipes the host's stderr and never reads it (the pipe
    // holds 64 KiB), and a plugin logging its whole budget of 2 KiB lines.
    let m = manifest(vec![PluginEntry::fixture().with(
        "instance = \"call\"\nlimits = { concurrent = 4, call_timeout_ms = 5000, log_lines = 200 }",
    )]);
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"));
    cmd.env("TOOLHOST_LOG", "info")
        .args(["serve", "--stdio", "--manifest"])
        .arg(&m.path);
    let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _unread = stderr.expect("the host's stderr, kept open and never read");
    let client = Arc::new(().serve(transport).await.expect("initialize over stdio"));
    let floods: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                call(
                    &client,
                    "fixture_fault_run",
                    json!({ "fault": "log-flood" }),
                )
                .await
            })
        })
        .collect();
    for flood in floods {
        let flood = tokio::time::timeout(std::time::Duration::from_secs(60), flood)
            .await
            .expect("a call that logs more than the pipe holds still ends")
            .unwrap();
        // Flooding a gigabyte may take longer than its deadline; either
        // way the call ended.
        let flood = content(&flood);
        assert!(
            flood["flooded"] == true || flood["code"] == "timeout",
            "{flood}"
        );
    }
    let echo = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        ok(&client, "fixture_echo_get", json!({ "text": "still here" })),
    )
    .await
    .expect("the host still answers");
    assert_eq!(echo["text"], "still here");
}

#[tokio::test]
async fn a_host_whose_log_nobody_reads_still_exits() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let m = manifest(vec![PluginEntry::fixture().with(
        "instance = \"call\"\nlimits = { call_timeout_ms = 5000, log_lines = 200 }",
    )]);
    let mut host = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolhost"))
        .env("TOOLHOST_LOG", "info")
        .args(["serve", "--stdio", "--manifest"])
        .arg(&m.path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Kept open and never read: the pipe fills, and stays full.
    let _unread = host.stderr.take();
    let mut stdin = host.stdin.take().unwrap();
    let mut stdout = tokio::io::BufReader::new(host.stdout.take().unwrap()).lines();
    let messages = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": { "name": "test", "version": "1" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
    ];
    // Six floods of 200 lines: more than the log queue holds.
    let floods = (2..8).map(|id| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "fixture_fault_run", "arguments": { "fault": "log-flood" } } })
    });
    for message in messages.into_iter().chain(floods) {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let answered = tokio::time::timeout(std::time::Duration::from_secs(120), async {
        let mut floods = 0;
        while let Some(line) = stdout.next_line().await.unwrap() {
            if serde_json::from_str::<Value>(&line).unwrap()["id"].as_i64() >= Some(2) {
                floods += 1;
                if floods == 6 {
                    return;
                }
            }
        }
        panic!("the host closed stdout before answering the floods");
    });
    answered.await.expect("the floods are answered");
    // End of input: the host stops, though what it logged cannot be written.
    drop(stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(30), host.wait())
        .await
        .expect("the host exits though nobody reads its stderr")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn beyond_its_queue_a_plugin_is_busy_and_recovers() {
    let m = manifest(vec![PluginEntry::fixture().with(
        "instance = \"call\"\nlimits = { concurrent = 1, queue = 1, call_timeout_ms = 3000 }",
    )]);
    let host = http(&m, &[]);
    let (a, b, c) = (
        connect(&host.url).await,
        connect(&host.url).await,
        connect(&host.url).await,
    );
    let sleep = json!({ "fault": "sleep" });
    let (first, second, third) = tokio::join!(
        refused(&a, "fixture_fault_run", sleep.clone()),
        refused(&b, "fixture_fault_run", sleep.clone()),
        async {
            // Once one call runs and one waits, a third finds no room.
            // (Not a measurement: a margin well inside the 3 s calls.)
            tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
            refused(&c, "fixture_fault_run", sleep.clone()).await
        },
    );
    assert_eq!(first["code"], "timeout");
    assert_eq!(second["code"], "timeout");
    assert_eq!(third["code"], "busy", "{third}");
    assert_eq!(third["retryable"], true);
    let echo = ok(&c, "fixture_echo_get", json!({ "text": "room again" })).await;
    assert_eq!(echo["text"], "room again");
}

#[tokio::test]
async fn a_session_flooding_a_plugin_gets_busy_while_another_session_is_served() {
    // Ten slow calls would take all eight places of the plugin; the
    // session's share is two, so the last two places are kept for others:
    // the flood gets six and four are refused at once, and another client
    // still gets a place and runs.
    let m = manifest(vec![PluginEntry::fixture().with(
        "instance = \"call\"\nlimits = { concurrent = 8, queue = 0, session_share = 2, call_timeout_ms = 3000 }",
    )]);
    let host = http(&m, &[]);
    let (flooder, other) = (connect(&host.url).await, connect(&host.url).await);
    let sleep = json!({ "fault": "sleep" });
    let (flood, served) = tokio::join!(
        futures::future::join_all((0..10).map(|_| refused(
            &flooder,
            "fixture_fault_run",
            sleep.clone()
        ))),
        async {
            // Not a measurement: a margin for the flood to arrive, well
            // inside the 3 s its running calls take.
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            ok(
                &other,
                "fixture_echo_get",
                json!({ "text": "still served" }),
            )
            .await
        },
    );
    assert_eq!(served["text"], "still served");
    let codes: Vec<&str> = flood.iter().map(|e| e["code"].as_str().unwrap()).collect();
    assert_eq!(
        codes.iter().filter(|c| **c == "timeout").count(),
        6,
        "{codes:?}"
    );
    assert_eq!(
        codes.iter().filter(|c| **c == "busy").count(),
        4,
        "{codes:?}"
    );
    let busy = flood.iter().find(|e| e["code"] == "busy").unwrap();
    assert_eq!(busy["retryable"], true);
    assert!(
        busy["message"].as_str().unwrap().contains("fair share"),
        "{busy}"
    );
}

#[test]
fn directories_that_expose_the_host_or_each_other_are_refused() {
    let grant = |name: &str, files: &str| {
        PluginEntry::fixture_as(
            name,
            &format!("config = {{ prefix = \"{name}\" }}\nfiles = [{files}]"),
        )
    };
    let m = manifest(vec![
        grant("data", r#"{ host = "data", guest = "/data", mode = "rw" }"#),
        grant(
            "nested",
            r#"{ host = "data/kb", guest = "/kb", mode = "ro" }"#,
        ),
        grant(
            "state",
            r#"{ host = ".toolhost", guest = "/state", mode = "ro" }"#,
        ),
        grant("whole", r#"{ host = ".", guest = "/all", mode = "ro" }"#),
        grant(
            "missing",
            r#"{ host = "nowhere", guest = "/x", mode = "ro" }"#,
        ),
        grant(
            "shared",
            r#"{ host = "docs", guest = "/docs", mode = "ro" }"#,
        ),
        grant(
            "again",
            r#"{ host = "docs", guest = "/docs", mode = "ro" }"#,
        ),
    ]);
    let dir = m.path.parent().unwrap();
    for sub in ["data/kb", ".toolhost", "docs"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let out = start_and_exit(&m, &[]);
    let log = &out.stderr;
    let refusal = |plugin: &str| {
        log.lines()
            .find(|l| l.contains(&format!("plugin `{plugin}` refused")))
            .map(str::to_string)
    };
    assert!(refusal("data").is_none(), "{log}");
    assert!(refusal("nested").unwrap().contains("writable"), "{log}");
    assert!(refusal("state").unwrap().contains("state_dir"), "{log}");
    assert!(refusal("whole").unwrap().contains("state_dir"), "{log}");
    assert!(refusal("missing").unwrap().contains("cannot open"), "{log}");
    // Read-only grants of one directory to two plugins are fine.
    assert!(
        refusal("shared").is_none() && refusal("again").is_none(),
        "{log}"
    );
    // A writable grant beside state_dir is served, with a warning; a
    // read-only one gets none.
    let beside = |plugin: &str| {
        log.lines().any(|l| {
            l.contains("same filesystem as state_dir") && l.contains(&format!("plugin={plugin}"))
        })
    };
    assert!(beside("data"), "{log}");
    assert!(!beside("shared"), "{log}");
}

#[tokio::test]
async fn a_granted_directory_swapped_after_start_is_not_followed() {
    let m =
        manifest(vec![PluginEntry::fixture().with(
            r#"files = [{ host = "kb", guest = "/kb", mode = "ro" }]"#,
        )]);
    let dir = m.path.parent().unwrap();
    std::fs::create_dir(dir.join("kb")).unwrap();
    std::fs::write(dir.join("kb/readme.txt"), "granted text").unwrap();
    std::fs::create_dir(dir.join("private")).unwrap();
    std::fs::write(dir.join("private/key.txt"), "not for plugins").unwrap();
    let host = http(&m, &[]);
    // Whoever may rename in the manifest's folder puts another directory
    // where the checked one was, after the host checked and opened it.
    std::fs::rename(dir.join("kb"), dir.join("kb-checked")).unwrap();
    std::os::unix::fs::symlink(dir.join("private"), dir.join("kb")).unwrap();
    let client = connect(&host.url).await;
    let file = |fault: &'static str, path: &'static str| {
        ok(
            &client,
            "fixture_fault_run",
            json!({ "fault": fault, "path": path }),
        )
    };
    assert_eq!(file("list-dir", "/kb").await["ok"], "readme.txt");
    assert_eq!(
        file("read-file", "/kb/readme.txt").await["ok"],
        "granted text"
    );
    let key = file("read-file", "/kb/key.txt").await;
    assert!(key.get("error").is_some(), "{key}");
}

#[tokio::test]
async fn a_fuel_limit_ends_an_endless_loop_deterministically() {
    let m = manifest(vec![
        PluginEntry::fixture().with("limits = { fuel = 5000000 }"),
    ]);
    let client = stdio(&m, &[]).await;
    let error = refused(&client, "fixture_fault_run", json!({ "fault": "loop" })).await;
    assert_eq!(error["code"], "out_of_fuel", "{error}");
    assert_eq!(error["retryable"], false);
    // A normal call fits in the same budget.
    let echo = ok(&client, "fixture_echo_get", json!({ "text": "fuelled" })).await;
    assert_eq!(echo["text"], "fuelled");
    client.cancel().await.unwrap();
}

#[test]
fn the_host_refuses_to_start_when_a_grant_holds_its_admin_token() {
    use std::os::unix::fs::PermissionsExt;
    let m = manifest(vec![PluginEntry::fixture().with(
        "files = [{ host = \"shared\", guest = \"/shared\", mode = \"ro\" }]",
    )]);
    let dir = m.path.parent().unwrap().join("shared");
    std::fs::create_dir(&dir).unwrap();
    let token = dir.join("admin.token");
    std::fs::write(&token, "an-admin-token-long-enough-for-the-host-0123456789").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The metrics token reads the metrics: it is kept from plugins alike.
    for flag in ["--admin-token-file", "--metrics-token-file"] {
        let out = toolhost()
            .env(
                "TOOLHOST_ADMIN_TOKEN",
                "another-admin-token-long-enough-0123456789",
            )
            .args(["serve", "--http", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
            .arg(flag)
            .arg(&token)
            .arg("--manifest")
            .arg(&m.path)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let log = String::from_utf8_lossy(&out.stderr);
        assert!(
            log.contains(flag)
                && log.contains("plugin `fixture` is granted")
                && log.contains("holds it"),
            "{log}"
        );
    }
}

/// The database URL file holds PostgreSQL's password: no grant may hold it.
/// (A serving host starts while its database cannot be reached, so no
/// database is needed to see the refusal.)
#[test]
fn no_plugin_may_be_granted_the_database_url_file() {
    use std::os::unix::fs::PermissionsExt;
    let grant = "files = [{ host = \"shared\", guest = \"/shared\", mode = \"ro\" }]";
    let fixture = manifest(vec![PluginEntry::fixture().with(grant)]);
    let text = std::fs::read_to_string(&fixture.path).unwrap();
    let m = manifest_text(&format!(
        "[host]\nstore = \"postgres\"\ndatabase_url_file = \"shared/db-url\"\n\n{text}"
    ));
    let dir = m.path.parent().unwrap().join("shared");
    std::fs::create_dir(&dir).unwrap();
    let url = dir.join("db-url");
    // Nothing listens on port 1 of the loopback: refused at once.
    std::fs::write(&url, "postgres://toolhost:a-password@127.0.0.1:1/toolhost").unwrap();
    std::fs::set_permissions(&url, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The file's URL (`toolhost()` clears the environment's).
    let out = start_and_exit(&m, &["--strict"]);
    assert!(!out.success);
    assert!(
        out.stderr.contains("plugin `fixture` refused")
            && out.stderr.contains("db-url, which no plugin may see"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn a_plugin_inventing_error_codes_cannot_grow_the_metrics() {
    const ADMIN_TOKEN: &str = "admin-token-for-plugin-error-codes-01234";
    let m = manifest(vec![PluginEntry::fixture()]);
    let host = http_env(
        &m,
        &["--admin", "127.0.0.1:0"],
        &[("TOOLHOST_ADMIN_TOKEN", ADMIN_TOKEN)],
    );
    let client = connect(&host.url).await;
    let calls = 600;
    for i in 0..calls {
        // Codes it keeps using, and a new one for every other call.
        let code = if i % 2 == 0 {
            format!("invented_{i}")
        } else {
            format!("kept_{}", i % 3)
        };
        let error = refused(
            &client,
            "fixture_fault_run",
            json!({ "fault": "error-code", "code": code }),
        )
        .await;
        assert_eq!(
            error["code"],
            json!(code),
            "the client still gets the plugin's code"
        );
    }
    let series = scrape(&host, ADMIN_TOKEN, "toolhost_tool_calls_total").await;
    let count = |outcome: &str| {
        series
            .iter()
            .find(|s| s.labels["outcome"] == outcome)
            .map_or(0, |s| s.value.parse::<u32>().unwrap())
    };
    // The tool's first 32 codes get a series each (3 kept, 29 invented);
    // the other 271 invented are counted as `plugin_error`.
    assert_eq!(series.len(), 32 + 1, "{series:?}");
    assert_eq!(count("kept_0") + count("kept_1") + count("kept_2"), 300);
    assert_eq!(count("invented_0"), 1);
    assert_eq!(count("plugin_error"), 271);
    let total: u32 = series.iter().map(|s| s.value.parse::<u32>().unwrap()).sum();
    assert_eq!(total, calls);
}

/// A plugin that keeps opening files and never closes them is stopped at
/// its bound of host handles (the call ends as a trap), instead of using up
/// the descriptors of the whole process; they are given back with the
/// instance, and the host goes on serving.
#[tokio::test]
async fn a_plugin_hoarding_handles_is_stopped_at_its_bound() {
    let m = hostile_manifest();
    let (client, pid) = stdio_with_pid(&m, &[]).await;
    let hoard = call(
        &client,
        "fixture_fault_run",
        json!({ "fault": "hoard-files", "path": "/kb/readme.txt" }),
    )
    .await;
    let body = content(&hoard);
    assert_eq!(body["code"], "plugin_trap", "{body}");
    let descriptors = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    assert!(descriptors < 1_000, "{descriptors} descriptors open");
    ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    client.cancel().await.unwrap();
}

/// An instance may hold a host handle per 64 KiB of its memory limit (at
/// least 256, at most 4 096), so what its handles make the host hold stays
/// within about twice what its own memory may take: 2 000 open files are
/// past the bound of the default 64 MiB (the call ends as a trap, and the
/// instance goes with its files), and within that of 128 MiB.
#[tokio::test]
async fn an_instances_handles_are_bounded_by_its_memory_limit() {
    for (memory_mib, fits) in [(64, false), (128, true)] {
        let m = files_manifest_with(memory_mib);
        let (client, pid) = stdio_with_pid(&m, &[]).await;
        let kept = call(
            &client,
            "fixture_fault_run",
            json!({ "fault": "keep-files", "path": "/kb/readme.txt" }),
        )
        .await;
        let body = content(&kept);
        if fits {
            assert_eq!(body["held"], 2_000, "{body}");
        } else {
            assert_eq!(body["code"], "plugin_trap", "{body}");
            let descriptors = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .count();
            assert!(descriptors < 500, "{descriptors} descriptors open");
        }
        client.cancel().await.unwrap();
    }
}

/// Files held open count per plugin, over all its instances: sessions that
/// each keep files open share the plugin's places, an open beyond them
/// fails (the plugin sees an error it can handle, not a trap), and a
/// session's places come back when it closes.
#[tokio::test]
async fn files_are_counted_per_plugin() {
    let (_m, host, [first, second, third]) = files_host().await;
    // A file closed gives its place back at once.
    let read = json!({ "fault": "read-file", "path": "/kb/readme.txt" });
    for _ in 0..3 {
        let body = content(&call(&first, "fixture_fault_run", read.clone()).await);
        assert!(body.to_string().contains("granted text"), "{body}");
    }
    assert_eq!(keep(&first).await["held"], 2_000);
    assert_eq!(keep(&second).await["held"], 2_000);
    // 96 places are left, which no single instance's handle bound stops.
    let refused = keep(&third).await;
    assert_eq!(refused["opened"], 96, "{refused}");
    let error = refused["error"].as_str().expect("the open failed");
    assert!(error.to_lowercase().contains("quota"), "{error}");
    let descriptors = || {
        std::fs::read_dir(format!("/proc/{}/fd", host.child.id()))
            .unwrap()
            .count()
    };
    assert!(descriptors() < 4_096 + 200, "{} open", descriptors());
    let body = content(&call(&second, "fixture_fault_run", read.clone()).await);
    assert!(body.to_string().to_lowercase().contains("quota"), "{body}");

    // The first session's instance goes with it, and its places with that.
    first.cancel().await.unwrap();
    let again = once_held(2_096, async || keep(&third).await).await;
    assert_eq!(again["opened"], 2_000, "{again}");
    assert_eq!(again["held"], 2_096, "{again}");
    ok(&second, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
}

/// A file whose descriptor is dropped while a stream of it lives is still
/// open in the host, so it keeps its place until the stream goes too; then
/// another session's instance may have it.
#[tokio::test]
async fn a_file_held_by_its_stream_keeps_its_place() {
    let (_m, _host, [first, second, third]) = files_host().await;
    let run = |fault: &str| json!({ "fault": fault, "path": "/kb/readme.txt" });
    let streamed = content(&call(&first, "fixture_fault_run", run("stream-files")).await);
    assert_eq!(streamed["held"], 2_000, "{streamed}");
    assert_eq!(keep(&second).await["held"], 2_000);
    let refused = keep(&third).await;
    assert_eq!(refused["opened"], 96, "{refused}");

    // Once the streams are gone, their places serve any instance.
    content(&call(&first, "fixture_fault_run", run("drop-streams")).await);
    let again = keep(&third).await;
    assert_eq!(again["opened"], 2_000, "{again}");
}

/// Requests a plugin made and filled a body of, but never sent, hold their
/// bodies' bytes in the host: a write carries at most 64 KiB, the bodies
/// are counted per plugin over all its instances, a body beyond them is
/// refused (an error the guest can handle, not a trap), and a session's
/// come back when it closes.
#[tokio::test]
async fn unsent_request_bodies_are_counted_per_plugin() {
    let m = manifest(vec![PluginEntry::fixture(), PluginEntry::helpdesk()]);
    let host = http(&m, &[]);
    let first = connect(&host.url).await;
    let second = connect(&host.url).await;
    let kept = keep_bodies(&first).await;
    assert_eq!(kept["opened"], 64, "{kept}");
    assert_eq!(kept["chunk"], 64 << 10, "{kept}");
    let error = kept["error"].as_str().expect("a body was refused");
    assert!(error.contains("refused the body"), "{error}");
    assert_eq!(keep_bodies(&second).await["opened"], 0);

    first.cancel().await.unwrap();
    let again = once_held(64, async || keep_bodies(&second).await).await;
    assert_eq!(again["held"], 64, "{again}");
    ok(&second, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
}

/// What `keep` reports once this session holds `count`: a closed
/// session's places come back a moment after it closes (a plugin's bodies
/// one at a time as its instance's table goes, so several calls may be
/// needed to take them all).
async fn once_held(count: u64, keep: impl AsyncFn() -> Value) -> Value {
    let mut again = Value::Null;
    for _ in 0..100 {
        again = keep().await;
        if again["held"] == count {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    again
}

/// Has the fixture make up to 2 000 more unsent requests with filled
/// bodies and keep them; what it reports.
async fn keep_bodies(client: &Client) -> Value {
    kept(client, "keep-bodies", "").await
}

/// When the process's limit on open files leaves less than the plugins'
/// 4 096 places each beside what the host may need, they share only what
/// it leaves: their opens cannot take the descriptors of the host's
/// connections, trail and store, and it goes on serving.
#[tokio::test]
async fn plugins_share_only_the_open_files_the_host_spares() {
    let m = files_manifest();
    let host = http_by(
        toolhost_under(&["prlimit", "--nofile=3000:3000"]),
        &m,
        &["--max-connections", "100"],
    );
    // 3 000 less 100 connections, 1 000 instances (the pool's) each opening
    // the one granted directory again, and 512 for the rest.
    let first = connect(&host.url).await;
    let refused = keep(&first).await;
    assert_eq!(refused["opened"], 1_388, "{refused}");
    let error = refused["error"].as_str().expect("the open failed");
    assert!(error.to_lowercase().contains("quota"), "{error}");
    // The connections it was told to take are still there for it: 90 held
    // open beside the plugin's files, then a new session and a call (with
    // its audit records).
    let address = host.url.trim_start_matches("http://");
    let address = &address[..address.find('/').unwrap_or(address.len())];
    let held: Vec<std::net::TcpStream> = (0..90)
        .map(|_| std::net::TcpStream::connect(address).unwrap())
        .collect();
    let second = connect(&host.url).await;
    ok(&second, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    let descriptors = std::fs::read_dir(format!("/proc/{}/fd", host.child.id()))
        .unwrap()
        .count();
    assert!(
        (1_388 + 90..1_388 + 300).contains(&descriptors),
        "{descriptors} open"
    );
    drop(held);
}

/// A directory's listing is read whole into the host before the guest
/// sees it: listings held are counted per plugin over all its instances,
/// one beyond them fails with `quota`, and a session's come back when it
/// closes.
#[tokio::test]
async fn directory_listings_are_counted_per_plugin() {
    let (_m, _host, [first, second, _]) = files_host().await;
    let listings = async |client: &Client| kept(client, "keep-listings", "/kb").await;
    let kept = listings(&first).await;
    assert_eq!(kept["opened"], 16, "{kept}");
    let error = kept["error"].as_str().expect("a listing was refused");
    assert!(error.to_lowercase().contains("quota"), "{error}");
    assert_eq!(listings(&second).await["opened"], 0);
    first.cancel().await.unwrap();
    let again = once_held(16, async || listings(&second).await).await;
    assert_eq!(again["held"], 16, "{again}");
}

/// An HTTP host on [`files_manifest`] (kept: its folder holds the host's
/// state) and three sessions of it.
async fn files_host() -> (TestManifest, HttpHost, [Client; 3]) {
    let m = files_manifest();
    let host = http(&m, &[]);
    let sessions = [
        connect(&host.url).await,
        connect(&host.url).await,
        connect(&host.url).await,
    ];
    (m, host, sessions)
}

/// The fixture with a granted directory, time enough for 2 000 opens in a
/// call on a busy machine, and memory enough for 4 096 host handles.
fn files_manifest() -> TestManifest {
    files_manifest_with(256)
}

/// [`files_manifest`] with `memory_mib` of memory per instance (a handle
/// per 64 KiB of it).
fn files_manifest_with(memory_mib: u32) -> TestManifest {
    let m = manifest(vec![
        PluginEntry::fixture().with(&format!(
            "limits = {{ call_timeout_ms = 30000, memory_mib = {memory_mib} }}\n\
             files = [{{ host = \"kb\", guest = \"/kb\", mode = \"ro\" }}]",
        )),
        PluginEntry::helpdesk(),
    ]);
    let dir = m.path.parent().unwrap();
    std::fs::create_dir(dir.join("kb")).unwrap();
    std::fs::write(dir.join("kb/readme.txt"), "granted text").unwrap();
    m
}

/// Has the fixture open its granted file up to 2 000 more times and keep
/// the handles; what it reports.
async fn keep(client: &Client) -> Value {
    kept(client, "keep-files", "/kb/readme.txt").await
}

/// What the fixture's `fault` (one that keeps what it makes, under `path`)
/// reports; it must not fail as a whole.
async fn kept(client: &Client, fault: &str, path: &str) -> Value {
    let kept = call(
        client,
        "fixture_fault_run",
        json!({ "fault": fault, "path": path }),
    )
    .await;
    let body = content(&kept);
    assert_eq!(kept.is_error, Some(false), "{body}");
    body
}

/// wasi:http checks only the form of a method or an authority a plugin
/// sets on a request it builds, and keeps it until the request goes: the
/// host refuses longer ones than it would ever send (a method of 32 bytes,
/// an authority of 1 KiB), so a kept request cannot hold megabytes.
#[tokio::test]
async fn a_request_being_built_cannot_hold_a_huge_method_or_authority() {
    let m = manifest(vec![PluginEntry::fixture()]);
    let client = stdio(&m, &[]).await;
    let fields = kept(&client, "request-fields", "").await;
    assert_eq!(
        fields,
        json!({
            "method_32": true, "method_33": false, "method_1mib": false,
            "authority_1024": true, "authority_1025": false, "authority_1mib": false,
        })
    );
    client.cancel().await.unwrap();
}
