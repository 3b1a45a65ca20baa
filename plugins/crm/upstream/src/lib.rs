//! The demo CRM: a small HTTP API over contacts kept in memory.
//!
//! It stands in for a real third-party system the `crm` plugin calls
//! through the host. The contact data lives only here, never in the plugin,
//! and every `/contacts` route wants `Authorization: Bearer <token>`: a
//! credential the host holds and adds to the plugin's requests, so the
//! plugin never sees it.
//!
//! Routes (all answers JSON; errors are `{"error": code, "message": text}`):
//!
//! | route | answer |
//! |---|---|
//! | `GET /contacts?q=&limit=` | `{"contacts": [...], "truncated": bool}`; 400 `invalid_query` |
//! | `GET /contacts/{id}` | the contact; 404 `not_found` |
//! | `PATCH /contacts/{id}` | the changed contact; 400 `invalid_body`, 404 `not_found` |
//! | `DELETE /contacts/{id}` | `{"deleted": id}`; 404 `not_found` |
//!
//! Any `/contacts` route without the exact bearer header: 401 `unauthorized`.
//! With [`Config::test_routes`] there are also routes for the host's tests,
//! without the bearer check: `GET /echo/headers`, `GET /redirect?to=`,
//! `GET /big?bytes=` and `GET /big-chunked?bytes=`.
//!
//! The server records every request it receives ([`Upstream::requests`]),
//! so tests can check what the host actually sent.

pub mod contacts;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use contacts::{Contact, ContactPatch};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Largest body the `/big` routes produce, so a typo cannot exhaust memory.
pub const MAX_BIG_BYTES: usize = 64 << 20;

/// Chunk size of `/big-chunked`.
const CHUNK: usize = 64 << 10;

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bearer token `/contacts` routes demand. Must be non-empty visible
    /// ASCII, as it has to fit in a header.
    pub token: String,
    /// Whether to serve the routes that exist only for the host's tests
    /// (header echo, redirect, large bodies).
    pub test_routes: bool,
}

/// One request as the server received it, before any check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// The method, e.g. `GET`.
    pub method: String,
    /// Path and query, e.g. `/contacts?q=berg`.
    pub path: String,
    /// The `Authorization` header, if any (the first, if several); non-UTF-8
    /// bytes converted lossily.
    pub authorization: Option<String>,
}

/// A running server. Dropping it stops the server.
pub struct Upstream {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Upstream {
    /// Serves on an already bound listener until dropped (or shut down).
    ///
    /// Fails if the listener has no local address or the token cannot be
    /// sent in a header (empty, or not visible ASCII).
    pub async fn start(listener: TcpListener, config: Config) -> io::Result<Upstream> {
        if config.token.is_empty() || !config.token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the token must be non-empty and consist of visible ASCII characters",
            ));
        }
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            expected_authorization: format!("Bearer {}", config.token),
            contacts: Mutex::new(contacts::seed()),
            seen: Mutex::new(Vec::new()),
        });
        let app = router(Arc::clone(&shared), config.test_routes);
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async {
                // A dropped sender means the same as a sent signal: stop.
                let _ = stopped.await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                eprintln!("crm-upstream: server failed: {e}");
            }
        });
        Ok(Upstream {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request the server received, in order (including rejected ones).
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.seen).clone()
    }

    /// Stops accepting connections and waits until the requests in flight
    /// are answered.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Upstream {
    /// Signals the server to stop; it closes its listener at once and its
    /// connections once their requests are answered.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// State the handlers share.
struct Shared {
    expected_authorization: String,
    contacts: Mutex<Vec<Contact>>,
    seen: Mutex<Vec<SeenRequest>>,
}

/// A handler that panicked mid-update leaves at worst one half-patched
/// demo contact, so a poisoned lock is used rather than propagated.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn router(shared: Arc<Shared>, test_routes: bool) -> Router {
    let mut app = Router::new().route("/contacts", get(search)).route(
        "/contacts/{id}",
        get(get_contact).patch(patch_contact).delete(delete_contact),
    );
    if test_routes {
        app = app
            .route("/echo/headers", get(echo_headers))
            .route("/redirect", get(redirect))
            .route("/big", get(big))
            .route("/big-chunked", get(big_chunked))
            .route("/slow", get(slow));
    }
    app.fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        // Outermost, so it sees requests that match no route too.
        .layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            record_and_guard,
        ))
        .with_state(shared)
}

/// Records the request, then turns away `/contacts` requests without the
/// right bearer token, before routing so unknown paths there are hidden too.
async fn record_and_guard(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let mut authorizations = request.headers().get_all(header::AUTHORIZATION).iter();
    let first = authorizations.next();
    let several = authorizations.next().is_some();
    lock(&shared.seen).push(SeenRequest {
        method: request.method().to_string(),
        path: request
            .uri()
            .path_and_query()
            .map_or_else(|| request.uri().path().to_string(), |pq| pq.to_string()),
        authorization: first.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
    });

    let path = request.uri().path();
    let guarded = path == "/contacts" || path.starts_with("/contacts/");
    let authorized = !several
        && first
            .is_some_and(|v| same_bytes(v.as_bytes(), shared.expected_authorization.as_bytes()));
    if guarded && !authorized {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send the header `Authorization: Bearer <token>` with the CRM's token",
        )
        .into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    }
    next.run(request).await
}

/// Compares in time that depends only on the lengths, so response times do
/// not reveal how much of a guessed token was right.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An error answer: `{"error": code, "message": message}`.
struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    fn not_found(id: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("there is no contact {id}"),
        )
    }

    fn invalid_query(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code, "message": self.message });
        (self.status, axum::Json(body)).into_response()
    }
}

type Answer = Result<axum::Json<Value>, ApiError>;

#[derive(Deserialize)]
struct SearchParams {
    q: Option<String>,
    limit: Option<String>,
}

async fn search(
    State(shared): State<Arc<Shared>>,
    params: Result<Query<SearchParams>, QueryRejection>,
) -> Answer {
    let Query(params) = params.map_err(|e| ApiError::invalid_query(e.body_text()))?;
    let needle = contacts::check_query(params.q.as_deref()).map_err(ApiError::invalid_query)?;
    let limit = contacts::check_limit(params.limit.as_deref()).map_err(ApiError::invalid_query)?;
    let contacts = lock(&shared.contacts);
    let mut hits = contacts.iter().filter(|c| contacts::matches(c, &needle));
    let found: Vec<&Contact> = hits.by_ref().take(limit).collect();
    let truncated = hits.next().is_some();
    Ok(axum::Json(
        json!({ "contacts": found, "truncated": truncated }),
    ))
}

/// An id that cannot be decoded names no contact.
fn contact_id(id: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    id.map(|Path(id)| id)
        .map_err(|_| ApiError::not_found("with that id"))
}

async fn get_contact(
    State(shared): State<Arc<Shared>>,
    id: Result<Path<String>, PathRejection>,
) -> Answer {
    let id = contact_id(id)?;
    let contacts = lock(&shared.contacts);
    let contact = contacts
        .iter()
        .find(|c| c.id == id)
        .ok_or_else(|| ApiError::not_found(&id))?;
    Ok(axum::Json(json!(contact)))
}

async fn patch_contact(
    State(shared): State<Arc<Shared>>,
    id: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Answer {
    let id = contact_id(id)?;
    let body = body.map_err(|e| ApiError::new(e.status(), "invalid_body", e.body_text()))?;
    // Parsed by hand rather than with `Json`, so a missing content type or
    // a malformed body gets the same JSON error as any other bad request.
    let patch: ContactPatch = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!("the body must be a JSON object with address, phone or email: {e}"),
        )
    })?;
    patch
        .check()
        .map_err(|m| ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", m))?;
    let mut contacts = lock(&shared.contacts);
    let contact = contacts
        .iter_mut()
        .find(|c| c.id == id)
        .ok_or_else(|| ApiError::not_found(&id))?;
    patch.apply(contact);
    Ok(axum::Json(json!(contact)))
}

async fn delete_contact(
    State(shared): State<Arc<Shared>>,
    id: Result<Path<String>, PathRejection>,
) -> Answer {
    let id = contact_id(id)?;
    let mut contacts = lock(&shared.contacts);
    let index = contacts
        .iter()
        .position(|c| c.id == id)
        .ok_or_else(|| ApiError::not_found(&id))?;
    contacts.remove(index);
    Ok(axum::Json(json!({ "deleted": id })))
}

async fn no_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

async fn wrong_method() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// Echoes every header back, `authorization` included: the host's tests use
/// it to check what reached the upstream and that the host redacts it.
async fn echo_headers(headers: HeaderMap) -> axum::Json<Value> {
    let mut echoed = Map::new();
    for name in headers.keys() {
        let values: Vec<String> = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        echoed.insert(name.to_string(), Value::String(values.join(", ")));
    }
    axum::Json(Value::Object(echoed))
}

#[derive(Deserialize)]
struct RedirectParams {
    to: Option<String>,
}

async fn redirect(
    params: Result<Query<RedirectParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::invalid_query(e.body_text()))?;
    let to = params
        .to
        .ok_or_else(|| ApiError::invalid_query("to is required: the URL to redirect to"))?;
    let location = HeaderValue::from_str(&to)
        .map_err(|_| ApiError::invalid_query("to cannot be sent as a Location header"))?;
    Ok((
        StatusCode::FOUND,
        [(header::LOCATION, location)],
        axum::Json(json!({ "redirect": to })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct BigParams {
    bytes: Option<String>,
}

fn big_size(params: Result<Query<BigParams>, QueryRejection>) -> Result<usize, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::invalid_query(e.body_text()))?;
    params
        .bytes
        .as_deref()
        .and_then(|raw| raw.parse::<usize>().ok())
        .filter(|&n| n <= MAX_BIG_BYTES)
        .ok_or_else(|| {
            ApiError::invalid_query(format!(
                "bytes is required: an integer from 0 to {MAX_BIG_BYTES}"
            ))
        })
}

async fn big(params: Result<Query<BigParams>, QueryRejection>) -> Result<Response, ApiError> {
    let size = big_size(params)?;
    Ok(([(header::CONTENT_TYPE, "text/plain")], vec![b'a'; size]).into_response())
}

#[derive(Deserialize)]
struct SlowParams {
    ms: Option<u64>,
}

/// Answers after `ms` milliseconds (at most ten seconds), to test the
/// caller's timeout.
async fn slow(Query(params): Query<SlowParams>) -> &'static str {
    let ms = params.ms.unwrap_or(1_000).min(10_000);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    "done"
}

/// Streams the body so hyper cannot know its length and sends it chunked,
/// without `Content-Length`.
async fn big_chunked(
    params: Result<Query<BigParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let size = big_size(params)?;
    let chunk = Bytes::from(vec![b'a'; CHUNK]);
    let lengths = (0..size.div_ceil(CHUNK)).map(move |i| (size - i * CHUNK).min(CHUNK));
    let stream = futures::stream::iter(
        lengths.map(move |len| Ok::<_, std::convert::Infallible>(chunk.slice(..len))),
    );
    Ok((
        [(header::CONTENT_TYPE, "text/plain")],
        Body::from_stream(stream),
    )
        .into_response())
}
