//! Asking a human to approve one destructive call, through whatever the
//! client offers.
//!
//! - A client of a session-based protocol (2025-11-25 and earlier) that
//!   declared elicitation is asked at once with `elicitation/create`; the
//!   call waits for the answer (at most ten minutes; without an answer the
//!   approval stays pending for an operator).
//! - A 2026-07-28 client that declared elicitation gets an `input_required`
//!   result (multi round-trip request) whose `requestState` is the approval
//!   id; its retry carries the answer.
//! - Any other client gets `approval_required` with the approval id; an
//!   operator decides with `toolhost approval approve|deny` or the admin API
//!   and the model repeats the call.
//!
//! Whatever the channel, the decision is recorded in the store against the
//! pending approval, which is bound to the exact task, tool and arguments;
//! the call is then simply made again and the store's charge uses the yes.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationSchema, InputRequest, InputRequiredResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use crate::store::{Approval, Decision, Store, StoreError};

/// Key of the one input request in an `input_required` result.
const INPUT_KEY: &str = "approval";
/// The boolean the form asks for.
const CONFIRM_FIELD: &str = "approve";
/// How long a session-based client may take to answer before the approval
/// is left to an operator.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// How this request's client can be asked.
pub enum Channel {
    Elicitation,
    InputRequired,
    Operator,
}

impl Channel {
    /// The channel for `approval` in this request. A task opened with
    /// operator approval never asks the client: an agent with its token
    /// could otherwise answer for the human.
    pub fn of(approval: &Approval, context: &RequestContext<RoleServer>) -> Channel {
        if approval.operator_only {
            return Channel::Operator;
        }
        let can_elicit = context
            .client_capabilities()
            .and_then(|c| c.elicitation)
            // An empty elicitation capability means form mode (the only
            // mode before 2025-11-25); `form` must be present otherwise.
            .is_some_and(|e| e.form.is_some() || e.url.is_none());
        if !can_elicit {
            return Channel::Operator;
        }
        match context.protocol_version() {
            Some(version) if !version.has_initialize() => Channel::InputRequired,
            _ => Channel::Elicitation,
        }
    }
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

/// What the human reads.
fn prompt(approval: &Approval) -> String {
    format!(
        "An AI agent asks to run a destructive action. {} Approve it only if this is what you want; it runs once.",
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
    match store.decide(&approval.id, decision, by, channel).await {
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
    let answer = context
        .peer
        .create_elicitation_with_timeout(params, Some(ELICITATION_TIMEOUT))
        .await;
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
    if approval.operator_only || request.request_state.as_deref() != Some(approval.id.as_str()) {
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
