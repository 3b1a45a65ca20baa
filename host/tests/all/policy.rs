//! Risk enforcement: read tools always, write tools with a grant, destructive
//! tools not without an approval.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_write_tool_without_a_grant_is_refused_with_not_granted() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(&m, &[]).await;
    let error = refused(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    assert_eq!(error["code"], "not_granted");
    assert_eq!(error["retryable"], false);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("task token that grants helpdesk_ticket_close"),
        "{message}"
    );
    // Nothing changed.
    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(ticket["status"], "open");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_grant_covers_only_the_tools_it_names() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(&m, &["--task", "T-7", "--grant", "helpdesk_ticket_close"]).await;
    ok(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    let error = refused(
        &client,
        "helpdesk_ticket_escalate",
        json!({ "key": "T-1047", "team": "legal", "reason": "lawyer threatens action" }),
    )
    .await;
    assert_eq!(error["code"], "not_granted");
    assert!(error["message"].as_str().unwrap().contains("task T-7"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_destructive_tool_needs_approval_even_when_granted() {
    let m = manifest(vec![
        PluginEntry::helpdesk().risk("helpdesk_ticket_close", "destructive"),
    ]);
    let client = stdio(&m, &[]).await;
    let error = refused(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    assert_eq!(error["code"], "not_granted");
    client.cancel().await.unwrap();

    let client = stdio(&m, &["--task", "T-8", "--grant", "helpdesk_ticket_close"]).await;
    let error = refused(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    assert_eq!(error["code"], "approval_required");
    assert_eq!(error["retryable"], false);
    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1048" })).await;
    assert_eq!(ticket["status"], "open");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn invalid_arguments_are_refused_before_the_plugin_runs() {
    let m = manifest(vec![PluginEntry::helpdesk(), PluginEntry::fixture()]);
    let client = stdio(&m, &["--task", "T-9", "--grant", "helpdesk_ticket_answer"]).await;

    let cases = [
        (
            "helpdesk_ticket_answer",
            json!({ "key": "T-1041", "answer": "ok" }),
            "/answer",
        ),
        ("helpdesk_ticket_get", json!({ "key": "1041" }), "/key"),
        (
            "helpdesk_ticket_get",
            json!({ "key": "T-1041", "verbose": true }),
            "verbose",
        ),
        ("helpdesk_ticket_list", json!({ "limit": 1000 }), "/limit"),
        ("fixture_echo_get", json!({ "text": 42 }), "/text"),
    ];
    for (tool, arguments, mentions) in cases {
        let error = refused(&client, tool, arguments.clone()).await;
        assert_eq!(error["code"], "invalid_arguments", "{tool} {arguments}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(mentions), "{tool} {arguments}: {message}");
    }

    // The plugin never saw them: the short answer changed nothing, and the
    // fixture counted only the calls that passed validation.
    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1041" })).await;
    assert_eq!(ticket["status"], "open");
    assert_eq!(ticket["answers"], json!([]));
    let counted = ok(&client, "fixture_fault_run", json!({ "fault": "counter" })).await;
    assert_eq!(counted["calls"], 1);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_unknown_tool_is_a_json_rpc_error() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(&m, &[]).await;
    let error = client
        .call_tool(rmcp::model::CallToolRequestParams::new(
            "helpdesk_ticket_delete",
        ))
        .await
        .expect_err("unknown tool");
    let text = error.to_string();
    assert!(
        text.contains("-32602") || text.contains("Unknown tool"),
        "{text}"
    );
    client.cancel().await.unwrap();
}
