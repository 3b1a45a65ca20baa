//! The MCP surface: the rmcp server handler and the two transports.
//!
//! A handler value exists per session (rmcp makes one per Streamable HTTP
//! session or stateless request; stdio has one), holding that session's
//! plugin instances. Everything it does is delegated to [`Toolhost`]; this
//! module only translates between MCP and the host.

mod approval;
pub mod http;
pub(crate) mod reply;
pub mod stdio;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::catalog::CatalogTool;
use crate::dispatch::{CallError, Toolhost};
use crate::manifest::RiskClass;
use crate::policy::Denial;
use crate::session::{Peer, Session, Transport};
use approval::Channel;

/// What the host tells every client at `initialize`.
const INSTRUCTIONS: &str = "Tools run in sandboxed plugins. Read tools always work. Write and \
destructive tools need a task grant from the operator (a task token); destructive calls also \
need a human's approval of each call. A refusal says what is missing. Every failure is a result \
with ok=false, a code, a message saying what to do next, and retryable.";

/// The sentence that ends each write or destructive tool's description.
fn needs(risk: RiskClass) -> Option<&'static str> {
    match risk {
        RiskClass::Read => None,
        RiskClass::Write => Some("Needs a task grant."),
        RiskClass::Destructive => Some("Needs a task grant and a human's approval for each call."),
    }
}

/// Which task a session's calls are made for.
#[derive(Debug, Clone)]
pub enum Binding {
    /// stdio: the process was started for this task, or for none.
    Fixed(Option<String>),
    /// Streamable HTTP: each request's bearer token decides (checked by the
    /// HTTP layer, which attaches a [`http::BoundTask`]).
    PerRequest,
}

/// The catalog as MCP `Tool`s, built once at start-up.
pub struct McpCatalog {
    tools: Vec<Tool>,
}

impl McpCatalog {
    pub fn new(host: &Toolhost) -> McpCatalog {
        McpCatalog {
            tools: host.catalog.tools.iter().map(|t| mcp_tool(t)).collect(),
        }
    }
}

/// Annotations come from the manifest's risk class, never from the plugin.
fn mcp_tool(tool: &CatalogTool) -> Tool {
    let mut annotations = ToolAnnotations::with_title(tool.title.clone())
        .read_only(tool.risk == RiskClass::Read)
        // Only a plugin the manifest lets out reaches anything beyond the host.
        .open_world(tool.open_world);
    if tool.risk != RiskClass::Read {
        annotations = annotations
            .destructive(tool.risk == RiskClass::Destructive)
            .idempotent(tool.idempotent);
    }
    let description = match needs(tool.risk) {
        Some(needs) => format!("{} {needs}", tool.description.trim_end()),
        None => tool.description.clone(),
    };
    let mut out = Tool::new(
        tool.name.as_str().to_string(),
        description,
        tool.input_schema().clone(),
    );
    out.title = Some(tool.title.clone());
    out.output_schema = tool.output.as_ref().map(|s| s.document().clone());
    out.annotations = Some(annotations);
    out
}

/// The rmcp handler of one session.
#[derive(Clone)]
pub struct McpSession {
    host: Arc<Toolhost>,
    catalog: Arc<McpCatalog>,
    session: Arc<Session>,
    binding: Binding,
}

impl McpSession {
    pub fn new(host: Arc<Toolhost>, catalog: Arc<McpCatalog>, binding: Binding) -> McpSession {
        McpSession {
            host,
            catalog,
            session: Arc::new(Session::new(match binding {
                Binding::Fixed(_) => Transport::Stdio,
                Binding::PerRequest => Transport::Http,
            })),
            binding,
        }
    }

    /// Records the session's opening, once: when the client says it is
    /// initialized, or at the session's first call if rmcp runs that first
    /// (each message is handled in a task of its own, so a call sent right
    /// after the notification can be handled before it).
    fn record_opened(&self, peer: &rmcp::Peer<RoleServer>, extensions: &rmcp::model::Extensions) {
        let opened = self.session.record_opened(&self.host.audit, || {
            let client = peer.peer_info();
            let client = client.as_deref();
            Peer {
                client: client.map(|c| c.client_info.name.clone()),
                client_version: client.map(|c| c.client_info.version.clone()),
                protocol: client.map(|c| c.protocol_version.to_string()),
                task: self.task(extensions),
            }
        });
        if opened {
            self.host.sessions.add(&self.session);
        }
    }

    fn task(&self, extensions: &rmcp::model::Extensions) -> Option<String> {
        match &self.binding {
            Binding::Fixed(task) => task.clone(),
            Binding::PerRequest => extensions
                .get::<axum::http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<http::BoundTask>())
                .map(|bound| bound.0.clone()),
        }
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("toolhost", env!("CARGO_PKG_VERSION")).with_title("toolhost"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.record_opened(&context.peer, &context.extensions);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.catalog.tools.clone()))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, ErrorData>> + Send + '_ {
        // Boxed: rmcp serves every request through one future as large as
        // the largest of its methods' (a call's, 5.4 KiB, by far), and the
        // task that runs an HTTP session, which serves the `initialize`
        // through it, keeps that size for the session's whole life. Boxing
        // took about 4 KiB off each live session (docs/performance.md).
        Box::pin(self.serve_call(request, context))
    }
}

impl McpSession {
    /// One `tools/call`: the host's answer, after asking for an approval
    /// where the call needs one and the client can give it.
    async fn serve_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let task = self.task(&context.extensions);
        let stateless = is_stateless_http(&context);
        if !stateless {
            self.record_opened(&context.peer, &context.extensions);
        }
        let lease = match &task {
            Some(task) if stateless => Some(self.host.task_session(task)),
            _ => None,
        };
        let session = match &lease {
            Some(lease) => lease.session(),
            // Its own session (fresh instances), but marked stateless: its
            // calls share a plugin's places with the other anonymous
            // stateless requests, not with nobody.
            None if stateless => Arc::new(Session::new(Transport::HttpStateless)),
            None => self.session.clone(),
        };
        let call = || {
            self.host.call(
                &session,
                task.as_deref(),
                &request.name,
                request.arguments.clone(),
            )
        };
        let mut outcome = call().await;
        if let Err(CallError::Denied {
            denial: Denial::ApprovalRequired(pending),
            ..
        }) = &outcome
        {
            let store = &*self.host.store;
            let asked = match Channel::of(pending, &context, self.host.approval_page(&pending.id)) {
                Channel::Operator => Ok(false),
                Channel::Elicitation => approval::elicit(store, pending, &context).await,
                Channel::InputRequired => {
                    match approval::answer_from_retry(store, pending, &request, &context).await {
                        Ok(false) => return approval::input_required(pending).map(Into::into),
                        other => other,
                    }
                }
                Channel::Url(page) => approval::elicit_url(store, pending, &page, &context).await,
                Channel::InputRequiredUrl(page) => {
                    match approval::wait_after_retry(store, pending, &request, &context).await {
                        Ok(None) => {
                            return Ok(approval::input_required_url(pending, &page).into());
                        }
                        Ok(Some(decided)) => Ok(decided),
                        Err(e) => Err(e),
                    }
                }
            };
            match asked {
                // The decision is in the store; the same call now runs (or
                // reports the decline).
                Ok(true) => outcome = call().await,
                Ok(false) => {}
                Err(e) => tracing::error!("recording an approval decision: {e}"),
            }
        }
        reply::tool_result_linked(outcome, self.host.console_url.get().map(String::as_str))
            .map(Into::into)
    }
}

/// A Streamable HTTP request outside any `Mcp-Session-Id` session: rmcp
/// serves it with a handler of its own, which lives for this request only.
fn is_stateless_http(context: &RequestContext<RoleServer>) -> bool {
    context
        .extensions
        .get::<axum::http::request::Parts>()
        .is_some_and(|parts| !parts.headers.contains_key("mcp-session-id"))
}
