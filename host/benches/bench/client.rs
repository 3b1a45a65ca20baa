//! The benchmark's own Streamable HTTP client: one keep-alive HTTP/1.1
//! connection (hyper, `TCP_NODELAY`), request bodies written as strings, and
//! an answer checked by looking for `"isError":false` rather than parsed, so
//! the client costs as little of the shared two cores as it can.

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;

/// Which protocol era the client speaks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25: `initialize` opens a session; calls carry its id.
    Sessions,
    /// 2026-07-28: no session; every request names its version and method.
    Stateless,
}

impl Era {
    pub fn label(self) -> &'static str {
        match self {
            Era::Sessions => "2025-11-25 sessions",
            Era::Stateless => "2026-07-28 stateless",
        }
    }
}

/// A `tools/call` written once: the tool's name and its arguments as JSON.
pub struct Call {
    pub tool: String,
    pub arguments: String,
}

impl Call {
    pub fn new(tool: &str, arguments: serde_json::Value) -> Call {
        Call {
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        }
    }
}

pub struct HttpClient {
    sender: SendRequest<Full<Bytes>>,
    uri: Uri,
    host: HeaderValue,
    era: Era,
    session: Option<HeaderValue>,
    token: Option<HeaderValue>,
    next_id: u64,
}

impl HttpClient {
    /// Connects to `url` (`http://host:port/path`) and, in the sessions era,
    /// opens a session.
    pub async fn connect(url: &str, era: Era, token: Option<&str>) -> HttpClient {
        let uri: Uri = url.parse().expect("an http:// URL");
        let authority = uri.authority().expect("a host and port").clone();
        let tcp = tokio::net::TcpStream::connect(authority.as_str())
            .await
            .expect("the host listens");
        tcp.set_nodelay(true).unwrap();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("an HTTP/1.1 connection");
        tokio::spawn(connection);
        let mut client = HttpClient {
            sender,
            host: HeaderValue::from_str(authority.as_str()).unwrap(),
            uri,
            era,
            session: None,
            token: token.map(|t| HeaderValue::from_str(&format!("Bearer {t}")).unwrap()),
            next_id: 0,
        };
        if era == Era::Sessions {
            client.open_session().await;
        }
        client
    }

    /// Opens a new session on the same connection; the previous one stays
    /// open on the server.
    pub async fn open_session(&mut self) {
        self.session = None;
        let (status, session, body) = self
            .post(
                r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolhost-bench","version":"0"}}}"#.to_string(),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        self.session = Some(session.expect("initialize answered with a session id"));
        let (status, _, body) = self
            .post(
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
                None,
            )
            .await;
        assert_eq!(
            status,
            StatusCode::ACCEPTED,
            "{}",
            String::from_utf8_lossy(&body)
        );
    }

    /// Makes `call` and returns the answer's body (SSE or JSON), which must
    /// be a result with `isError: false` unless `expect_ok` is false.
    pub async fn call(&mut self, call: &Call, expect_ok: bool) -> Bytes {
        self.next_id += 1;
        let id = self.next_id;
        let body = match self.era {
            Era::Sessions => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{}}}}}"#,
                call.tool, call.arguments
            ),
            Era::Stateless => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{}","arguments":{},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#,
                call.tool, call.arguments
            ),
        };
        let (status, _, answer) = self.post(body, Some(&call.tool)).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&answer)
        );
        if expect_ok {
            assert!(
                contains(&answer, br#""isError":false"#),
                "{}",
                String::from_utf8_lossy(&answer)
            );
        }
        answer
    }

    async fn post(
        &mut self,
        body: String,
        tool: Option<&str>,
    ) -> (StatusCode, Option<HeaderValue>, Bytes) {
        let mut request = Request::post(self.uri.clone())
            .header(http::header::HOST, self.host.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        match self.era {
            Era::Sessions => {
                if let Some(session) = &self.session {
                    request = request
                        .header("mcp-session-id", session.clone())
                        .header("mcp-protocol-version", "2025-11-25");
                }
            }
            Era::Stateless => {
                request = request
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", "tools/call");
                if let Some(tool) = tool {
                    request = request.header("mcp-name", tool);
                }
            }
        }
        if let Some(token) = &self.token {
            request = request.header(http::header::AUTHORIZATION, token.clone());
        }
        let request = request.body(Full::new(Bytes::from(body))).unwrap();
        self.sender.ready().await.expect("the connection is open");
        let response = self
            .sender
            .send_request(request)
            .await
            .expect("an HTTP answer");
        let status = response.status();
        let session = response.headers().get("mcp-session-id").cloned();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("the whole body")
            .to_bytes();
        (status, session, body)
    }
}

/// Whether `needle` occurs in `haystack`, searched from the end, where
/// `isError` is.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).rev().any(|w| w == needle)
}
