//! The approval queue, one page per approval, and the decision.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use super::auth::{Operator, check_post};
use super::layout::{self, Section};
use super::{Console, Shared, see_other, store_failed};
use crate::store::{Approval, ApprovalState, Decision, StoreError, Task};
use crate::text;

/// A value longer than this (as shown) is folded behind its first part.
const FOLD_CHARS: usize = 240;
const MAX_NOTE_CHARS: usize = 1_000;
/// Approvals listed as recently decided.
const RECENT: u32 = 20;

#[derive(Deserialize, Default)]
pub struct ListQuery {
    #[serde(default)]
    fragment: Option<String>,
}

pub async fn queue(
    State(console): Shared,
    operator: Operator,
    Query(query): Query<ListQuery>,
) -> Response {
    let pending = match console.host.store.approvals(true).await {
        Ok(list) => list,
        Err(e) => return store_failed(e),
    };
    let mut tasks = HashMap::new();
    for approval in &pending {
        if !tasks.contains_key(&approval.task_id) {
            match console.host.store.task(&approval.task_id).await {
                Ok(Some(task)) => {
                    tasks.insert(approval.task_id.clone(), task);
                }
                Ok(None) => {}
                Err(e) => return store_failed(e),
            }
        }
    }
    let list = html! {
        @if pending.is_empty() {
            p.empty { "Nothing is waiting for a decision." }
        } @else {
            ul.cards {
                @for approval in &pending {
                    li.card { (card(&console, approval, tasks.get(&approval.task_id))) }
                }
            }
        }
    };
    if query.fragment.is_some() {
        return layout::fragment(list);
    }
    let recent = match console.host.store.closed_approvals(RECENT).await {
        Ok(list) => list,
        Err(e) => return store_failed(e),
    };
    let body = html! {
        h1 { "Approvals" }
        p.lede {
            "Destructive calls wait here for a person's yes. Each approval allows one call, "
            "of this tool, with exactly these arguments, for this task."
        }
        section aria-labelledby="pending-h" {
            h2 #pending-h { "Waiting " span.count data-live-count {} }
            div #queue data-live="/approvals?fragment=list" aria-live="polite" { (list) }
        }
        section aria-labelledby="recent-h" {
            h2 #recent-h { "Recently decided" }
            @if recent.is_empty() {
                p.empty { "None yet." }
            } @else {
                div.scroll {
                    table {
                        thead { tr { th { "Approval" } th { "Tool" } th { "Task" } th { "State" } th { "By" } th { "Decided" } } }
                        tbody {
                            @for a in &recent {
                                tr {
                                    td { a href={"/approvals/" (a.id)} { code { (a.id) } } }
                                    td { code { (a.tool) } }
                                    td { code { (a.task_id) } }
                                    td { span class={"state " (a.state.as_str())} { (a.state.as_str()) } }
                                    td { (a.decided_by.as_deref().map(text::visible).unwrap_or_default()) }
                                    td { @if let Some(at) = a.decided_at { (layout::time(at)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page("Approvals", &operator, Section::Approvals, body).into_response()
}

/// The tool's title as the catalog has it (its name if it is gone).
fn title<'a>(console: &'a Console, approval: &'a Approval) -> &'a str {
    console
        .host
        .catalog
        .tool(&approval.tool)
        .map_or(approval.tool.as_str(), |t| t.title.as_str())
}

/// The call restated, and who asked for it in which task; `full` adds
/// when it was asked and the expiry's time (the approval's own page).
fn described(approval: &Approval, task: Option<&Task>, full: bool) -> Markup {
    html! {
        p.summary { (text::escape_hidden(&approval.summary)) }
        dl.meta {
            dt { "Tool" } dd { code { (approval.tool) } }
            dt { "Task" } dd {
                code { (approval.task_id) }
                @if let Some(task) = task { " — " (text::visible(&task.purpose)) }
            }
            dt { "Asked by" } dd { (approval.asked_by.as_deref().map(text::visible).unwrap_or_else(|| "unknown".into())) }
            @if full {
                dt { "Requested" } dd { (layout::time(approval.requested_at)) }
                dt { "Expires" } dd { (layout::time(approval.expires_at)) " (" (layout::countdown(approval.expires_at)) ")" }
            } @else {
                dt { "Expires" } dd { (layout::countdown(approval.expires_at)) }
            }
        }
    }
}

/// One pending approval in the queue.
fn card(console: &Console, approval: &Approval, task: Option<&Task>) -> Markup {
    html! {
        h3 {
            a href={"/approvals/" (approval.id)} { (title(console, approval)) }
            " " span.risk.destructive { "destructive" }
        }
        (described(approval, task, false))
        p { a.button href={"/approvals/" (approval.id)} { "Review " code { (approval.id) } } }
    }
}

pub async fn page(
    State(console): Shared,
    operator: Operator,
    Path(id): Path<String>,
    Query(query): Query<ListQuery>,
) -> Response {
    let approval = match console.host.store.approval(&id).await {
        Ok(Some(approval)) => approval,
        Ok(None) => {
            return layout::message(
                StatusCode::NOT_FOUND,
                "No such approval",
                "There is no approval with this id.",
            );
        }
        Err(e) => return store_failed(e),
    };
    let task = match console.host.store.task(&approval.task_id).await {
        Ok(task) => task,
        Err(e) => return store_failed(e),
    };
    let decision = decision_part(&operator, &approval);
    if query.fragment.is_some() {
        return layout::fragment(decision);
    }
    let body = html! {
        p.crumbs { a href="/approvals" { "Approvals" } " / " code { (approval.id) } }
        h1 {
            (title(&console, &approval))
            " " span.risk.destructive { "destructive" }
        }
        (described(&approval, task.as_ref(), true))
        section aria-labelledby="args-h" {
            h2 #args-h { "Arguments, exactly as the agent sent them" }
            (arguments(&approval.arguments))
        }
        div #decision data-live={"/approvals/" (approval.id) "?fragment=decision"} aria-live="polite" {
            (decision)
        }
    };
    layout::page(
        &format!("Approval {}", approval.id),
        &operator,
        Section::Approvals,
        body,
    )
    .into_response()
}

/// The arguments as a table of escaped JSON, long values folded.
fn arguments(value: &Value) -> Markup {
    let Some(map) = value.as_object() else {
        return html! { pre.json { (text::json(value, true)) } };
    };
    html! {
        @if map.is_empty() {
            p.empty { "No arguments." }
        } @else {
            div.scroll {
                table.args {
                    thead { tr { th scope="col" { "Name" } th scope="col" { "Value" } } }
                    tbody {
                        @for (key, value) in map {
                            @let shown = text::json(value, true);
                            tr {
                                th scope="row" { code { (text::visible(key)) } }
                                td {
                                    @if shown.chars().count() > FOLD_CHARS {
                                        details {
                                            summary {
                                                code { (shown.chars().take(FOLD_CHARS / 2).collect::<String>()) "…" }
                                                " (" (shown.chars().count()) " characters; show all)"
                                            }
                                            pre.json { (shown) }
                                        }
                                    } @else {
                                        pre.json { (shown) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The state, who decided, and the form while it is pending.
fn decision_part(operator: &Operator, approval: &Approval) -> Markup {
    html! {
        @if approval.state == ApprovalState::Pending {
            form.decide method="post" action={"/approvals/" (approval.id) "/decide"} {
                (layout::csrf(operator))
                label for="note" { "Note (optional, kept in the audit trail)" }
                textarea #note name="note" rows="2" maxlength=(MAX_NOTE_CHARS) {}
                div.actions {
                    button.approve type="submit" name="decision" value="approve" { "Approve this call" }
                    button.deny type="submit" name="decision" value="deny" { "Deny" }
                }
            }
        } @else {
            p class={"outcome state " (approval.state.as_str())} {
                "This approval is " strong { (approval.state.as_str()) }
                @if let Some(by) = &approval.decided_by { " — decided by " (text::visible(by)) }
                @if let Some(channel) = &approval.channel { " through " (channel) }
                @if let Some(at) = approval.decided_at { ", " (layout::time(at)) }
                "."
            }
            @if let Some(note) = &approval.note {
                p.note { "Note: " (text::visible(note)) }
            }
        }
    }
}

pub async fn decide(
    State(console): Shared,
    operator: Operator,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    if let Some(refused) = check_post(
        &console,
        &operator,
        &headers,
        form.get("csrf").map(String::as_str),
    ) {
        return refused;
    }
    let decision = match form.get("decision").map(String::as_str) {
        Some("approve") => Decision::Approve,
        Some("deny") => Decision::Deny,
        _ => {
            return layout::message(
                StatusCode::BAD_REQUEST,
                "Choose a decision",
                "Approve or deny.",
            );
        }
    };
    let note: String = form
        .get("note")
        .map(|n| n.trim())
        .unwrap_or("")
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .take(MAX_NOTE_CHARS)
        .collect();
    let note = (!note.is_empty()).then_some(note);
    match console
        .host
        .store
        .decide(&id, decision, operator.name(), "console", note.as_deref())
        .await
    {
        Ok(approval) => {
            tracing::info!(approval = %approval.id, state = approval.state.as_str(), by = operator.name(), "approval decided in the console");
            see_other(&format!("/approvals/{}", approval.id))
        }
        Err(StoreError::AlreadyDecided { state, .. }) => layout::message(
            StatusCode::CONFLICT,
            "Already decided",
            &format!(
                "This approval is already {}; nothing changed.",
                state.as_str()
            ),
        ),
        Err(StoreError::NoApproval(_)) => layout::message(
            StatusCode::NOT_FOUND,
            "No such approval",
            "There is no approval with this id.",
        ),
        Err(e) => store_failed(e),
    }
}
