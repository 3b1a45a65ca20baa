//! Integration tests: the real `toolhost` binary, real components built from
//! `plugins/` and the fixtures, and real MCP clients.

mod admin;
mod approvals;
mod audit;
mod cache;
mod call;
mod catalog;
mod conformance;
mod console;
mod descriptions;
mod faults;
mod helpdesk;
mod hostile;
mod kit;
mod lint;
mod network;
#[path = "../../benches/common/postgres.rs"]
mod pg_server;
mod poisoning;
mod policy;
mod polyglot;
mod postgres;
mod pysdk;
mod registry;
mod replicas;
mod sessions;
mod store_contract;
mod streams;
mod support;
mod tasks;
mod transport;
mod vetting;
