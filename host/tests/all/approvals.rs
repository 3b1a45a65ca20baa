//! Destructive calls and the human who approves each one: through an
//! eliciting client (both protocol eras), and through the operator when the
//! client cannot ask. Also the notes plugin's durable state.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation,
};
use rmcp::service::RequestContext;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::support::*;

/// A client whose user answers every approval prompt the same way, and
/// which remembers what it was shown.
#[derive(Clone)]
pub(crate) struct Human {
    answer: Answer,
    prompts: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone, Copy)]
pub(crate) enum Answer {
    Yes,
    No,
    /// What a careless auto-accepting client sends: accept, no form content.
    AcceptBlank,
}

impl Human {
    pub(crate) fn new(approves: bool) -> Human {
        Human::answering(if approves { Answer::Yes } else { Answer::No })
    }

    fn answering(answer: Answer) -> Human {
        Human {
            answer,
            prompts: Arc::default(),
        }
    }

    fn prompts(&self) -> Vec<String> {
        self.prompts.lock().unwrap().clone()
    }
}

impl ClientHandler for Human {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("approving-test-client", "1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.prompts.lock().unwrap().push(message);
        }
        Ok(match self.answer {
            Answer::Yes => ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "approve": true })),
            Answer::No => ElicitResult::new(ElicitationAction::Decline),
            Answer::AcceptBlank => ElicitResult::new(ElicitationAction::Accept),
        })
    }
}

/// A client that shows every approval prompt to a user who never answers,
/// and counts the prompts.
#[derive(Clone, Default)]
struct Absent {
    asked: Arc<AtomicUsize>,
}

impl Absent {
    /// Waits until `count` prompts were shown.
    async fn asked(&self, count: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while self.asked.load(Ordering::SeqCst) < count {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{} of {count} prompts shown",
                self.asked.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl ClientHandler for Absent {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("absent-test-client", "1.0"),
        )
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        std::future::pending().await
    }
}

fn note(slug: &str, body: &str) -> Value {
    json!({ "slug": slug, "title": format!("Note {slug}"), "body": body, "tags": ["ops"] })
}

const DELETE: &str = "notes_note_delete";
const SAVE: &str = "notes_note_save";

#[tokio::test]
async fn a_session_client_that_elicits_asks_its_user_and_runs_only_on_yes() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--approve-in-client"]);
    let host = http(&m, &[]);

    let yes = Human::new(true);
    let client = connect_with(&host.url, Some(&task.token), yes.clone())
        .await
        .unwrap();
    ok_as(&client, SAVE, note("deploy-checklist", "1. tag 2. ship")).await;
    ok_as(&client, SAVE, note("old-runbook", "obsolete")).await;
    let deleted = ok_as(&client, DELETE, json!({ "slug": "deploy-checklist" })).await;
    assert_eq!(deleted["trashed"], true);
    let prompts = yes.prompts();
    assert_eq!(prompts.len(), 1);
    assert!(
        prompts[0].contains("moves the note `deploy-checklist` to the trash")
            && prompts[0].contains(&task.id)
            && prompts[0].contains("Delete"),
        "{}",
        prompts[0]
    );
    let gone = call_as(
        &client,
        "notes_note_get",
        json!({ "slug": "deploy-checklist" }),
    )
    .await;
    assert_eq!(content(&gone)["code"], "not_found");
    client.cancel().await.unwrap();

    let no = Human::new(false);
    let client = connect_with(&host.url, Some(&task.token), no.clone())
        .await
        .unwrap();
    let result = call_as(&client, DELETE, json!({ "slug": "old-runbook" })).await;
    let error = content(&result);
    assert_eq!(error["code"], "approval_denied", "{error}");
    assert_eq!(error["retryable"], false);
    assert_eq!(no.prompts().len(), 1);
    ok_as(&client, "notes_note_get", json!({ "slug": "old-runbook" })).await;
    client.cancel().await.unwrap();

    // Accepting without ticking the box is not a yes.
    let blank = Human::answering(Answer::AcceptBlank);
    let client = connect_with(&host.url, Some(&task.token), blank.clone())
        .await
        .unwrap();
    let result = call_as(&client, DELETE, json!({ "slug": "old-runbook" })).await;
    assert_eq!(content(&result)["code"], "approval_denied");
    ok_as(&client, "notes_note_get", json!({ "slug": "old-runbook" })).await;
    client.cancel().await.unwrap();

    let decided: Value =
        serde_json::from_str(&cli(&m, &["approval", "list", "--all", "--json"])).unwrap();
    let channels: Vec<_> = decided
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["state"].as_str().unwrap(), a["channel"].as_str().unwrap()))
        .collect();
    assert!(channels.contains(&("used", "elicitation")), "{decided}");
    assert!(channels.contains(&("denied", "elicitation")), "{decided}");
}

#[tokio::test]
async fn a_2026_client_answers_through_an_input_required_round_trip() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--approve-in-client"]);
    let host = http(&m, &[]);
    let yes = Human::new(true);
    let client = connect_stateless_with(&host.url, Some(&task.token), yes.clone()).await;
    ok_as(&client, SAVE, note("deploy-checklist", "steps")).await;
    let deleted = ok_as(&client, DELETE, json!({ "slug": "deploy-checklist" })).await;
    assert_eq!(deleted["trashed"], true);
    assert_eq!(yes.prompts().len(), 1);

    let no = Human::new(false);
    let declining = connect_stateless_with(&host.url, Some(&task.token), no.clone()).await;
    ok_as(&declining, SAVE, note("keep-me", "x")).await;
    let result = call_as(&declining, DELETE, json!({ "slug": "keep-me" })).await;
    assert_eq!(content(&result)["code"], "approval_denied");
    ok_as(&declining, "notes_note_get", json!({ "slug": "keep-me" })).await;

    let all: Value =
        serde_json::from_str(&cli(&m, &["approval", "list", "--all", "--json"])).unwrap();
    assert!(
        all.as_array()
            .unwrap()
            .iter()
            .all(|a| a["channel"] == "mrtr"),
        "{all}"
    );
    client.cancel().await.unwrap();
    declining.cancel().await.unwrap();
}

#[tokio::test]
async fn without_elicitation_the_call_waits_for_an_operator_and_runs_once() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &[]);
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok_as(&client, SAVE, note("a", "first")).await;
    ok_as(&client, SAVE, note("b", "second")).await;
    ok_as(&client, SAVE, note("c", "third")).await;

    let error = content(&call_as(&client, DELETE, json!({ "slug": "a" })).await);
    assert_eq!(error["code"], "approval_required");
    let id = error["approval_id"].as_str().unwrap().to_string();
    assert!(error["message"].as_str().unwrap().contains(&id));
    // Asking again does not pile up requests.
    let again = content(&call_as(&client, DELETE, json!({ "slug": "a" })).await);
    assert_eq!(again["approval_id"], id.as_str());

    let pending = cli(&m, &["approval", "list"]);
    assert!(
        pending.contains(&id) && pending.contains("`a`"),
        "{pending}"
    );
    cli(&m, &["approval", "approve", &id]);

    // The approval covers these exact arguments only.
    let other = content(&call_as(&client, DELETE, json!({ "slug": "b" })).await);
    assert_eq!(other["code"], "approval_required");
    assert_ne!(other["approval_id"], id.as_str());

    let deleted = ok_as(&client, DELETE, json!({ "slug": "a" })).await;
    assert_eq!(deleted["slug"], "a");
    // ... and runs once: the same call needs a new approval.
    let next = content(&call_as(&client, DELETE, json!({ "slug": "a" })).await);
    assert_eq!(next["code"], "approval_required");
    assert_ne!(next["approval_id"], id.as_str());

    // A denial is reported once, then the call may be asked for again.
    let b_id = other["approval_id"].as_str().unwrap().to_string();
    cli(&m, &["approval", "deny", &b_id]);
    let denied = content(&call_as(&client, DELETE, json!({ "slug": "b" })).await);
    assert_eq!(denied["code"], "approval_denied");
    ok_as(&client, "notes_note_get", json!({ "slug": "b" })).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_task_with_operator_approval_never_asks_the_client_and_caps_waiting_calls() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--operator-approval"]);
    let host = http(&m, &[]);
    let eager = Human::new(true);
    let client = connect_with(&host.url, Some(&task.token), eager.clone())
        .await
        .unwrap();
    let stateless = connect_stateless_with(&host.url, Some(&task.token), eager.clone()).await;
    for slug in ["n0", "n1", "n2", "n3", "n4", "n5"] {
        ok_as(&client, SAVE, note(slug, "x")).await;
    }
    let first = content(&call_as(&client, DELETE, json!({ "slug": "n0" })).await);
    assert_eq!(first["code"], "approval_required");
    let again = content(&call_as(&stateless, DELETE, json!({ "slug": "n0" })).await);
    assert_eq!(again["code"], "approval_required");
    assert_eq!(again["approval_id"], first["approval_id"]);
    assert!(eager.prompts().is_empty(), "the client was never asked");

    // An agent cannot bury the operator in questions.
    for slug in ["n1", "n2", "n3", "n4"] {
        let waiting = content(&call_as(&client, DELETE, json!({ "slug": slug })).await);
        assert_eq!(waiting["code"], "approval_required");
    }
    let refused = content(&call_as(&client, DELETE, json!({ "slug": "n5" })).await);
    assert_eq!(refused["code"], "too_many_pending", "{refused}");

    let id = first["approval_id"].as_str().unwrap();
    cli(&m, &["approval", "approve", id]);
    ok_as(&client, DELETE, json!({ "slug": "n0" })).await;
    // Revoking the task retires what still waits.
    cli(&m, &["task", "revoke", &task.id]);
    assert!(cli(&m, &["approval", "list"]).contains("no pending approvals"));
    client.cancel().await.unwrap();
    stateless.cancel().await.unwrap();
}

/// Each call waiting for a person holds its handler and its request for up
/// to ten minutes, so a client that never answers must not park calls
/// without bound: past 256 waiting in the process, a call answers
/// `approval_required` at once. A client that goes away gives its places
/// back.
#[tokio::test]
async fn unanswered_prompts_hold_at_most_256_calls_until_their_client_goes() {
    const PLACES: usize = 256;
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--approve-in-client"]);
    let host = http(&m, &[]);
    let away = Absent::default();
    let client = Arc::new(
        connect_with(&host.url, Some(&task.token), away.clone())
            .await
            .unwrap(),
    );
    ok_as(&*client, SAVE, note("kept", "x")).await;
    let parked: Vec<_> = (0..PLACES)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                call_as(&*client, DELETE, json!({ "slug": "kept" })).await;
            })
        })
        .collect();
    away.asked(PLACES).await;

    // One more is not parked: it answers at once, without a prompt.
    let refused = content(&call_as(&*client, DELETE, json!({ "slug": "kept" })).await);
    assert_eq!(refused["code"], "approval_required", "{refused}");
    assert_eq!(away.asked.load(Ordering::SeqCst), PLACES);

    // The client closes its session: its prompts end, and a call of
    // another session is asked again.
    for call in parked {
        call.abort();
        let _ = call.await;
    }
    let Ok(client) = Arc::try_unwrap(client) else {
        panic!("the parked calls still hold the client");
    };
    client.cancel().await.unwrap();
    let back = Absent::default();
    let next = connect_with(&host.url, Some(&task.token), back.clone())
        .await
        .unwrap();
    let asking = tokio::spawn(async move {
        call_as(&next, DELETE, json!({ "slug": "kept" })).await;
    });
    back.asked(1).await;
    asking.abort();
}

#[tokio::test]
async fn a_pre_approved_tool_needs_no_human_and_list_says_what_each_tool_needs() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--pre-approve", DELETE]);
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok_as(&client, SAVE, note("a", "x")).await;
    ok_as(&client, DELETE, json!({ "slug": "a" })).await;

    let tools = client.list_all_tools().await.unwrap();
    let description = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .unwrap()
            .description
            .clone()
            .unwrap_or_default()
            .to_string()
    };
    assert!(description(SAVE).ends_with("Needs a task grant."));
    assert!(
        description(DELETE).ends_with("Needs a task grant and a human's approval for each call.")
    );
    assert!(!description("notes_note_get").contains("Needs"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn notes_survive_a_restart_and_plugins_cannot_see_each_other_s_state() {
    let m = manifest(vec![PluginEntry::notes(), PluginEntry::fixture()]);
    let task = open_task(&m, &[SAVE], &[]);
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok_as(&client, SAVE, note("deploy-checklist", "secret steps")).await;
    let peek = ok_as(
        &client,
        "fixture_fault_run",
        json!({ "fault": "state-peek" }),
    )
    .await;
    assert_eq!(peek, json!({ "keys": [], "peek": null }));
    client.cancel().await.unwrap();

    let client = stdio(&m, &[]).await;
    let kept = ok(
        &client,
        "notes_note_get",
        json!({ "slug": "deploy-checklist" }),
    )
    .await;
    assert_eq!(kept["body"], "secret steps");
    assert_eq!(kept["version"], 1);
    let peek = ok(
        &client,
        "fixture_fault_run",
        json!({ "fault": "state-peek" }),
    )
    .await;
    assert_eq!(peek, json!({ "keys": ["fixture-was-here"], "peek": null }));
    client.cancel().await.unwrap();

    // The operator sees each plugin's keys apart.
    assert_eq!(
        cli(&m, &["state", "list", "fixture"]).trim(),
        "fixture-was-here"
    );
    assert_eq!(
        cli(&m, &["state", "list", "notes"]).trim(),
        "note/deploy-checklist"
    );
}

#[tokio::test]
async fn an_operator_restores_a_deleted_note_from_the_trash() {
    let m = manifest(vec![PluginEntry::notes()]);
    let task = open_task(&m, &[SAVE, DELETE], &["--pre-approve", DELETE]);
    let client = stdio_with(&m, &["--task-token", &task.token], &[], ()).await;
    ok_as(&client, SAVE, note("runbook", "keep this")).await;
    ok_as(&client, DELETE, json!({ "slug": "runbook" })).await;
    let trash = cli(&m, &["state", "list", "notes", "--prefix", "trash/"]);
    let key = trash.trim();
    assert!(key.starts_with("trash/runbook@"), "{trash}");
    cli(&m, &["state", "move", "notes", key, "note/runbook"]);
    let back = ok_as(&client, "notes_note_get", json!({ "slug": "runbook" })).await;
    assert_eq!(back["body"], "keep this");
    client.cancel().await.unwrap();
}

/// `ok` for clients with a handler of their own.
async fn ok_as<H: ClientHandler>(
    client: &rmcp::service::RunningService<RoleClient, H>,
    tool: &str,
    arguments: Value,
) -> Value {
    let result = call_as(client, tool, arguments).await;
    assert_eq!(result.is_error, Some(false), "{tool} failed: {result:?}");
    content(&result)
}
