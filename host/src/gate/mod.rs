//! The network gate: every outbound HTTP request of a plugin passes here.
//!
//! Plugins get `wasi:http/outgoing-handler` and nothing else that reaches
//! the network (their WASI context allows no socket and no name lookup).
//! wasmtime-wasi-http hands each request to [`WasiHttpHooks::send_request`],
//! which [`Egress`] implements: the allow-list, the method rule of the
//! calling tool, the per-call and concurrency limits, credential injection,
//! the host's own name resolution with the internal-address check on the
//! address actually connected to, the response size limit and redaction.
//! No redirect is followed: a 3xx goes back to the plugin, and a request to
//! its `Location` passes the gate like any other.

mod address;
mod secrets;
mod send;

pub use secrets::{SecretError, SecretStore};
pub use send::web_tls_config;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use http::{HeaderName, HeaderValue, Method};
use tokio::sync::Semaphore;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use crate::audit::{Audit, Event, record};
use crate::manifest::{
    AllowEntry, CredentialDecl, Manifest, NetworkLimits, PluginDecl, PluginName, RiskClass, Scheme,
};
use crate::redact::Redactor;
use send::{HeldBytes, SendError, Target};

/// The host-wide part of the gate: the secret store and the redactor built
/// from every secret the manifest names.
pub struct Network {
    secrets: SecretStore,
    redactor: Arc<Redactor>,
    audit: Option<Audit>,
}

impl Network {
    /// Opens the secret store and builds the redactor. A secret that is
    /// missing is not an error here: only its plugin is refused, at load.
    pub fn new(manifest: &Manifest, audit: Option<Audit>) -> Result<Network, SecretError> {
        let secrets = SecretStore::open(manifest.secrets_file.as_deref())?;
        // Each value, and each header value it is sent in, so that their
        // encodings (say, base64 of `Bearer …`) are caught too.
        let mut known: Vec<(String, zeroize::Zeroizing<String>)> = Vec::new();
        for c in manifest.plugins.iter().flat_map(|p| &p.network.credentials) {
            let Ok(value) = secrets.get(&c.secret) else {
                continue;
            };
            let formatted = zeroize::Zeroizing::new(c.format.replace("{secret}", &value));
            for form in [value, formatted] {
                if !known.iter().any(|(_, v)| *v == form) {
                    known.push((c.secret.as_str().to_string(), form));
                }
            }
        }
        Ok(Network {
            secrets,
            redactor: Arc::new(Redactor::new(&known)),
            audit,
        })
    }

    /// A gate that lets nothing out, for hosts and tests without a manifest.
    pub fn closed() -> Network {
        Network {
            secrets: SecretStore::default(),
            redactor: Arc::new(Redactor::default()),
            audit: None,
        }
    }

    /// Every configured secret, for redacting what leaves the host.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// The gate of one plugin; the error refuses the plugin.
    pub fn gate(&self, decl: &PluginDecl) -> Result<Gate, String> {
        let mut credentials = Vec::with_capacity(decl.network.credentials.len());
        for c in &decl.network.credentials {
            let secret = self.secrets.get(&c.secret)?;
            let mut value =
                HeaderValue::from_str(&c.format.replace("{secret}", &secret)).map_err(|_| {
                    format!(
                        "secret `{}` does not fit in a header value, which takes printable ASCII only",
                        c.secret.as_str()
                    )
                })?;
            value.set_sensitive(true);
            credentials.push(Credential {
                header: HeaderName::from_bytes(c.header.as_bytes())
                    .expect("the manifest checked the header name"),
                value,
                decl: c.clone(),
            });
        }
        let methods = decl
            .tools
            .iter()
            .map(|t| {
                let allowed = match (&t.http_methods, t.risk) {
                    (Some(list), _) => Some(
                        list.iter()
                            .filter_map(|m| Method::from_bytes(m.as_bytes()).ok())
                            .collect(),
                    ),
                    (None, RiskClass::Read) => Some(vec![Method::GET, Method::HEAD]),
                    (None, _) => None,
                };
                (t.name.as_str().to_string(), allowed)
            })
            .collect();
        Ok(Gate {
            plugin: decl.name.clone(),
            allow: decl.network.allow.clone(),
            credentials,
            limits: decl.network.limits,
            methods,
            in_flight: Arc::new(Semaphore::new(decl.network.limits.concurrent as usize)),
            held: HeldBytes::new(
                decl.network.limits.response_bytes * u64::from(decl.network.limits.concurrent),
            ),
            redactor: self.redactor.clone(),
            audit: self.audit.clone(),
        })
    }
}

/// A credential ready to add: the header and its value with the secret in.
struct Credential {
    header: HeaderName,
    /// Marked sensitive, so `Debug` output never shows it.
    value: HeaderValue,
    decl: CredentialDecl,
}

/// One plugin's network policy, shared by all its instances.
pub struct Gate {
    plugin: PluginName,
    allow: Vec<AllowEntry>,
    credentials: Vec<Credential>,
    limits: NetworkLimits,
    /// Methods each tool may use; `None` for any.
    methods: HashMap<String, Option<Vec<Method>>>,
    in_flight: Arc<Semaphore>,
    /// Response bytes its instances hold, at most `concurrent` full responses.
    held: HeldBytes,
    redactor: Arc<Redactor>,
    audit: Option<Audit>,
}

impl Gate {
    /// The host's redactor: for the plugin's results and errors, and its
    /// log lines.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }
}

/// A request the host refused during a call. It replaces the plugin's own
/// error for that call, since the host knows the cause for certain.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// `network_denied`, `busy` or `response_too_large`.
    pub code: &'static str,
    pub detail: String,
    pub retryable: bool,
}

/// The gate as one instance sees it: the hooks wasmtime-wasi-http calls,
/// with the state of the call that is running.
pub struct Egress {
    gate: Arc<Gate>,
    tool: String,
    call: String,
    requests: u32,
    /// Requests past the call's limit refused after the first of them,
    /// recorded together when the call ends ([`Egress::end_call`]).
    unrecorded: u64,
    refusal: Arc<Mutex<Option<Refusal>>>,
}

impl Egress {
    pub fn new(gate: Arc<Gate>) -> Egress {
        Egress {
            gate,
            tool: String::new(),
            call: String::new(),
            requests: 0,
            unrecorded: 0,
            refusal: Arc::default(),
        }
    }

    /// Starts the count and the refusal slot of a new call. Requests still
    /// in flight from an earlier call report to that call's slot.
    pub fn begin_call(&mut self, tool: &str, call: &str) {
        self.end_call();
        self.tool = tool.to_string();
        self.call = call.to_string();
        self.requests = 0;
        self.refusal = Arc::default();
    }

    /// Records, as one refusal, the requests past the limit that were
    /// refused without a record of their own during the call. Also run by
    /// the next [`Egress::begin_call`] and when the instance is dropped, so
    /// a call cut off by its deadline is counted too.
    pub fn end_call(&mut self) {
        if self.unrecorded == 0 {
            return;
        }
        let unrecorded = std::mem::take(&mut self.unrecorded);
        self.attempt(String::new(), String::new(), None).finish(
            "network_denied",
            None,
            None,
            None,
            Some(format!(
                "{unrecorded} more requests past the limit of {} were refused in this call",
                self.gate.limits.requests_per_call
            )),
        );
    }

    /// A request of the current call, as it will be recorded.
    fn attempt(&self, method: String, url: String, allowed_by: Option<String>) -> Attempt {
        Attempt {
            gate: self.gate.clone(),
            tool: self.tool.clone(),
            call: self.call.clone(),
            method,
            url,
            credentials: Vec::new(),
            started: Instant::now(),
            refusal: self.refusal.clone(),
            allowed_by,
        }
    }

    /// The first request the host refused during the current call.
    pub fn refusal(&self) -> Option<Refusal> {
        self.refusal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        self.end_call();
    }
}

/// Longer than any method HTTP has registered (17 bytes).
pub const MAX_METHOD_BYTES: usize = 32;

/// Far longer than any host name (253 bytes) with a port and credentials:
/// a plugin may not set a longer authority on a request it builds.
pub const MAX_AUTHORITY_BYTES: usize = 1_024;

/// The longest URL or refusal detail recorded, logged and told whole. A
/// plugin makes up the path and the host name (wasi:http bounds neither),
/// and a detail names them; a longer text keeps its first 256 bytes and its
/// length.
const MAX_SHOWN_BYTES: usize = 2_048;

fn shown(text: String) -> String {
    if text.len() > MAX_SHOWN_BYTES {
        record::bounded_text(&text)
    } else {
        text
    }
}

/// A method as recorded: cut where it is longer than any real one.
fn shown_method(method: &Method) -> String {
    let method = method.as_str();
    match method.get(..MAX_METHOD_BYTES) {
        Some(start) if method.len() > MAX_METHOD_BYTES => format!("{start}…"),
        _ => method.to_string(),
    }
}

/// What one request looked like, for the audit trail and the log.
struct Attempt {
    gate: Arc<Gate>,
    tool: String,
    call: String,
    method: String,
    url: String,
    credentials: Vec<String>,
    started: Instant,
    refusal: Arc<Mutex<Option<Refusal>>>,
    allowed_by: Option<String>,
}

impl Attempt {
    fn finish(
        &self,
        outcome: &str,
        status: Option<u16>,
        bytes: Option<u64>,
        address: Option<String>,
        detail: Option<String>,
    ) {
        let detail = detail.map(shown);
        match outcome {
            "ok" => {
                tracing::debug!(plugin = %self.gate.plugin, method = %self.method, url = %self.url, ?status, "outbound request")
            }
            _ => {
                tracing::warn!(plugin = %self.gate.plugin, tool = %self.tool, method = %self.method, url = %self.url, outcome, detail = detail.as_deref().unwrap_or(""), "outbound request failed")
            }
        }
        if let Some(audit) = &self.gate.audit {
            audit.record(Event::OutboundRequest {
                plugin: self.gate.plugin.to_string(),
                tool: self.tool.clone(),
                call: self.call.clone(),
                method: self.method.clone(),
                url: self.url.clone(),
                credential: (!self.credentials.is_empty()).then(|| self.credentials.join(",")),
                outcome: outcome.to_string(),
                status,
                bytes,
                address,
                detail,
                duration_us: self
                    .started
                    .elapsed()
                    .as_micros()
                    .try_into()
                    .unwrap_or(u64::MAX),
                allowed_by: self.allowed_by.clone(),
            });
        }
    }

    /// Refuses the request: recorded, kept for the call's error, and
    /// answered to the guest in wasi-http's terms.
    fn refuse(
        &self,
        code: &'static str,
        detail: String,
        retryable: bool,
        wasi: wasmtime_wasi_http::Error,
    ) -> wasmtime_wasi_http::Error {
        let detail = shown(detail);
        self.finish(code, None, None, None, Some(detail.clone()));
        let mut slot = self.refusal.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(Refusal {
            code,
            detail,
            retryable,
        });
        wasi
    }
}

type Sending = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
                ),
                wasmtime_wasi_http::Error,
            >,
        > + Send,
>;

/// The most one write into an outgoing body may carry. A body holds at
/// most two such chunks waiting to be sent (wasmtime-wasi-http's channel
/// keeps one slot free besides its one buffered chunk), so a plugin's
/// unsent bodies hold at most `sandbox::OUTGOING_BODIES` times 128 KiB.
pub const BODY_CHUNK_BYTES: usize = 64 << 10;

impl WasiHttpHooks for Egress {
    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        BODY_CHUNK_BYTES
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }

    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Sending {
        self.requests = self.requests.saturating_add(1);
        let uri = request.uri();
        let scheme = match uri.scheme_str() {
            Some("http") => Some(Scheme::Http),
            Some("https") => Some(Scheme::Https),
            _ => None,
        };
        let host = uri
            .host()
            .map(|h| {
                h.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let port = uri
            .port_u16()
            .or(scheme.map(Scheme::default_port))
            .unwrap_or(0);
        let shown_host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let origin = format!(
            "{}://{shown_host}:{port}",
            scheme.map_or("?", Scheme::as_str)
        );
        let listed = scheme.and_then(|scheme| {
            self.gate
                .allow
                .iter()
                .find(|a| a.destination.matches(scheme, &host, port))
        });
        // The query is left out of the record: it may carry personal data.
        let mut attempt = self.attempt(
            shown_method(request.method()),
            shown(format!("{origin}{}", uri.path())),
            listed.map(|entry| entry.destination.host.to_string()),
        );
        let denied = |attempt: &Attempt, detail: String, body: WasiBody| -> Sending {
            send::drain(body);
            let error = attempt.refuse(
                "network_denied",
                detail,
                false,
                wasmtime_wasi_http::Error::HttpRequestDenied,
            );
            Box::new(async move { Err(error) })
        };

        let gate = &self.gate;
        if self.requests > gate.limits.requests_per_call {
            // Only the first request past the limit gets a record (and a
            // log line) of its own: a guest looping on refused requests
            // would otherwise write the trail as fast as it can loop. The
            // rest are counted into one record when the call ends.
            if self.requests > gate.limits.requests_per_call.saturating_add(1) {
                send::drain(request.into_body());
                self.unrecorded = self.unrecorded.saturating_add(1);
                return Box::new(async { Err(wasmtime_wasi_http::Error::HttpRequestDenied) });
            }
            let detail = format!(
                "the plugin made more than {} requests in one call",
                gate.limits.requests_per_call
            );
            return denied(&attempt, detail, request.into_body());
        }
        // wasi:http lets a guest name any method; its length is the
        // guest's choice, and it goes into the log and the trail.
        if request.method().as_str().len() > MAX_METHOD_BYTES {
            let detail = format!("a method longer than {MAX_METHOD_BYTES} bytes is never sent");
            return denied(&attempt, detail, request.into_body());
        }
        let Some(scheme) = scheme else {
            let detail = format!("{origin} is not an http or https destination");
            return denied(&attempt, detail, request.into_body());
        };
        let authority = request.uri().authority().map_or("", |a| a.as_str());
        let port_text = authority.rsplit_once(']').map_or(authority, |(_, p)| p);
        if authority.contains('@')
            || (port_text.contains(':') && request.uri().port_u16().is_none())
        {
            let detail = format!("the authority {authority:?} has user info or an invalid port");
            return denied(&attempt, detail, request.into_body());
        }
        // Outside a tool call (instantiation, `describe()`) nothing goes out.
        let Some(methods) = gate.methods.get(&self.tool) else {
            let detail = format!(
                "{origin}: plugin `{}` sent a request outside a tool call",
                gate.plugin
            );
            return denied(&attempt, detail, request.into_body());
        };
        // Both echo or tunnel past everything the host checks.
        if request.method() == Method::TRACE || request.method() == Method::CONNECT {
            let detail = format!("{} requests are never sent", request.method());
            return denied(&attempt, detail, request.into_body());
        }
        if let Some(methods) = methods
            && !methods.contains(request.method())
        {
            let detail = format!(
                "tool `{}` may only send {} requests, not {}",
                self.tool,
                methods
                    .iter()
                    .map(Method::as_str)
                    .collect::<Vec<_>>()
                    .join("/"),
                request.method()
            );
            return denied(&attempt, detail, request.into_body());
        }
        let Some(entry) = listed else {
            let detail = format!(
                "{origin} is not in plugin `{}`'s network allow-list",
                gate.plugin
            );
            return denied(&attempt, detail, request.into_body());
        };

        // Bodies come back unencoded and whole, so that redaction sees the
        // bytes the plugin will read.
        let headers = request.headers_mut();
        headers.insert(
            http::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.remove(http::header::RANGE);
        headers.remove(http::header::IF_RANGE);
        // The host's value replaces any header of the same name the
        // plugin set.
        for credential in &gate.credentials {
            let d = &credential.decl.destination;
            if d.matches(scheme, &host, port) && credential.decl.applies_to(&self.tool) {
                request
                    .headers_mut()
                    .insert(credential.header.clone(), credential.value.clone());
                attempt
                    .credentials
                    .push(credential.decl.secret.as_str().to_string());
            }
        }

        let target = Target {
            scheme,
            host,
            port,
            addresses: entry.addresses.clone(),
        };
        let limits = gate.limits;
        let in_flight = gate.in_flight.clone();
        Box::new(async move {
            let Ok(permit) = in_flight.try_acquire_owned() else {
                send::drain(request.into_body());
                return Err(attempt.refuse(
                    "busy",
                    format!(
                        "the plugin already has {} requests in flight",
                        limits.concurrent
                    ),
                    true,
                    wasmtime_wasi_http::Error::ConnectionLimitReached,
                ));
            };
            let sent = tokio::time::timeout(
                limits.timeout,
                send::send(
                    request,
                    &target,
                    limits.response_bytes,
                    &attempt.gate.redactor,
                    &attempt.gate.held,
                    Arc::new(permit),
                ),
            )
            .await;
            match sent {
                Ok(Ok(sent)) => {
                    attempt.finish(
                        "ok",
                        Some(sent.response.status().as_u16()),
                        Some(sent.bytes),
                        Some(sent.connected.to_string()),
                        None,
                    );
                    let done: Box<
                        dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send,
                    > = Box::new(async { Ok(()) });
                    Ok((sent.response, done))
                }
                Ok(Err(SendError::Denied(detail))) => Err(attempt.refuse(
                    "network_denied",
                    detail,
                    false,
                    wasmtime_wasi_http::Error::HttpRequestDenied,
                )),
                Ok(Err(error @ SendError::TooLarge { .. })) => {
                    let wasi = error.to_wasi();
                    Err(attempt.refuse("response_too_large", error.to_string(), false, wasi))
                }
                Ok(Err(error @ SendError::Held { .. })) => {
                    let wasi = error.to_wasi();
                    Err(attempt.refuse("busy", error.to_string(), true, wasi))
                }
                Ok(Err(error)) => {
                    attempt.finish("failed", None, None, None, Some(error.to_string()));
                    Err(error.to_wasi())
                }
                Err(_) => {
                    attempt.finish(
                        "timeout",
                        None,
                        None,
                        None,
                        Some(format!("no complete response within {:?}", limits.timeout)),
                    );
                    Err(wasmtime_wasi_http::Error::HttpResponseTimeout)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A method of the guest's own making is recorded cut, and is one the
    /// gate refuses; a real one is recorded whole.
    #[test]
    fn a_made_up_url_or_detail_is_cut_past_2_kib() {
        let whole = "a".repeat(MAX_SHOWN_BYTES);
        assert_eq!(shown(whole.clone()), whole);
        let long = format!("http://{}.example.com/", "h".repeat(100_000));
        let cut = shown(long.clone());
        assert!(cut.starts_with("http://hhh"), "{cut}");
        assert!(
            cut.ends_with(&format!("[cut: {} bytes]", long.len())),
            "{cut}"
        );
        assert!(cut.len() < 400);
    }

    #[test]
    fn a_method_longer_than_any_real_one_is_cut_in_the_record() {
        let long = Method::from_bytes("X".repeat(4096).as_bytes()).unwrap();
        assert!(long.as_str().len() > MAX_METHOD_BYTES);
        assert_eq!(
            shown_method(&long),
            format!("{}…", "X".repeat(MAX_METHOD_BYTES))
        );
        assert_eq!(shown_method(&Method::DELETE), "DELETE");
        let longest = Method::from_bytes(b"UPDATEREDIRECTREF").unwrap();
        assert_eq!(shown_method(&longest), "UPDATEREDIRECTREF");
    }
}
