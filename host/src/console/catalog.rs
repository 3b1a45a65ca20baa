//! The catalog as served: plugins and what the manifest grants them, tools
//! with their texts and schemas, lint findings, and refused plugins.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde_json::Value;

use super::Shared;
use super::auth::Operator;
use super::layout::{self, Section};
use crate::lint::Severity;
use crate::manifest::RiskClass;
use crate::text;

pub async fn page(State(console): Shared, operator: Operator) -> Response {
    let catalog = &console.host.catalog;
    let body = html! {
        h1 { "Catalog" }
        p.lede {
            (catalog.plugins.len()) " plugins serving " (catalog.tools.len()) " tools"
            @if !catalog.refusals.is_empty() { "; " (catalog.refusals.len()) " refused" }
            ". Texts are shown with hidden characters made visible."
        }
        @if !catalog.refusals.is_empty() {
            section aria-labelledby="refused-h" {
                h2 #refused-h { "Refused plugins" }
                ul {
                    @for refusal in &catalog.refusals {
                        li { code { (refusal.plugin.as_str()) } " (manifest line " (refusal.line) "): " (text::visible(&refusal.reason)) }
                    }
                }
            }
        }
        @if !console.settings.lint.is_empty() {
            section aria-labelledby="lint-h" {
                h2 #lint-h { "Lint findings" }
                ul {
                    @for finding in &console.settings.lint {
                        li {
                            span class={"severity " (if finding.allowed.is_some() { "allowed" } else if finding.severity == Severity::Error { "error" } else { "warning" })} {
                                (if finding.allowed.is_some() { "allowed" } else if finding.severity == Severity::Error { "error" } else { "warning" })
                            }
                            " " code { (finding.rule.id()) } " " (text::visible(&finding.plugin))
                            @if let Some(tool) = &finding.tool { "/" (text::visible(tool)) }
                            ": " (text::visible(&finding.message))
                        }
                    }
                }
            }
        }
        @for (index, plugin) in catalog.plugins.iter().enumerate() {
            @let grants = &plugin.vetted.grants;
            section.plugin aria-labelledby={"plugin-" (index)} {
                h2 id={"plugin-" (index)} { "Plugin " code { (plugin.prepared.shared().name.as_str()) } }
                dl.meta {
                    dt { "Digest" } dd { code.digest { "sha256:" (plugin.sha256) } }
                    dt { "Instances" } dd { (grants.instance) }
                    dt { "Limits" } dd {
                        @for (key, value) in &grants.limits { span.pill { (key) " " (value) } " " }
                    }
                    dt { "Network" } dd {
                        @if grants.network.is_empty() { "none" }
                        @for rule in &grants.network { code { (text::visible(rule)) } br; }
                    }
                    dt { "Credentials" } dd {
                        @if grants.credentials.is_empty() { "none" }
                        @for credential in &grants.credentials { code { (text::visible(credential)) } br; }
                    }
                    dt { "Files" } dd {
                        @if grants.files.is_empty() { "none" }
                        @for grant in &grants.files { code { (text::visible(grant)) } br; }
                    }
                }
                @for tool in catalog.tools.iter().filter(|t| t.plugin == index) {
                    article.tool {
                        h3 {
                            (text::visible(&tool.title)) " " code { (tool.name.as_str()) } " "
                            span class={"risk " (tool.risk.as_str())} { (tool.risk.as_str()) }
                        }
                        p.annotations {
                            (if tool.risk == RiskClass::Read { "read-only" } else { "changes things" })
                            @if tool.risk != RiskClass::Read && tool.idempotent { " · idempotent" }
                            @if tool.risk == RiskClass::Destructive { " · destructive" }
                            (if tool.open_world { " · open world" } else { " · closed world" })
                        }
                        p.description { (text::visible(&tool.description)) }
                        @if let Some(approval) = &tool.approval {
                            p { "Approval asks: " em { (text::visible(approval)) } }
                        }
                        details {
                            summary { "Input schema" }
                            pre.json { (text::json(&Value::Object((**tool.input_schema()).clone()), true)) }
                        }
                        @if let Some(output) = &tool.output {
                            details {
                                summary { "Output schema" }
                                pre.json { (text::json(&Value::Object((**output.document()).clone()), true)) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page("Catalog", &operator, Section::Catalog, body).into_response()
}
