//! MCP over Streamable HTTP at `/mcp`.
//!
//! Both protocol eras are served by rmcp's `StreamableHttpService`: clients
//! that `initialize` (2025-11-25 and earlier) get an `Mcp-Session-Id` and a
//! handler (with its plugin instances) for the session's life; 2026-07-28
//! requests are stateless, so each gets a fresh handler and therefore fresh
//! plugin instances. `Host` and `Origin` are checked against allow-lists (a
//! foreign one gets 403) and request bodies are capped while streaming.
//!
//! A request may carry `Authorization: Bearer <task token>`; its calls are
//! then made for that task. A token that was never issued is refused with
//! 401 on any request. A revoked or expired one is refused with 401 when a
//! session-era client connects (a request without `Mcp-Session-Id` of a
//! protocol that has `initialize`); inside a live session, and on stateless
//! 2026-07-28 requests, which have no connect, it passes and its calls get
//! `grant_expired`, so the model learns why.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use rmcp::model::{ErrorCode, ProtocolVersion};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::{Binding, McpCatalog, McpSession};
use crate::bearer::Bearer;
use crate::dispatch::Toolhost;
use crate::store::{self, Store, TaskState};

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
}

impl HttpOptions {
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
        }
    }
}

/// A bound listener, ready to serve.
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    router: axum::Router,
    shutdown: CancellationToken,
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
        let shutdown = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(options.allowed_hosts)
            .with_allowed_origins(options.allowed_origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(options.max_message_bytes)
            .with_cancellation_token(shutdown.child_token());
        let store = host.store.clone();
        let service = StreamableHttpService::new(
            move || {
                Ok(McpSession::new(
                    host.clone(),
                    catalog.clone(),
                    Binding::PerRequest,
                ))
            },
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let router = axum::Router::new()
            .route_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(store, bind_task))
            .layer(axum::middleware::map_response(json_rpc_error_bodies));
        Ok(HttpServer {
            listener,
            router,
            shutdown,
        })
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` resolves, then closes sessions and connections.
    pub async fn run(self, stop: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        let shutdown = self.shutdown.clone();
        // A keep-alive client sends its next request only after the answer:
        // Nagle would hold the answer's last segment for a delayed ACK.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY not set: {e}");
            }
        });
        axum::serve(listener, self.router)
            .with_graceful_shutdown(async move {
                stop.await;
                shutdown.cancel();
            })
            .await
    }
}

/// Resolves the bearer token, if any, to its task; see the module docs.
async fn bind_task(
    State(store): State<Arc<dyn Store>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = match Bearer::of(request.headers()) {
        Bearer::Absent => return next.run(request).await,
        Bearer::Malformed => {
            return unauthorized("the Authorization header must be `Bearer <task token>`");
        }
        Bearer::Token(token) => token,
    };
    let task = match store.authenticate(token) {
        Ok(Some(task)) => task,
        Ok(None) => return unauthorized("unknown task token"),
        Err(e) => {
            tracing::error!("checking a task token: {e}");
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "the host's store is unavailable",
            )
                .into_response();
        }
    };
    let headers = request.headers();
    let stateless = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| serde_json::from_value::<ProtocolVersion>(v.into()).ok())
        .is_some_and(|version| !version.has_initialize());
    let connecting = !stateless && !headers.contains_key("mcp-session-id");
    match task.state(store::now()) {
        TaskState::Open => {}
        state if connecting => {
            let what = if state == TaskState::Revoked {
                "revoked"
            } else {
                "expired"
            };
            return unauthorized(&format!("task {} is {what}", task.id));
        }
        _ => {}
    }
    request.extensions_mut().insert(BoundTask(task.id));
    next.run(request).await
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
