//! A small blocking HTTP client over `wasi:http/outgoing-handler`.
//!
//! The host sends every request itself: it decides which destinations a
//! plugin may reach, adds credentials the plugin never sees, and enforces
//! timeouts and size limits. This module only turns plain Rust values into
//! the WASI resources and back, and sorts the host's error codes into the
//! few cases a plugin can act on ([`Error`]).
//!
//! ```no_run
//! use toolhost_sdk::http;
//!
//! fn search() -> Result<Option<String>, http::Error> {
//!     let response = http::get("http://127.0.0.1:8788/contacts?q=berg")?;
//!     Ok((response.status == 200).then(|| response.text()))
//! }
//! ```

use std::fmt;
use wasip2::http::{outgoing_handler, types};
use wasip2::io::streams::{OutputStream, StreamError};

/// `blocking-write-and-flush` accepts at most this many bytes per call.
const WRITE_CHUNK: usize = 4096;

/// How much of the response body to ask for per read; the host may hand
/// back less.
const READ_CHUNK: u64 = 64 * 1024;

/// The request methods a plugin may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`: reads a resource; sends no body.
    Get,
    /// `HEAD`: like `GET`, but the response has no body.
    Head,
    /// `POST`: creates a resource or runs an action.
    Post,
    /// `PUT`: replaces a resource.
    Put,
    /// `PATCH`: changes part of a resource.
    Patch,
    /// `DELETE`: removes a resource.
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    fn to_wasi(self) -> types::Method {
        match self {
            Method::Get => types::Method::Get,
            Method::Head => types::Method::Head,
            Method::Post => types::Method::Post,
            Method::Put => types::Method::Put,
            Method::Patch => types::Method::Patch,
            Method::Delete => types::Method::Delete,
        }
    }
}

/// One HTTP request, as the plugin wants it sent.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request method.
    pub method: Method,
    /// Absolute `http://` or `https://` URL: `scheme://host[:port][/path][?query]`.
    /// Any fragment is dropped; characters outside visible ASCII must be
    /// percent-encoded by the caller.
    pub url: String,
    /// Request headers in order; a name may repeat. The host refuses some
    /// names (such as `host` or `connection`), and may add or replace others.
    pub headers: Vec<(String, String)>,
    /// The request body, if any. `GET` and `HEAD` requests cannot carry one.
    /// When there is a body and no `content-length` header, one is added.
    pub body: Option<Vec<u8>>,
}

/// A complete HTTP response: the whole body is read before [`send`] returns.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code, e.g. 200.
    pub status: u16,
    /// Response headers in the order received. Names are as the host reports
    /// them (lower case); values that are not UTF-8 are converted lossily.
    pub headers: Vec<(String, String)>,
    /// The response body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text; invalid UTF-8 sequences become U+FFFD.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of header `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request produced no response.
#[derive(Debug)]
pub enum Error {
    /// The host refused to send the request to this destination: the
    /// manifest does not allow it.
    Denied,
    /// Connecting, the DNS lookup, or waiting for the response took longer
    /// than the host allows.
    Timeout,
    /// The response (its headers or its body) is larger than the host allows.
    TooLarge,
    /// The host refused this request header (forbidden or syntactically
    /// invalid); holds the header's name.
    HeaderRefused(String),
    /// The URL cannot be sent; holds what is wrong with it.
    InvalidUrl(String),
    /// Any other failure, described by the host's error code.
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Denied => {
                f.write_str("the host refused to send the request to this destination")
            }
            Error::Timeout => f.write_str("the request timed out"),
            Error::TooLarge => f.write_str("the response is larger than the host allows"),
            Error::HeaderRefused(name) => write!(f, "the host refused the request header `{name}`"),
            Error::InvalidUrl(why) => write!(f, "invalid URL: {why}"),
            Error::Failed(why) => write!(f, "the request failed: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    fn from_code(code: types::ErrorCode) -> Error {
        use types::ErrorCode as C;
        match code {
            C::HttpRequestDenied => Error::Denied,
            C::ConnectionTimeout
            | C::ConnectionReadTimeout
            | C::ConnectionWriteTimeout
            | C::HttpResponseTimeout
            | C::DnsTimeout => Error::Timeout,
            C::HttpResponseBodySize(_)
            | C::HttpResponseHeaderSectionSize(_)
            | C::HttpResponseHeaderSize(_) => Error::TooLarge,
            other => Error::Failed(format!("{other:?}")),
        }
    }

    /// A stream error carries a `wasi:io` error, which may or may not wrap an
    /// HTTP error code; only the code says e.g. that the body hit a limit.
    fn from_stream(error: StreamError, closed: &str) -> Error {
        match error {
            StreamError::Closed => Error::Failed(closed.to_string()),
            StreamError::LastOperationFailed(e) => match types::http_error_code(&e) {
                Some(code) => Error::from_code(code),
                None => Error::Failed(e.to_debug_string()),
            },
        }
    }
}

/// Sends `request` through the host and waits for the whole response.
///
/// Any status code, including 4xx and 5xx, is a [`Response`]; redirects are
/// not followed. Blocks the plugin until the response is complete or the
/// host gives up.
pub fn send(request: &Request) -> Result<Response, Error> {
    let target = Target::parse(&request.url)?;
    let body = match (&request.body, request.method) {
        (None, _) => None,
        (Some(_), Method::Get | Method::Head) => {
            return Err(Error::Failed(format!(
                "a {} request cannot carry a body",
                request.method.as_str()
            )));
        }
        (Some(bytes), _) => Some(bytes.as_slice()),
    };

    let outgoing = types::OutgoingRequest::new(fields(&request.headers, body.map(<[u8]>::len))?);
    outgoing
        .set_method(&request.method.to_wasi())
        .map_err(|()| {
            Error::Failed(format!(
                "the host refused the method {}",
                request.method.as_str()
            ))
        })?;
    outgoing
        .set_scheme(Some(&target.scheme))
        .map_err(|()| Error::InvalidUrl("the host refused the scheme".into()))?;
    outgoing
        .set_authority(Some(&target.authority))
        .map_err(|()| {
            Error::InvalidUrl(format!(
                "the host refused the authority {}",
                target.authority
            ))
        })?;
    outgoing
        .set_path_with_query(Some(&target.path_with_query))
        .map_err(|()| {
            Error::InvalidUrl(format!(
                "the host refused the path {}",
                target.path_with_query
            ))
        })?;

    // A body resource is taken only when there are bytes to send: an empty
    // body opened for a GET races with the host's HTTP client and makes the
    // request fail now and then. It must be taken before `handle`, which
    // consumes the request, and written after, when the host reads it.
    let outgoing_body = match body {
        Some(_) => Some(
            outgoing
                .body()
                .map_err(|()| Error::Failed("the request body was already taken".into()))?,
        ),
        None => None,
    };

    // No timeouts of our own: the host enforces its limits on every request.
    let options = types::RequestOptions::new();
    let pending = outgoing_handler::handle(outgoing, Some(options)).map_err(Error::from_code)?;

    let sent = match (outgoing_body, body) {
        (Some(outgoing_body), Some(bytes)) => write_body(outgoing_body, bytes),
        _ => Ok(()),
    };
    let received = receive(&pending);
    // When the body could not be written, the response usually says why
    // (denied, timed out), which is more useful than "stream closed".
    match (sent, received) {
        (_, Err(e)) => Err(e),
        (Err(e), Ok(_)) => Err(e),
        (Ok(()), Ok(response)) => Ok(response),
    }
}

/// Sends a `GET` to `url` with no headers of its own.
pub fn get(url: &str) -> Result<Response, Error> {
    send(&Request {
        method: Method::Get,
        url: url.to_string(),
        headers: Vec::new(),
        body: None,
    })
}

fn fields(headers: &[(String, String)], body_len: Option<usize>) -> Result<types::Fields, Error> {
    let fields = types::Fields::new();
    for (name, value) in headers {
        append(&fields, name, value)?;
    }
    // Without a length the host streams the body chunked, which some
    // servers refuse.
    if let Some(len) = body_len
        && !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("content-length"))
    {
        append(&fields, "content-length", &len.to_string())?;
    }
    Ok(fields)
}

fn append(fields: &types::Fields, name: &str, value: &str) -> Result<(), Error> {
    fields.append(name, value.as_bytes()).map_err(|e| match e {
        types::HeaderError::Forbidden | types::HeaderError::InvalidSyntax => {
            Error::HeaderRefused(name.to_string())
        }
        types::HeaderError::Immutable => Error::Failed(format!("cannot set header {name}: {e:?}")),
    })
}

/// Writes `bytes` and finishes the body. On failure the body is dropped
/// unfinished, which tells the host the request is incomplete.
fn write_body(body: types::OutgoingBody, bytes: &[u8]) -> Result<(), Error> {
    let stream = body
        .write()
        .map_err(|()| Error::Failed("the request body stream was already taken".into()))?;
    let written = write_all(&stream, bytes);
    // The stream is a child of the body and must go before the body does.
    drop(stream);
    written?;
    types::OutgoingBody::finish(body, None).map_err(Error::from_code)
}

fn write_all(stream: &OutputStream, bytes: &[u8]) -> Result<(), Error> {
    for chunk in bytes.chunks(WRITE_CHUNK) {
        // Waits for the host to accept the bytes (check-write) and flushes.
        stream
            .blocking_write_and_flush(chunk)
            .map_err(|e| Error::from_stream(e, "the host closed the request body early"))?;
    }
    Ok(())
}

fn receive(pending: &types::FutureIncomingResponse) -> Result<Response, Error> {
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(Error::from_code(code)),
        Some(Err(())) => return Err(Error::Failed("the response was already taken".into())),
        None => return Err(Error::Failed("no response after waiting for it".into())),
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    let body = read_body(&response)?;
    Ok(Response {
        status,
        headers,
        body,
    })
}

fn read_body(response: &types::IncomingResponse) -> Result<Vec<u8>, Error> {
    let body = response
        .consume()
        .map_err(|()| Error::Failed("the response body was already taken".into()))?;
    let stream = body
        .stream()
        .map_err(|()| Error::Failed("the response body stream was already taken".into()))?;
    let mut bytes = Vec::new();
    let outcome = loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break Ok(bytes),
            Err(e) => break Err(Error::from_stream(e, "the response body closed early")),
        }
    };
    // Child before parent: the host traps on a body dropped while its stream
    // is alive. Trailers are of no interest, so the body is not finished.
    drop(stream);
    drop(body);
    outcome
}

/// The parts of a URL that `wasi:http` takes separately.
struct Target {
    scheme: types::Scheme,
    authority: String,
    path_with_query: String,
}

impl Target {
    fn parse(url: &str) -> Result<Target, Error> {
        let invalid = |why: &str| Error::InvalidUrl(format!("{why} (in {url:?})"));
        if url.bytes().any(|b| !(0x21..=0x7e).contains(&b)) {
            return Err(invalid(
                "only visible ASCII characters are allowed; percent-encode the others",
            ));
        }
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("the URL has no scheme"))?;
        let scheme = if scheme.eq_ignore_ascii_case("http") {
            types::Scheme::Http
        } else if scheme.eq_ignore_ascii_case("https") {
            types::Scheme::Https
        } else {
            return Err(invalid("the scheme must be http or https"));
        };
        // Fragments are for the client only and never sent.
        let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
        let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
        check_authority(authority).map_err(invalid)?;
        let path_with_query = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        Ok(Target {
            scheme,
            authority: authority.to_string(),
            path_with_query,
        })
    }
}

/// Accepts `host`, `host:port`, `[ipv6]` and `[ipv6]:port`.
fn check_authority(authority: &str) -> Result<(), &'static str> {
    if authority.contains('@') {
        // Credentials come from the host, never from the plugin's URL.
        return Err("user info in the URL is not supported");
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (address, after) = bracketed
            .split_once(']')
            .ok_or("the IPv6 address has no closing bracket")?;
        if address.is_empty()
            || !address
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err("the IPv6 address is invalid");
        }
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or("unexpected text after the IPv6 address")?,
            ),
        };
        (address, port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            return Err("the host name contains invalid characters");
        }
        (host, port)
    };
    if host.is_empty() {
        return Err("the URL has no host");
    }
    if let Some(port) = port
        && !(port.bytes().all(|b| b.is_ascii_digit()) && port.parse::<u16>().is_ok_and(|p| p != 0))
    {
        return Err("the port must be a number from 1 to 65535");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, String) {
        let t = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        (t.authority, t.path_with_query)
    }

    #[test]
    fn splits_urls() {
        assert_eq!(parts("http://a.example"), ("a.example".into(), "/".into()));
        assert_eq!(
            parts("https://a.example:8443/x/y?q=1#frag"),
            ("a.example:8443".into(), "/x/y?q=1".into())
        );
        assert_eq!(parts("http://h?q=1"), ("h".into(), "/?q=1".into()));
        assert_eq!(parts("HTTP://[::1]:80/p"), ("[::1]:80".into(), "/p".into()));
    }

    #[test]
    fn refuses_bad_urls() {
        for url in [
            "ftp://a.example/",
            "a.example/x",
            "http://",
            "http:///x",
            "http://user:pw@a.example/",
            "http://a.example:0/",
            "http://a.example:99999/",
            "http://a.example:/",
            "http://a.example/with space",
            "http://[::1/",
            "http://a b/",
        ] {
            assert!(
                matches!(Target::parse(url), Err(Error::InvalidUrl(_))),
                "{url} passed"
            );
        }
    }
}
