//! The host's metrics in Prometheus text format (`GET /metrics` on the
//! admin listener), kept with the `prometheus-client` crate.
//!
//! Counters and histograms are fed from the audit trail's events as they
//! are recorded (every call outcome, outbound request and decision is an
//! event already, so the metrics cannot disagree with the trail and the
//! call path gains no second bookkeeping); gauges are read at scrape time.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::audit::Event;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    risk: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabel {
    plugin: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutboundLabels {
    plugin: String,
    destination: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransportLabel {
    transport: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabel {
    decision: String,
}

/// The `destination` of an outbound request outside the plugin's
/// allow-list.
const NOT_ALLOWED: &str = "(not allowed)";

/// How many `tool_calls_total` series of one tool may carry an error code
/// its plugin chose: per tool, so no plugin can crowd out another's.
pub const PLUGIN_CODE_SERIES: usize = 32;

/// Buckets for call and store latencies, in seconds: 100 µs to about 30 s.
fn latency() -> Histogram {
    Histogram::new([
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0, 30.0,
    ])
}

/// Buckets for how long a person takes to decide: 1 s to 15 min.
fn human() -> Histogram {
    Histogram::new([1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0])
}

/// What scrape time reads from the rest of the host.
pub struct Snapshot {
    pub pending_approvals: Option<usize>,
    pub sessions: HashMap<&'static str, usize>,
    pub audit_unavailable: bool,
    pub in_flight: usize,
    /// Calls admitted (running or waiting) per plugin.
    pub queue_depth: Vec<(String, u32)>,
    /// Records waiting for the audit writer.
    pub audit_queued: usize,
    /// Plugin instances made since start, and alive now.
    pub instances_created: u64,
    pub instances_live: u64,
}

pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<ToolLabel, Histogram, fn() -> Histogram>,
    busy: Family<PluginLabel, Counter>,
    outbound: Family<OutboundLabels, Counter>,
    store_seconds: Histogram,
    decisions: Family<DecisionLabel, Histogram, fn() -> Histogram>,
    pending: Gauge,
    sessions: Family<TransportLabel, Gauge>,
    audit_unavailable: Gauge,
    in_flight: Gauge,
    queue_depth: Family<PluginLabel, Gauge>,
    audit_queued: Gauge,
    instances_created: Counter,
    instances_live: Gauge,
    /// When each approval this process asked for was asked, until decided.
    asked: Mutex<HashMap<String, Instant>>,
    /// The plugin's own error codes each tool has a series for. Only a
    /// plugin error whose code has no series takes this lock.
    plugin_codes: Mutex<HashMap<String, HashSet<String>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "toolhost_tool_calls",
            "Tool calls by tool, risk class and outcome (ok or the error code)",
            calls.clone(),
        );
        let call_seconds: Family<ToolLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(latency);
        registry.register(
            "toolhost_tool_call_duration_seconds",
            "Time from a call's admission to its outcome, per tool",
            call_seconds.clone(),
        );
        let busy = Family::<PluginLabel, Counter>::default();
        registry.register(
            "toolhost_plugin_busy",
            "Calls refused because the plugin's slots and queue were full",
            busy.clone(),
        );
        let outbound = Family::<OutboundLabels, Counter>::default();
        registry.register(
            "toolhost_outbound_requests",
            "Plugins' outbound HTTP requests by plugin, destination host and outcome",
            outbound.clone(),
        );
        let store_seconds = latency();
        registry.register(
            "toolhost_store_charge_duration_seconds",
            "Time the store takes to admit and charge one task-bound call",
            store_seconds.clone(),
        );
        let decisions: Family<DecisionLabel, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(human);
        registry.register(
            "toolhost_approval_decision_seconds",
            "Time from an approval's request to its decision (approvals asked on this replica)",
            decisions.clone(),
        );
        let pending = Gauge::default();
        registry.register(
            "toolhost_approvals_pending",
            "Approvals waiting for a person",
            pending.clone(),
        );
        let sessions = Family::<TransportLabel, Gauge>::default();
        registry.register(
            "toolhost_sessions_live",
            "Live MCP sessions on this replica by transport",
            sessions.clone(),
        );
        let audit_unavailable = Gauge::default();
        registry.register(
            "toolhost_audit_unavailable",
            "1 while the audit trail cannot be written (write calls are refused)",
            audit_unavailable.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "toolhost_calls_in_flight",
            "Calls between their start and their outcome record",
            in_flight.clone(),
        );
        let queue_depth = Family::<PluginLabel, Gauge>::default();
        registry.register(
            "toolhost_plugin_queue_depth",
            "Calls holding a place of the plugin (running or waiting)",
            queue_depth.clone(),
        );
        let audit_queued = Gauge::default();
        registry.register(
            "toolhost_audit_queued_records",
            "Records waiting for the audit writer (its backlog)",
            audit_queued.clone(),
        );
        let instances_created = Counter::default();
        registry.register(
            "toolhost_instances_created",
            "Plugin instances made (a fresh one per call for instance = \"call\", one per session otherwise)",
            instances_created.clone(),
        );
        let instances_live = Gauge::default();
        registry.register(
            "toolhost_instances_live",
            "Plugin instances alive now",
            instances_live.clone(),
        );
        Metrics {
            registry,
            audit_queued,
            instances_created,
            instances_live,
            calls,
            call_seconds,
            busy,
            outbound,
            store_seconds,
            decisions,
            pending,
            sessions,
            audit_unavailable,
            in_flight,
            queue_depth,
            asked: Mutex::new(HashMap::new()),
            plugin_codes: Mutex::new(HashMap::new()),
        }
    }

    /// Counts what an audit event says happened.
    pub fn observe(&self, event: &Event) {
        match event {
            Event::ToolCall(record) => {
                let outcome = record.outcome.clone().unwrap_or_else(|| "unknown".into());
                // The host's `busy`, not a plugin's error of that name.
                if outcome == "busy"
                    && !record.outcome_by_plugin
                    && let Some(plugin) = &record.plugin
                {
                    self.busy
                        .get_or_create(&PluginLabel {
                            plugin: plugin.clone(),
                        })
                        .inc();
                }
                // A name the catalog does not have is whatever a client
                // sent: one label for all of them, or any client could
                // grow the registry without bound.
                let tool = match record.risk {
                    Some(_) => record.tool.clone(),
                    None => "(unknown)".to_string(),
                };
                let mut labels = CallLabels {
                    tool: tool.clone(),
                    risk: record.risk.clone().unwrap_or_else(|| "none".into()),
                    outcome,
                };
                // A plugin's own error codes are worth a label each, but a
                // plugin choosing a new one per call would grow the registry
                // without bound: past the budget, new ones count as
                // `plugin_error` (the trail keeps the code).
                if record.outcome_by_plugin && self.calls.get(&labels).is_none() {
                    let mut codes = self.plugin_codes.lock().unwrap_or_else(|p| p.into_inner());
                    let labelled = codes.entry(tool.clone()).or_default();
                    let fits = labelled.contains(&labels.outcome)
                        || (labelled.len() < PLUGIN_CODE_SERIES
                            && labelled.insert(labels.outcome.clone()));
                    if !fits {
                        labels.outcome = "plugin_error".into();
                    }
                }
                self.calls.get_or_create(&labels).inc();
                if let Some(us) = record.duration_us {
                    self.call_seconds
                        .get_or_create(&ToolLabel { tool })
                        .observe(us as f64 / 1e6);
                }
            }
            Event::OutboundRequest {
                plugin,
                outcome,
                allowed_by,
                ..
            } => {
                // The URL's host is the plugin's choice: labelled by it, a
                // plugin sending to a new name each time (refused, or under a
                // wildcard entry) would grow the registry without bound. The
                // allow-list's entries are the operator's, and few.
                let destination = allowed_by
                    .clone()
                    .unwrap_or_else(|| NOT_ALLOWED.to_string());
                self.outbound
                    .get_or_create(&OutboundLabels {
                        plugin: plugin.clone(),
                        destination,
                        outcome: outcome.clone(),
                    })
                    .inc();
            }
            Event::ApprovalRequested { approval, .. } => {
                let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
                // Approvals decided elsewhere would pile up: forget the old.
                asked.retain(|_, at| at.elapsed().as_secs() < 3600);
                asked.entry(approval.clone()).or_insert_with(Instant::now);
            }
            Event::ApprovalDecided {
                approval, decision, ..
            } => {
                let asked = self
                    .asked
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(approval);
                if let Some(at) = asked {
                    self.decisions
                        .get_or_create(&DecisionLabel {
                            decision: decision.clone(),
                        })
                        .observe(at.elapsed().as_secs_f64());
                }
            }
            _ => {}
        }
    }

    /// How long one charge took in the store.
    pub fn observe_charge(&self, started: Instant) {
        self.store_seconds.observe(started.elapsed().as_secs_f64());
    }

    /// The text exposition, with the gauges set from `now`.
    pub fn render(&self, now: Snapshot) -> String {
        if let Some(pending) = now.pending_approvals {
            self.pending.set(pending as i64);
        }
        self.sessions.clear();
        for (transport, count) in now.sessions {
            self.sessions
                .get_or_create(&TransportLabel {
                    transport: transport.to_string(),
                })
                .set(count as i64);
        }
        self.audit_unavailable.set(i64::from(now.audit_unavailable));
        self.in_flight.set(now.in_flight as i64);
        self.audit_queued.set(now.audit_queued as i64);
        self.instances_live
            .set(i64::try_from(now.instances_live).unwrap_or(i64::MAX));
        // The counter follows the sandbox's own count.
        let seen = self.instances_created.get();
        self.instances_created
            .inc_by(now.instances_created.saturating_sub(seen));
        for (plugin, depth) in now.queue_depth {
            self.queue_depth
                .get_or_create(&PluginLabel { plugin })
                .set(i64::from(depth));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String does not fail");
        out
    }
}
