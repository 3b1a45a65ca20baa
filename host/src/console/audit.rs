//! The audit trail of this replica: the latest records through filters,
//! one record in full, downloads, and whether the trail verifies.

use std::path::PathBuf;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;

use super::Shared;
use super::auth::Operator;
use super::layout::{self, Section};
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

/// The trail's records passing `filter`, exported as `format` (off the
/// async workers: it reads files).
async fn exported(state_dir: PathBuf, filter: Filter, format: Format) -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        export::export(&[state_dir], &filter, format, &mut out)
            .map(|_| out)
            .map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The trail's records passing `filter`, parsed.
async fn records(state_dir: PathBuf, filter: Filter) -> Result<Vec<Value>, String> {
    let out = exported(state_dir, filter, Format::Jsonl).await?;
    Ok(out
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect())
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
                        @for record in records.iter().rev().take(SHOWN) {
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
    let found = match records(console.state_dir(), filter).await {
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
        return layout::fragment(rows(&found));
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
        p.lede { "The tamper-evident record of this replica (" (console.manifest.replica) "), newest first; " (found.len()) " records match." }
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
        div #records aria-live="polite" { (rows(&found)) }
    };
    layout::page("Audit", &operator, Section::Audit, body).into_response()
}

async fn verify_status(state_dir: PathBuf) -> Markup {
    let checked = tokio::task::spawn_blocking(move || {
        let signing = key::load(&key::key_path(&state_dir)).map_err(|e| e.to_string())?;
        let public = signing.verifying_key();
        let result = verify::verify(&state_dir, &public, &[]).map_err(|e| e.to_string())?;
        Ok::<_, String>((key::public_text(&public), result))
    })
    .await;
    match checked {
        Ok(Ok((public, Ok(verified)))) => {
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
        Ok(Ok((_, Err(broken)))) => {
            html! { p.problem role="alert" { "The chain is broken at " (broken.to_string()) "." } }
        }
        Ok(Err(e)) => html! { p.problem { "Cannot verify: " (e) } },
        Err(e) => html! { p.problem { "Cannot verify: " (e.to_string()) } },
    }
}

pub async fn record(State(console): Shared, operator: Operator, Path(seq): Path<u64>) -> Response {
    let found = match records(console.state_dir(), Filter::default()).await {
        Ok(found) => found,
        Err(e) => {
            return layout::message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Cannot read the trail",
                &e,
            );
        }
    };
    let Some(record) = found
        .iter()
        .find(|r| r.get("seq").and_then(Value::as_u64) == Some(seq))
    else {
        return layout::message(
            StatusCode::NOT_FOUND,
            "No such record",
            "The trail has no record with this seq.",
        );
    };
    let body = html! {
        p.crumbs { a href="/audit" { "Audit" } " / seq " (seq) }
        h1 { "Record " (seq) ": " (field(record, "event")) }
        pre.json { (text::json(record, true)) }
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
    let written = exported(console.state_dir(), filter, format).await;
    match written {
        Ok(bytes) => (
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
            bytes,
        )
            .into_response(),
        Err(e) => layout::message(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Cannot read the trail",
            &e,
        ),
    }
}
