//! `[host] approval_webhook`: a JSON POST for each new pending approval, so
//! the people who decide learn of it where they are (Slack, a pager relay).
//!
//! Posts are made by the host, never by a plugin, from a task of their own:
//! the call that asked for the approval does not wait for them. A post that
//! fails is tried again after 1, 2, 4, 8 and 16 s; the outcome is recorded
//! in the audit trail (`approval_notified`). The body carries a
//! Slack-compatible `text`, the approval's fields and the link to its
//! console page; with a `secret`, `X-Toolhost-Signature: sha256=<hex>` is
//! the HMAC-SHA256 of the timestamp header, a dot and the body.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hmac::{Hmac, Mac};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::json;
use sha2::Sha256;
use tokio::net::TcpStream;
use zeroize::Zeroizing;

use crate::audit::{Audit, Event};

/// Attempts per approval, and the first wait between them (doubling).
const ATTEMPTS: u32 = 6;
const FIRST_WAIT: Duration = Duration::from_secs(1);
/// One attempt, connection to status line.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the webhook cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("approval_webhook: {0}")]
    Secret(String),
    #[error("approval_webhook url {0:?} cannot be used")]
    Url(String),
}

/// Where posts go, and what signs them.
pub struct Webhook {
    url: http::Uri,
    secret: Option<Zeroizing<String>>,
    console_url: OnceLock<String>,
    audit: Audit,
    runtime: tokio::runtime::Handle,
    /// Approvals already posted (repeated calls ask for the same one).
    sent: Mutex<HashMap<String, Instant>>,
}

impl Webhook {
    /// Needs a running tokio runtime: posts are spawned on it.
    pub fn new(
        url: &str,
        secret: Option<Zeroizing<String>>,
        audit: Audit,
    ) -> Result<Arc<Webhook>, WebhookError> {
        let url: http::Uri = url.parse().map_err(|_| WebhookError::Url(url.into()))?;
        Ok(Arc::new(Webhook {
            url,
            secret,
            console_url: OnceLock::new(),
            audit,
            runtime: tokio::runtime::Handle::current(),
            sent: Mutex::new(HashMap::new()),
        }))
    }

    /// The console's base URL, for the link in each post.
    pub fn link_to(&self, console_url: &str) {
        let _ = self.console_url.set(console_url.to_string());
    }

    /// Posts a new pending approval (once per approval); the rest of the
    /// host's events are none of its business.
    pub fn observe(self: &Arc<Self>, event: &Event) {
        let Event::ApprovalRequested {
            approval,
            task,
            tool,
            summary,
            expires,
        } = event
        else {
            return;
        };
        {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            sent.retain(|_, at| at.elapsed() < Duration::from_secs(3600));
            if sent.insert(approval.clone(), Instant::now()).is_some() {
                return;
            }
        }
        let link = self
            .console_url
            .get()
            .map(|base| format!("{base}/approvals/{approval}"));
        let text = match &link {
            Some(link) => format!("Approval needed: {summary}\nDecide: {link}"),
            None => format!(
                "Approval needed: {summary}\nDecide: toolhost approval approve|deny {approval}"
            ),
        };
        let body = json!({
            "text": text,
            "approval": approval,
            "task": task,
            "tool": tool,
            "summary": summary,
            "expires": expires,
            "url": link,
        })
        .to_string();
        let hook = self.clone();
        let approval = approval.clone();
        self.runtime
            .spawn(async move { hook.deliver(approval, body).await });
    }

    async fn deliver(&self, approval: String, body: String) {
        let mut wait = FIRST_WAIT;
        let mut last = String::new();
        for attempt in 1..=ATTEMPTS {
            match tokio::time::timeout(ATTEMPT_TIMEOUT, self.post(&body)).await {
                Ok(Ok(status)) if status.is_success() => {
                    self.audit.record(Event::ApprovalNotified {
                        approval,
                        outcome: "sent".into(),
                        attempts: attempt,
                    });
                    return;
                }
                Ok(Ok(status)) => last = format!("answered {status}"),
                Ok(Err(e)) => last = e,
                Err(_) => last = format!("no answer within {} s", ATTEMPT_TIMEOUT.as_secs()),
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
        tracing::warn!(%approval, "approval webhook gave up: {last}");
        self.audit.record(Event::ApprovalNotified {
            approval,
            outcome: format!("failed: {last}"),
            attempts: ATTEMPTS,
        });
    }

    async fn post(&self, body: &str) -> Result<http::StatusCode, String> {
        let host = self
            .url
            .host()
            .ok_or("no host")?
            .trim_start_matches('[')
            .trim_end_matches(']');
        let https = self.url.scheme_str() == Some("https");
        let port = self.url.port_u16().unwrap_or(if https { 443 } else { 80 });
        let stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
        let timestamp = crate::store::now().to_string();
        let mut request = http::Request::post(
            self.url
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
        )
        .header(
            http::header::HOST,
            self.url.authority().map_or(host, |a| a.as_str()),
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("toolhost/", env!("CARGO_PKG_VERSION")),
        )
        .header("x-toolhost-timestamp", &timestamp);
        if let Some(secret) = &self.secret {
            request = request.header("x-toolhost-signature", sign(secret, &timestamp, body));
        }
        let request = request
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| e.to_string())?;
        let status = if https {
            let tls = tls(stream, host).await?;
            exchange(TokioIo::new(tls), request).await?
        } else {
            exchange(TokioIo::new(stream), request).await?
        };
        Ok(status)
    }
}

/// `sha256=<hex>` of HMAC-SHA256(secret, "<timestamp>.<body>").
pub fn sign(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes a key of any length");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn exchange<T>(
    io: TokioIo<T>,
    request: http::Request<Full<Bytes>>,
) -> Result<http::StatusCode, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    let connection = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string());
    let status = match response {
        Ok(response) => {
            let status = response.status();
            // Read (and drop) the answer so the exchange ends cleanly.
            let _ = response.into_body().collect().await;
            Ok(status)
        }
        Err(e) => Err(e),
    };
    connection.abort();
    status
}

async fn tls(
    stream: TcpStream,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a TLS name: {e}"))?;
    tokio_rustls::TlsConnector::from(crate::gate::web_tls_config())
        .connect(name, stream)
        .await
        .map_err(|e| format!("TLS with {host} failed: {e}"))
}
