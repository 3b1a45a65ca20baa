//! What is served: the tool list, and the plugins refused at load.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn the_nine_helpdesk_tools_are_listed_with_annotations_from_the_manifest() {
    let m = manifest(vec![
        PluginEntry::helpdesk().risk("helpdesk_ticket_close", "destructive"),
    ]);
    let client = stdio(&m, &[]).await;
    check_helpdesk_listing(&client).await;
    client.cancel().await.unwrap();

    let host = http(&m, &[]);
    let client = connect(&host.url).await;
    check_helpdesk_listing(&client).await;
    client.cancel().await.unwrap();
}

async fn check_helpdesk_listing(client: &Client) {
    let listed = tools(client).await;
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_ref()).collect();
    let expected: Vec<&str> = HELPDESK_TOOLS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected);
    for tool in &listed {
        let a = tool.annotations.as_ref().expect("annotations");
        assert!(
            tool.title.as_deref().is_some_and(|t| !t.is_empty()),
            "{} has a title",
            tool.name
        );
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 40));
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
        match tool.name.as_ref() {
            "helpdesk_ticket_close" => {
                assert_eq!(a.read_only_hint, Some(false));
                assert_eq!(a.destructive_hint, Some(true));
            }
            "helpdesk_ticket_categorize"
            | "helpdesk_ticket_answer"
            | "helpdesk_ticket_escalate" => {
                assert_eq!(a.read_only_hint, Some(false));
                assert_eq!(a.destructive_hint, Some(false));
            }
            _ => {
                assert_eq!(a.read_only_hint, Some(true));
                assert_eq!(a.destructive_hint, None);
            }
        }
    }
    let list = listed
        .iter()
        .find(|t| t.name == "helpdesk_ticket_list")
        .unwrap();
    assert!(
        list.output_schema.is_some(),
        "list promises an output schema"
    );
}

#[tokio::test]
async fn idempotent_hint_is_given_only_where_the_manifest_says_so() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    std::fs::write(
        &m.path,
        std::fs::read_to_string(&m.path).unwrap().replace(
            "name = \"helpdesk_ticket_categorize\"\nrisk = \"write\"\n",
            "name = \"helpdesk_ticket_categorize\"\nrisk = \"write\"\nidempotent = true\n",
        ),
    )
    .unwrap();
    let client = stdio(&m, &[]).await;
    for tool in tools(&client).await {
        let hint = tool.annotations.unwrap().idempotent_hint;
        match tool.name.as_ref() {
            "helpdesk_ticket_categorize" => assert_eq!(hint, Some(true)),
            "helpdesk_ticket_answer" => assert_eq!(hint, Some(false)),
            _ => {}
        }
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_component_that_differs_from_its_pin_is_refused_and_the_rest_served() {
    let tampered_dir = tempfile::tempdir().unwrap();
    let tampered = tampered_dir.path().join("fixture.wasm");
    let mut bytes = std::fs::read(wasm("fixture")).unwrap();
    let pinned = sha256(&wasm("fixture"));
    bytes.push(0);
    std::fs::write(&tampered, &bytes).unwrap();
    let mut fixture = PluginEntry::fixture();
    fixture.component = tampered.clone();
    fixture.sha256 = pinned.clone();
    let m = manifest(vec![fixture, PluginEntry::helpdesk()]);

    let client = stdio(&m, &[]).await;
    let names: Vec<String> = tools(&client)
        .await
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names.len(), 9, "only the helpdesk is served: {names:?}");
    assert!(names.iter().all(|n| n.starts_with("helpdesk_")));
    client.cancel().await.unwrap();

    // --strict refuses to serve at all, and says which digests differ.
    let out = start_and_exit(&m, &["--strict"]);
    assert!(!out.success);
    let stderr = &out.stderr;
    assert!(stderr.contains(&pinned), "{stderr}");
    assert!(stderr.contains(&sha256(&tampered)), "{stderr}");
    assert!(stderr.contains("--strict"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
}

async fn served_tools(entries: Vec<PluginEntry>) -> Vec<String> {
    served_names(&manifest(entries)).await
}

#[tokio::test]
async fn a_plugin_offering_an_undeclared_tool_is_refused() {
    let sneaky = PluginEntry::fixture().with("config = { describe = \"extra-tool\" }");
    let names = served_tools(vec![sneaky, PluginEntry::helpdesk()]).await;
    assert_eq!(names.len(), 9);
    assert!(
        !names.iter().any(|n| n.starts_with("fixture_")),
        "{names:?}"
    );

    // The same happens to the helpdesk when the manifest leaves a tool out.
    let partial = PluginEntry::helpdesk().without_tool("helpdesk_ticket_close");
    let names = served_tools(vec![partial, PluginEntry::fixture()]).await;
    assert_eq!(names, ["fixture_echo_get", "fixture_fault_run"]);
}

#[tokio::test]
async fn a_plugin_lacking_a_declared_tool_is_refused() {
    let mut overclaimed = PluginEntry::fixture();
    overclaimed
        .tools
        .push(("fixture_ghost_get".into(), "read".into()));
    let names = served_tools(vec![overclaimed, PluginEntry::helpdesk()]).await;
    assert_eq!(names.len(), 9);
    assert!(!names.iter().any(|n| n.starts_with("fixture_")));
}

#[tokio::test]
async fn a_tool_whose_input_schema_is_not_json_schema_refuses_its_plugin() {
    let broken = PluginEntry::fixture().with("config = { describe = \"bad-schema\" }");
    let m = manifest(vec![broken, PluginEntry::helpdesk()]);
    let out = start_and_exit(&m, &["--strict"]);
    assert!(!out.success);
    let stderr = &out.stderr;
    assert!(
        stderr.contains("input schema of tool `fixture_echo_get`"),
        "{stderr}"
    );
    let names = served_tools(vec![
        PluginEntry::fixture().with("config = { describe = \"bad-schema\" }"),
        PluginEntry::helpdesk(),
    ])
    .await;
    assert_eq!(names.len(), 9);
}

#[tokio::test]
async fn a_tool_name_declared_by_two_plugins_refuses_the_later_plugin() {
    let mut twin = PluginEntry::helpdesk();
    twin.name = "twin".into();
    let m = manifest(vec![PluginEntry::helpdesk(), twin, PluginEntry::fixture()]);
    let stderr = start_and_exit(&m, &["--strict"]).stderr;
    assert!(
        stderr.contains("plugin `twin`")
            && stderr.contains("already declared by plugin `helpdesk`"),
        "{stderr}"
    );

    let client = stdio(&m, &[]).await;
    assert_eq!(
        tools(&client).await.len(),
        11,
        "helpdesk and fixture are served"
    );
    client.cancel().await.unwrap();
}

#[test]
fn a_bad_manifest_is_refused_with_file_line_and_fix() {
    let m =
        manifest_text("[[plugin]]\nname = \"helpdesk\"\ncomponent = \"x.wasm\"\nsha256 = \"00\"\n");
    let out = start_and_exit(&m, &[]);
    assert!(!out.success);
    let stderr = &out.stderr;
    let location = format!("{}:4:", m.path.display());
    assert!(stderr.contains(&location), "{stderr}");
    assert!(
        stderr.contains("not 64 hex digits") && stderr.contains("fix:"),
        "{stderr}"
    );
}

#[test]
fn granting_an_undeclared_or_read_tool_is_refused_at_start() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    for (grant, expected) in [
        ("helpdesk_ticket_delete", "declares no such tool"),
        ("helpdesk_ticket_get", "read tool"),
    ] {
        let out = start_and_exit(&m, &["--task", "T1", "--grant", grant]);
        assert!(!out.success);
        assert!(out.stderr.contains(expected), "{}", out.stderr);
    }
}
