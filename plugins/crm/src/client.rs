//! Calls to the CRM's HTTP API, and what its failures mean for the model.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolhost_sdk::ToolError;
use toolhost_sdk::http::{self, Method, Request};
use toolhost_sdk::log::{self, Level};

/// Longest upstream error text passed on to the model.
const MAX_UPSTREAM_MESSAGE: usize = 300;

/// A contact as the CRM returns it.
// Fields the CRM may add later are dropped, so results always match the
// output schema.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Contact {
    id: String,
    name: String,
    email: String,
    phone: String,
    address: String,
}

/// The contacts that matched, and whether more did.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct SearchResult {
    contacts: Vec<Contact>,
    truncated: bool,
}

/// The id of the contact that was deleted.
#[derive(Deserialize, Serialize, JsonSchema)]
pub struct Deleted {
    deleted: String,
}

/// The CRM's error body.
#[derive(Deserialize)]
struct UpstreamError {
    message: Option<String>,
}

/// The CRM at one base URL.
pub struct Client {
    base: String,
}

impl Client {
    /// A client for the CRM at `base` (no trailing slash).
    pub fn new(base: String) -> Client {
        Client { base }
    }

    /// `GET /contacts?q=&limit=`.
    pub fn search(&self, query: &str, limit: u32) -> Result<SearchResult, ToolError> {
        let path = format!("/contacts?q={}&limit={limit}", encode(query));
        self.call::<SearchResult>("crm_contact_search", Method::Get, &path, None, None)
    }

    /// `GET /contacts/{id}`.
    pub fn get(&self, id: &str) -> Result<Contact, ToolError> {
        let path = format!("/contacts/{}", encode(id));
        self.call::<Contact>("crm_contact_get", Method::Get, &path, Some(id), None)
    }

    /// `PATCH /contacts/{id}` with only the fields given.
    pub fn update(
        &self,
        id: &str,
        address: Option<String>,
        phone: Option<String>,
        email: Option<String>,
    ) -> Result<Contact, ToolError> {
        let mut body = Map::new();
        for (name, value) in [("address", address), ("phone", phone), ("email", email)] {
            if let Some(value) = value {
                body.insert(name.into(), Value::String(value));
            }
        }
        let path = format!("/contacts/{}", encode(id));
        let body = Value::Object(body).to_string().into_bytes();
        self.call::<Contact>(
            "crm_contact_update",
            Method::Patch,
            &path,
            Some(id),
            Some(body),
        )
    }

    /// `DELETE /contacts/{id}`.
    pub fn delete(&self, id: &str) -> Result<Deleted, ToolError> {
        let path = format!("/contacts/{}", encode(id));
        self.call::<Deleted>("crm_contact_delete", Method::Delete, &path, Some(id), None)
    }

    /// Sends one request and reads a `T` from a 2xx answer. `id` is the
    /// contact the call is about, if any: a 404 then means that contact is
    /// missing rather than the CRM being misconfigured.
    fn call<T: DeserializeOwned>(
        &self,
        tool: &str,
        method: Method,
        path: &str,
        id: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Result<T, ToolError> {
        let mut headers = vec![("accept".to_string(), "application/json".to_string())];
        if body.is_some() {
            headers.push(("content-type".into(), "application/json".into()));
        }
        let request = Request {
            method,
            url: format!("{}{path}", self.base),
            headers,
            body,
        };
        let response = http::send(&request).map_err(|e| self.network_error(tool, e))?;
        let status = response.status;
        if !(200..300).contains(&status) {
            // The status alone: bodies and URLs may carry personal data.
            log::write(
                Level::Warn,
                &format!("{tool}: the CRM answered HTTP {status}"),
            );
            return Err(status_error(status, &response.body, id));
        }
        let parsed: T = serde_json::from_slice(&response.body).map_err(|e| {
            log::write(
                Level::Error,
                &format!("{tool}: unreadable answer from the CRM: {e}"),
            );
            upstream_error(
                format!("The CRM's answer could not be read ({e}). Tell the operator."),
                false,
            )
        })?;
        Ok(parsed)
    }

    fn network_error(&self, tool: &str, error: http::Error) -> ToolError {
        let (kind, tool_error) = match error {
            http::Error::Denied => (
                "denied",
                ToolError {
                    code: "network_denied".into(),
                    message: format!(
                        "The host refused to let the crm plugin reach the CRM at {}. Ask the \
                         operator to allow this destination; retrying will not help.",
                        self.base
                    ),
                    retryable: false,
                },
            ),
            http::Error::Timeout => (
                "timeout",
                upstream_error(
                    "The CRM did not answer in time. Try again shortly.".into(),
                    true,
                ),
            ),
            http::Error::TooLarge => (
                "too large",
                upstream_error(
                    "The CRM's answer was larger than the host allows. For a search, try a \
                     smaller limit or more specific text."
                        .into(),
                    false,
                ),
            ),
            http::Error::InvalidUrl(why) => (
                "invalid url",
                ToolError {
                    code: "config_invalid".into(),
                    message: format!(
                        "The crm plugin's base_url is not a usable http(s) URL ({why}). Stop and \
                         tell the operator."
                    ),
                    retryable: false,
                },
            ),
            e @ http::Error::HeaderRefused(_) => (
                "header refused",
                upstream_error(format!("{e}. Tell the operator."), false),
            ),
            http::Error::Failed(why) => (
                "failed",
                upstream_error(
                    format!(
                        "The CRM could not be reached ({why}). Try again later; if it keeps \
                         failing, tell the operator."
                    ),
                    true,
                ),
            ),
        };
        log::write(Level::Warn, &format!("{tool}: request to the CRM {kind}"));
        tool_error
    }
}

fn upstream_error(message: String, retryable: bool) -> ToolError {
    ToolError {
        code: "upstream_error".into(),
        message,
        retryable,
    }
}

/// Turns a non-2xx answer into what the model can do about it.
fn status_error(status: u16, body: &[u8], id: Option<&str>) -> ToolError {
    match (status, id) {
        (404, Some(id)) => ToolError {
            code: "not_found".into(),
            message: format!(
                "The CRM has no contact {id}. Use crm_contact_search to find the contact's id."
            ),
            retryable: false,
        },
        (401 | 403, _) => upstream_error(
            "The CRM rejected the host's credential for it. Stop and tell the operator; \
             retrying will not help."
                .into(),
            false,
        ),
        (400..=499, _) => upstream_error(
            format!(
                "The CRM refused the request: {}",
                upstream_message(status, body)
            ),
            false,
        ),
        (500..=599, _) => upstream_error(
            format!(
                "The CRM failed ({}). Try again later.",
                upstream_message(status, body)
            ),
            true,
        ),
        _ => upstream_error(
            format!("The CRM gave an unexpected answer (HTTP {status})."),
            false,
        ),
    }
}

/// The CRM's own explanation, shortened, or the bare status.
fn upstream_message(status: u16, body: &[u8]) -> String {
    let message = serde_json::from_slice::<UpstreamError>(body)
        .ok()
        .and_then(|e| e.message)
        .filter(|m| !m.trim().is_empty());
    match message {
        Some(m) if m.chars().count() > MAX_UPSTREAM_MESSAGE => {
            let cut: String = m.chars().take(MAX_UPSTREAM_MESSAGE).collect();
            format!("{cut}… (HTTP {status})")
        }
        Some(m) => format!("{m} (HTTP {status})"),
        None => format!("HTTP {status}"),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so any
/// text is safe in a path segment or a query value.
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_all_but_unreserved() {
        assert_eq!(encode("Lea Berger"), "Lea%20Berger");
        assert_eq!(encode("a&b=c/d?#+%"), "a%26b%3Dc%2Fd%3F%23%2B%25");
        assert_eq!(encode("Krüger"), "Kr%C3%BCger");
        assert_eq!(encode("c_1001-x.y~"), "c_1001-x.y~");
    }
}
