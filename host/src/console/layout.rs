//! The page shell, shared bits of markup, and the two static files.

use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::auth::Operator;
use crate::store::{UnixSecs, now, rfc3339};

const STYLESHEET: &str = include_str!("assets/console.css");
const SCRIPT: &str = include_str!("assets/console.js");

/// The sections of the console, in the order the navigation shows them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Approvals,
    Tasks,
    Catalog,
    Audit,
    Sessions,
}

impl Section {
    const ALL: [Section; 5] = [
        Section::Approvals,
        Section::Tasks,
        Section::Catalog,
        Section::Audit,
        Section::Sessions,
    ];

    fn label(self) -> &'static str {
        match self {
            Section::Approvals => "Approvals",
            Section::Tasks => "Tasks",
            Section::Catalog => "Catalog",
            Section::Audit => "Audit",
            Section::Sessions => "Sessions",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Section::Approvals => "/approvals",
            Section::Tasks => "/tasks",
            Section::Catalog => "/catalog",
            Section::Audit => "/audit",
            Section::Sessions => "/sessions",
        }
    }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="color-scheme" content="light dark";
            title { (title) " · toolhost" }
            link rel="stylesheet" href="/static/console.css";
            script src="/static/console.js" defer {}
        }
    }
}

/// A page outside the signed-in shell (the sign-in page, messages).
pub fn bare(title: &str, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body { (body) }
            }
        }
        .into_string(),
    )
}

/// A signed-in page: the navigation, who is signed in, and `body`.
pub fn page(title: &str, operator: &Operator, active: Section, body: Markup) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body data-now=(now()) {
                    a.skip href="#main" { "Skip to content" }
                    header.top {
                        span.brand { "toolhost" }
                        nav aria-label="Sections" {
                            ul {
                                @for section in Section::ALL {
                                    li {
                                        a href=(section.path())
                                            aria-current=[(section == active).then_some("page")] {
                                            (section.label())
                                            @if section == Section::Approvals {
                                                " " span #pending-count.badge aria-live="polite" {}
                                            }
                                        }
                                    }
                                }
                            }
                        }
                        form.signout method="post" action="/signout" {
                            input type="hidden" name="csrf" value=(operator.csrf());
                            span.who { (operator.name()) " · " (operator.0.role.as_str()) }
                            button.link type="submit" { "Sign out" }
                        }
                    }
                    main #main { (body) }
                }
            }
        }
        .into_string(),
    )
}

/// A page that only says something.
pub fn message(status: StatusCode, title: &str, text: &str) -> Response {
    let body = html! {
        main.signin {
            h1 { (title) }
            p { (text) }
            p { a href="/approvals" { "Back to the console" } }
        }
    };
    (status, bare(title, body)).into_response()
}

/// An HTML fragment for the console's script to put into a page.
pub fn fragment(markup: Markup) -> Response {
    Html(markup.into_string()).into_response()
}

/// A time, readable and machine-readable.
pub fn time(at: UnixSecs) -> Markup {
    let text = rfc3339(at);
    html! { time datetime=(text) { (text.replace('T', " ").trim_end_matches('Z')) " UTC" } }
}

/// "in 4m 10s" / "4m 10s ago" from now, kept current by the script.
pub fn countdown(at: UnixSecs) -> Markup {
    html! { span.countdown data-at=(at) { (relative(at - now())) } }
}

fn relative(secs: i64) -> String {
    let span = humantime::format_duration(std::time::Duration::from_secs(secs.unsigned_abs()));
    if secs >= 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// The hidden field every state-changing form carries.
pub fn csrf(operator: &Operator) -> Markup {
    html! { input type="hidden" name="csrf" value=(operator.csrf()); }
}

pub async fn stylesheet() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        STYLESHEET,
    )
        .into_response()
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}
