//! The approver's console: the host's own pages, served on the admin
//! listener, where named operators sign in and decide destructive calls,
//! and see tasks, the catalog, the audit trail and live sessions.
//!
//! Pages are rendered on the server (maud escapes everything spliced into
//! them, so plugin text and call arguments are never markup) with one
//! small script of our own for live updates, countdowns and copying; the
//! page loads nothing from elsewhere. Every answer carries a strict
//! Content-Security-Policy (no inline script), refuses framing and is
//! never cached.
//!
//! Signing in makes a server-side sign-in kept in the store (so it holds
//! on every replica); the browser holds only a random cookie whose SHA-256
//! finds it. Every state-changing request is a POST carrying the
//! sign-in's CSRF token, from the console's own origin.

mod approvals;
mod audit;
mod auth;
mod catalog;
mod events;
mod layout;
pub mod scrape;
mod sessions;
mod tasks;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};

use crate::dispatch::Toolhost;
use crate::lint::Finding;
use crate::manifest::Manifest;
use crate::store::StoreError;

/// Where the console stands and what it shows besides the store.
pub struct ConsoleSettings {
    /// The base URL people reach the console at (no trailing slash).
    pub public_url: String,
    /// Where MCP clients reach this host, for the ready client line shown
    /// with a new task's token; unset on stdio. Set once the MCP listener
    /// is bound, which is after the console's.
    pub mcp_url: std::sync::OnceLock<String>,
    /// What the catalog's lint found at start.
    pub lint: Vec<Finding>,
}

/// The console's shared state.
pub struct Console {
    host: Arc<Toolhost>,
    manifest: Manifest,
    settings: ConsoleSettings,
    limiter: auth::Limiter,
    events: events::Hub,
}

impl Console {
    pub fn new(host: Arc<Toolhost>, manifest: Manifest, settings: ConsoleSettings) -> Arc<Console> {
        let events = events::Hub::start(host.store.clone());
        Arc::new(Console {
            host,
            manifest,
            settings,
            limiter: auth::Limiter::default(),
            events,
        })
    }

    /// Cookies are `Secure` when people reach the console over TLS.
    fn secure(&self) -> bool {
        self.settings.public_url.starts_with("https://")
    }

    fn state_dir(&self) -> PathBuf {
        self.manifest.state_dir.clone()
    }

    /// Where MCP clients reach the host, once its listener is bound.
    pub fn set_mcp_url(&self, url: String) {
        let _ = self.settings.mcp_url.set(url);
    }
}

type Shared = axum::extract::State<Arc<Console>>;

/// The console's routes; the admin listener serves them beside the JSON API.
pub fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/approvals") }))
        .route("/signin", get(auth::sign_in_page).post(auth::sign_in))
        .route("/signout", post(auth::sign_out))
        .route("/approvals", get(approvals::queue))
        .route("/approvals/{id}", get(approvals::page))
        .route("/approvals/{id}/decide", post(approvals::decide))
        .route("/tasks", get(tasks::list).post(tasks::open))
        .route("/tasks/{id}/revoke", post(tasks::revoke))
        .route("/tasks/{id}/extend", post(tasks::extend))
        .route("/catalog", get(catalog::page))
        .route("/audit", get(audit::page))
        .route("/audit/records/{seq}", get(audit::record))
        .route("/audit/download", get(audit::download))
        .route("/sessions", get(sessions::page))
        .route("/events", get(events::stream))
        .route("/static/console.css", get(layout::stylesheet))
        .route("/static/console.js", get(layout::script))
        .fallback(|| async {
            layout::message(StatusCode::NOT_FOUND, "Not found", "There is no such page.")
        })
        .layer(axum::extract::DefaultBodyLimit::max(64 << 10))
        .layer(axum::middleware::from_fn(protect))
        .with_state(console)
}

/// The headers every console answer carries.
async fn protect(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let set = |headers: &mut axum::http::HeaderMap, name, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    // Not `no-referrer`: with it browsers send `Origin: null` on the
    // console's own form posts. No URL of the console holds a secret.
    set(headers, header::REFERRER_POLICY, "same-origin");
    set(headers, header::CACHE_CONTROL, "no-store");
    set(
        headers,
        header::HeaderName::from_static("cross-origin-opener-policy"),
        "same-origin",
    );
    set(
        headers,
        header::HeaderName::from_static("cross-origin-resource-policy"),
        "same-origin",
    );
    response
}

/// A store failure, as a page.
fn store_failed(e: StoreError) -> Response {
    tracing::error!("console: {e}");
    layout::message(
        StatusCode::SERVICE_UNAVAILABLE,
        "The store is unavailable",
        "The host could not reach its store; try again in a moment. The host log says more.",
    )
}

/// The address a request came from, for rate limits and the record. The
/// listener is loopback-only, so with an `https://` console URL a TLS proxy
/// on this machine stands in front of it, and every request seems to come
/// from it: then the last `X-Forwarded-For` entry (what that proxy saw) is
/// the address.
fn peer(console: &Console, from: SocketAddr, headers: &axum::http::HeaderMap) -> String {
    let proxied = from.ip().is_loopback() && console.secure();
    let forwarded = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next_back()
        .and_then(|v| v.trim().parse::<std::net::IpAddr>().ok());
    match forwarded {
        Some(ip) if proxied => ip.to_string(),
        _ => from.ip().to_string(),
    }
}

/// A 303 to `to`: after a form, or to the sign-in page.
fn see_other(to: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        [(
            header::LOCATION,
            HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/")),
        )],
    )
        .into_response()
}
