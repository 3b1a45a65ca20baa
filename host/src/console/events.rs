//! Live updates: server-sent events telling open console pages that the
//! pending approvals changed, so they fetch their fresh part.
//!
//! Approvals are asked for on any replica, so the store is what is
//! watched: one task per process reads the pending set every second while
//! at least one page listens, and tells the pages when it differs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use tokio::sync::watch;

use super::Shared;
use super::auth::{LIMITS, Operator};
use crate::store::Store;

const POLL: Duration = Duration::from_secs(1);

/// The pending approvals as pages need to know them: how many, and a
/// fingerprint that changes with any of them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Pending {
    pub count: usize,
    fingerprint: String,
}

pub struct Hub {
    pending: watch::Receiver<Pending>,
}

impl Hub {
    pub fn start(store: Arc<dyn Store>) -> Hub {
        let (tx, rx) = watch::channel(Pending::default());
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(POLL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticker.tick().await;
                // Only the hub's own receiver: nobody is looking.
                if tx.receiver_count() <= 1 {
                    if tx.is_closed() {
                        break;
                    }
                    continue;
                }
                let Ok(list) = store.approvals(true).await else {
                    continue;
                };
                let fingerprint = list
                    .iter()
                    .map(|a| a.id.as_str())
                    .collect::<Vec<_>>()
                    .join(",");
                let now = Pending {
                    count: list.len(),
                    fingerprint,
                };
                tx.send_if_modified(|current| {
                    let changed = *current != now;
                    if changed {
                        *current = now;
                    }
                    changed
                });
            }
        });
        Hub { pending: rx }
    }
}

/// How often an open stream checks that its sign-in still holds.
const RECHECK: Duration = Duration::from_secs(30);

/// `GET /events`: `approvals` events whose data is the pending count. The
/// stream ends once its sign-in does (signed out, removed, expired).
pub async fn stream(State(console): Shared, operator: Operator) -> Response {
    let mut rx = console.events.pending.clone();
    // The first event tells a fresh page the state as the hub last saw it.
    rx.mark_changed();
    let cookie = *operator.cookie_sha256();
    let state = (rx, console.clone());
    let events = futures::stream::unfold(state, move |(mut rx, console)| async move {
        loop {
            tokio::select! {
                changed = rx.changed() => {
                    changed.ok()?;
                    let count = rx.borrow_and_update().count;
                    let event = Event::default().event("approvals").data(count.to_string());
                    return Some((Ok::<_, Infallible>(event), (rx, console)));
                }
                () = tokio::time::sleep(RECHECK) => {
                    match console.host.store.sign_in(&cookie, LIMITS).await {
                        Ok(Some(_)) => {}
                        _ => return None,
                    }
                }
            }
        }
    });
    sse(events)
}

fn sse(events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static) -> Response {
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}
