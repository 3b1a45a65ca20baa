//! Docs: the product documentation of the Tidenwächter TW-2, public and
//! read-only.
//!
//! | route | answer |
//! |---|---|
//! | `GET /articles` | `{"articles": [{id, title, section, updated}]}` |
//! | `GET /articles?full=1` | the same, each with its `body` |
//! | `GET /articles/{id}` | `{id, title, section, updated, body}`; 404 `not_found` |

use axum::Router;
use axum::extract::{Path, Query};
use axum::http::StatusCode;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::ApiError;

/// One article of the documentation.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Article {
    pub id: &'static str,
    pub title: &'static str,
    pub section: &'static str,
    /// The date of the last change, `YYYY-MM-DD`.
    pub updated: &'static str,
    #[serde(skip)]
    pub body: &'static str,
}

/// Every article, in the order of the handbook.
pub const ARTICLES: [Article; 8] = [
    article(
        "installation",
        "Installing the TW-2",
        "Setup",
        "2026-10-02",
        include_str!("../docs/installation.md"),
    ),
    article(
        "depth",
        "Rated depth and deep wells",
        "Setup",
        "2026-09-14",
        include_str!("../docs/depth.md"),
    ),
    article(
        "battery",
        "Battery life and changing the cell",
        "Operation",
        "2026-09-14",
        include_str!("../docs/battery.md"),
    ),
    article(
        "zero-reading",
        "Level shows 0 cm and the LED blinks red",
        "Troubleshooting",
        "2026-11-05",
        include_str!("../docs/zero-reading.md"),
    ),
    article(
        "warranty",
        "Warranty",
        "Service",
        "2026-06-30",
        include_str!("../docs/warranty.md"),
    ),
    article(
        "returns",
        "Returning a TW-2",
        "Service",
        "2026-06-30",
        include_str!("../docs/returns.md"),
    ),
    article(
        "billing",
        "Charges, duplicates and refunds",
        "Billing",
        "2026-11-20",
        include_str!("../docs/billing.md"),
    ),
    article(
        "delivery",
        "Delivery times and lost parcels",
        "Service",
        "2026-06-30",
        include_str!("../docs/delivery.md"),
    ),
];

const fn article(
    id: &'static str,
    title: &'static str,
    section: &'static str,
    updated: &'static str,
    body: &'static str,
) -> Article {
    Article {
        id,
        title,
        section,
        updated,
        body,
    }
}

/// The docs API.
pub fn router() -> Router {
    Router::new()
        .route("/articles", get(list))
        .route("/articles/{id}", get(read))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
}

#[derive(Deserialize)]
struct ListQuery {
    full: Option<String>,
}

async fn list(Query(query): Query<ListQuery>) -> axum::Json<serde_json::Value> {
    let full = query.full.as_deref() == Some("1");
    let articles: Vec<serde_json::Value> = ARTICLES
        .iter()
        .map(|a| {
            let mut value = json!(a);
            if full {
                value["body"] = json!(a.body);
            }
            value
        })
        .collect();
    axum::Json(json!({ "articles": articles }))
}

async fn read(Path(id): Path<String>) -> Result<axum::Json<serde_json::Value>, ApiError> {
    let found = ARTICLES.iter().find(|a| a.id == id).ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("there is no article {id}"),
        )
    })?;
    let mut value = json!(found);
    value["body"] = json!(found.body);
    Ok(axum::Json(value))
}
