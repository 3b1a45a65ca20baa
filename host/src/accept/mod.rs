//! The HTTP accept loop behind `/mcp` and the admin listener.
//!
//! Neither uses `axum::serve`, which has no timeouts. Here a connection
//! must send each request's headers within the read timeout (which also
//! closes idle keep-alive connections), must take what it is sent within
//! it too (`stalled.rs`), and only so many are open at once: a semaphore on
//! accept, beyond which new ones wait in the kernel's backlog. Bodies are
//! the handlers' to bound, as only they know how large one may be.
//!
//! A stop closes the listener, so new clients are refused rather than left
//! waiting, asks each connection to end after its request in flight, and
//! gives them a few seconds before closing the rest.

mod stalled;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use stalled::WriteDeadline;

/// What a listener allows its connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A request's headers must arrive within this, a keep-alive connection
    /// may idle this long, and a client may leave its answers unread this
    /// long.
    pub read_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
}

/// How long a stopping listener waits for its connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves each accepted connection with the router `service` makes for its
/// peer, until `stop` resolves; `closing` is cancelled then, for whatever
/// else should wind down with the connections (event streams, sessions).
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: impl Fn(SocketAddr) -> axum::Router,
    limits: ConnectionLimits,
    closing: CancellationToken,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    // The header timeout also runs while a keep-alive connection waits for
    // its next request, so idle connections are closed as well.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.read_timeout)
        .max_buf_size(64 << 10);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = open.clone().acquire_owned() => permit.expect("never closed"),
            () = &mut stop => break,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before
                    // it was accepted: wait a little, go on.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(50)) => continue,
                        () = &mut stop => break,
                    }
                }
            },
            () = &mut stop => break,
        };
        // Reap finished connections so the set stays as large as the number
        // of open ones.
        while connections.try_join_next().is_some() {}
        // A keep-alive client sends its next request only after the answer:
        // Nagle would hold the answer's last segment for a delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY not set: {e}");
        }
        let tcp = WriteDeadline::new(tcp, limits.read_timeout);
        let serving =
            http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service(peer)));
        let closing = closing.clone();
        connections.spawn(async move {
            let _permit = permit;
            tokio::pin!(serving);
            let served = tokio::select! {
                served = serving.as_mut() => served,
                () = closing.cancelled() => {
                    serving.as_mut().graceful_shutdown();
                    serving.await
                }
            };
            if let Err(e) = served {
                tracing::debug!("connection ended: {e}");
            }
        });
    }
    drop(listener);
    closing.cancel();
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "{} connections still open after {SHUTDOWN_GRACE:?}; closing them",
            connections.len()
        );
        connections.shutdown().await;
    }
    Ok(())
}
