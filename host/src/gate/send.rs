//! Sending one allowed request: the host resolves the name, checks every
//! address it got, connects to a checked address itself, and reads the whole
//! response within the plugin's limits before the plugin sees any of it.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use tokio::net::TcpStream;
use wasmtime_wasi_http::WasiBody;

use super::address;
use crate::manifest::Scheme;
use crate::redact::Redactor;

/// The largest response head (status line and headers) the gate reads; a
/// longer one fails the request with `HTTP-response-header-section-size`.
const RESPONSE_HEAD_BYTES: usize = 64 << 10;

/// Where a request goes, as the gate allowed it.
pub(super) struct Target {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Internal ranges the allow-list entry names.
    pub addresses: Vec<IpNet>,
}

/// How a request that passed the allow-list still failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum SendError {
    #[error("{0}")]
    Denied(String),
    #[error("cannot resolve {0}")]
    Dns(String),
    #[error("cannot connect to {addr}: {error}")]
    Connect { addr: String, error: std::io::Error },
    #[error("TLS with {host} failed: {error}")]
    Tls { host: String, error: std::io::Error },
    #[error("the response is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error(
        "the response's headers, with secrets redacted, are larger than the limit of {limit} bytes"
    )]
    HeadTooLarge { limit: usize },
    #[error("the plugin holds {held} bytes of responses it has not released, the most it may hold")]
    Held { held: u64 },
    #[error("HTTP exchange failed: {0}")]
    Http(#[from] hyper::Error),
}

impl SendError {
    /// What the guest is told, in wasi-http's own terms.
    pub fn to_wasi(&self) -> wasmtime_wasi_http::Error {
        use wasmtime_wasi_http::Error as E;
        match self {
            SendError::Denied(_) => E::HttpRequestDenied,
            SendError::Dns(_) => E::DnsError {
                rcode: Some("name not resolved".into()),
                info_code: None,
            },
            SendError::Connect { .. } => E::ConnectionRefused,
            SendError::Tls { .. } => E::TlsProtocolError,
            SendError::TooLarge { limit } => E::HttpResponseBodySize(Some(*limit)),
            SendError::HeadTooLarge { limit } => {
                E::HttpResponseHeaderSectionSize(Some(*limit as u32))
            }
            SendError::Held { .. } => E::ConnectionLimitReached,
            SendError::Http(e) if e.is_timeout() => E::HttpResponseTimeout,
            SendError::Http(e) if e.is_parse_too_large() => {
                E::HttpResponseHeaderSectionSize(Some(RESPONSE_HEAD_BYTES as u32))
            }
            SendError::Http(_) => E::HttpProtocolError,
        }
    }
}

/// What came back, with what the audit trail wants to know.
pub(super) struct Sent {
    pub response: Response<WasiBody>,
    pub connected: SocketAddr,
    pub bytes: u64,
}

/// One of the plugin's requests in flight, held until the request is done
/// and any name lookup it started has returned.
pub(super) type InFlight = Arc<tokio::sync::OwnedSemaphorePermit>;

/// Sends `request` to `target`, reading at most `limit` bytes of body.
pub(super) async fn send(
    mut request: Request<WasiBody>,
    target: &Target,
    limit: u64,
    redactor: &Redactor,
    held: &HeldBytes,
    in_flight: InFlight,
) -> Result<Sent, SendError> {
    // The place is held here until the request is done, and by the lookup
    // until it returns.
    let addrs = resolve(target, in_flight.clone()).await?;
    for addr in &addrs {
        address::check(addr.ip(), &target.addresses)
            .map_err(|why| SendError::Denied(format!("{} resolves to {why}", target.host)))?;
    }
    let (stream, connected) = connect(&addrs).await?;
    let io = match target.scheme {
        Scheme::Http => Io::Plain(stream),
        Scheme::Https => Io::Tls(Box::new(tls(stream, &target.host).await?)),
    };

    // Requests go in origin form, and the Host header names the checked
    // host and port, whatever authority text the guest wrote.
    let uri = request.uri();
    let path = match (uri.path(), uri.query()) {
        ("", None) => "/".to_string(),
        ("", Some(q)) => format!("/?{q}"),
        (p, None) => p.to_string(),
        (p, Some(q)) => format!("{p}?{q}"),
    };
    *request.uri_mut() = path
        .parse()
        .map_err(|_| SendError::Denied(format!("the request path {path:?} is not valid")))?;
    let shown = if target.host.contains(':') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    let host_header = if target.port == target.scheme.default_port() {
        shown
    } else {
        format!("{shown}:{}", target.port)
    };
    request.headers_mut().insert(
        http::header::HOST,
        HeaderValue::from_str(&host_header)
            .map_err(|_| SendError::Denied(format!("{host_header} is not a valid host")))?,
    );
    let bodiless_response = request.method() == http::Method::HEAD;
    let request = drop_body_of_bodiless(request);

    // A response's head goes to the plugin as a header set it may keep as
    // long as it likes; hyper's own bound is its 400 KiB read buffer.
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_header_size(RESPONSE_HEAD_BYTES)
        .handshake(TokioIo::new(io))
        .await?;
    let connection = AbortOnDrop(tokio::spawn(connection));
    let response = sender.send_request(request).await?;

    // Redaction needs the bytes as sent: a compressed body would carry a
    // secret past it. The request asked for `identity`.
    let encoding = response
        .headers()
        .get(http::header::CONTENT_ENCODING)
        .map(|v| v.as_bytes().to_ascii_lowercase());
    if encoding.is_some_and(|e| e != b"identity") {
        return Err(SendError::Denied(
            "the response is content-encoded, which the host cannot check for secrets".into(),
        ));
    }
    let declared = response
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if !bodiless_response && declared.is_some_and(|n| n > limit) {
        return Err(SendError::TooLarge { limit });
    }
    let (mut parts, mut body) = response.into_parts();
    let mut buffer = BytesMut::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            if buffer.len() as u64 + data.len() as u64 > limit {
                return Err(SendError::TooLarge { limit });
            }
            buffer.extend_from_slice(&data);
        }
    }
    drop(connection);
    let bytes = buffer.len() as u64;

    // Every value is copied, redacted or not: hyper's are slices of its
    // read buffer, which grows in steps to about twice the head's limit and
    // would live as long as the plugin keeps the header set. Redaction can
    // lengthen a value (a secret's name in place of a shorter secret), so
    // the limit is held again to what the plugin gets.
    for value in parts.headers.values_mut() {
        let clean = redactor.bytes(value.as_bytes());
        *value = HeaderValue::from_bytes(&clean).expect("redaction keeps header bytes valid");
    }
    if head_bytes(&parts.headers) > RESPONSE_HEAD_BYTES {
        return Err(SendError::HeadTooLarge {
            limit: RESPONSE_HEAD_BYTES,
        });
    }
    let body = match redactor.bytes(&buffer) {
        std::borrow::Cow::Borrowed(_) => buffer.freeze(),
        std::borrow::Cow::Owned(clean) => Bytes::from(clean),
    };
    if !bodiless_response && parts.headers.contains_key(http::header::CONTENT_LENGTH) {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    let body = Held::new(body, held)?.boxed_unsync();
    Ok(Sent {
        response: Response::from_parts(parts, body),
        connected,
        bytes,
    })
}

/// The bytes of `headers` as written in a head: `name: value` and a line end
/// each.
fn head_bytes(headers: &http::HeaderMap) -> usize {
    headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// The addresses of `target`'s host. The system's resolver blocks a thread
/// of the runtime's blocking pool, and goes on after the request's timeout
/// has ended it (a name server that never answers keeps it for the
/// resolver's own timeouts): the lookup holds the request's place in flight
/// until it returns, so a plugin cannot keep more threads looking up than
/// it may have requests in flight.
async fn resolve(target: &Target, in_flight: InFlight) -> Result<Vec<SocketAddr>, SendError> {
    if let Ok(ip) = target.host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, target.port)]);
    }
    let (host, port) = (target.host.clone(), target.port);
    let found = tokio::task::spawn_blocking(move || {
        let _in_flight = in_flight;
        (host.as_str(), port)
            .to_socket_addrs()
            .map(Iterator::collect::<Vec<SocketAddr>>)
    })
    .await;
    let addrs = match found {
        Ok(found) => found.map_err(|e| SendError::Dns(format!("{}: {e}", target.host)))?,
        Err(e) => return Err(SendError::Dns(format!("{}: {e}", target.host))),
    };
    if addrs.is_empty() {
        return Err(SendError::Dns(target.host.clone()));
    }
    Ok(addrs)
}

/// Connects to the first address that answers; every one was checked.
async fn connect(addrs: &[SocketAddr]) -> Result<(TcpStream, SocketAddr), SendError> {
    let mut last = None;
    for &addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok((stream, addr));
            }
            Err(e) => last = Some((addr, e)),
        }
    }
    let (addr, error) = last.expect("resolve returns at least one address");
    Err(SendError::Connect {
        addr: addr.to_string(),
        error,
    })
}

/// The host's TLS client settings for the public web: the web's roots,
/// rustls' safe defaults, the host's provider (`tls`). Shared by plugins'
/// requests and the host's own (the approval webhook).
pub fn web_tls_config() -> Arc<tokio_rustls::rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<tokio_rustls::rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = tokio_rustls::rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            Arc::new(
                tokio_rustls::rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default protocol versions")
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        })
        .clone()
}

async fn tls(
    stream: TcpStream,
    host: &str,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, SendError> {
    let tls_error = |error| SendError::Tls {
        host: host.to_string(),
        error,
    };
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| tls_error(std::io::Error::other(e)))?;
    tokio_rustls::TlsConnector::from(web_tls_config())
        .connect(name, stream)
        .await
        .map_err(tls_error)
}

/// A GET or HEAD goes out without a body. The guest may still be writing
/// one (or finishing an empty one): it is drained aside so that the guest's
/// write does not fail on a closed pipe.
fn drop_body_of_bodiless(request: Request<WasiBody>) -> Request<WasiBody> {
    if request.method() != http::Method::GET && request.method() != http::Method::HEAD {
        return request;
    }
    let (parts, body) = request.into_parts();
    drain(body);
    let empty = Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed_unsync();
    Request::from_parts(parts, empty)
}

/// Consumes a body nobody will send, so its writer is not left blocked.
pub(super) fn drain(body: WasiBody) {
    tokio::spawn(discard(body));
}

/// Reads `body` to its end, dropping each frame as it comes: the guest may
/// write for as long as its call lasts (or, from a session's instance,
/// across calls), and none of what the host holds counts against the
/// plugin's memory limit.
async fn discard(mut body: WasiBody) {
    while let Some(Ok(_)) = body.frame().await {}
}

/// Bytes of responses a plugin's instances hold in host memory, read but
/// not yet dropped by the guest. Bounded per plugin, since none of it counts
/// against the guest's own memory limit.
pub(super) struct HeldBytes {
    held: Arc<std::sync::atomic::AtomicU64>,
    max: u64,
}

impl HeldBytes {
    pub fn new(max: u64) -> HeldBytes {
        HeldBytes {
            held: Arc::default(),
            max,
        }
    }
}

/// A response body that gives its bytes back to [`HeldBytes`] when dropped.
struct Held {
    body: Full<Bytes>,
    held: Arc<std::sync::atomic::AtomicU64>,
    size: u64,
}

impl Held {
    fn new(bytes: Bytes, account: &HeldBytes) -> Result<Held, SendError> {
        use std::sync::atomic::Ordering;
        let size = bytes.len() as u64;
        account
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now + size <= account.max).then_some(now + size)
            })
            .map_err(|now| SendError::Held { held: now })?;
        Ok(Held {
            body: Full::new(bytes),
            held: account.held.clone(),
            size,
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held
            .fetch_sub(self.size, std::sync::atomic::Ordering::AcqRel);
    }
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = wasmtime_wasi_http::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body)
            .poll_frame(cx)
            .map_err(|never| match never {})
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connection's I/O task, stopped when the exchange is over.
struct AbortOnDrop(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A connection with or without TLS.
enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl tokio::io::AsyncRead for Io {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => std::pin::Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl tokio::io::AsyncWrite for Io {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => std::pin::Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => std::pin::Pin::new(s).poll_flush(cx),
            Io::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => std::pin::Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => std::pin::Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    use super::*;

    /// A frame that counts how many of its kind are alive at once.
    struct Counted {
        bytes: Vec<u8>,
        live: Arc<AtomicUsize>,
    }

    impl AsRef<[u8]> for Counted {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.live.fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn a_drained_body_is_not_kept() {
        let live = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let frames = {
            let (live, most) = (live.clone(), most.clone());
            futures::stream::iter(0..64).map(move |_| {
                let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let frame = Counted {
                    bytes: vec![0; 1 << 20],
                    live: live.clone(),
                };
                Ok::<_, wasmtime_wasi_http::Error>(Frame::data(Bytes::from_owner(frame)))
            })
        };
        discard(StreamBody::new(frames).boxed_unsync()).await;
        assert_eq!(live.load(Ordering::SeqCst), 0);
        // 64 MiB went through; at most one frame was held at a time.
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}
