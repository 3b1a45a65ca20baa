//! The demo back office of Nordwerk Simhaven: two small HTTP APIs that the
//! example plugins in Python (`billing`) and JavaScript (`kb`) reach only
//! through the host's gate.
//!
//! - **Billing** ([`billing`]): card charges per order and refunds, behind a
//!   bearer token the host holds and adds to the plugin's requests.
//! - **Docs** ([`docs`]): the product documentation of the Tidenwächter
//!   TW-2, read-only and public.
//!
//! Each API has its own listener, so the manifest grants each plugin one
//! destination and nothing else. Errors are `{"error": code, "message": text}`.

pub mod billing;
pub mod docs;

use std::io;
use std::net::SocketAddr;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One running API. Dropping it stops the server.
pub struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    /// Serves `app` on an already bound listener until dropped or shut down.
    pub fn start(listener: TcpListener, app: Router) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let stopped = async {
                let _ = stopped.await;
            };
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                eprintln!("backoffice-upstream: server failed: {e}");
            }
        });
        Ok(Server {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections and waits for the requests in flight.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// An error answer: `{"error": code, "message": message}`.
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code, "message": self.message });
        (self.status, axum::Json(body)).into_response()
    }
}
