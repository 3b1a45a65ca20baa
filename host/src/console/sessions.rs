//! Live MCP sessions of this process.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::Shared;
use super::auth::Operator;
use super::layout::{self, Section};
use crate::text;

fn short(d: std::time::Duration) -> String {
    humantime::format_duration(std::time::Duration::from_secs(d.as_secs())).to_string()
}

pub async fn page(State(console): Shared, operator: Operator) -> Response {
    let sessions = console.host.sessions.list();
    let body = html! {
        h1 { "Sessions" }
        p.lede {
            "MCP sessions open on this replica (" (console.manifest.replica) "). "
            "Client names and versions are what each client says of itself."
        }
        @if sessions.is_empty() {
            p.empty { "No live sessions." }
        } @else {
            div.scroll {
                table {
                    thead { tr {
                        th scope="col" { "Session" } th scope="col" { "Transport" } th scope="col" { "Client" }
                        th scope="col" { "Protocol" } th scope="col" { "Task" } th scope="col" { "Calls" }
                        th scope="col" { "Age" } th scope="col" { "Idle" }
                    } }
                    tbody {
                        @for s in &sessions {
                            tr {
                                td { code { (s.id.chars().take(8).collect::<String>()) } }
                                td { (s.transport.as_str()) }
                                td {
                                    (s.peer.client.as_deref().map(text::visible).unwrap_or_else(|| "unknown".into()))
                                    @if let Some(v) = &s.peer.client_version { " " (text::visible(v)) }
                                }
                                td { (s.peer.protocol.as_deref().unwrap_or("-")) }
                                td { @if let Some(task) = &s.peer.task { code { (task) } } @else { "none (reads only)" } }
                                td { (s.calls) }
                                td { (short(s.age)) }
                                td { (short(s.idle)) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page("Sessions", &operator, Section::Sessions, body).into_response()
}
