//! The admin HTTP API: tasks and approvals over JSON, on a listener of its
//! own (`serve --admin ADDR`), never on the MCP endpoint.
//!
//! Every request needs `Authorization: Bearer <admin token>`. The token
//! comes from the host's environment (`TOOLHOST_ADMIN_TOKEN`) or from a file
//! only its owner can read, never from the manifest, which is shared with
//! whoever vets plugins. Routes are listed in docs/admin-api.md.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::{OpenTask, approval_json, parse_ttl, task_json};
use crate::accept::ConnectionLimits;
use crate::bearer::Bearer;
use crate::manifest::Manifest;
use crate::store::{Decision, Store, StoreError};

/// Shortest admin token accepted: it guards every grant.
const MIN_TOKEN_CHARS: usize = 32;
/// Admin requests are small JSON documents.
const MAX_BODY: usize = 64 << 10;
/// Connections the admin listener keeps open at once: people at the console
/// (each tab holds an event stream), scrapers and scripts, not clients at
/// scale.
const MAX_CONNECTIONS: usize = 256;

/// Why the admin API cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AdminTokenError {
    #[error(
        "--admin needs an admin token: set TOOLHOST_ADMIN_TOKEN or pass --admin-token-file (a file of mode 0600)"
    )]
    Missing,
    #[error("cannot read the admin token file {0}: {1}")]
    Read(String, std::io::Error),
    #[error(
        "the admin token file {0} is readable by others (mode {1:o}); run `chmod 600 {0}` first"
    )]
    Permissions(String, u32),
    #[error(
        "the admin token must be at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 32`)"
    )]
    TooShort,
}

/// The admin token, kept only as its hash.
#[derive(Clone)]
pub struct AdminToken([u8; 32]);

impl AdminToken {
    /// From the file if one is given, else from the environment value.
    pub fn load(env: Option<String>, file: Option<&Path>) -> Result<AdminToken, AdminTokenError> {
        let text = match (env, file) {
            (_, Some(path)) => read_private(path)?,
            (Some(value), None) => value,
            (None, None) => return Err(AdminTokenError::Missing),
        };
        let text = text.trim();
        if text.chars().count() < MIN_TOKEN_CHARS {
            return Err(AdminTokenError::TooShort);
        }
        Ok(AdminToken(Sha256::digest(text.as_bytes()).into()))
    }

    /// Hashing first makes the comparison independent of the presented
    /// token's length as well as of its content.
    pub fn matches(&self, presented: &str) -> bool {
        let presented: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        presented.ct_eq(&self.0).into()
    }
}

fn read_private(path: &Path) -> Result<String, AdminTokenError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| AdminTokenError::Read(shown.clone(), e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(AdminTokenError::Permissions(shown, mode));
        }
    }
    #[cfg(not(unix))]
    let _ = meta;
    std::fs::read_to_string(path).map_err(|e| AdminTokenError::Read(shown, e))
}

struct Admin {
    store: Arc<dyn Store>,
    manifest: Manifest,
    token: AdminToken,
}

type Shared = State<Arc<Admin>>;

/// Binds the admin listener; [`AdminServer::run`] serves it.
pub struct AdminServer {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    read_timeout: Duration,
}

impl AdminServer {
    /// The JSON API under `/v1`, and `beside` (the console, metrics) on
    /// every other path. A request's headers, then its body, must arrive
    /// within `read_timeout`, and its answer be taken within it.
    pub fn new(
        listener: tokio::net::TcpListener,
        store: Arc<dyn Store>,
        manifest: Manifest,
        token: AdminToken,
        beside: axum::Router,
        read_timeout: Duration,
    ) -> AdminServer {
        let admin = Arc::new(Admin {
            store,
            manifest,
            token,
        });
        let api = axum::Router::new()
            .route("/tasks", get(list_tasks).post(open_task))
            .route("/tasks/{id}", get(show_task))
            .route("/tasks/{id}/revoke", post(revoke_task))
            .route("/tasks/{id}/extend", post(extend_task))
            .route("/approvals", get(list_approvals))
            .route("/approvals/{id}", get(show_approval))
            .route("/approvals/{id}/approve", post(approve))
            .route("/approvals/{id}/deny", post(deny))
            .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "no such route") })
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .layer(axum::middleware::from_fn_with_state(
                admin.clone(),
                authenticate,
            ))
            .layer(axum::middleware::map_response(json_errors))
            .with_state(admin);
        let router = axum::Router::new().nest("/v1", api).merge(beside).layer(
            axum::middleware::from_fn_with_state(read_timeout, body_within),
        );
        AdminServer {
            listener,
            router,
            read_timeout,
        }
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves. Each request carries its peer's
    /// address (`ConnectInfo`), which the console's sign-in limits by.
    pub async fn run(self, stop: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let router = self.router;
        crate::accept::serve(
            self.listener,
            move |peer: SocketAddr| router.clone().layer(axum::Extension(ConnectInfo(peer))),
            ConnectionLimits {
                read_timeout: self.read_timeout,
                max_connections: MAX_CONNECTIONS,
            },
            CancellationToken::new(),
            stop,
        )
        .await
    }
}

/// Whether reading a body failed because it was longer than allowed.
fn over_limit(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(error) = cause {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = error.source();
    }
    false
}

/// Reads a request's whole body first, within `limit`: a client trickling
/// one would otherwise hold its connection (and its place) for as long as
/// it likes.
async fn body_within(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(limit, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(e)) if over_limit(&e) => error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            &format!("the request body exceeds {MAX_BODY} bytes"),
        ),
        Ok(Err(e)) => error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &format!("the request body could not be read: {e}"),
        ),
        Err(_) => error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            &format!(
                "the request body did not arrive within {} ms",
                limit.as_millis()
            ),
        ),
    }
}

async fn authenticate(State(admin): Shared, request: Request, next: Next) -> Response {
    match Bearer::of(request.headers()) {
        Bearer::Token(token) if admin.token.matches(token) => next.run(request).await,
        Bearer::Token(_) | Bearer::Malformed => {
            tracing::warn!(method = %request.method(), path = %request.uri().path(), "admin API: wrong admin token");
            unauthorized("wrong admin token")
        }
        Bearer::Absent => unauthorized("missing `Authorization: Bearer <admin token>`"),
    }
}

/// Every answer is JSON (axum's own refusals, such as 405 or a bad query,
/// are plain text) and is never cached: some carry a task token.
async fn json_errors(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    parts
        .headers
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let is_json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json || parts.status.is_success() {
        return Response::from_parts(parts, body);
    }
    let bytes = axum::body::to_bytes(body, 4_096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let message = if text.is_empty() {
        parts
            .status
            .canonical_reason()
            .unwrap_or("error")
            .to_string()
    } else {
        text
    };
    let mut response = error(parts.status, "invalid_request", &message);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn unauthorized(message: &str) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"toolhost-admin\""),
    );
    response
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        Json(json!({ "error": { "code": code, "message": message } })),
    )
        .into_response()
}

fn store_error(e: StoreError) -> Response {
    match e {
        StoreError::NoTask(_) | StoreError::NoApproval(_) => {
            error(StatusCode::NOT_FOUND, "not_found", &e.to_string())
        }
        StoreError::TaskClosed { .. } | StoreError::AlreadyDecided { .. } => {
            error(StatusCode::CONFLICT, "conflict", &e.to_string())
        }
        other => {
            tracing::error!("admin API: {other}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                "the host's store failed; see the host log",
            )
        }
    }
}

/// A JSON body, with its parse error given back as a 400 in our shape.
fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, Box<Response>> {
    serde_json::from_slice(bytes).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &e.to_string(),
        ))
    })
}

async fn open_task(State(admin): Shared, bytes: axum::body::Bytes) -> Response {
    let request: OpenTask = match body(&bytes) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let new = match request.vet(&admin.manifest, "admin_api".into()) {
        Ok(new) => new,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request", &e.to_string()),
    };
    match admin.store.open_task(new).await {
        Ok((task, token)) => {
            tracing::info!(task = %task.id, grants = ?task.grants, "task opened through the admin API");
            (
                StatusCode::CREATED,
                Json(json!({ "task": task_json(&task), "token": token.as_str() })),
            )
                .into_response()
        }
        Err(e) => store_error(e),
    }
}

async fn list_tasks(State(admin): Shared) -> Response {
    match admin.store.tasks().await {
        Ok(tasks) => Json(json!({ "tasks": tasks.iter().map(task_json).collect::<Vec<_>>() }))
            .into_response(),
        Err(e) => store_error(e),
    }
}

async fn show_task(State(admin): Shared, UrlPath(id): UrlPath<String>) -> Response {
    match admin.store.task(&id).await {
        Ok(Some(task)) => Json(task_json(&task)).into_response(),
        Ok(None) => store_error(StoreError::NoTask(id)),
        Err(e) => store_error(e),
    }
}

async fn revoke_task(State(admin): Shared, UrlPath(id): UrlPath<String>) -> Response {
    match admin.store.revoke_task(&id, "admin_api").await {
        Ok(task) => {
            tracing::info!(task = %task.id, "task revoked through the admin API");
            Json(task_json(&task)).into_response()
        }
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Extend {
    ttl: String,
}

async fn extend_task(
    State(admin): Shared,
    UrlPath(id): UrlPath<String>,
    bytes: axum::body::Bytes,
) -> Response {
    let request: Extend = match body(&bytes) {
        Ok(r) => r,
        Err(response) => return *response,
    };
    let ttl = match parse_ttl(&request.ttl) {
        Ok(ttl) => ttl,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request", &e.to_string()),
    };
    match admin.store.extend_task(&id, ttl, "admin_api").await {
        Ok(task) => Json(task_json(&task)).into_response(),
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize)]
struct ApprovalFilter {
    #[serde(default)]
    all: bool,
}

async fn list_approvals(State(admin): Shared, Query(filter): Query<ApprovalFilter>) -> Response {
    match admin.store.approvals(!filter.all).await {
        Ok(list) => Json(json!({
            "approvals": list.iter().map(approval_json).collect::<Vec<_>>()
        }))
        .into_response(),
        Err(e) => store_error(e),
    }
}

async fn show_approval(State(admin): Shared, UrlPath(id): UrlPath<String>) -> Response {
    match admin.store.approval(&id).await {
        Ok(Some(approval)) => Json(approval_json(&approval)).into_response(),
        Ok(None) => store_error(StoreError::NoApproval(id)),
        Err(e) => store_error(e),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct DecideBody {
    /// Who decided, for the record (defaults to `admin_api`).
    by: Option<String>,
}

async fn decide(admin: &Admin, id: &str, decision: Decision, bytes: &[u8]) -> Response {
    let request: DecideBody = if bytes.is_empty() {
        DecideBody::default()
    } else {
        match body(bytes) {
            Ok(r) => r,
            Err(response) => return *response,
        }
    };
    let by = match request.by {
        Some(by) if !by.trim().is_empty() && by.len() <= 200 => format!("admin_api:{}", by.trim()),
        _ => "admin_api".to_string(),
    };
    match admin
        .store
        .decide(id, decision, &by, "admin_api", None)
        .await
    {
        Ok(approval) => {
            tracing::info!(approval = %approval.id, state = ?approval.state, %by, "approval decided");
            Json(approval_json(&approval)).into_response()
        }
        Err(e) => store_error(e),
    }
}

async fn approve(
    State(admin): Shared,
    UrlPath(id): UrlPath<String>,
    bytes: axum::body::Bytes,
) -> Response {
    decide(&admin, &id, Decision::Approve, &bytes).await
}

async fn deny(
    State(admin): Shared,
    UrlPath(id): UrlPath<String>,
    bytes: axum::body::Bytes,
) -> Response {
    decide(&admin, &id, Decision::Deny, &bytes).await
}
