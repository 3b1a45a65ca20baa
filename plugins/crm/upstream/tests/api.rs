//! The CRM API over real TCP, with a hand-written HTTP/1.1 client so the
//! tests see exactly the bytes on the wire (status, headers, framing).

use crm_upstream::{Config, SeenRequest, Upstream};
use serde_json::{Value, json};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const TOKEN: &str = "test-token-7f3a";

async fn start(test_routes: bool) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    Upstream::start(
        listener,
        Config {
            token: TOKEN.into(),
            test_routes,
        },
    )
    .await
    .unwrap()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// Sends one request on a fresh connection and reads the reply to EOF.
async fn send(
    addr: SocketAddr,
    method: &str,
    target: &str,
    extra: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut head = format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body.unwrap_or_default());

    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse(&raw)
}

fn parse(raw: &[u8]) -> Reply {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("no end of headers");
    let head = std::str::from_utf8(&raw[..split]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    let mut reply = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    let rest = &raw[split + 4..];
    reply.body = if reply.header("transfer-encoding") == Some("chunked") {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    reply
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size_line = std::str::from_utf8(&rest[..end]).unwrap();
        let size = usize::from_str_radix(size_line.split(';').next().unwrap().trim(), 16).unwrap();
        rest = &rest[end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

async fn authed(addr: SocketAddr, method: &str, target: &str, body: Option<&str>) -> Reply {
    send(addr, method, target, &[("Authorization", &bearer())], body).await
}

#[tokio::test]
async fn contacts_need_the_exact_bearer_token() {
    let upstream = start(false).await;
    let addr = upstream.addr();
    for auth in [
        None,
        Some("Bearer wrong"),
        Some(TOKEN),
        Some("bearer test-token-7f3a "),
    ] {
        let extra: Vec<(&str, &str)> = auth.iter().map(|a| ("Authorization", *a)).collect();
        for (method, target) in [
            ("GET", "/contacts?q=berg"),
            ("GET", "/contacts/c_1001"),
            ("DELETE", "/contacts/c_1001"),
            ("GET", "/contacts/no/such/route"),
        ] {
            let reply = send(addr, method, target, &extra, None).await;
            assert_eq!(reply.status, 401, "{method} {target} with {auth:?}");
            assert_eq!(reply.json()["error"], "unauthorized");
            assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        }
    }
    // Nothing was deleted by the refused requests.
    assert_eq!(
        authed(addr, "GET", "/contacts/c_1001", None).await.status,
        200
    );
}

#[tokio::test]
async fn search_matches_names_and_emails() {
    let upstream = start(false).await;
    let addr = upstream.addr();

    let reply = authed(addr, "GET", "/contacts?q=BERGER", None).await;
    assert_eq!(reply.status, 200);
    let names: Vec<String> = reply.json()["contacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["Jonas Berger", "Lea Berger"]);
    assert_eq!(reply.json()["truncated"], false);

    let reply = authed(addr, "GET", "/contacts?q=berg&limit=2", None).await;
    assert_eq!(reply.json()["contacts"].as_array().unwrap().len(), 2);
    assert_eq!(reply.json()["truncated"], true);

    let reply = authed(addr, "GET", "/contacts?q=mensah-logistics", None).await;
    assert_eq!(reply.json()["contacts"][0]["id"], "c_1006");

    let reply = authed(addr, "GET", "/contacts?q=El%20Idrissi", None).await;
    assert_eq!(reply.json()["contacts"][0]["id"], "c_1012");

    let reply = authed(addr, "GET", "/contacts?q=nobody-at-all", None).await;
    assert_eq!(reply.json(), json!({ "contacts": [], "truncated": false }));

    let long = "x".repeat(101);
    for target in [
        "/contacts".to_string(),
        "/contacts?q=".to_string(),
        "/contacts?q=%20%20".to_string(),
        format!("/contacts?q={long}"),
        "/contacts?q=a&limit=0".to_string(),
        "/contacts?q=a&limit=51".to_string(),
        "/contacts?q=a&limit=ten".to_string(),
    ] {
        let reply = authed(addr, "GET", &target, None).await;
        assert_eq!(reply.status, 400, "{target}");
        assert_eq!(reply.json()["error"], "invalid_query", "{target}");
    }
}

#[tokio::test]
async fn patch_changes_only_the_given_fields() {
    let upstream = start(false).await;
    let addr = upstream.addr();
    let before = authed(addr, "GET", "/contacts/c_1002", None).await.json();

    let reply = authed(
        addr,
        "PATCH",
        "/contacts/c_1002",
        Some(r#"{"address":"1 New Road, Eastbrook 20312","phone":"+1 206 555 0199"}"#),
    )
    .await;
    assert_eq!(reply.status, 200);
    let after = authed(addr, "GET", "/contacts/c_1002", None).await.json();
    assert_eq!(reply.json(), after);
    assert_eq!(after["address"], "1 New Road, Eastbrook 20312");
    assert_eq!(after["phone"], "+1 206 555 0199");
    assert_eq!(after["email"], before["email"]);
    assert_eq!(after["name"], before["name"]);

    for body in [
        "{}",
        r#"{"name":"Someone Else"}"#,
        r#"{"email":"no-at-sign"}"#,
        r#"{"phone":17}"#,
        "not json",
    ] {
        let reply = authed(addr, "PATCH", "/contacts/c_1002", Some(body)).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.json()["error"], "invalid_body", "{body}");
    }
    let reply = authed(addr, "PATCH", "/contacts/c_9999", Some(r#"{"phone":"1"}"#)).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"], "not_found");
}

#[tokio::test]
async fn deleted_contacts_are_gone() {
    let upstream = start(false).await;
    let addr = upstream.addr();
    let reply = authed(addr, "DELETE", "/contacts/c_1005", None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json(), json!({ "deleted": "c_1005" }));
    for method in ["GET", "DELETE"] {
        let reply = authed(addr, method, "/contacts/c_1005", None).await;
        assert_eq!(reply.status, 404, "{method}");
        assert_eq!(reply.json()["error"], "not_found");
    }
    let reply = authed(addr, "GET", "/contacts?q=priya", None).await;
    assert_eq!(reply.json()["contacts"], json!([]));
}

#[tokio::test]
async fn records_every_request_with_its_authorization() {
    let upstream = start(false).await;
    let addr = upstream.addr();
    send(addr, "GET", "/contacts?q=lea", &[], None).await;
    authed(addr, "GET", "/contacts?q=lea", None).await;
    authed(addr, "POST", "/nowhere", None).await;
    let seen = |method: &str, path: &str, authorization: Option<String>| SeenRequest {
        method: method.into(),
        path: path.into(),
        authorization,
    };
    assert_eq!(
        upstream.requests(),
        [
            seen("GET", "/contacts?q=lea", None),
            seen("GET", "/contacts?q=lea", Some(bearer())),
            seen("POST", "/nowhere", Some(bearer())),
        ]
    );
}

#[tokio::test]
async fn test_routes_exist_only_when_asked_for() {
    let plain = start(false).await;
    let reply = send(plain.addr(), "GET", "/echo/headers", &[], None).await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"], "not_found");

    let upstream = start(true).await;
    let addr = upstream.addr();

    let reply = send(
        addr,
        "GET",
        "/echo/headers",
        &[("Authorization", "Bearer secret"), ("X-Probe", "1")],
        None,
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["authorization"], "Bearer secret");
    assert_eq!(reply.json()["x-probe"], "1");

    let reply = send(
        addr,
        "GET",
        "/redirect?to=http%3A%2F%2F10.0.0.1%2Fadmin",
        &[],
        None,
    )
    .await;
    assert_eq!(reply.status, 302);
    assert_eq!(reply.header("location"), Some("http://10.0.0.1/admin"));

    let reply = send(addr, "GET", "/big?bytes=1000", &[], None).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), Some("1000"));
    assert_eq!(reply.body, vec![b'a'; 1000]);

    let size = 3 * 64 * 1024 + 17;
    let reply = send(
        addr,
        "GET",
        &format!("/big-chunked?bytes={size}"),
        &[],
        None,
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-length"), None);
    assert_eq!(reply.header("transfer-encoding"), Some("chunked"));
    assert_eq!(reply.body, vec![b'a'; size]);

    let reply = send(addr, "GET", "/big?bytes=lots", &[], None).await;
    assert_eq!(reply.status, 400);
}

#[tokio::test]
async fn refuses_an_unusable_token() {
    for token in ["", "has space"] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let config = Config {
            token: token.into(),
            test_routes: false,
        };
        assert!(
            Upstream::start(listener, config).await.is_err(),
            "{token:?}"
        );
    }
}
