//! The Simhaven helpdesk: support tickets about the "Tidenwächter TW-2"
//! water-level sensor by Nordwerk Simhaven, and the product doc that is the
//! helpdesk's only source of facts.
//!
//! The plugin keeps its tickets in instance memory: with `instance =
//! "session"` each MCP session works on its own copy. It never judges a
//! ticket itself (no guessed category, no drafted answer, no bulk action):
//! that stays with the agent.

mod desk;

use std::cell::RefCell;

use desk::{Category, CategoryFilter, Desk, DeskError, Doc, Status, Team};
use schemars::JsonSchema;
use serde::Deserialize;
use toolhost_sdk::log::{self, Level};
use toolhost_sdk::{CallContext, ToolError, Toolbox, config};

thread_local! {
    /// Built on the first call so that `describe` needs no config.
    static DESK: RefCell<Option<Desk>> = const { RefCell::new(None) };
}

/// Runs `f` on this instance's desk, creating it at the first call.
fn with_desk<T>(f: impl FnOnce(&mut Desk) -> Result<T, DeskError>) -> Result<T, ToolError> {
    DESK.with_borrow_mut(|slot| {
        let desk = match slot {
            Some(desk) => desk,
            None => slot.insert(Desk::new(rounds()?)),
        };
        f(desk).map_err(|e| ToolError::new(e.code(), e.to_string()))
    })
}

/// Arguments that name one ticket.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    /// Ticket key, e.g. T-1041.
    #[schemars(regex(pattern = r"^T-\d{4}$"), length(max = 6))]
    key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    /// Only tickets with this status.
    status: Option<Status>,
    /// Only tickets of this category; `none` for those not yet categorised.
    category: Option<CategoryFilter>,
    /// Rows per page.
    #[serde(default = "default_list_limit")]
    #[schemars(range(min = 1, max = 100))]
    limit: usize,
    /// Matching tickets to skip.
    #[serde(default)]
    #[schemars(range(min = 0, max = 100000))]
    offset: usize,
}

fn default_list_limit() -> usize {
    25
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    /// Words that must all appear in the subject or text.
    #[schemars(length(min = 1, max = 200))]
    query: String,
    /// Rows at most.
    #[serde(default = "default_search_limit")]
    #[schemars(range(min = 1, max = 50))]
    limit: usize,
}

fn default_search_limit() -> usize {
    10
}

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CategorizeArgs {
    /// Ticket key, e.g. T-1041.
    #[schemars(regex(pattern = r"^T-\d{4}$"), length(max = 6))]
    key: String,
    /// The category you judged.
    category: Category,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AnswerArgs {
    /// Ticket key, e.g. T-1041.
    #[schemars(regex(pattern = r"^T-\d{4}$"), length(max = 6))]
    key: String,
    /// The answer to send, from the product doc alone.
    #[schemars(length(min = 10, max = 4000))]
    answer: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EscalateArgs {
    /// Ticket key, e.g. T-1041.
    #[schemars(regex(pattern = r"^T-\d{4}$"), length(max = 6))]
    key: String,
    /// The team that takes the ticket over.
    team: Team,
    /// Why it needs that team.
    #[schemars(length(min = 10, max = 500))]
    reason: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CloseArgs {
    /// Ticket key, e.g. T-1041.
    #[schemars(regex(pattern = r"^T-\d{4}$"), length(max = 6))]
    key: String,
    /// Why it is closed (kept with the ticket).
    #[schemars(length(min = 1, max = 500))]
    reason: Option<String>,
}

fn toolbox() -> Toolbox {
    Toolbox::new()
        .tool(
            "helpdesk_ticket_list",
            "List helpdesk tickets",
            "Lists helpdesk tickets, newest key last, without their full text (use \
             helpdesk_ticket_get for that). Filters by status and category (\"none\" = not yet \
             categorised). Pages with limit (default 25, at most 100) and offset; `rest` says \
             how many matching tickets come after this page. Changes nothing.",
            |_: &CallContext, a: ListArgs| {
                with_desk(|d| Ok(d.list(a.status, a.category, a.limit, a.offset)))
            },
        )
        .tool(
            "helpdesk_ticket_get",
            "Read one helpdesk ticket",
            "Returns one ticket by its key (T-1041 style) with its full text, the answers given \
             so far and any escalation. Unknown keys give not_found. Changes nothing.",
            |_: &CallContext, a: KeyArgs| with_desk(|d| d.get(&a.key)),
        )
        .tool(
            "helpdesk_ticket_search",
            "Search helpdesk tickets",
            "Finds tickets whose subject or text contains every word of the query \
             (case-insensitive). Returns at most limit rows (default 10, at most 50) without \
             full text. Changes nothing.",
            |_: &CallContext, a: SearchArgs| with_desk(|d| Ok(d.search(a.query, a.limit))),
        )
        .tool(
            "helpdesk_doc_read",
            "Read the product doc",
            "Returns the product doc of the Tidenwächter TW-2: warranty, return window, battery, \
             rated depth, delivery and which team handles what. It is the helpdesk's only source \
             of facts; answer customers from it alone. Changes nothing.",
            |_: &CallContext, _: NoArgs| {
                Ok(Doc {
                    title: desk::DOC_TITLE.into(),
                    text: desk::DOC_TEXT.into(),
                })
            },
        )
        .tool(
            "helpdesk_stats_get",
            "Count tickets",
            "Counts tickets by status and by category (uncategorised tickets count as \"none\"). \
             Changes nothing.",
            |_: &CallContext, _: NoArgs| with_desk(|d| Ok(d.stats())),
        )
        .tool(
            "helpdesk_ticket_categorize",
            "Set a ticket's category",
            "Writes the category of one ticket (question, malfunction, billing, legal or spam), \
             replacing any earlier one. You judge the category; the tool does not guess it. \
             Changes nothing else.",
            |_: &CallContext, a: CategorizeArgs| with_desk(|d| d.categorize(&a.key, a.category)),
        )
        .tool(
            "helpdesk_ticket_answer",
            "Send an answer to a customer",
            "Sends your answer (10 to 4000 characters) to the customer of one ticket and sets \
             its status to answered. Refuses closed tickets (ticket_closed) and escalated ones \
             (ticket_escalated). Answer only from the product doc.",
            |_: &CallContext, a: AnswerArgs| with_desk(|d| d.answer(&a.key, a.answer)),
        )
        .tool(
            "helpdesk_ticket_escalate",
            "Escalate a ticket to a team",
            "Hands one ticket to the legal, engineering or billing team with your reason (10 to \
             500 characters) and sets its status to escalated; the helpdesk sends no further \
             answers on it. Refuses closed or already escalated tickets.",
            |_: &CallContext, a: EscalateArgs| with_desk(|d| d.escalate(&a.key, a.team, a.reason)),
        )
        .tool(
            "helpdesk_ticket_close",
            "Close a ticket",
            "Closes one ticket without sending anything to the customer (spam is closed, not \
             answered); a closed ticket cannot be answered or escalated again. Refuses a ticket \
             that is already closed.",
            |_: &CallContext, a: CloseArgs| with_desk(|d| d.close(&a.key, a.reason)),
        )
}

toolhost_sdk::export_plugin!(toolbox);

/// Reads `rounds` from the manifest config: how many copies of the eight
/// tickets to serve (so paging can be tried on hundreds).
fn rounds() -> Result<u32, ToolError> {
    let Some(raw) = config::get("rounds") else {
        return Ok(1);
    };
    match raw.trim().parse::<u32>() {
        Ok(n) if (1..=desk::MAX_ROUNDS).contains(&n) => Ok(n),
        _ => {
            log::write(Level::Error, &format!("config rounds = {raw:?} is invalid"));
            Err(ToolError::new(
                "config_invalid",
                format!(
                    "The helpdesk is misconfigured (rounds must be 1..={}). Stop and tell the operator.",
                    desk::MAX_ROUNDS
                ),
            ))
        }
    }
}
