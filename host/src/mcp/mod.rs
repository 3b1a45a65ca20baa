//! The MCP surface: the rmcp server handler and the two transports.
//!
//! A handler value exists per session (rmcp makes one per Streamable HTTP
//! session or stateless request; stdio has one), holding that session's
//! plugin instances. Everything it does is delegated to [`Toolhost`]; this
//! module only translates between MCP and the host.

pub mod http;
mod reply;
pub mod stdio;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};

use crate::catalog::CatalogTool;
use crate::dispatch::Toolhost;
use crate::manifest::RiskClass;
use crate::session::Session;

/// What the host tells every client at `initialize`.
const INSTRUCTIONS: &str = "Tools run in sandboxed plugins. Read tools always work. Write and \
destructive tools need a task grant from the operator; a refusal says which grant is missing. \
Every failure is a result with ok=false, a code, a message saying what to do next, and \
retryable.";

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
        // Plugins have no network access in this host.
        .open_world(false);
    if tool.risk != RiskClass::Read {
        annotations = annotations
            .destructive(tool.risk == RiskClass::Destructive)
            .idempotent(tool.idempotent);
    }
    let mut out = Tool::new(
        tool.name.as_str().to_string(),
        tool.description.clone(),
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
}

impl McpSession {
    pub fn new(host: Arc<Toolhost>, catalog: Arc<McpCatalog>) -> McpSession {
        McpSession {
            host,
            catalog,
            session: Arc::new(Session::new()),
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

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.catalog.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = match &self.host.task_session {
            Some(shared) if is_stateless_http(&context) => shared,
            _ => &*self.session,
        };
        let outcome = self
            .host
            .call(session, &request.name, request.arguments)
            .await;
        reply::tool_result(outcome).map(Into::into)
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
