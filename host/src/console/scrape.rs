//! `GET /metrics` on the admin listener: the host's metrics for a
//! Prometheus scraper, behind a bearer token of their own (or the admin
//! token), so a scraper holds nothing that can grant or approve.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::bearer::Bearer;
use crate::dispatch::Toolhost;
use crate::metrics::Snapshot;
use crate::operator::admin::AdminToken;

struct Scrape {
    host: Arc<Toolhost>,
    /// Any of these may scrape: the metrics token if set, and the admin token.
    tokens: Vec<AdminToken>,
}

pub fn router(host: Arc<Toolhost>, tokens: Vec<AdminToken>) -> axum::Router {
    axum::Router::new()
        .route("/metrics", get(metrics))
        .with_state(Arc::new(Scrape { host, tokens }))
}

async fn metrics(State(scrape): State<Arc<Scrape>>, headers: HeaderMap) -> Response {
    let allowed = match Bearer::of(&headers) {
        Bearer::Token(token) => scrape.tokens.iter().any(|t| t.matches(token)),
        _ => false,
    };
    if !allowed {
        let mut response = (
            StatusCode::UNAUTHORIZED,
            "metrics need `Authorization: Bearer <metrics or admin token>`\n",
        )
            .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"toolhost-metrics\""),
        );
        return response;
    }
    let host = &scrape.host;
    let pending = host.store.approvals(true).await.ok().map(|list| list.len());
    let snapshot = Snapshot {
        pending_approvals: pending,
        sessions: host.sessions.count_by_transport(),
        audit_unavailable: !host.audit.healthy(),
        in_flight: host.in_flight(),
        audit_queued: host.audit.queued(),
        instances_created: crate::sandbox::instance_counts().0,
        instances_live: crate::sandbox::instance_counts().1,
        queue_depth: host
            .catalog
            .plugins
            .iter()
            .map(|p| {
                (
                    p.prepared.shared().name.as_str().to_string(),
                    p.queue.admitted(),
                )
            })
            .collect(),
    };
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        host.metrics.render(snapshot),
    )
        .into_response()
}
