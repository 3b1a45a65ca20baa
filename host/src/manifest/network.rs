//! The network part of a plugin's declaration: where it may send HTTP
//! requests, which credentials the host adds to them, and the limits.
//!
//! Config types and their parsing only; the gate (`crate::gate`) decides
//! what a request may do with them.

use std::fmt;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use super::ToolName;

/// `http` or `https`; nothing else leaves the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// The host part of an allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// This name or IP literal only (lowercase; IPv6 without brackets).
    Exact(String),
    /// `*.example.com`: any name under `example.com` (stored as
    /// `.example.com`), not `example.com` itself.
    Subdomains(String),
}

/// An allow-list entry: scheme, host and port, as in
/// `https://api.example.com` or `http://127.0.0.1:8788`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Destination {
    pub scheme: Scheme,
    pub host: HostPattern,
    /// Explicit, or the scheme's default.
    pub port: u16,
}

impl Destination {
    /// Parses `scheme://host[:port]` (an optional trailing `/`). Paths,
    /// queries and user info are refused: the allow-list is per origin.
    pub fn parse(text: &str) -> Result<Destination, String> {
        let refuse = |why: &str| Err(format!("destination {text:?} {why}"));
        let (scheme, rest) = match text.split_once("://") {
            Some(("http", rest)) => (Scheme::Http, rest),
            Some(("https", rest)) => (Scheme::Https, rest),
            Some(_) => return refuse("has a scheme other than http or https"),
            None => return refuse("has no scheme; write it as https://host[:port]"),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#']) {
            return refuse("has a path or query; the allow-list takes scheme, host and port only");
        }
        if authority.contains('@') {
            return refuse("has user info; credentials belong in `credentials`, not in the URL");
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let Some((addr, after)) = v6.split_once(']') else {
                return refuse("has an unclosed `[`");
            };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return refuse("has an invalid IPv6 address");
            }
            let port = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) => Some(p),
                    None => return refuse("has text after the IPv6 address"),
                },
            };
            (addr.to_ascii_lowercase(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (authority.to_ascii_lowercase(), None),
            }
        };
        let port = match port {
            None => scheme.default_port(),
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return refuse("has an invalid port"),
            },
        };
        let host = match host.strip_prefix("*.") {
            Some(suffix) if valid_name(suffix) && suffix.contains('.') => {
                HostPattern::Subdomains(format!(".{suffix}"))
            }
            Some(_) => {
                return refuse(
                    "has a wildcard that is not `*.` before a domain of two or more labels",
                );
            }
            None if host.parse::<std::net::IpAddr>().is_ok() || valid_name(&host) => {
                HostPattern::Exact(host)
            }
            None => return refuse("has an invalid host name"),
        };
        Ok(Destination { scheme, host, port })
    }

    /// Whether a request to `scheme://host:port` falls under this entry.
    /// `host` must be lowercase, IPv6 without brackets.
    pub fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        self.scheme == scheme && self.port == port && self.host.matches(host)
    }
}

impl HostPattern {
    /// Whether `host` (lowercase, IPv6 without brackets) is this name or
    /// lies under it.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Subdomains(suffix) => {
                host.len() > suffix.len() && host.ends_with(suffix.as_str())
            }
        }
    }
}

impl fmt::Display for HostPattern {
    /// As the manifest writes it: `[::1]`, `api.example.com`, `*.example.com`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) if h.contains(':') => write!(f, "[{h}]"),
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Subdomains(suffix) => write!(f, "*{suffix}"),
        }
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

/// A DNS name: labels of letters, digits and `-`, separated by dots.
fn valid_name(host: &str) -> bool {
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// One allow-list entry with the address ranges it may resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowEntry {
    pub destination: Destination,
    /// Private, loopback or link-local ranges this destination may reach.
    /// Without them, only public addresses are connected to.
    pub addresses: Vec<IpNet>,
}

/// A secret's name in the host's secret store: snake_case, at most 64.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct SecretName(String);

impl SecretName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The environment variable the secret store reads it from.
    pub fn env_var(&self) -> String {
        format!("TOOLHOST_SECRET_{}", self.0.to_ascii_uppercase())
    }
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SecretName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let ok = s.len() <= 64
            && s.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok {
            Ok(SecretName(s))
        } else {
            Err(format!(
                "secret name {s:?} is not snake_case (a-z, 0-9 and `_`, starting with a letter, at most 64 characters)"
            ))
        }
    }
}

/// A credential the host adds to requests for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialDecl {
    /// Exact scheme, host and port; no wildcard.
    pub destination: Destination,
    pub secret: SecretName,
    /// Lowercase header name, e.g. `authorization`.
    pub header: String,
    /// The header's value with `{secret}` where the secret goes.
    pub format: String,
    /// Only these tools' requests carry it; all of the plugin's when `None`.
    pub tools: Option<Vec<ToolName>>,
}

impl CredentialDecl {
    pub fn applies_to(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|tools| tools.iter().any(|t| t.as_str() == tool))
    }
}

/// Per-plugin limits on outbound HTTP, every default filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkLimits {
    /// From sending the request to the last byte of the response.
    pub timeout: Duration,
    /// Largest response body handed to the plugin; beyond it the request
    /// fails (nothing is cut silently).
    pub response_bytes: u64,
    /// Requests one tool call may send.
    pub requests_per_call: u32,
    /// Requests of the plugin (all its instances) in flight at once.
    pub concurrent: u32,
}

impl NetworkLimits {
    pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
    pub const DEFAULT_RESPONSE_KIB: u32 = 1_024;
    pub const DEFAULT_REQUESTS_PER_CALL: u32 = 16;
    pub const DEFAULT_CONCURRENT: u32 = 8;
}

impl Default for NetworkLimits {
    fn default() -> Self {
        NetworkLimits {
            timeout: Duration::from_millis(Self::DEFAULT_TIMEOUT_MS),
            response_bytes: u64::from(Self::DEFAULT_RESPONSE_KIB) << 10,
            requests_per_call: Self::DEFAULT_REQUESTS_PER_CALL,
            concurrent: Self::DEFAULT_CONCURRENT,
        }
    }
}

/// What a plugin may reach. The default reaches nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkDecl {
    pub allow: Vec<AllowEntry>,
    pub credentials: Vec<CredentialDecl>,
    pub limits: NetworkLimits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_parse_to_origins() {
        let d = Destination::parse("https://API.example.com").unwrap();
        assert_eq!(d.to_string(), "https://api.example.com:443");
        assert!(d.matches(Scheme::Https, "api.example.com", 443));
        assert!(!d.matches(Scheme::Http, "api.example.com", 443));
        assert!(!d.matches(Scheme::Https, "api.example.com", 8443));

        let w = Destination::parse("https://*.example.com:8443/").unwrap();
        assert!(w.matches(Scheme::Https, "a.b.example.com", 8443));
        assert!(!w.matches(Scheme::Https, "example.com", 8443));
        assert!(!w.matches(Scheme::Https, "evilexample.com", 8443));

        let v6 = Destination::parse("http://[::1]:8080").unwrap();
        assert!(v6.matches(Scheme::Http, "::1", 8080));
        assert_eq!(v6.to_string(), "http://[::1]:8080");

        for bad in [
            "crm.example.com",
            "ftp://x.example.com",
            "https://x.example.com/api",
            "https://user:pw@x.example.com",
            "https://*.com",
            "https://x.example.com:0",
            "https://x.exa mple.com",
            "https://a*.example.com",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }
}
