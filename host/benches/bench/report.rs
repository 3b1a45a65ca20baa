//! The one table `just bench` prints and the `target/bench/results.json` it
//! writes: every figure with its median and p99 over repeated runs, and the
//! issue's target for it, met or missed by how much.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::summary;

/// What a figure measures.
#[derive(Clone, Copy)]
pub enum Amount {
    Time(Duration),
    Bytes(u64),
}

impl Amount {
    fn text(self) -> String {
        match self {
            Amount::Time(d) if d >= Duration::from_millis(10) => {
                format!("{:.1} ms", d.as_secs_f64() * 1e3)
            }
            Amount::Time(d) => format!("{:.1} µs", d.as_secs_f64() * 1e6),
            Amount::Bytes(b) => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        }
    }

    fn json(self) -> Value {
        match self {
            Amount::Time(d) => json!({ "us": d.as_secs_f64() * 1e6 }),
            Amount::Bytes(b) => json!({ "bytes": b }),
        }
    }
}

/// A target from the issue and whether this run met it.
pub struct Target {
    pub text: String,
    /// How far the figure is from the target, as measured / allowed
    /// (≤ 1 is met; for a floor like calls/s, allowed / measured).
    pub ratio: f64,
}

impl Target {
    /// A figure that must stay at or below `limit`.
    pub fn at_most(text: impl Into<String>, measured: f64, limit: f64) -> Target {
        Target {
            text: text.into(),
            ratio: measured / limit,
        }
    }

    /// A figure that must reach at least `floor`.
    pub fn at_least(text: impl Into<String>, measured: f64, floor: f64) -> Target {
        Target {
            text: text.into(),
            ratio: floor / measured,
        }
    }

    fn verdict(&self) -> String {
        if self.ratio <= 1.0 {
            format!("{}: met", self.text)
        } else {
            format!("{}: missed ({:.2}×)", self.text, self.ratio)
        }
    }
}

/// One row of the table.
pub struct Figure {
    pub section: &'static str,
    pub name: String,
    pub p50: Option<Amount>,
    pub p99: Option<Amount>,
    pub calls_per_sec: Option<f64>,
    pub cpu_per_call: Option<Duration>,
    /// The targets this figure is held to (an older issue's absolute one and
    /// the footprint issue's ratio may both apply).
    pub targets: Vec<Target>,
    /// A name other sections' ratios find this figure by.
    pub key: Option<String>,
}

impl Figure {
    /// The median and p99 of `samples`.
    pub fn of(section: &'static str, name: impl Into<String>, samples: &mut [Duration]) -> Figure {
        let (p50, p99) = summary(samples);
        Figure::new(section, name, Amount::Time(p50), Amount::Time(p99))
    }

    pub fn new(section: &'static str, name: impl Into<String>, p50: Amount, p99: Amount) -> Figure {
        Figure {
            section,
            name: name.into(),
            p50: Some(p50),
            p99: Some(p99),
            calls_per_sec: None,
            cpu_per_call: None,
            targets: Vec::new(),
            key: None,
        }
    }

    pub fn rate(mut self, calls_per_sec: f64) -> Figure {
        self.calls_per_sec = Some(calls_per_sec);
        self
    }

    pub fn cpu(mut self, per_call: Duration) -> Figure {
        self.cpu_per_call = Some(per_call);
        self
    }

    pub fn target(mut self, target: Target) -> Figure {
        self.targets.push(target);
        self
    }

    pub fn key(mut self, key: impl Into<String>) -> Figure {
        self.key = Some(key.into());
        self
    }

    pub fn p50_time(&self) -> Duration {
        match self.p50 {
            Some(Amount::Time(d)) => d,
            _ => Duration::ZERO,
        }
    }

    pub fn p99_time(&self) -> Duration {
        match self.p99 {
            Some(Amount::Time(d)) => d,
            _ => Duration::ZERO,
        }
    }

    fn json(&self) -> Value {
        json!({
            "section": self.section,
            "name": self.name,
            "p50": self.p50.map(Amount::json),
            "p99": self.p99.map(Amount::json),
            "calls_per_sec": self.calls_per_sec,
            "server_cpu_per_call_us": self.cpu_per_call.map(|d| d.as_secs_f64() * 1e6),
            "targets": self.targets.iter().map(|t| json!({
                "text": t.text,
                "met": t.ratio <= 1.0,
                "ratio": t.ratio,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The figure `key` names, if its section ran.
pub fn find<'a>(figures: &'a mut [Figure], key: &str) -> Option<&'a mut Figure> {
    figures.iter_mut().find(|f| f.key.as_deref() == Some(key))
}

/// The table, as markdown.
pub fn table(figures: &[Figure]) -> String {
    let mut out = String::from(
        "| section | figure | p50 | p99 | calls/s | server CPU/call | target |\n\
         | --- | --- | ---: | ---: | ---: | ---: | --- |\n",
    );
    let dash = || "–".to_string();
    for f in figures {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            f.section,
            f.name,
            f.p50.map_or_else(dash, Amount::text),
            f.p99.map_or_else(dash, Amount::text),
            f.calls_per_sec.map_or_else(dash, |r| format!("{r:.0}")),
            f.cpu_per_call.map_or_else(dash, |d| Amount::Time(d).text()),
            f.targets
                .iter()
                .map(Target::verdict)
                .collect::<Vec<_>>()
                .join("; "),
        ));
    }
    out
}

/// `target/bench/results.json`: the machine, the run's settings and every
/// figure.
pub fn results(figures: &[Figure], quick: bool, binary: &std::path::Path) -> Value {
    json!({
        "machine": machine(),
        "quick": quick,
        "binary": binary.display().to_string(),
        "figures": figures.iter().map(Figure::json).collect::<Vec<_>>(),
    })
}

/// What the figures were measured on.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_default();
    let memory_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory_gib": (memory_kib as f64 / (1 << 20) as f64).round(),
        "kernel": kernel.trim(),
        "date": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    })
}
