//! The Simhaven helpdesk through the host: paging, full text, the scenario.

use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn listing_400_tickets_pages_with_a_correct_rest() {
    let m = manifest(vec![
        PluginEntry::helpdesk().with("config = { rounds = 50 }"),
    ]);
    let client = stdio(&m, &[]).await;

    let first = ok(&client, "helpdesk_ticket_list", json!({ "limit": 100 })).await;
    assert_eq!(first["total"], 400);
    assert_eq!(first["matches"], 400);
    assert_eq!(first["offset"], 0);
    assert_eq!(first["rest"], 300);
    assert_eq!(first["tickets"].as_array().unwrap().len(), 100);
    assert_eq!(first["tickets"][0]["key"], "T-1041");

    let last = ok(
        &client,
        "helpdesk_ticket_list",
        json!({ "limit": 100, "offset": 350 }),
    )
    .await;
    assert_eq!(last["tickets"].as_array().unwrap().len(), 50);
    assert_eq!(last["rest"], 0);
    assert_eq!(last["tickets"][49]["key"], "T-1440");

    let default_page = ok(&client, "helpdesk_ticket_list", json!({ "offset": 390 })).await;
    assert_eq!(default_page["tickets"].as_array().unwrap().len(), 10);
    assert_eq!(default_page["rest"], 0);

    let legal = ok(
        &client,
        "helpdesk_ticket_search",
        json!({ "query": "legal action", "limit": 50 }),
    )
    .await;
    assert_eq!(legal["matches"], 50, "one legal threat per round");

    let uncategorised = ok(
        &client,
        "helpdesk_ticket_list",
        json!({ "category": "none", "limit": 5 }),
    )
    .await;
    assert_eq!(uncategorised["matches"], 400);
    assert_eq!(uncategorised["rest"], 395);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn only_get_returns_the_full_text() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(&m, &[]).await;
    let list = ok(&client, "helpdesk_ticket_list", json!({})).await;
    assert_eq!(list["total"], 8);
    for row in list["tickets"].as_array().unwrap() {
        assert!(row.get("text").is_none(), "list row has no text: {row}");
        assert!(row["subject"].is_string());
    }
    let found = ok(
        &client,
        "helpdesk_ticket_search",
        json!({ "query": "charged" }),
    )
    .await;
    assert_eq!(found["matches"], 1);
    assert!(found["tickets"][0].get("text").is_none());

    let ticket = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1046" })).await;
    assert!(ticket["text"].as_str().unwrap().contains("two charges"));

    let missing = refused(&client, "helpdesk_ticket_get", json!({ "key": "T-9999" })).await;
    assert_eq!(missing["code"], "not_found");
    assert_eq!(missing["retryable"], false);

    let doc = ok(&client, "helpdesk_doc_read", json!({})).await;
    for fact in ["24 months", "14 days", "18 months", "3 m", "5 working days"] {
        assert!(
            doc["text"].as_str().unwrap().contains(fact),
            "doc states {fact}"
        );
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_helpdesk_scenario_runs_with_a_task_grant() {
    let m = manifest(vec![PluginEntry::helpdesk()]);
    let client = stdio(
        &m,
        &[
            "--task",
            "simhaven-triage",
            "--grant",
            "helpdesk_ticket_categorize",
            "--grant",
            "helpdesk_ticket_escalate",
            "--grant",
            "helpdesk_ticket_close",
            "--grant",
            "helpdesk_ticket_answer",
        ],
    )
    .await;

    let threat = ok(&client, "helpdesk_ticket_get", json!({ "key": "T-1047" })).await;
    assert!(threat["text"].as_str().unwrap().contains("legal action"));
    ok(
        &client,
        "helpdesk_ticket_categorize",
        json!({ "key": "T-1047", "category": "legal" }),
    )
    .await;
    let escalated = ok(
        &client,
        "helpdesk_ticket_escalate",
        json!({ "key": "T-1047", "team": "legal", "reason": "Customer's lawyer threatens legal action." }),
    )
    .await;
    assert_eq!(escalated["status"], "escalated");
    assert_eq!(escalated["escalation"]["team"], "legal");
    assert!(escalated.get("text").is_none(), "only get returns the text");
    // Any later change returns the escalation too, as the result says.
    let recategorized = ok(
        &client,
        "helpdesk_ticket_categorize",
        json!({ "key": "T-1047", "category": "legal" }),
    )
    .await;
    assert_eq!(recategorized["escalation"]["team"], "legal");

    ok(
        &client,
        "helpdesk_ticket_categorize",
        json!({ "key": "T-1048", "category": "spam" }),
    )
    .await;
    let closed = ok(
        &client,
        "helpdesk_ticket_close",
        json!({ "key": "T-1048", "reason": "spam" }),
    )
    .await;
    assert_eq!(closed["status"], "closed");
    assert!(closed.get("text").is_none());

    let answered = ok(
        &client,
        "helpdesk_ticket_answer",
        json!({ "key": "T-1041", "answer": "The TW-2 has a warranty of 24 months from delivery." }),
    )
    .await;
    assert_eq!(answered["status"], "answered");

    let stats = ok(&client, "helpdesk_stats_get", json!({})).await;
    assert_eq!(stats["total"], 8);
    assert_eq!(
        stats["by_status"],
        json!({ "open": 5, "answered": 1, "escalated": 1, "closed": 1 })
    );
    assert_eq!(stats["by_category"]["legal"], 1);
    assert_eq!(stats["by_category"]["spam"], 1);
    assert_eq!(stats["by_category"]["none"], 6);

    // What the plugin itself refuses comes back as the plugin's own codes.
    let no_reply = refused(
        &client,
        "helpdesk_ticket_answer",
        json!({ "key": "T-1047", "answer": "We are sorry to hear that." }),
    )
    .await;
    assert_eq!(no_reply["code"], "ticket_escalated");
    let again = refused(&client, "helpdesk_ticket_close", json!({ "key": "T-1048" })).await;
    assert_eq!(again["code"], "ticket_closed");
    client.cancel().await.unwrap();
}
