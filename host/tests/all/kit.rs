//! The author kit, end to end, as an outside author uses it: scaffold a
//! plugin, build it for wasm32-wasip2, inspect it, declare it, lint the
//! manifest, call both tools without a client, and list them over MCP.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

/// `toolhost ...` with cargo pointed at the workspace's target directory
/// and package cache, so the scaffold fetches nothing. It builds its own
/// release profile (LTO, like the workspace's plugin profile, but not the
/// same profile), so it compiles its dependencies once per target
/// directory: about 40 s in CI.
fn kit(args: &[&str], dir: &Path) -> Output {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    toolhost()
        .args(args)
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env("CARGO_NET_OFFLINE", "true")
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test]
async fn an_outside_author_goes_from_nothing_to_a_served_tool() {
    let work = tempfile::tempdir().unwrap();
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk");
    let sdk = sdk.to_str().unwrap();

    // Scaffold and build; the block to paste carries the real digest.
    let block = succeeded(&kit(
        &["plugin", "new", "kitdemo", "--dir", "kitdemo", "--sdk", sdk],
        work.path(),
    ));
    let component = block
        .lines()
        .find_map(|l| l.strip_prefix("component = "))
        .map(|c| c.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("no component in {block}"));
    let digest = sha256(Path::new(&component));
    assert!(block.contains(&format!("sha256 = \"{digest}\"")), "{block}");
    assert!(work.path().join("kitdemo/src/lib.rs").exists());

    // Inspect: fits the world, two tools, no lint finding.
    let inspected = json_of(&kit(
        &["plugin", "inspect", &component, "--format", "json"],
        work.path(),
    ));
    assert_eq!(inspected["misfit"], Value::Null, "{inspected:#}");
    assert_eq!(inspected["sha256"], digest);
    assert!(
        inspected["exports"]
            .as_array()
            .unwrap()
            .contains(&json!("toolhost:plugin/tools@0.2.0"))
    );
    let names: Vec<&str> = inspected["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kitdemo_item_get", "kitdemo_item_save"]);
    assert_eq!(inspected["tools"][0]["risk"], "read");
    assert_eq!(
        inspected["tools"][0]["input_schema"]["additionalProperties"],
        false
    );
    assert_eq!(inspected["lint"]["findings"], json!([]), "{inspected:#}");
    let text = succeeded(&kit(&["plugin", "inspect", &component], work.path()));
    assert!(
        text.contains("fits toolhost:plugin@0.2.0") && text.contains("0 error(s), 0 warning(s)"),
        "{text}"
    );

    // Declare it as printed; the manifest lints clean.
    let m = manifest_text(&block);
    let linted = kit(&["lint", m.path.to_str().unwrap()], work.path());
    assert!(
        succeeded(&linted).contains("0 error(s), 0 warning(s), 0 allowed"),
        "{linted:?}"
    );

    // Both tools without a client: the read works, the write needs a task.
    let manifest = m.path.to_str().unwrap();
    let call = |tool: &str, args: Value, token: Option<&str>| {
        let mut cmd = vec!["call", tool, "--manifest", manifest];
        let args = args.to_string();
        cmd.extend(["--args", &args]);
        if let Some(token) = token {
            cmd.extend(["--task-token", token]);
        }
        kit(&cmd, work.path())
    };
    let missing = call("kitdemo_item_get", json!({ "key": "first" }), None);
    assert!(!missing.status.success());
    assert_eq!(json_of(&missing)["code"], "not_found");
    let ungranted = call(
        "kitdemo_item_save",
        json!({ "key": "first", "text": "hello" }),
        None,
    );
    assert_eq!(json_of(&ungranted)["code"], "not_granted");
    let task = open_task(&m, &["kitdemo_item_save"], &[]);
    let saved = call(
        "kitdemo_item_save",
        json!({ "key": "first", "text": "hello" }),
        Some(&task.token),
    );
    assert_eq!(json_of(&saved)["text"], "hello", "{saved:?}");
    let read = call("kitdemo_item_get", json!({ "key": "first" }), None);
    assert_eq!(json_of(&read), json!({ "key": "first", "text": "hello" }));

    // And an MCP client sees it, classed as the manifest says.
    let client = stdio(&m, &[]).await;
    let tools = client.list_all_tools().await.unwrap();
    let get = tools
        .iter()
        .find(|t| t.name == "kitdemo_item_get")
        .expect("listed");
    assert_eq!(
        get.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    assert!(tools.iter().any(|t| t.name == "kitdemo_item_save"));
    let item = ok(&client, "kitdemo_item_get", json!({ "key": "first" })).await;
    assert_eq!(item["text"], "hello");
    client.cancel().await.unwrap();
}

#[test]
fn the_scaffold_refuses_a_folder_that_is_not_empty_and_a_bad_name() {
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("taken")).unwrap();
    std::fs::write(work.path().join("taken/keep.txt"), "mine").unwrap();
    let out = kit(
        &["plugin", "new", "taken", "--dir", "taken", "--no-build"],
        work.path(),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not empty"));
    assert_eq!(
        std::fs::read_to_string(work.path().join("taken/keep.txt")).unwrap(),
        "mine"
    );
    let out = kit(&["plugin", "new", "Bad_Name", "--no-build"], work.path());
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("plugin name"));
}

#[test]
fn inspect_says_when_a_file_is_not_a_plugin() {
    let work = tempfile::tempdir().unwrap();
    let junk = work.path().join("junk.wasm");
    std::fs::write(&junk, b"\0asm not really").unwrap();
    let out = kit(
        &[
            "plugin",
            "inspect",
            junk.to_str().unwrap(),
            "--format",
            "json",
        ],
        work.path(),
    );
    assert!(!out.status.success());
    let report = json_of(&out);
    assert!(
        report["misfit"]
            .as_str()
            .unwrap()
            .contains("not a component"),
        "{report:#}"
    );
}
