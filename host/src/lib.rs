//! toolhost: an MCP tool host that runs every tool as a sandboxed
//! WebAssembly component.
//!
//! A `tools/call` travels: `mcp` (transport, rmcp handler) → `dispatch`
//! (catalog lookup, argument validation) → `policy` (grants) → `sandbox`
//! (instance, limits; outbound HTTP through `gate`) → back through `dispatch` (result checks) and
//! `mcp::reply` (the one error mapping). `manifest` parses what the platform
//! team vetted; `catalog` joins it with what each plugin describes.

pub mod accept;
pub mod audit;
pub mod bearer;
pub mod catalog;
pub mod cli;
pub mod console;
pub mod dispatch;
pub mod gate;
pub mod heap;
pub mod inspect;
pub mod lint;
pub mod logs;
pub mod manifest;
pub mod mcp;
pub mod metrics;
pub mod operator;
pub mod policy;
pub mod pruning;
pub mod queue;
pub mod redact;
pub mod registry;
pub mod sandbox;
pub mod scaffold;
pub mod session;
pub mod signing;
pub mod store;
pub mod text;
pub mod tls;
pub mod webhook;
