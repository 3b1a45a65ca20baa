//! Billing: card charges per order, and refunds that an idempotency key
//! makes safe to retry.
//!
//! | route | answer |
//! |---|---|
//! | `GET /charges?order=N` | `{"order": N, "charges": [...]}`; 400 `invalid_query` |
//! | `POST /refunds` `{"charge_id", "idempotency_key", "reason"}` | 201 the refund; 200 the same refund again for a repeated key; 400 `invalid_body`, 404 `not_found`, 409 `already_refunded` or `idempotency_key_reused`, 422 `refund_declined` |
//!
//! Every route wants `Authorization: Bearer <token>` (401 `unauthorized`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ApiError;

/// One card charge.
#[derive(Debug, Clone, Serialize)]
pub struct Charge {
    pub id: String,
    pub order: String,
    pub amount_cents: u64,
    pub currency: &'static str,
    /// The card, as the statement shows it (brand and last four digits).
    pub card: &'static str,
    /// RFC 3339, UTC.
    pub captured_at: &'static str,
    /// `captured` or `refunded`.
    pub status: &'static str,
    pub refund_id: Option<String>,
    /// The card processor refuses refunds to this card (a closed account).
    #[serde(skip)]
    declines_refunds: bool,
}

/// A refund as the API reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Refund {
    pub id: String,
    pub charge_id: String,
    pub amount_cents: u64,
    pub currency: &'static str,
    pub reason: String,
}

/// The ledger behind the API.
pub struct Ledger {
    expected_authorization: String,
    charges: Mutex<Vec<Charge>>,
    /// Refunds by idempotency key.
    refunds: Mutex<HashMap<String, Refund>>,
}

impl Ledger {
    /// Every charge, for tests.
    pub fn charges(&self) -> Vec<Charge> {
        lock(&self.charges).clone()
    }

    /// How many refunds were made.
    pub fn refund_count(&self) -> usize {
        lock(&self.refunds).len()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn charge(id: &str, order: &str, cents: u64, card: &'static str, at: &'static str) -> Charge {
    Charge {
        id: id.to_string(),
        order: order.to_string(),
        amount_cents: cents,
        currency: "EUR",
        card,
        captured_at: at,
        status: "captured",
        refund_id: None,
        declines_refunds: false,
    }
}

/// The demo's orders: 88231 is the helpdesk's "charged twice" ticket (two
/// equal charges 37 s apart), 88190 a sensor and a mounting kit on one card
/// (two charges, no duplicate), 88102 a single charge, and 88244 a
/// duplicate whose card no longer takes refunds.
fn seed() -> Vec<Charge> {
    let mut closed = charge(
        "ch_88244_b",
        "88244",
        14_900,
        "mastercard ••0081",
        "2026-11-21T16:40:09Z",
    );
    closed.declines_refunds = true;
    vec![
        charge(
            "ch_88231_a",
            "88231",
            14_900,
            "visa ••4417",
            "2026-11-18T10:02:11Z",
        ),
        charge(
            "ch_88231_b",
            "88231",
            14_900,
            "visa ••4417",
            "2026-11-18T10:02:48Z",
        ),
        charge(
            "ch_88190_a",
            "88190",
            14_900,
            "visa ••9930",
            "2026-11-12T08:15:00Z",
        ),
        charge(
            "ch_88190_b",
            "88190",
            2_490,
            "visa ••9930",
            "2026-11-12T08:15:02Z",
        ),
        charge(
            "ch_88102_a",
            "88102",
            14_900,
            "amex ••1005",
            "2026-11-02T19:30:45Z",
        ),
        Charge {
            declines_refunds: true,
            ..charge(
                "ch_88244_a",
                "88244",
                14_900,
                "mastercard ••0081",
                "2026-11-21T16:39:51Z",
            )
        },
        closed,
    ]
}

/// The billing API with bearer `token` (non-empty visible ASCII), and its
/// ledger for tests to look at.
pub fn router(token: &str) -> Result<(Router, Arc<Ledger>), String> {
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the billing token must be non-empty visible ASCII".into());
    }
    let ledger = Arc::new(Ledger {
        expected_authorization: format!("Bearer {token}"),
        charges: Mutex::new(seed()),
        refunds: Mutex::new(HashMap::new()),
    });
    let app = Router::new()
        .route("/charges", get(list_charges))
        .route("/refunds", post(refund))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(middleware::from_fn_with_state(Arc::clone(&ledger), guard))
        .with_state(Arc::clone(&ledger));
    Ok((app, ledger))
}

async fn guard(State(ledger): State<Arc<Ledger>>, request: Request, next: Next) -> Response {
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let first = values.next();
    let ok = values.next().is_none()
        && first
            .is_some_and(|v| same_bytes(v.as_bytes(), ledger.expected_authorization.as_bytes()));
    if !ok {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "send `Authorization: Bearer <token>` with the billing token",
        )
        .into_response();
    }
    next.run(request).await
}

/// Time depends only on the lengths, not on how much of a guess was right.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[derive(Deserialize)]
struct ChargesQuery {
    order: Option<String>,
}

fn valid_order(order: &str) -> bool {
    (5..=8).contains(&order.len()) && order.bytes().all(|b| b.is_ascii_digit())
}

async fn list_charges(
    State(ledger): State<Arc<Ledger>>,
    query: Result<Query<ChargesQuery>, QueryRejection>,
) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let invalid = |m: &str| ApiError::new(StatusCode::BAD_REQUEST, "invalid_query", m);
    let Query(query) = query.map_err(|e| invalid(&e.body_text()))?;
    let order = query
        .order
        .ok_or_else(|| invalid("give ?order=, the order number"))?;
    if !valid_order(&order) {
        return Err(invalid("an order number is 5 to 8 digits"));
    }
    let charges: Vec<Charge> = lock(&ledger.charges)
        .iter()
        .filter(|c| c.order == order)
        .cloned()
        .collect();
    Ok(axum::Json(json!({ "order": order, "charges": charges })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefundBody {
    charge_id: String,
    idempotency_key: String,
    reason: String,
}

async fn refund(State(ledger): State<Arc<Ledger>>, body: Bytes) -> Result<Response, ApiError> {
    let body: RefundBody = serde_json::from_slice(&body).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!("expected {{charge_id, idempotency_key, reason}}: {e}"),
        )
    })?;
    if body.idempotency_key.is_empty() || body.idempotency_key.len() > 128 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "the idempotency key is 1 to 128 characters",
        ));
    }
    // One lock order everywhere: refunds, then charges.
    let mut refunds = lock(&ledger.refunds);
    if let Some(done) = refunds.get(&body.idempotency_key) {
        if done.charge_id != body.charge_id {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_reused",
                "this idempotency key was used for another charge",
            ));
        }
        return Ok((StatusCode::OK, axum::Json(done.clone())).into_response());
    }
    let mut charges = lock(&ledger.charges);
    let charge = charges
        .iter_mut()
        .find(|c| c.id == body.charge_id)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("there is no charge {}", body.charge_id),
            )
        })?;
    if charge.status == "refunded" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_refunded",
            format!("charge {} was refunded before", charge.id),
        ));
    }
    if charge.declines_refunds {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "refund_declined",
            "the card processor declined the refund: the card's account is closed",
        ));
    }
    let made = Refund {
        id: format!("re_{}", charge.id.trim_start_matches("ch_")),
        charge_id: charge.id.clone(),
        amount_cents: charge.amount_cents,
        currency: charge.currency,
        reason: body.reason,
    };
    charge.status = "refunded";
    charge.refund_id = Some(made.id.clone());
    refunds.insert(body.idempotency_key, made.clone());
    Ok((StatusCode::CREATED, axum::Json(made)).into_response())
}
