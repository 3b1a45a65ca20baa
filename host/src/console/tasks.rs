//! Tasks: the list, and for admins opening, revoking and extending them.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::auth::{Operator, check_post};
use super::layout::{self, Section};
use super::{Console, Shared, see_other, store_failed};
use crate::manifest::RiskClass;
use crate::operator::{OpenTask, parse_ttl};
use crate::store::{StoreError, Task, TaskState, now};
use crate::text;

type Fields = Vec<(String, String)>;

fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn fields<'a>(fields: &'a Fields, name: &'a str) -> impl Iterator<Item = String> + 'a {
    fields
        .iter()
        .filter(move |(k, _)| k == name)
        .map(|(_, v)| v.clone())
}

/// Ended tasks (revoked or expired) the list shows, the newest; every open
/// one is shown.
const ENDED_SHOWN: u32 = 100;

pub async fn list(State(console): Shared, operator: Operator) -> Response {
    let tasks = match console.host.store.recent_tasks(ENDED_SHOWN).await {
        Ok(tasks) => tasks,
        Err(e) => return store_failed(e),
    };
    let body = html! {
        h1 { "Tasks" }
        p.lede {
            "A task grants write and destructive tools to one agent's job, for a while, within budgets. "
            "Read tools need no task. Every open task is listed, and the "
            (ENDED_SHOWN) " most recently opened of those that ended; "
            code { "toolhost task list" } " lists them all."
        }
        @if operator.is_admin() {
            details.open-task {
                summary { "Open a task" }
                (open_form(&console, &operator))
            }
        } @else {
            p.note { "Only admins open, revoke and extend tasks; you are signed in as an approver." }
        }
        (table(&operator, &tasks))
    };
    layout::page("Tasks", &operator, Section::Tasks, body).into_response()
}

fn table(operator: &Operator, tasks: &[Task]) -> Markup {
    let at = now();
    html! {
        @if tasks.is_empty() {
            p.empty { "No tasks yet." }
        } @else {
            div.scroll {
                table.tasks {
                    thead { tr {
                        th scope="col" { "Task" } th scope="col" { "State" } th scope="col" { "Expires" }
                        th scope="col" { "Grants" } th scope="col" { "Calls used" } th scope="col" { "Writes / hour" }
                        th scope="col" { "Approvals" }
                        @if operator.is_admin() { th scope="col" { "Actions" } }
                    } }
                    tbody {
                        @for task in tasks {
                            @let state = task.state(at);
                            tr {
                                td {
                                    code { (task.id) } br;
                                    span.purpose { (text::visible(&task.purpose)) }
                                    br; small { "opened by " (text::visible(&task.opened_by)) }
                                }
                                td { span class={"state " (state.as_str())} { (state.as_str()) } }
                                td { (layout::time(task.expires_at)) br; (layout::countdown(task.expires_at)) }
                                td {
                                    ul.plain {
                                        @for grant in &task.grants {
                                            li {
                                                code { (grant) }
                                                @if task.pre_approves(grant) { " " small { "(pre-approved)" } }
                                            }
                                        }
                                    }
                                }
                                td { (task.calls_used) " of " (task.max_calls.map_or("unlimited".to_string(), |m| m.to_string())) }
                                td { (task.writes_per_hour.map_or("unlimited".to_string(), |w| w.to_string())) }
                                td {
                                    (if task.operator_approval { "operator only" }
                                     else if task.approve_in_client { "in the agent's client" }
                                     else { "console (link to the client)" })
                                }
                                @if operator.is_admin() {
                                    td.actions {
                                        @if state == TaskState::Open {
                                            form method="post" action={"/tasks/" (task.id) "/revoke"} {
                                                (layout::csrf(operator))
                                                button.deny type="submit" { "Revoke" }
                                            }
                                        }
                                        @if state != TaskState::Revoked {
                                            form.inline method="post" action={"/tasks/" (task.id) "/extend"} {
                                                (layout::csrf(operator))
                                                label for={"ttl-" (task.id)} { "Expire in" }
                                                input id={"ttl-" (task.id)} name="ttl" type="text" value="2h" size="5" required;
                                                button type="submit" { "Extend" }
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
    }
}

fn open_form(console: &Console, operator: &Operator) -> Markup {
    let grantable: Vec<_> = console
        .host
        .catalog
        .tools
        .iter()
        .filter(|t| t.risk != RiskClass::Read)
        .collect();
    html! {
        form.stack method="post" action="/tasks" {
            (layout::csrf(operator))
            label for="purpose" { "Purpose (what the agent's job is; approvers read it)" }
            input #purpose name="purpose" type="text" maxlength="1000" required;
            fieldset {
                legend { "Grants" }
                @for tool in &grantable {
                    div.check {
                        input type="checkbox" name="grant" value=(tool.name.as_str()) id={"grant-" (tool.name.as_str())};
                        label for={"grant-" (tool.name.as_str())} {
                            (tool.title) " " code { (tool.name.as_str()) } " "
                            span class={"risk " (tool.risk.as_str())} { (tool.risk.as_str()) }
                        }
                    }
                }
            }
            fieldset {
                legend { "Pre-approved (granted destructive tools whose calls need no per-call yes)" }
                @for tool in grantable.iter().filter(|t| t.risk == RiskClass::Destructive) {
                    div.check {
                        input type="checkbox" name="pre_approve" value=(tool.name.as_str()) id={"pre-" (tool.name.as_str())};
                        label for={"pre-" (tool.name.as_str())} { code { (tool.name.as_str()) } }
                    }
                }
            }
            div.row {
                div {
                    label for="ttl" { "Lasts (e.g. 30m, 2h, 1d)" }
                    input #ttl name="ttl" type="text" value="2h" required;
                }
                div {
                    label for="max_calls" { "Most calls (blank: no limit)" }
                    input #max_calls name="max_calls" type="number" min="1";
                }
                div {
                    label for="writes_per_hour" { "Writes per hour (blank: no limit)" }
                    input #writes_per_hour name="writes_per_hour" type="number" min="1";
                }
            }
            fieldset {
                legend { "Who approves destructive calls" }
                div.check {
                    input #mode-console type="radio" name="approvals" value="console" checked;
                    label for="mode-console" { "A signed-in approver, here; the agent's client gets a link (default)" }
                }
                div.check {
                    input #mode-operator type="radio" name="approvals" value="operator";
                    label for="mode-operator" { "Operators only; the client is not asked at all" }
                }
                div.check {
                    input #mode-client type="radio" name="approvals" value="client";
                    label for="mode-client" { "The agent's own client, in a form (attended use: the client is the person)" }
                }
            }
            button type="submit" { "Open task" }
        }
    }
}

fn optional_number<T: std::str::FromStr>(
    text: Option<&str>,
    what: &str,
) -> Result<Option<T>, String> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| format!("{what} must be a whole number")),
    }
}

pub async fn open(
    State(console): Shared,
    operator: Operator,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Fields>,
) -> Response {
    if let Some(refused) = admin_post(&console, &operator, &headers, &form, "open") {
        return refused;
    }
    let numbers = optional_number(field(&form, "max_calls"), "Most calls").and_then(|max| {
        optional_number(field(&form, "writes_per_hour"), "Writes per hour").map(|w| (max, w))
    });
    let (max_calls, writes_per_hour) = match numbers {
        Ok(numbers) => numbers,
        Err(problem) => {
            return layout::message(StatusCode::BAD_REQUEST, "Cannot open the task", &problem);
        }
    };
    let mode = field(&form, "approvals").unwrap_or("console");
    let request = OpenTask {
        purpose: field(&form, "purpose").unwrap_or("").to_string(),
        grants: fields(&form, "grant").collect(),
        ttl: field(&form, "ttl").unwrap_or("").to_string(),
        max_calls,
        writes_per_hour,
        pre_approve: fields(&form, "pre_approve").collect(),
        operator_approval: mode == "operator",
        approve_in_client: mode == "client",
    };
    let new = match request.vet(&console.manifest, operator.name().to_string()) {
        Ok(new) => new,
        Err(e) => {
            return layout::message(
                StatusCode::BAD_REQUEST,
                "Cannot open the task",
                &e.to_string(),
            );
        }
    };
    let (task, token) = match console.host.store.open_task(new).await {
        Ok(opened) => opened,
        Err(e) => return store_failed(e),
    };
    tracing::info!(task = %task.id, by = operator.name(), "task opened in the console");
    let token = token.as_str().to_string();
    let client_line = match console.settings.mcp_url.get() {
        Some(url) => format!(
            "claude mcp add --transport http toolhost {url} --header \"Authorization: Bearer {token}\""
        ),
        None => format!("TOOLHOST_TASK_TOKEN={token} toolhost serve --stdio"),
    };
    let body = html! {
        p.crumbs { a href="/tasks" { "Tasks" } " / " code { (task.id) } }
        h1 { "Task opened" }
        p { "Task " code #task-id { (task.id) } " is open until " (layout::time(task.expires_at)) "." }
        section.token aria-labelledby="token-h" {
            h2 #token-h { "Its token — shown only this once" }
            p { "Give it to the agent's MCP client. Nobody can show it again; if it is lost, revoke the task and open another." }
            div.copyable {
                code #token { (token) }
                button type="button" data-copy="token" { "Copy token" }
            }
            h3 { "Ready client line" }
            div.copyable {
                code #client-line { (client_line) }
                button type="button" data-copy="client-line" { "Copy line" }
            }
        }
        p { a href="/tasks" { "Back to tasks" } }
    };
    let mut response = layout::page("Task opened", &operator, Section::Tasks, body).into_response();
    *response.status_mut() = StatusCode::CREATED;
    response
}

/// Checks a task change: a genuine console POST, by an admin. The answer
/// refusing it, if it fails.
fn admin_post(
    console: &Console,
    operator: &Operator,
    headers: &HeaderMap,
    form: &Fields,
    verb: &str,
) -> Option<Response> {
    if let Some(refused) = check_post(console, operator, headers, field(form, "csrf")) {
        return Some(refused);
    }
    (!operator.is_admin()).then(|| {
        layout::message(
            StatusCode::FORBIDDEN,
            "Admins only",
            &format!("Only an admin may {verb} tasks; you are signed in as an approver."),
        )
    })
}

pub async fn revoke(
    State(console): Shared,
    operator: Operator,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Fields>,
) -> Response {
    if let Some(refused) = admin_post(&console, &operator, &headers, &form, "revoke") {
        return refused;
    }
    match console.host.store.revoke_task(&id, operator.name()).await {
        Ok(task) => {
            tracing::info!(task = %task.id, by = operator.name(), "task revoked in the console");
            see_other("/tasks")
        }
        Err(e) => task_error(e),
    }
}

pub async fn extend(
    State(console): Shared,
    operator: Operator,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<Fields>,
) -> Response {
    if let Some(refused) = admin_post(&console, &operator, &headers, &form, "extend") {
        return refused;
    }
    let ttl = match parse_ttl(field(&form, "ttl").unwrap_or("")) {
        Ok(ttl) => ttl,
        Err(e) => {
            return layout::message(
                StatusCode::BAD_REQUEST,
                "Cannot extend the task",
                &e.to_string(),
            );
        }
    };
    match console
        .host
        .store
        .extend_task(&id, ttl, operator.name())
        .await
    {
        Ok(_) => see_other("/tasks"),
        Err(e) => task_error(e),
    }
}

fn task_error(e: StoreError) -> Response {
    match e {
        StoreError::NoTask(_) => {
            layout::message(StatusCode::NOT_FOUND, "No such task", &e.to_string())
        }
        StoreError::TaskClosed { .. } => {
            layout::message(StatusCode::CONFLICT, "Task closed", &e.to_string())
        }
        other => store_failed(other),
    }
}
