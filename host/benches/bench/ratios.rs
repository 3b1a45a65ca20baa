//! Targets that hold one section's figure against another's from the same
//! run (this machine's speed drifts by several times within a day, so the
//! footprint issue sets its CPU targets as ratios): the server's CPU per
//! stdio call against the in-process floor, per task-bound call against an
//! unbound one, per stateless HTTP request against a session call at the
//! same load, and per HTTP session call against stdio. A target whose other figure's section did not run is
//! left out.

use std::time::Duration;

use crate::report::{Figure, Target, find};

pub fn apply(figures: &mut [Figure]) {
    if let Some(floor) = find(figures, "floor.live").map(|f| f.p50_time()) {
        let what = "the floor's live instance call";
        hold(figures, "stdio.cpu", floor, 6.0, what);
        for key in ["stdio.4", "stdio.16", "stdio.64"] {
            hold(figures, key, floor, 4.0, what);
        }
    }
    if let Some(unbound) = find(figures, "stdio.cpu").and_then(|f| f.cpu_per_call) {
        hold(figures, "stdio.bound", unbound, 1.5, "an unbound call");
    }
    for clients in [1, 4, 16, 64] {
        let sessions = format!("http.sessions.{clients}");
        if let Some(session) = find(figures, &sessions).and_then(|f| f.cpu_per_call) {
            let stateless = format!("http.stateless.{clients}");
            hold(figures, &stateless, session, 1.5, "a session call");
        }
    }
    for (http, stdio, what) in [
        ("http.sessions.1", "stdio.cpu", "stdio's sequential call"),
        ("http.sessions.4", "stdio.4", "stdio's, 4 in flight"),
        ("http.sessions.16", "stdio.16", "stdio's, 16 in flight"),
        ("http.sessions.64", "stdio.64", "stdio's, 64 in flight"),
    ] {
        if let Some(stdio) = find(figures, stdio).and_then(|f| f.cpu_per_call) {
            hold(figures, http, stdio, 2.0, what);
        }
    }
}

/// Holds the server CPU per call of the figure `key` to at most `times`
/// × `base`.
fn hold(figures: &mut [Figure], key: &str, base: Duration, times: f64, what: &str) {
    let Some(figure) = find(figures, key) else {
        return;
    };
    let Some(cpu) = figure.cpu_per_call else {
        return;
    };
    let ratio = cpu.as_secs_f64() / base.as_secs_f64();
    figure.targets.push(Target::at_most(
        format!(
            "CPU ≤ {times}× {what} ({:.1} µs); is {ratio:.1}×",
            base.as_secs_f64() * 1e6
        ),
        ratio,
        times,
    ));
}
