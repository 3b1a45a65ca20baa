//! The audit trail of this replica: the latest records through filters,
//! one record in full, downloads, and whether the trail verifies.

use std::io::Write;
use std::path::PathBuf;

use axum::body::{Body, Bytes};

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::Shared;
use super::auth::Operator;
use super::layout::{self, Section};
use crate::audit::browse::{self, Newest};
use crate::audit::export::{self, Filter, Format};
use crate::audit::{key, verify};
use crate::text;

/// Records a page shows, newest first.
const SHOWN: usize = 200;

#[derive(Deserialize, Default, Clone)]
pub struct AuditQuery {
    #[serde(default)]
    task: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    risk: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    until: String,
    #[serde(default)]
    fragment: Option<String>,
    #[serde(default)]
    format: Option<String>,
}

impl AuditQuery {
    fn filter(&self) -> Result<Filter, String> {
        let given = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
        let time = |s: &str| given(s).map(|t| export::parse_time(&t)).transpose();
        Ok(Filter {
            since: time(&self.since)?,
            until: time(&self.until)?,
            task: given(&self.task),
            tool: given(&self.tool),
            risk: given(&self.risk),
            outcome: given(&self.outcome),
        })
    }

    /// The filters as a query string, for the download links.
    fn query(&self) -> String {
        let pairs = [
            ("task", &self.task),
            ("tool", &self.tool),
            ("risk", &self.risk),
            ("outcome", &self.outcome),
            ("since", &self.since),
            ("until", &self.until),
        ];
        pairs
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
                )
            })
            .collect::<Vec<_>>()
            .join("&")
    }
}

/// Trail reads the console runs at once. One may read the whole trail (a
/// filter that matches little, the chain's verification), so further
/// views, of more operators or tabs, wait their turn instead of each taking
/// a thread and a core.
static READERS: Semaphore = Semaphore::const_new(2);

/// Runs `work`, which reads the trail, off the async workers and in turn
/// with the console's other reads of it. The turn is held until `work`
/// ends, even if the page that asked is no longer waiting for it.
async fn reading<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    let turn = READERS.acquire().await.map_err(|e| e.to_string())?;
    tokio::task::spawn_blocking(move || {
        let _turn = turn;
        work()
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The newest records passing `filter`.
async fn newest(state_dir: PathBuf, filter: Filter) -> Result<Newest, String> {
    reading(move || browse::newest(&state_dir, &filter, SHOWN).map_err(|e| e.to_string())).await
}

fn field<'a>(record: &'a Value, name: &str) -> &'a str {
    record.get(name).and_then(Value::as_str).unwrap_or("")
}

fn rows(records: &[Value]) -> Markup {
    html! {
        @if records.is_empty() {
            p.empty { "No records match." }
        } @else {
            div.scroll {
                table.audit {
                    thead { tr {
                        th scope="col" { "Seq" } th scope="col" { "Time" } th scope="col" { "Event" }
                        th scope="col" { "Task" } th scope="col" { "Tool" } th scope="col" { "Outcome" } th scope="col" { "By" }
                    } }
                    tbody {
                        @for record in records {
                            @let seq = record.get("seq").and_then(Value::as_u64).unwrap_or(0);
                            tr {
                                td { a href={"/audit/records/" (seq)} { (seq) } }
                                td { (field(record, "time")) }
                                td { (field(record, "event")) }
                                td { code { (text::visible(field(record, "task"))) } }
                                td { code { (text::visible(field(record, "tool"))) } }
                                td { (text::visible(field(record, "outcome"))) }
                                td { (text::visible(field(record, "by"))) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub async fn page(
    State(console): Shared,
    operator: Operator,
    Query(query): Query<AuditQuery>,
) -> Response {
    let filter = match query.filter() {
        Ok(filter) => filter,
        Err(problem) => return layout::message(StatusCode::BAD_REQUEST, "Bad filter", &problem),
    };
    let found = match newest(console.state_dir(), filter).await {
        Ok(found) => found,
        Err(e) => {
            return layout::message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot read the trail",
                &e,
            );
        }
    };
    if query.fragment.is_some() {
        return layout::fragment(rows(&found.records));
    }
    let status = verify_status(console.state_dir()).await;
    let q = query.query();
    let live = if q.is_empty() {
        "/audit?fragment=rows".to_string()
    } else {
        format!("/audit?{q}&fragment=rows")
    };
    let body = html! {
        h1 { "Audit trail" }
        p.lede {
            "The tamper-evident record of this replica (" (console.manifest.replica) "), newest first; "
            @if found.more {
                "the newest " (found.records.len()) " records that match are shown, and older ones match too (the downloads hold them all)."
            } @else {
                (found.records.len()) " records match."
            }
        }
        section.verify aria-labelledby="verify-h" { h2 #verify-h { "Verification" } (status) }
        form.filters method="get" action="/audit" {
            @for (name, label, value) in [("task", "Task", &query.task), ("tool", "Tool", &query.tool), ("outcome", "Outcome", &query.outcome), ("since", "Since (2h, 2026-11-30, RFC 3339)", &query.since), ("until", "Until", &query.until)] {
                div {
                    label for={"f-" (name)} { (label) }
                    input id={"f-" (name)} name=(name) type="text" value=(value);
                }
            }
            div {
                label for="f-risk" { "Risk" }
                select #f-risk name="risk" {
                    @for risk in ["", "read", "write", "destructive"] {
                        option value=(risk) selected[query.risk == risk] { (if risk.is_empty() { "any" } else { risk }) }
                    }
                }
            }
            div.actions {
                button type="submit" { "Filter" }
                a.button href={"/audit/download?format=csv" @if !q.is_empty() { "&" (q) }} { "Download CSV" }
                a.button href={"/audit/download?format=jsonl" @if !q.is_empty() { "&" (q) }} { "Download JSONL" }
            }
        }
        div.check {
            input #live-tail type="checkbox" data-tail=(live);
            label for="live-tail" { "Follow new records" }
        }
        div #records aria-live="polite" { (rows(&found.records)) }
    };
    layout::page("Audit", &operator, Section::Audit, body).into_response()
}

async fn verify_status(state_dir: PathBuf) -> Markup {
    let checked = reading(move || {
        let signing = key::load(&key::key_path(&state_dir)).map_err(|e| e.to_string())?;
        let public = signing.verifying_key();
        let result = verify::verify(&state_dir, &public, &[]).map_err(|e| e.to_string())?;
        Ok((key::public_text(&public), result))
    })
    .await;
    match checked {
        Ok((public, Ok(verified))) => {
            let unsigned = verified.records.saturating_sub(verified.signed_through);
            html! {
                p.ok { "The chain verifies: " (verified.records) " records in " (verified.segments) " segments." }
                dl.meta {
                    dt { "Newest checkpoint" } dd {
                        "seq " (verified.signed_through)
                        @if let Some(at) = &verified.last_signed_at { ", signed " (at) }
                    }
                    dt { "Records after it (chained, not yet signed)" } dd { (unsigned) }
                    dt { "Signing key" } dd { code.digest { (public) } }
                }
            }
        }
        Ok((_, Err(broken))) => {
            html! { p.problem role="alert" { "The chain is broken at " (broken.to_string()) "." } }
        }
        Err(e) => html! { p.problem { "Cannot verify: " (e) } },
    }
}

pub async fn record(State(console): Shared, operator: Operator, Path(seq): Path<u64>) -> Response {
    let state_dir = console.state_dir();
    let found = reading(move || browse::find(&state_dir, seq).map_err(|e| e.to_string())).await;
    let record = match found {
        Ok(Some(record)) => record,
        Ok(None) => {
            return layout::message(
                StatusCode::NOT_FOUND,
                "No such record",
                "The trail has no record with this seq.",
            );
        }
        Err(e) => {
            return layout::message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot read the trail",
                &e,
            );
        }
    };
    let body = html! {
        p.crumbs { a href="/audit" { "Audit" } " / seq " (seq) }
        h1 { "Record " (seq) ": " (field(&record, "event")) }
        pre.json { (text::json(&record, true)) }
    };
    layout::page(&format!("Record {seq}"), &operator, Section::Audit, body).into_response()
}

pub async fn download(
    State(console): Shared,
    _operator: Operator,
    Query(query): Query<AuditQuery>,
) -> Response {
    let filter = match query.filter() {
        Ok(filter) => filter,
        Err(problem) => return layout::message(StatusCode::BAD_REQUEST, "Bad filter", &problem),
    };
    let (format, kind, extension) = match query.format.as_deref() {
        Some("csv") => (Format::Csv, "text/csv; charset=utf-8", "csv"),
        _ => (Format::Jsonl, "application/x-ndjson", "jsonl"),
    };
    // The export streams: a blocking thread reads the trail and hands
    // chunks over as the client takes them, so a download of the whole
    // trail holds a few chunks in memory, not the trail.
    let (tx, mut rx) = tokio::sync::mpsc::channel(DOWNLOAD_CHUNKS_AHEAD);
    let state_dir = console.state_dir();
    tokio::task::spawn_blocking(move || {
        let mut chunks = Chunks {
            tx,
            buf: Vec::with_capacity(DOWNLOAD_CHUNK),
        };
        if let Err(e) = export::export(&[state_dir], &filter, format, &mut chunks)
            && !chunks.tx.is_closed()
        {
            tracing::warn!("audit download cut short: {e}");
            let _ = chunks
                .tx
                .blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    // An error before the first chunk (the trail cannot be read at all)
    // can still be answered as one; later ones can only cut the body off.
    let first = match rx.recv().await {
        Some(Err(e)) => {
            return layout::message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot read the trail",
                &e.to_string(),
            );
        }
        first => first,
    };
    let rest = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    });
    (
        [
            (header::CONTENT_TYPE, kind.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!(
                    "attachment; filename=\"audit-{}.{extension}\"",
                    console.manifest.replica
                ),
            ),
        ],
        Body::from_stream(futures::stream::iter(first).chain(rest)),
    )
        .into_response()
}

/// Bytes of a download handed to the response at a time.
const DOWNLOAD_CHUNK: usize = 64 << 10;
/// Chunks read ahead of a client that takes them slowly.
const DOWNLOAD_CHUNKS_AHEAD: usize = 4;

/// The writing end of a streamed download: it gathers an export's output
/// into chunks and sends each to the response, waiting while the client
/// is behind.
struct Chunks {
    tx: tokio::sync::mpsc::Sender<std::io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl Chunks {
    fn send(&mut self) -> std::io::Result<()> {
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(DOWNLOAD_CHUNK),
        ));
        // The client went away: stop reading the trail for it.
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the download was abandoned")
        })
    }
}

impl Write for Chunks {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= DOWNLOAD_CHUNK {
            self.send()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.send()
    }
}
