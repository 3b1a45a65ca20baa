//! Signing in and out, who is signed in, and what guards a POST: the
//! sign-in's CSRF token, the console's own origin, and a limit on failed
//! sign-ins per name and per address.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, FromRequestParts, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{Console, Shared, layout, peer, see_other, store_failed};
use crate::audit::Event;
use crate::operator::accounts::verify_password;
use crate::store::{Role, SignIn, SignInLimits};

/// A sign-in ends after this long without a request, and after `MAX` in
/// any case.
pub const LIMITS: SignInLimits = SignInLimits {
    idle_secs: 30 * 60,
    max_secs: 12 * 3600,
};
/// Password checks running at once.
static HASHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// Failed sign-ins allowed per name, and per address, in [`WINDOW`].
const NAME_FAILURES: usize = 5;
const ADDRESS_FAILURES: usize = 20;
const WINDOW: Duration = Duration::from_secs(15 * 60);

/// The cookie's name: with `__Host-` (which browsers accept only from a
/// secure origin, for the whole host) when served over TLS.
fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-toolhost_console"
    } else {
        "toolhost_console"
    }
}

/// Recent failed sign-ins, per name (from one address) and per address.
/// Kept in this process: behind a load balancer each replica counts its
/// own, so the limit is that many times the replicas (said in
/// docs/console.md).
#[derive(Default)]
pub struct Limiter {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
    /// Keys whose refusal was recorded in this window: one record each, so
    /// a flood of refused tries cannot fill the trail.
    recorded: Mutex<HashMap<String, Instant>>,
}

impl Limiter {
    fn keys(name: &str, address: &str) -> [String; 2] {
        [format!("name:{address}:{name}"), format!("addr:{address}")]
    }

    /// Takes a try for `name` from `address`, counted as a failure until
    /// [`Limiter::succeeded`] says otherwise, so parallel tries cannot pass
    /// the limit before the first of them has been counted. `false`: too
    /// many lately.
    fn take(&self, name: &str, address: &str) -> bool {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Forget keys nobody has failed with lately, so the map stays small.
        failures.retain(|_, times| {
            times.retain(|t| now.duration_since(*t) < WINDOW);
            !times.is_empty()
        });
        let [by_name, by_address] = Limiter::keys(name, address);
        let count = |key: &str| failures.get(key).map_or(0, Vec::len);
        if count(&by_name) >= NAME_FAILURES || count(&by_address) >= ADDRESS_FAILURES {
            return false;
        }
        for key in [by_name, by_address] {
            failures.entry(key).or_default().push(now);
        }
        true
    }

    /// The try was right: it does not count, and the name starts afresh.
    fn succeeded(&self, name: &str, address: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let [by_name, by_address] = Limiter::keys(name, address);
        failures.remove(&by_name);
        if let Some(times) = failures.get_mut(&by_address) {
            times.pop();
        }
    }

    /// Whether a refusal for being over the limit should be recorded now:
    /// once per window for the limit that refused it. An address over its
    /// limit is recorded once whatever names it goes on trying, or each
    /// made-up name would be a record (and an entry here) of its own.
    fn record_refusal(&self, name: &str, address: &str) -> bool {
        let [by_name, by_address] = Limiter::keys(name, address);
        let address_over = {
            let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            failures.get(&by_address).map_or(0, Vec::len) >= ADDRESS_FAILURES
        };
        let key = if address_over { by_address } else { by_name };
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        recorded.retain(|_, at| at.elapsed() < WINDOW);
        recorded.insert(key, Instant::now()).is_none()
    }
}

/// The signed-in operator of a request. Extracting it fails with a
/// redirect to the sign-in page (for a page) or a 401.
pub struct Operator(pub SignIn, [u8; 32]);

impl Operator {
    pub fn name(&self) -> &str {
        &self.0.operator
    }

    pub fn is_admin(&self) -> bool {
        self.0.role == Role::Admin
    }

    /// The SHA-256 of the sign-in's cookie, which finds it in the store.
    pub fn cookie_sha256(&self) -> &[u8; 32] {
        &self.1
    }

    /// The sign-in's CSRF token, put in every form.
    pub fn csrf(&self) -> &str {
        &self.0.csrf
    }
}

fn cookie_value<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn cookie_hash(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

impl FromRequestParts<Arc<Console>> for Operator {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        console: &Arc<Console>,
    ) -> Result<Operator, Response> {
        let not_signed_in = || {
            if parts.method == axum::http::Method::GET && !is_fragment(parts) {
                // Back to the page asked for (an approval's link) after.
                match return_path(parts.uri.path()) {
                    Some(path) if path != "/" => see_other(&format!("/signin?next={path}")),
                    _ => see_other("/signin"),
                }
            } else {
                layout::message(
                    StatusCode::UNAUTHORIZED,
                    "Sign in first",
                    "Your sign-in has ended; sign in again.",
                )
            }
        };
        let Some(value) = cookie_value(&parts.headers, cookie_name(console.secure())) else {
            return Err(not_signed_in());
        };
        match console
            .host
            .store
            .sign_in(&cookie_hash(value), LIMITS)
            .await
        {
            Ok(Some(sign_in)) => Ok(Operator(sign_in, cookie_hash(value))),
            Ok(None) => Err(not_signed_in()),
            Err(e) => Err(store_failed(e)),
        }
    }
}

/// A request for part of a page, made by the console's script.
fn is_fragment(parts: &Parts) -> bool {
    parts.uri.query().is_some_and(|q| q.contains("fragment="))
}

/// Whether a state-changing request comes from the console's own pages.
/// A browser that sends `Sec-Fetch-Site` (every current one) is believed:
/// only `same-origin` passes. Without it, an `Origin` header must be the
/// console's own; a request with neither comes from no browser page.
/// `SameSite=Strict` keeps the cookie off cross-site requests as well; this
/// also refuses same-site ones from another port or subdomain.
pub fn same_origin(console: &Console, headers: &HeaderMap) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site") {
        return site == "same-origin";
    }
    let Some(origin) = header("origin") else {
        return true;
    };
    let own = |url: &str| {
        let url = url.trim_end_matches('/');
        // The origin is scheme://host[:port], the base URL may add a path.
        url == origin || url.starts_with(&format!("{origin}/"))
    };
    if own(&console.settings.public_url) {
        return true;
    }
    // Reached directly at the listener's address (http://HOST:PORT).
    header("host").is_some_and(|host| origin == format!("http://{host}"))
}

/// Checks a form's CSRF token and origin against the sign-in; the answer
/// refusing it, if it fails.
pub fn check_post(
    console: &Console,
    operator: &Operator,
    headers: &HeaderMap,
    presented: Option<&str>,
) -> Option<Response> {
    if !same_origin(console, headers) {
        tracing::warn!(
            operator = operator.name(),
            "console: cross-site request refused"
        );
        return Some(layout::message(
            StatusCode::FORBIDDEN,
            "Refused",
            "This request did not come from the console's own pages.",
        ));
    }
    let presented = presented.unwrap_or("");
    if !bool::from(presented.as_bytes().ct_eq(operator.csrf().as_bytes())) {
        tracing::warn!(
            operator = operator.name(),
            "console: request without the CSRF token refused"
        );
        return Some(layout::message(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form's security token is missing or out of date. Reload the page and try again.",
        ));
    }
    None
}

/// 256 random bits in hex; `None` (logged) if the OS cannot give them.
fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    if let Err(e) = getrandom::fill(&mut bytes) {
        tracing::error!("console: the OS random source failed: {e}");
        return None;
    }
    Some(hex::encode(bytes))
}

/// A console path to return to after signing in: plain path characters
/// only, so it can neither leave the console nor carry markup.
fn return_path(path: &str) -> Option<&str> {
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'));
    (plain && path.starts_with('/') && !path.starts_with("//") && path.len() <= 200).then_some(path)
}

#[derive(Deserialize, Default)]
pub struct SignInQuery {
    #[serde(default)]
    next: Option<String>,
}

pub async fn sign_in_page(Query(query): Query<SignInQuery>) -> Response {
    let next = query.next.as_deref().and_then(return_path);
    sign_in_form(StatusCode::OK, None, next)
}

fn sign_in_form(status: StatusCode, problem: Option<&str>, next: Option<&str>) -> Response {
    let body = html! {
        main.signin {
            h1 { "toolhost console" }
            p.lede { "Sign in to decide approvals and manage tasks." }
            @if let Some(problem) = problem {
                p.problem role="alert" { (problem) }
            }
            form method="post" action="/signin" {
                @if let Some(next) = next { input type="hidden" name="next" value=(next); }
                label for="name" { "Name" }
                input #name name="name" type="text" autocomplete="username" required autofocus
                    autocapitalize="none" spellcheck="false";
                label for="password" { "Password" }
                input #password name="password" type="password" autocomplete="current-password" required;
                button type="submit" { "Sign in" }
            }
        }
    };
    (status, layout::bare("Sign in", body)).into_response()
}

pub async fn sign_in(
    axum::extract::State(console): Shared,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    let address = peer(&console, addr, &headers);
    let name = form
        .get("name")
        .map(|n| n.trim().to_string())
        .unwrap_or_default();
    let password = form.get("password").cloned().unwrap_or_default();
    // A sign-in form posted from another site (login CSRF) is refused too.
    if !same_origin(&console, &headers) {
        return layout::message(
            StatusCode::FORBIDDEN,
            "Refused",
            "This request did not come from the console's own pages.",
        );
    }
    let next = form
        .get("next")
        .and_then(|n| return_path(n))
        .unwrap_or("/approvals");
    let name: String = name.chars().filter(|c| !c.is_control()).take(64).collect();
    let account = match console.host.store.account(&name).await {
        Ok(account) => account,
        Err(e) => return store_failed(e),
    };
    // A name nobody has (often a password typed into the wrong field) is
    // not written down.
    let shown_name = if account.is_some() {
        name.clone()
    } else {
        "(unknown name)".to_string()
    };
    let refuse = |reason: &str| {
        console.host.audit.record(Event::ConsoleSignInRefused {
            operator: shown_name.clone(),
            address: address.clone(),
            reason: reason.to_string(),
        });
    };
    if !console.limiter.take(&name, &address) {
        if console.limiter.record_refusal(&name, &address) {
            refuse("rate_limited");
        }
        tracing::warn!(operator = %shown_name, %address, "console: sign-in refused, too many failures");
        return sign_in_form(
            StatusCode::TOO_MANY_REQUESTS,
            Some(
                "Too many failed sign-ins. Wait 15 minutes, or ask an admin to reset your password.",
            ),
            Some(next),
        );
    }
    // Hashing takes tens of milliseconds of CPU and 19 MiB: off the async
    // workers, and two at a time, so a burst of sign-ins cannot take the
    // host's memory or every core.
    let Ok(_hashing) = HASHING.acquire().await else {
        return store_failed(crate::store::StoreError::Database("sign-in stopped".into()));
    };
    let checked = tokio::task::spawn_blocking(move || {
        verify_password(account.as_ref(), &password)
            .then_some(account)
            .flatten()
    })
    .await
    .ok()
    .flatten();
    let Some(account) = checked else {
        refuse("wrong_name_or_password");
        tracing::warn!(operator = %shown_name, %address, "console: wrong name or password");
        return sign_in_form(
            StatusCode::UNAUTHORIZED,
            Some("Wrong name or password."),
            Some(next),
        );
    };
    console.limiter.succeeded(&account.name, &address);
    let (Some(cookie), Some(csrf)) = (random_token(), random_token()) else {
        return layout::message(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Error",
            "No randomness; see the host log.",
        );
    };
    if let Err(e) = console
        .host
        .store
        .open_sign_in(&cookie_hash(&cookie), &account.name, &csrf)
        .await
    {
        return store_failed(e);
    }
    console.host.audit.record(Event::ConsoleSignIn {
        operator: account.name.clone(),
        address,
    });
    tracing::info!(operator = %account.name, "console: signed in");
    with_cookie(&console, see_other(next), &cookie, LIMITS.max_secs)
}

/// `response` setting the sign-in cookie to `value` for `max_age` seconds
/// (an empty value and 0 clear it).
fn with_cookie(console: &Console, mut response: Response, value: &str, max_age: i64) -> Response {
    let secure = if console.secure() { "; Secure" } else { "" };
    let cookie = format!(
        "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}",
        cookie_name(console.secure()),
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

pub async fn sign_out(
    axum::extract::State(console): Shared,
    operator: Operator,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    if let Some(refused) = check_post(
        &console,
        &operator,
        &headers,
        form.get("csrf").map(String::as_str),
    ) {
        return refused;
    }
    if let Some(value) = cookie_value(&headers, cookie_name(console.secure()))
        && let Err(e) = console.host.store.close_sign_in(&cookie_hash(value)).await
    {
        return store_failed(e);
    }
    console.host.audit.record(Event::ConsoleSignOut {
        operator: operator.name().to_string(),
    });
    with_cookie(&console, see_other("/signin"), "", 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_address_is_recorded_once_whatever_names_it_tries() {
        let limiter = Limiter::default();
        for n in 0..ADDRESS_FAILURES {
            assert!(limiter.take(&format!("name-{n}"), "10.0.0.1"));
        }
        let refused: Vec<bool> = (0..50)
            .map(|n| {
                let name = format!("made-up-{n}");
                assert!(!limiter.take(&name, "10.0.0.1"));
                limiter.record_refusal(&name, "10.0.0.1")
            })
            .collect();
        assert_eq!(refused.iter().filter(|r| **r).count(), 1);
        assert!(refused[0]);
        // One name over its own limit, from another address: once too.
        for _ in 0..NAME_FAILURES {
            assert!(limiter.take("carol", "10.0.0.2"));
        }
        assert!(!limiter.take("carol", "10.0.0.2"));
        assert!(limiter.record_refusal("carol", "10.0.0.2"));
        assert!(!limiter.record_refusal("carol", "10.0.0.2"));
    }
}
