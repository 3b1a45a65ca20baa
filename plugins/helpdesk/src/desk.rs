//! Tickets, the product doc, and what each tool does to them.

use serde::Deserialize;
use serde_json::{Value, json};
use std::fmt;

/// Keys are `T-` plus four digits, starting at 1041: 1041 + 8 * 1119 would
/// pass 9999, so rounds stop well before that.
pub const MAX_ROUNDS: u32 = 1000;
const FIRST_KEY: u32 = 1041;

pub const DOC_TITLE: &str = "Tidenwächter TW-2 — product facts for the helpdesk";
pub const DOC_TEXT: &str = "\
Tidenwächter TW-2, water-level sensor by Nordwerk Simhaven.

Warranty: 24 months from delivery, covering defects of the sensor and its electronics. \
Damage from use below the rated depth is not covered.
Return window: 14 days from delivery, no reason needed; the device must be complete.
Battery: lasts 18 months in normal use (one reading every 15 minutes); replaceable by the customer.
Rated depth: 3 m. Deeper installation is outside the specification.
Delivery: 5 working days within the country after payment.

Malfunctions go to engineering. Billing disputes go to billing. Legal threats go to legal \
and receive no answer from the helpdesk. Spam is closed without an answer.";

/// The eight tickets of one round: (subject, from, text).
const SEED: [(&str, &str, &str); 8] = [
    (
        "How long is the warranty?",
        "Greta Lindqvist",
        "Hello, I bought a Tidenwächter TW-2 for our boathouse last month. How long is the \
         warranty, and does it also cover the electronics? Thanks, Greta",
    ),
    (
        "Can I still send it back?",
        "Jonas Petersen",
        "I received the TW-2 nine days ago and it is bigger than I expected. Can I still return \
         it, and until when? Regards, Jonas",
    ),
    (
        "Battery life",
        "Mira Okafor",
        "How long does the battery of the TW-2 last before I have to change it? We read the \
         level every 15 minutes.",
    ),
    (
        "Installation depth",
        "Hannes Wiegand",
        "Our well is about 2.5 m deep. Can the TW-2 sit at the bottom, or is that too deep for \
         it?",
    ),
    (
        "Sensor shows 0 cm since Tuesday",
        "Sabine Krüger",
        "Since Tuesday my TW-2 reports a level of 0 cm although the tank is half full. I already \
         restarted it twice. The status LED blinks red. What can I do?",
    ),
    (
        "Charged twice for one sensor",
        "Piotr Nowak",
        "My credit card statement shows two charges of 149.00 EUR for order 88231, but I \
         ordered only one TW-2. Please refund the second charge.",
    ),
    (
        "Formal notice",
        "Dr. Albrecht Hoffmann",
        "My client's cellar flooded because your sensor failed to warn. We hold Nordwerk \
         Simhaven liable for the damage and expect your statement within 10 days, otherwise we \
         will take legal action.",
    ),
    (
        "Cheap watches 90% off!!!",
        "promo@deals-galore.example",
        "Luxury watches at 90% off, only today! Click the link to claim your discount.",
    ),
];

#[derive(Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Open,
    Answered,
    Escalated,
    Closed,
}

#[derive(Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Question,
    Malfunction,
    Billing,
    Legal,
    Spam,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Answered => "answered",
            Status::Escalated => "escalated",
            Status::Closed => "closed",
        }
    }
}

impl Category {
    fn name(self) -> &'static str {
        match self {
            Category::Question => "question",
            Category::Malfunction => "malfunction",
            Category::Billing => "billing",
            Category::Legal => "legal",
            Category::Spam => "spam",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Team {
    Legal,
    Engineering,
    Billing,
}

struct Ticket {
    key: String,
    subject: &'static str,
    from: &'static str,
    received: String,
    text: &'static str,
    status: Status,
    category: Option<Category>,
    answers: Vec<String>,
    escalation: Option<(Team, String)>,
    close_reason: Option<String>,
}

impl Ticket {
    /// The row shown by list and search: everything but the full text.
    fn row(&self) -> Value {
        json!({
            "key": self.key,
            "subject": self.subject,
            "from": self.from,
            "received": self.received,
            "status": self.status,
            "category": self.category,
        })
    }

    fn escalation_json(&self) -> Value {
        match &self.escalation {
            Some((team, reason)) => json!({ "team": team, "reason": reason }),
            None => Value::Null,
        }
    }

    fn full(&self) -> Value {
        let mut v = self.row();
        v["text"] = json!(self.text);
        v["answers"] = json!(self.answers);
        v["escalation"] = self.escalation_json();
        v["close_reason"] = json!(self.close_reason);
        v
    }
}

/// A failure of a tool, with the code the model sees.
pub enum DeskError {
    NotFound(String),
    Closed(String),
    Escalated(String),
    UnknownTool(String),
    BadArguments(String),
}

impl DeskError {
    pub fn code(&self) -> &'static str {
        match self {
            DeskError::NotFound(_) => "not_found",
            DeskError::Closed(_) => "ticket_closed",
            DeskError::Escalated(_) => "ticket_escalated",
            DeskError::UnknownTool(_) => "unknown_tool",
            DeskError::BadArguments(_) => "invalid_arguments",
        }
    }
}

impl fmt::Display for DeskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeskError::NotFound(key) => write!(
                f,
                "There is no ticket {key}. Use helpdesk_ticket_list or helpdesk_ticket_search to find valid keys."
            ),
            DeskError::Closed(key) => {
                write!(f, "Ticket {key} is closed and cannot be changed any more.")
            }
            DeskError::Escalated(key) => write!(
                f,
                "Ticket {key} is escalated; the team it went to handles it now, so the helpdesk does not answer it."
            ),
            DeskError::UnknownTool(tool) => write!(f, "The helpdesk has no tool {tool}."),
            DeskError::BadArguments(e) => write!(f, "The arguments do not fit the tool: {e}"),
        }
    }
}

pub struct Desk {
    tickets: Vec<Ticket>,
}

#[derive(Deserialize)]
struct ListArgs {
    status: Option<Status>,
    category: Option<String>,
    #[serde(default = "default_list_limit")]
    limit: usize,
    #[serde(default)]
    offset: usize,
}

fn default_list_limit() -> usize {
    25
}

#[derive(Deserialize)]
struct KeyArgs {
    key: String,
}

#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    #[serde(default = "default_search_limit")]
    limit: usize,
}

fn default_search_limit() -> usize {
    10
}

#[derive(Deserialize)]
struct CategorizeArgs {
    key: String,
    category: Category,
}

#[derive(Deserialize)]
struct AnswerArgs {
    key: String,
    answer: String,
}

#[derive(Deserialize)]
struct EscalateArgs {
    key: String,
    team: Team,
    reason: String,
}

#[derive(Deserialize)]
struct CloseArgs {
    key: String,
    reason: Option<String>,
}

fn parse<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T, DeskError> {
    T::deserialize(args).map_err(|e| DeskError::BadArguments(e.to_string()))
}

impl Desk {
    pub fn new(rounds: u32) -> Desk {
        let tickets = (0..rounds * SEED.len() as u32)
            .map(|i| {
                let (subject, from, text) = SEED[(i % SEED.len() as u32) as usize];
                Ticket {
                    key: format!("T-{}", FIRST_KEY + i),
                    subject,
                    from,
                    // One ticket an hour from a fixed day, so runs are repeatable.
                    received: format!("2026-11-{:02}T{:02}:00:00Z", 2 + i / 24 % 27, i % 24),
                    text,
                    status: Status::Open,
                    category: None,
                    answers: Vec::new(),
                    escalation: None,
                    close_reason: None,
                }
            })
            .collect();
        Desk { tickets }
    }

    pub fn dispatch(&mut self, tool: &str, args: &Value) -> Result<Value, DeskError> {
        match tool {
            "helpdesk_ticket_list" => Ok(self.list(parse(args)?)),
            "helpdesk_ticket_get" => {
                let a: KeyArgs = parse(args)?;
                Ok(self.find(&a.key)?.full())
            }
            "helpdesk_ticket_search" => Ok(self.search(parse(args)?)),
            "helpdesk_doc_read" => Ok(json!({ "title": DOC_TITLE, "text": DOC_TEXT })),
            "helpdesk_stats_get" => Ok(self.stats()),
            "helpdesk_ticket_categorize" => {
                let a: CategorizeArgs = parse(args)?;
                let t = self.find_mut(&a.key)?;
                t.category = Some(a.category);
                Ok(t.row())
            }
            "helpdesk_ticket_answer" => {
                let a: AnswerArgs = parse(args)?;
                let t = self.find_mut(&a.key)?;
                match t.status {
                    Status::Closed => return Err(DeskError::Closed(a.key)),
                    Status::Escalated => return Err(DeskError::Escalated(a.key)),
                    Status::Open | Status::Answered => {}
                }
                t.answers.push(a.answer);
                t.status = Status::Answered;
                Ok(t.row())
            }
            "helpdesk_ticket_escalate" => {
                let a: EscalateArgs = parse(args)?;
                let t = self.find_mut(&a.key)?;
                match t.status {
                    Status::Closed => return Err(DeskError::Closed(a.key)),
                    Status::Escalated => return Err(DeskError::Escalated(a.key)),
                    Status::Open | Status::Answered => {}
                }
                t.escalation = Some((a.team, a.reason));
                t.status = Status::Escalated;
                // The row and the escalation, not the text: only get shows that.
                let mut row = t.row();
                row["escalation"] = t.escalation_json();
                Ok(row)
            }
            "helpdesk_ticket_close" => {
                let a: CloseArgs = parse(args)?;
                let t = self.find_mut(&a.key)?;
                if t.status == Status::Closed {
                    return Err(DeskError::Closed(a.key));
                }
                t.status = Status::Closed;
                t.close_reason = a.reason;
                Ok(t.row())
            }
            other => Err(DeskError::UnknownTool(other.to_string())),
        }
    }

    fn find(&self, key: &str) -> Result<&Ticket, DeskError> {
        self.index(key)
            .map(|i| &self.tickets[i])
            .ok_or_else(|| DeskError::NotFound(key.to_string()))
    }

    fn find_mut(&mut self, key: &str) -> Result<&mut Ticket, DeskError> {
        match self.index(key) {
            Some(i) => Ok(&mut self.tickets[i]),
            None => Err(DeskError::NotFound(key.to_string())),
        }
    }

    /// Keys are dense, so the index is arithmetic rather than a scan.
    fn index(&self, key: &str) -> Option<usize> {
        let n: u32 = key.strip_prefix("T-")?.parse().ok()?;
        let i = n.checked_sub(FIRST_KEY)? as usize;
        (i < self.tickets.len()).then_some(i)
    }

    fn list(&self, a: ListArgs) -> Value {
        let wanted_category = a.category.as_deref();
        let matching: Vec<&Ticket> = self
            .tickets
            .iter()
            .filter(|t| a.status.is_none_or(|s| t.status == s))
            .filter(|t| match wanted_category {
                None => true,
                Some("none") => t.category.is_none(),
                Some(c) => t.category.is_some_and(|tc| tc.name() == c),
            })
            .collect();
        let rows: Vec<Value> = matching
            .iter()
            .skip(a.offset)
            .take(a.limit)
            .map(|t| t.row())
            .collect();
        let rest = matching.len().saturating_sub(a.offset + rows.len());
        json!({
            "total": self.tickets.len(),
            "matches": matching.len(),
            "offset": a.offset,
            "rest": rest,
            "tickets": rows,
        })
    }

    fn search(&self, a: SearchArgs) -> Value {
        let words: Vec<String> = a.query.split_whitespace().map(str::to_lowercase).collect();
        let matching: Vec<&Ticket> = self
            .tickets
            .iter()
            .filter(|t| {
                let hay = format!("{} {}", t.subject, t.text).to_lowercase();
                !words.is_empty() && words.iter().all(|w| hay.contains(w.as_str()))
            })
            .collect();
        let rows: Vec<Value> = matching.iter().take(a.limit).map(|t| t.row()).collect();
        json!({
            "query": a.query,
            "matches": matching.len(),
            "rest": matching.len() - rows.len(),
            "tickets": rows,
        })
    }

    fn stats(&self) -> Value {
        let mut by_status = json!({ "open": 0, "answered": 0, "escalated": 0, "closed": 0 });
        let mut by_category = json!({
            "question": 0, "malfunction": 0, "billing": 0, "legal": 0, "spam": 0, "none": 0
        });
        for t in &self.tickets {
            bump(&mut by_status, t.status.name());
            bump(&mut by_category, t.category.map_or("none", Category::name));
        }
        json!({
            "total": self.tickets.len(),
            "by_status": by_status,
            "by_category": by_category,
        })
    }
}

fn bump(counts: &mut Value, key: &str) {
    if let Some(n) = counts.get_mut(key) {
        *n = json!(n.as_u64().unwrap_or(0) + 1);
    }
}
