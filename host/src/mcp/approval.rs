//! Asking a human to approve one destructive call. The yes comes from a
//! signed-in approver on the console's page by default; the agent's client
//! only carries the link there, since a client that answered for itself
//! could approve its own agent's calls.
//!
//! - A client that declared URL-mode elicitation is sent the approval's
//!   console page: a session-era client (2025-11-25 and earlier) with
//!   `elicitation/create` in `url` mode, after which the call waits for the
//!   decision (at most ten minutes) and the client is told
//!   `notifications/elicitation/complete`; a 2026-07-28 client with an
//!   `input_required` result carrying the same request, whose retry waits
//!   likewise.
//! - Any other client gets `approval_required` with the approval id and the
//!   page's URL; a person decides there (or through the CLI or admin API)
//!   and the model repeats the call.
//! - Only a task opened with `--approve-in-client` (attended use, where the
//!   client is the person) is asked in a form the client answers itself:
//!   `elicitation/create` in form mode, or `input_required` for 2026-07-28.
//!
//! Whatever the channel, the decision is recorded in the store against the
//! pending approval, which is bound to the exact task, tool and arguments;
//! the call is then simply made again and the store's charge uses the yes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CustomNotification, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequiredResult, ServerNotification,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::store::{Approval, ApprovalState, Decision, Store, StoreError, now};

/// Key of the one input request in an `input_required` result.
const INPUT_KEY: &str = "approval";
/// The boolean the form asks for.
const CONFIRM_FIELD: &str = "approve";
/// How long a session-based client may take to answer before the approval
/// is left to an operator.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How long a URL-mode request waits between looks at the store.
const DECISION_POLL: Duration = Duration::from_millis(250);

/// How this request's client can be asked.
pub enum Channel {
    /// The client's own form (`--approve-in-client` tasks only).
    Elicitation,
    InputRequired,
    /// A link to the console page, where a signed-in approver decides.
    Url(String),
    InputRequiredUrl(String),
    /// Nothing to send the client: `approval_required`.
    Operator,
}

impl Channel {
    /// The channel for `approval` in this request; `page` is the
    /// approval's console URL if a console is served. A task opened with
    /// operator approval never asks the client.
    pub fn of(
        approval: &Approval,
        context: &RequestContext<RoleServer>,
        page: Option<String>,
    ) -> Channel {
        if approval.operator_only {
            return Channel::Operator;
        }
        let elicitation = context.client_capabilities().and_then(|c| c.elicitation);
        let session_era = !matches!(context.protocol_version(), Some(v) if !v.has_initialize());
        if approval.in_client {
            // An empty elicitation capability means form mode (the only
            // mode before 2025-11-25); `form` must be present otherwise.
            let form = elicitation.is_some_and(|e| e.form.is_some() || e.url.is_none());
            return match (form, session_era) {
                (false, _) => Channel::Operator,
                (true, true) => Channel::Elicitation,
                (true, false) => Channel::InputRequired,
            };
        }
        let url = elicitation.is_some_and(|e| e.url.is_some());
        match (page, url, session_era) {
            (Some(page), true, true) => Channel::Url(page),
            (Some(page), true, false) => Channel::InputRequiredUrl(page),
            _ => Channel::Operator,
        }
    }
}

fn url_request(approval: &Approval, page: &str) -> ElicitRequestParams {
    ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!(
            "A destructive action needs a person's approval on the toolhost console: {} Open the link, sign in, and approve or deny it there; the call goes on once it is decided.",
            approval.summary
        ),
        url: page.to_string(),
        elicitation_id: approval.id.clone(),
    }
}

/// Calls waiting for a person at once, in this process: for a client's
/// answer to an elicitation, or for a decision on the console (each of
/// those looks at the store four times a second). Each wait holds its
/// call's handler, request and stream for up to ten minutes; past this
/// many, a call answers `approval_required` at once instead of waiting.
const MAX_WAITING: usize = 256;
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_WAITING`] places, given back when dropped.
struct Waiting;

impl Waiting {
    fn take(approval: &Approval) -> Option<Waiting> {
        if WAITING.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING {
            WAITING.fetch_sub(1, Ordering::AcqRel);
            tracing::warn!(approval = %approval.id, "too many calls wait for a person; this one answers approval_required");
            return None;
        }
        Some(Waiting)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Waits until someone decides `approval`, or it expires, or ten minutes
/// pass, or the client gives up on the request (`cancelled`). Returns
/// whether it was decided (approved or denied). The caller holds a place
/// among the waiting calls.
async fn decided(
    store: &dyn Store,
    approval: &Approval,
    cancelled: &CancellationToken,
    _place: &Waiting,
) -> Result<bool, StoreError> {
    let left = u64::try_from(approval.expires_at - now()).unwrap_or(0);
    let deadline = tokio::time::Instant::now() + ELICITATION_TIMEOUT.min(Duration::from_secs(left));
    loop {
        match store.approval(&approval.id).await?.map(|a| a.state) {
            Some(ApprovalState::Pending) => {}
            Some(ApprovalState::Approved | ApprovalState::Denied | ApprovalState::Used) => {
                return Ok(true);
            }
            Some(ApprovalState::Expired) | None => return Ok(false),
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::select! {
            () = tokio::time::sleep(DECISION_POLL) => {}
            () = cancelled.cancelled() => return Ok(false),
        }
    }
}

/// Sends the client to the console page and waits for the decision made
/// there. Returns whether one was made: a client that declines to open the
/// link, fails, or a decision that does not come in time leaves the
/// approval pending, and the call answers `approval_required`.
pub async fn elicit_url(
    store: &dyn Store,
    approval: &Approval,
    page: &str,
    context: &RequestContext<RoleServer>,
) -> Result<bool, StoreError> {
    let Some(place) = Waiting::take(approval) else {
        return Ok(false);
    };
    let asking = context
        .peer
        .create_elicitation_with_timeout(url_request(approval, page), Some(ELICITATION_TIMEOUT));
    let Some(answer) = context.ct.run_until_cancelled(asking).await else {
        return Ok(false);
    };
    match answer {
        Ok(result) if result.action == ElicitationAction::Accept => {}
        Ok(_) => {
            tracing::info!(approval = %approval.id, "the client did not open the approval page");
            return Ok(false);
        }
        Err(e) => {
            tracing::info!(approval = %approval.id, "URL elicitation failed; the approval stays pending: {e}");
            return Ok(false);
        }
    }
    let done = decided(store, approval, &context.ct, &place).await?;
    if done {
        let complete = CustomNotification::new(
            "notifications/elicitation/complete",
            Some(serde_json::json!({ "elicitationId": approval.id })),
        );
        if let Err(e) = context
            .peer
            .send_notification(ServerNotification::CustomNotification(complete))
            .await
        {
            tracing::debug!("elicitation complete notification not sent: {e}");
        }
    }
    Ok(done)
}

/// The `input_required` result that sends a 2026-07-28 client to the page.
pub fn input_required_url(approval: &Approval, page: &str) -> InputRequiredResult {
    let request = InputRequest::Elicitation(ElicitRequest::new(url_request(approval, page)));
    let requests = [(INPUT_KEY.to_string(), request)].into_iter().collect();
    InputRequiredResult::new(Some(requests), Some(approval.id.clone()))
}

/// A 2026-07-28 retry after the client opened the page: waits for the
/// decision like a session's call does. Returns whether the retry was for
/// this approval and a decision came.
pub async fn wait_after_retry(
    store: &dyn Store,
    approval: &Approval,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<Option<bool>, StoreError> {
    if request.request_state.as_deref() != Some(approval.id.as_str()) {
        return Ok(None);
    }
    let opened = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
        .and_then(|answer| serde_json::from_value::<ElicitResult>(answer.clone()).ok())
        .is_some_and(|result| result.action == ElicitationAction::Accept);
    if !opened {
        return Ok(Some(false));
    }
    let Some(place) = Waiting::take(approval) else {
        return Ok(Some(false));
    };
    decided(store, approval, &context.ct, &place)
        .await
        .map(Some)
}

fn form(approval: &Approval) -> Result<ElicitRequestParams, ErrorData> {
    let schema: ElicitationSchema = ElicitationSchema::builder()
        .required_bool_with(CONFIRM_FIELD, |b| {
            b.title("Approve this action")
                .description("Yes runs the call once, exactly as shown. No refuses it.")
        })
        .description("Approval of a destructive action")
        .build()
        .map_err(|e| ErrorData::internal_error(format!("approval form: {e}"), None))?;
    Ok(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: prompt(approval),
        requested_schema: schema,
    })
}

/// What the human reads. This form is answered by the client itself, so it
/// says that it stands for the person at the keyboard.
fn prompt(approval: &Approval) -> String {
    format!(
        "An AI agent asks to run a destructive action. {} This task lets you approve it here, in your client, as the person at the keyboard. Approve it only if this is what you want; it runs once.",
        approval.summary
    )
}

/// Yes only for an accepted form whose required box is ticked: an accept
/// without content is what a careless auto-accepting client sends, and it
/// must not delete anything.
fn decision(result: &ElicitResult) -> Decision {
    let ticked = result
        .content
        .as_ref()
        .and_then(|content| content.get(CONFIRM_FIELD))
        .and_then(|v| v.as_bool())
        == Some(true);
    if result.action == ElicitationAction::Accept && ticked {
        Decision::Approve
    } else {
        Decision::Deny
    }
}

/// Who decided, as recorded: the user of the client, named as the client
/// names itself; the host cannot verify either.
fn decider(context: &RequestContext<RoleServer>) -> String {
    let client = context
        .client_info()
        .map(|i| i.name)
        .unwrap_or_else(|| "unknown".into());
    let client: String = client
        .chars()
        .filter(|c| !c.is_control())
        .take(100)
        .collect();
    format!("user of client-reported {client:?}")
}

/// Records an in-band answer; an approval someone else decided meanwhile
/// (an operator, or expiry) keeps that decision.
async fn record(
    store: &dyn Store,
    approval: &Approval,
    decision: Decision,
    by: &str,
    channel: &str,
) -> Result<(), StoreError> {
    match store
        .decide(&approval.id, decision, by, channel, None)
        .await
    {
        Ok(decided) => {
            tracing::info!(approval = %decided.id, task = %decided.task_id, tool = %decided.tool, state = decided.state.as_str(), by, channel, "approval decided through the client");
            Ok(())
        }
        Err(StoreError::AlreadyDecided { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Asks over the live session and records the answer. Returns whether an
/// answer came: a client that fails to ask (an error, no answer in time)
/// leaves the approval pending for an operator, like a client that cannot
/// elicit at all.
pub async fn elicit(
    store: &dyn Store,
    approval: &Approval,
    context: &RequestContext<RoleServer>,
) -> Result<bool, StoreError> {
    let params = match form(approval) {
        Ok(params) => params,
        Err(e) => {
            tracing::error!("{}", e.message);
            return Ok(false);
        }
    };
    let Some(_place) = Waiting::take(approval) else {
        return Ok(false);
    };
    let asking = context
        .peer
        .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT));
    let Some(answer) = context.ct.run_until_cancelled(asking).await else {
        return Ok(false);
    };
    let decision = match answer {
        Ok(result) => decision(&result),
        Err(e) => {
            tracing::info!(approval = %approval.id, "elicitation failed; the approval stays pending for an operator: {e}");
            return Ok(false);
        }
    };
    record(store, approval, decision, &decider(context), "elicitation").await?;
    Ok(true)
}

/// The `input_required` result that asks a 2026-07-28 client.
pub fn input_required(approval: &Approval) -> Result<InputRequiredResult, ErrorData> {
    let request = InputRequest::Elicitation(ElicitRequest::new(form(approval)?));
    let requests = [(INPUT_KEY.to_string(), request)].into_iter().collect();
    Ok(InputRequiredResult::new(
        Some(requests),
        Some(approval.id.clone()),
    ))
}

/// Records the answer a 2026-07-28 client's retry carries, if the retry is
/// for this very approval. Returns whether it carried one.
pub async fn answer_from_retry(
    store: &dyn Store,
    approval: &Approval,
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<bool, StoreError> {
    // The request state is the id of the approval this retry answers. The
    // approval passed in is the one pending for this exact task, tool and
    // arguments, so an id from another call does not match and is ignored.
    if !approval.in_client || request.request_state.as_deref() != Some(approval.id.as_str()) {
        return Ok(false);
    }
    let Some(answer) = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(INPUT_KEY))
    else {
        return Ok(false);
    };
    let decision = match serde_json::from_value::<ElicitResult>(answer.clone()) {
        Ok(result) => decision(&result),
        Err(_) => Decision::Deny,
    };
    record(store, approval, decision, &decider(context), "mrtr").await?;
    Ok(true)
}
