//! MCP over Streamable HTTP at `/mcp`.
//!
//! Both protocol eras are served by rmcp's `StreamableHttpService`: clients
//! that `initialize` (2025-11-25 and earlier) get an `Mcp-Session-Id` and a
//! handler (with its plugin instances) for the session's life; 2026-07-28
//! requests are stateless, so each gets a fresh handler and therefore fresh
//! plugin instances. `Host` and `Origin` are checked against allow-lists (a
//! foreign one gets 403) and request bodies are capped while streaming. A
//! `DELETE` with the session id ends the session: 204, or 404 for a session
//! the host does not hold.
//!
//! What a hostile client can hold is bounded: request headers, then the
//! body, must arrive within `read_timeout` (slow clients are cut off), and
//! a response the client takes nothing of for as long is abandoned with its
//! connection (`accept/stalled.rs`); open
//! connections are capped (beyond it, new ones wait in the kernel's
//! backlog), live sessions are capped (beyond it, 503 with `Retry-After`),
//! and a session idle for `session_idle` is closed with its instances.
//!
//! A request may carry `Authorization: Bearer <task token>`; its calls are
//! then made for that task. A token that was never issued is refused with
//! 401 on any request. A revoked or expired one is refused with 401 when a
//! client opens a session (an `initialize` request); inside a live session,
//! and on stateless 2026-07-28 requests, which have no connect, it passes
//! and its calls get `grant_expired`, so the model learns why. The store is
//! asked about a token at its first use and then at most once a minute;
//! requests that open a session always ask (`tokens.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http_body_util::BodyExt;
use rmcp::model::ErrorCode;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::sync::{Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;

use super::{Binding, McpCatalog, McpSession};
use crate::accept::ConnectionLimits;
use crate::bearer::Bearer;
use crate::dispatch::Toolhost;
use crate::store::{self, Store, TaskState};
use sessions::Sessions;
use tokens::KnownTokens;

mod pipe;
mod sessions;
mod tokens;

/// The task a request's bearer token belongs to; put in the request's
/// extensions by [`bind_task`].
#[derive(Debug, Clone)]
pub struct BoundTask(pub String);

/// Who may talk to the HTTP endpoint.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Accepted `Host` header values (`name` or `name:port`).
    pub allowed_hosts: Vec<String>,
    /// Accepted `Origin` values (`scheme://host[:port|:*]`); requests without
    /// `Origin` (non-browser clients) are always accepted.
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes.
    pub max_message_bytes: usize,
    /// Live MCP sessions at most.
    pub max_sessions: usize,
    /// A session with no request for this long is closed.
    pub session_idle: Duration,
    /// Headers, then the body, of a request must arrive within this time.
    pub read_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
}

impl HttpOptions {
    pub const DEFAULT_MAX_SESSIONS: usize = 2_000;
    pub const DEFAULT_MAX_CONNECTIONS: usize = 4_096;
    pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(300);
    pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);

    /// Loopback only: what a local client, or a browser page served from
    /// this machine, needs; nothing a DNS-rebinding page can pass.
    pub fn loopback(max_message_bytes: usize) -> HttpOptions {
        HttpOptions {
            allowed_hosts: ["localhost", "127.0.0.1", "::1", "[::1]"]
                .map(String::from)
                .to_vec(),
            allowed_origins: [
                "http://localhost:*",
                "http://127.0.0.1:*",
                "http://[::1]:*",
                "https://localhost:*",
                "https://127.0.0.1:*",
                "https://[::1]:*",
            ]
            .map(String::from)
            .to_vec(),
            max_message_bytes,
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            session_idle: Self::DEFAULT_SESSION_IDLE,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// A bound listener, ready to serve.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
    read_timeout: Duration,
    max_connections: usize,
}

/// Everything a request to `/mcp` passes through, in the order
/// [`Endpoint::answer`] takes it: the body is read, the bearer token
/// resolved, the session cap checked, then rmcp serves it.
struct Endpoint {
    limits: BodyLimits,
    store: Arc<dyn Store>,
    tokens: KnownTokens,
    cap: SessionCap,
    mcp: StreamableHttpService<McpSession, Sessions>,
}

/// What the session cap needs: the live sessions, and a lock that makes
/// "count, then create" one step.
struct SessionCap {
    sessions: Arc<Sessions>,
    max: usize,
    creating: Mutex<()>,
}

/// Put in a request's extensions by [`read_body`]: the request would open
/// an MCP session (an `initialize` without a usable session id, whatever
/// protocol version it names), which is what rmcp opens sessions for.
#[derive(Debug, Clone, Copy)]
struct OpensSession;

/// What the body reader needs.
#[derive(Clone, Copy)]
struct BodyLimits {
    max_bytes: usize,
    timeout: Duration,
}

impl HttpServer {
    /// Binds `addr` and builds the `/mcp` endpoint.
    pub async fn bind(
        addr: SocketAddr,
        host: Arc<Toolhost>,
        catalog: Arc<McpCatalog>,
        options: HttpOptions,
    ) -> std::io::Result<HttpServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        // A task's stateless requests share a session, kept as long as an
        // MCP session would be.
        host.keep_task_sessions_for(options.session_idle);
        let shutdown = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(options.allowed_hosts)
            .with_allowed_origins(options.allowed_origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(options.max_message_bytes)
            // A stateless request whose first message is its answer gets it
            // as one JSON body instead of an event stream: one write, and
            // no stream to frame and end. Anything sent before the answer
            // (an approval's elicitation, progress) still streams.
            .with_json_response(true)
            .with_cancellation_token(shutdown.child_token());
        let store = host.store.clone();
        let sessions = Arc::new(Sessions::new(options.session_idle));
        let cap = SessionCap {
            sessions: sessions.clone(),
            max: options.max_sessions,
            creating: Mutex::default(),
        };
        let limits = BodyLimits {
            max_bytes: options.max_message_bytes,
            timeout: options.read_timeout,
        };
        let mcp = StreamableHttpService::new(
            move || {
                Ok(McpSession::new(
                    host.clone(),
                    catalog.clone(),
                    Binding::PerRequest,
                ))
            },
            sessions,
            config,
        );
        // One handler over a shared endpoint, not a stack of middleware
        // layers over rmcp's service: each layer cloned the stack below it
        // for every request, and a clone of rmcp's service copies its
        // configuration (the Host and Origin allow-lists, string by string).
        let endpoint = Arc::new(Endpoint {
            limits,
            store,
            tokens: KnownTokens::default(),
            cap,
            mcp,
        });
        let elsewhere = endpoint.clone();
        let router = axum::Router::new()
            .route(
                "/mcp",
                axum::routing::any(move |request: Request| {
                    let endpoint = endpoint.clone();
                    async move { json_rpc_error_bodies(endpoint.answer(request).await).await }
                }),
            )
            .fallback(move |request: Request| {
                let endpoint = elsewhere.clone();
                async move { json_rpc_error_bodies(endpoint.elsewhere(request).await).await }
            });
        Ok(HttpServer {
            listener,
            router,
            shutdown,
            read_timeout: options.read_timeout,
            max_connections: options.max_connections,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves, then closes sessions and connections,
    /// giving requests in flight a few seconds to finish.
    pub async fn run(self, stop: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let router = self.router;
        crate::accept::serve(
            self.listener,
            move |_| router.clone(),
            ConnectionLimits {
                read_timeout: self.read_timeout,
                max_connections: self.max_connections,
            },
            self.shutdown,
            stop,
        )
        .await
    }
}

impl Endpoint {
    /// Answers one request to `/mcp`: each check in turn either passes the
    /// request on or answers it instead.
    async fn answer(&self, request: Request) -> Response {
        let request = match read_body(self.limits, request).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
        let request = match bind_task(&*self.store, &self.tokens, request).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
        // Held until the request is answered, so the cap holds exactly.
        let _one_at_a_time = if request.extensions().get::<OpensSession>().is_some() {
            match self.cap.admit().await {
                Ok(guard) => Some(guard),
                Err(refused) => return refused,
            }
        } else {
            None
        };
        if request.method() == Method::DELETE {
            return self.end_session(request).await;
        }
        let post = request.method() == Method::POST;
        let response = self.mcp.handle(request).await.into_response();
        if post && is_event_stream(&response) {
            return hold_first_events(response).await;
        }
        response
    }

    /// Answers a request to any other path: 404, after the same body and
    /// bearer-token checks as `/mcp`, so a bad token is refused the same
    /// way wherever it is sent.
    async fn elsewhere(&self, request: Request) -> Response {
        let request = match read_body(self.limits, request).await {
            Ok(request) => request,
            Err(refused) => return refused,
        };
        if let Err(refused) = bind_task(&*self.store, &self.tokens, request).await {
            return refused;
        }
        (
            StatusCode::NOT_FOUND,
            "Not Found: this host serves MCP at /mcp",
        )
            .into_response()
    }

    /// Answers a `DELETE` that ends a session as clients expect: rmcp closes
    /// the session and answers `202 Accepted`, which the MCP Python SDK
    /// reports as a failed termination; the session is closed by then, so
    /// this is `204 No Content`. rmcp also answers 202 for a session id it
    /// does not hold (never issued, closed, or dropped when idle), which the
    /// spec answers with 404. Every other answer (a missing or unreadable id,
    /// a bad `MCP-Protocol-Version`, a foreign Host or Origin) is rmcp's,
    /// unchanged.
    async fn end_session(&self, request: Request) -> Response {
        let id = request
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // Asked before rmcp runs: closing removes the session.
        let live = match &id {
            Some(id) => self.cap.sessions.contains(id),
            None => false,
        };
        let mut response = self.mcp.handle(request).await.into_response();
        if response.status() != StatusCode::ACCEPTED || id.is_none() {
            return response;
        }
        if live {
            *response.status_mut() = StatusCode::NO_CONTENT;
            response
        } else {
            // The text of rmcp's own 404 for an unknown session, made a
            // JSON-RPC error by `json_rpc_error_bodies` like the others.
            (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
        }
    }
}

impl SessionCap {
    /// Refuses a request that would open a session beyond the cap; else
    /// returns the lock that makes such requests wait for each other, to be
    /// held until the request is answered.
    async fn admit(&self) -> Result<MutexGuard<'_, ()>, Response> {
        let one_at_a_time = self.creating.lock().await;
        let live = self.sessions.len();
        if live < self.max {
            return Ok(one_at_a_time);
        }
        tracing::warn!(live, "session cap reached; refusing a new session");
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this host serves at most {} MCP sessions at once and all are in use; close an unused session or retry later",
                self.max
            ),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        Err(response)
    }
}

/// Reads the whole request body within the read timeout and the size cap,
/// so a client that trickles its body cannot hold a connection and a task.
async fn read_body(limits: BodyLimits, request: Request) -> Result<Request, Response> {
    if request.method() != Method::POST {
        return Ok(request);
    }
    let (parts, body) = request.into_parts();
    let limited = http_body_util::Limited::new(body, limits.max_bytes);
    let bytes = match tokio::time::timeout(limits.timeout, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is larger than this host accepts ({} bytes)",
                    limits.max_bytes
                ),
            )
                .into_response());
        }
        Ok(Err(e)) => {
            return Err((
                StatusCode::BAD_REQUEST,
                format!("the request body could not be read: {e}"),
            )
                .into_response());
        }
        Err(_) => {
            return Err((
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} ms",
                    limits.timeout.as_millis()
                ),
            )
                .into_response());
        }
    };
    let mut request = Request::from_parts(parts, axum::body::Body::from(bytes.clone()));
    if opens_session(request.headers(), &bytes) {
        request.extensions_mut().insert(OpensSession);
    }
    Ok(request)
}

/// Whether rmcp would open a session for this POST: its body is an
/// `initialize` request and it carries no session id rmcp can read.
fn opens_session(headers: &HeaderMap, body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let has_session = headers
        .get("mcp-session-id")
        .is_some_and(|v| v.to_str().is_ok());
    !has_session
        && serde_json::from_slice::<Envelope<'_>>(body)
            .is_ok_and(|m| m.method.as_deref() == Some("initialize"))
}

/// How long a request's event stream may hold its priming event back,
/// waiting for the next one.
const PRIMING_HOLD: Duration = Duration::from_millis(2);

fn is_event_stream(response: &Response) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"))
}

/// A request's event stream starts with a priming event, which rmcp's
/// response carries before the call has run; hyper writes the headers
/// and that event at once, and the answer later, so every call cost the
/// client two reads and the host two socket writes. Here the response
/// waits until its stream has a second event, or has ended, or
/// [`PRIMING_HOLD`] has passed: a quick call's whole answer then leaves
/// in one write, as one body of known length, while a slow call's client
/// still gets its priming event (to resume by) within the hold.
async fn hold_first_events(response: Response) -> Response {
    use futures::FutureExt;
    let (parts, mut body) = response.into_parts();
    let mut held: Vec<bytes::Bytes> = Vec::new();
    let deadline = tokio::time::sleep(PRIMING_HOLD);
    tokio::pin!(deadline);
    // Whatever is ready goes with what is held; after the second event,
    // or once the hold is over, the rest streams as it comes.
    let failed = loop {
        let frame = match body.frame().now_or_never() {
            Some(frame) => frame,
            None if held.len() >= 2 => break None,
            None => tokio::select! {
                biased;
                frame = body.frame() => frame,
                () = &mut deadline => break None,
            },
        };
        match frame {
            None => return Response::from_parts(parts, axum::body::Body::from(held.concat())),
            Some(Err(e)) => break Some(e),
            Some(Ok(frame)) => held.extend(frame.into_data().ok()),
        }
    };
    let held = futures::stream::iter(held.into_iter().map(Ok));
    let failed = futures::stream::iter(failed.map(Err));
    let rest = held.chain(failed).chain(body.into_data_stream());
    Response::from_parts(parts, axum::body::Body::from_stream(rest))
}

/// Resolves the bearer token, if any, to its task; see the module docs. A
/// token the store vouched for within the last minute binds without asking
/// it again, except on a request that opens a session, whose answer depends
/// on the task's state (`tokens.rs`).
async fn bind_task(
    store: &dyn Store,
    known: &KnownTokens,
    mut request: Request,
) -> Result<Request, Response> {
    let token = match Bearer::of(request.headers()) {
        Bearer::Absent => return Ok(request),
        Bearer::Malformed => {
            return Err(unauthorized(
                "the Authorization header must be `Bearer <task token>`",
            ));
        }
        Bearer::Token(token) => token,
    };
    let connecting = request.extensions().get::<OpensSession>().is_some();
    if !connecting && let Some(task) = known.task_of(token) {
        request.extensions_mut().insert(BoundTask(task));
        return Ok(request);
    }
    let task = match store.authenticate(token).await {
        Ok(Some(task)) => {
            known.remember(token, &task.id);
            task
        }
        Ok(None) => return Err(unauthorized("unknown task token")),
        Err(e) => {
            tracing::error!("checking a task token: {e}");
            let why = match e {
                store::StoreError::Busy(_) => {
                    "busy: the host's store is too busy to check the task token; retry shortly"
                }
                _ => {
                    "store_unavailable: the host cannot check the task token because its store is unreachable; retry shortly"
                }
            };
            // Nothing ran; the client may retry once the store answers.
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                [(http::header::RETRY_AFTER, "1")],
                why,
            )
                .into_response());
        }
    };
    match task.state(store::now()) {
        TaskState::Open => {}
        state if connecting => {
            let what = if state == TaskState::Revoked {
                "revoked"
            } else {
                "expired"
            };
            return Err(unauthorized(&format!("task {} is {what}", task.id)));
        }
        _ => {}
    }
    request.extensions_mut().insert(BoundTask(task.id));
    Ok(request)
}

fn unauthorized(why: &str) -> Response {
    let mut response = (StatusCode::UNAUTHORIZED, why.to_string()).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"toolhost\", error=\"invalid_token\""),
    );
    response
}

/// rmcp answers transport-level refusals (body too large, unparsable body,
/// forbidden Host or Origin, unknown session) with plain text. Clients expect
/// JSON-RPC, so the text is wrapped in a JSON-RPC error with a null id; the
/// status stays, except that an unparsable body is a 400 parse error.
async fn json_rpc_error_bodies(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // rmcp's refusal texts are one short line; anything longer is cut.
    let bytes = axum::body::to_bytes(body, 4_096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    let (status, code) = if status == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && text.starts_with("fail to deserialize")
    {
        (StatusCode::BAD_REQUEST, ErrorCode::PARSE_ERROR)
    } else {
        (status, ErrorCode::INVALID_REQUEST)
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code.0, "message": text },
    });
    parts.status = status;
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(body.to_string()))
}
