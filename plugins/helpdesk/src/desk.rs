//! Tickets, the product doc, and what each tool does to them.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// Where a ticket stands.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Open,
    Answered,
    Escalated,
    Closed,
}

/// What a ticket is about, as the agent judged it.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Question,
    Malfunction,
    Billing,
    Legal,
    Spam,
}

/// A category to list by; `none` means not yet categorised.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CategoryFilter {
    Question,
    Malfunction,
    Billing,
    Legal,
    Spam,
    None,
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

impl CategoryFilter {
    fn admits(self, category: Option<Category>) -> bool {
        let wanted = match self {
            CategoryFilter::None => return category.is_none(),
            CategoryFilter::Question => Category::Question,
            CategoryFilter::Malfunction => Category::Malfunction,
            CategoryFilter::Billing => Category::Billing,
            CategoryFilter::Legal => Category::Legal,
            CategoryFilter::Spam => Category::Spam,
        };
        category == Some(wanted)
    }
}

/// The team an escalated ticket went to.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
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
    escalation: Option<Escalation>,
    close_reason: Option<String>,
}

/// A ticket as list and search show it: everything but the full text.
#[derive(Serialize, JsonSchema)]
pub struct Row {
    pub key: String,
    pub subject: String,
    pub from: String,
    pub received: String,
    pub status: Status,
    pub category: Option<Category>,
}

/// Who an escalated ticket went to, and why.
#[derive(Clone, Serialize, JsonSchema)]
pub struct Escalation {
    pub team: Team,
    pub reason: String,
}

/// One ticket in full, as helpdesk_ticket_get returns it.
#[derive(Serialize, JsonSchema)]
pub struct FullTicket {
    #[serde(flatten)]
    pub row: Row,
    pub text: String,
    pub answers: Vec<String>,
    pub escalation: Option<Escalation>,
    pub close_reason: Option<String>,
}

/// A ticket after a change: its row, and its escalation if it has one.
// Not the text: only helpdesk_ticket_get shows that.
#[derive(Serialize, JsonSchema)]
pub struct Changed {
    #[serde(flatten)]
    pub row: Row,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Escalation>,
}

/// One page of helpdesk_ticket_list.
#[derive(Serialize, JsonSchema)]
pub struct ListPage {
    pub total: usize,
    pub matches: usize,
    pub offset: usize,
    pub rest: usize,
    pub tickets: Vec<Row>,
}

/// What helpdesk_ticket_search found.
#[derive(Serialize, JsonSchema)]
pub struct SearchPage {
    pub query: String,
    pub matches: usize,
    pub rest: usize,
    pub tickets: Vec<Row>,
}

/// The product doc.
#[derive(Serialize, JsonSchema)]
pub struct Doc {
    pub title: String,
    pub text: String,
}

/// Ticket counts.
#[derive(Serialize, JsonSchema)]
pub struct Stats {
    pub total: usize,
    pub by_status: BTreeMap<String, usize>,
    pub by_category: BTreeMap<String, usize>,
}

impl Ticket {
    fn row(&self) -> Row {
        Row {
            key: self.key.clone(),
            subject: self.subject.into(),
            from: self.from.into(),
            received: self.received.clone(),
            status: self.status,
            category: self.category,
        }
    }

    fn full(&self) -> FullTicket {
        FullTicket {
            row: self.row(),
            text: self.text.into(),
            answers: self.answers.clone(),
            escalation: self.escalation.clone(),
            close_reason: self.close_reason.clone(),
        }
    }

    fn changed(&self) -> Changed {
        Changed {
            row: self.row(),
            escalation: self.escalation.clone(),
        }
    }

    /// Answers and escalations go only to tickets still in the helpdesk's hands.
    fn still_open(&self) -> Result<(), DeskError> {
        match self.status {
            Status::Closed => Err(DeskError::Closed(self.key.clone())),
            Status::Escalated => Err(DeskError::Escalated(self.key.clone())),
            Status::Open | Status::Answered => Ok(()),
        }
    }
}

/// A failure of a tool, with the code the model sees.
pub enum DeskError {
    NotFound(String),
    Closed(String),
    Escalated(String),
}

impl DeskError {
    pub fn code(&self) -> &'static str {
        match self {
            DeskError::NotFound(_) => "not_found",
            DeskError::Closed(_) => "ticket_closed",
            DeskError::Escalated(_) => "ticket_escalated",
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
            DeskError::Closed(key) => write!(
                f,
                "Ticket {key} is closed; a closed ticket cannot be answered, escalated or closed again."
            ),
            DeskError::Escalated(key) => write!(
                f,
                "Ticket {key} is escalated; the team it went to handles it now, so the helpdesk does not answer it."
            ),
        }
    }
}

pub struct Desk {
    tickets: Vec<Ticket>,
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

    pub fn get(&self, key: &str) -> Result<FullTicket, DeskError> {
        Ok(self.find(key)?.full())
    }

    pub fn categorize(&mut self, key: &str, category: Category) -> Result<Changed, DeskError> {
        let t = self.find_mut(key)?;
        t.category = Some(category);
        Ok(t.changed())
    }

    pub fn answer(&mut self, key: &str, answer: String) -> Result<Changed, DeskError> {
        let t = self.find_mut(key)?;
        t.still_open()?;
        t.answers.push(answer);
        t.status = Status::Answered;
        Ok(t.changed())
    }

    pub fn escalate(
        &mut self,
        key: &str,
        team: Team,
        reason: String,
    ) -> Result<Changed, DeskError> {
        let t = self.find_mut(key)?;
        t.still_open()?;
        t.escalation = Some(Escalation { team, reason });
        t.status = Status::Escalated;
        Ok(t.changed())
    }

    pub fn close(&mut self, key: &str, reason: Option<String>) -> Result<Changed, DeskError> {
        let t = self.find_mut(key)?;
        if t.status == Status::Closed {
            return Err(DeskError::Closed(key.to_string()));
        }
        t.status = Status::Closed;
        t.close_reason = reason;
        Ok(t.changed())
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

    pub fn list(
        &self,
        status: Option<Status>,
        category: Option<CategoryFilter>,
        limit: usize,
        offset: usize,
    ) -> ListPage {
        let matching: Vec<&Ticket> = self
            .tickets
            .iter()
            .filter(|t| status.is_none_or(|s| t.status == s))
            .filter(|t| category.is_none_or(|c| c.admits(t.category)))
            .collect();
        let tickets: Vec<Row> = matching
            .iter()
            .skip(offset)
            .take(limit)
            .map(|t| t.row())
            .collect();
        ListPage {
            total: self.tickets.len(),
            matches: matching.len(),
            offset,
            rest: matching.len().saturating_sub(offset + tickets.len()),
            tickets,
        }
    }

    pub fn search(&self, query: String, limit: usize) -> SearchPage {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        let matching: Vec<&Ticket> = self
            .tickets
            .iter()
            .filter(|t| {
                let hay = format!("{} {}", t.subject, t.text).to_lowercase();
                !words.is_empty() && words.iter().all(|w| hay.contains(w.as_str()))
            })
            .collect();
        let tickets: Vec<Row> = matching.iter().take(limit).map(|t| t.row()).collect();
        SearchPage {
            query,
            matches: matching.len(),
            rest: matching.len() - tickets.len(),
            tickets,
        }
    }

    pub fn stats(&self) -> Stats {
        let mut by_status: BTreeMap<String, usize> = ["open", "answered", "escalated", "closed"]
            .into_iter()
            .map(|s| (s.to_string(), 0))
            .collect();
        let mut by_category: BTreeMap<String, usize> = [
            "question",
            "malfunction",
            "billing",
            "legal",
            "spam",
            "none",
        ]
        .into_iter()
        .map(|c| (c.to_string(), 0))
        .collect();
        for t in &self.tickets {
            *by_status.entry(t.status.name().into()).or_default() += 1;
            *by_category
                .entry(t.category.map_or("none", Category::name).into())
                .or_default() += 1;
        }
        Stats {
            total: self.tickets.len(),
            by_status,
            by_category,
        }
    }
}
