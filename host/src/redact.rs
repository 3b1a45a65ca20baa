//! Redaction: every configured secret value, in the encodings it commonly
//! travels in, replaced by `[REDACTED:<name>]` wherever bytes leave the host
//! (responses handed to a plugin, tool results, log lines, audit records).
//!
//! It sits below the gate, the sandbox and the audit trail, which are each
//! handed the host's [`Redactor`]; none of them reaches for a global one.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Percent-encoding that leaves RFC 3986's unreserved characters alone, as
/// most URL encoders do.
const URL_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
use zeroize::Zeroizing;

/// Replaces known secret values. Cheap to share; empty when no secret is
/// configured, and then a no-op.
#[derive(Default)]
pub struct Redactor {
    matcher: Option<AhoCorasick>,
    replacements: Vec<String>,
    /// The longest pattern's length in bytes.
    longest: usize,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} patterns)", self.replacements.len())
    }
}

impl Redactor {
    /// Builds a redactor for `(name, value)` pairs.
    pub fn new(secrets: &[(String, Zeroizing<String>)]) -> Redactor {
        let mut patterns: Vec<Zeroizing<String>> = Vec::new();
        let mut replacements = Vec::new();
        for (name, value) in secrets {
            let replacement = format!("[REDACTED:{name}]");
            let bytes = value.as_bytes();
            let forms = [
                value.to_string(),
                STANDARD.encode(bytes),
                STANDARD_NO_PAD.encode(bytes),
                URL_SAFE.encode(bytes),
                URL_SAFE_NO_PAD.encode(bytes),
                utf8_percent_encode(value, NON_ALPHANUMERIC).to_string(),
                utf8_percent_encode(value, URL_COMPONENT).to_string(),
                // Form encoding writes spaces as `+`.
                utf8_percent_encode(value, URL_COMPONENT)
                    .to_string()
                    .replace("%20", "+"),
                // JSON text escapes `/` optionally and `"`/`\` always.
                value.replace('\\', "\\\\").replace('"', "\\\""),
                value.replace('/', "\\/"),
            ];
            for form in forms {
                let form = Zeroizing::new(form);
                if !patterns.iter().any(|p| **p == *form) {
                    patterns.push(form);
                    replacements.push(replacement.clone());
                }
            }
        }
        if patterns.is_empty() {
            return Redactor::default();
        }
        // Case-insensitive: an echo may change case (hex digits, `%2f`).
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(true)
            .build(patterns.iter().map(|p| p.as_bytes()))
            .expect("a few short literal patterns always build");
        Redactor {
            matcher: Some(matcher),
            longest: patterns.iter().map(|p| p.len()).max().unwrap_or(0),
            replacements,
        }
    }

    /// `text` with every secret replaced; borrowed when there was none.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.matcher {
            Some(m) if m.is_match(text) => Cow::Owned(m.replace_all(text, &self.replacements)),
            _ => Cow::Borrowed(text),
        }
    }

    /// `bytes` with every secret replaced; borrowed when there was none.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        match &self.matcher {
            Some(m) if m.is_match(bytes) => {
                Cow::Owned(m.replace_all_bytes(bytes, &self.replacements))
            }
            _ => Cow::Borrowed(bytes),
        }
    }

    /// Enough of `bytes`, redacted, for its first `max` bytes to be those of
    /// all of it redacted, for a caller that keeps no more (a log line):
    /// a huge text is not read to its end. A secret replaced leaves at
    /// least one byte for every pattern length it takes, so a secret found
    /// beyond `max` times the longest pattern cannot reach the first `max`
    /// bytes, and one starting before it ends within one more length.
    pub fn bytes_head<'a>(&self, bytes: &'a [u8], max: usize) -> Cow<'a, [u8]> {
        self.bytes(&bytes[..self.head_len(bytes.len(), max)])
    }

    /// [`Redactor::bytes_head`] for text.
    pub fn text_head<'a>(&self, text: &'a str, max: usize) -> Cow<'a, str> {
        let mut end = self.head_len(text.len(), max);
        while !text.is_char_boundary(end) {
            end += 1;
        }
        self.text(&text[..end])
    }

    fn head_len(&self, len: usize, max: usize) -> usize {
        let window = max.saturating_add(1).saturating_mul(self.longest);
        len.min(window.max(max))
    }

    /// Whether any secret is configured at all.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }
}

/// Redacts every string (and key) inside a JSON value, in place.
pub fn json(redactor: &Redactor, value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => {
            if let Cow::Owned(clean) = redactor.text(s) {
                *s = clean;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| json(redactor, v)),
        Value::Object(map) => {
            let dirty: Vec<String> = map
                .keys()
                .filter(|k| matches!(redactor.text(k), Cow::Owned(_)))
                .cloned()
                .collect();
            for key in dirty {
                if let Some(v) = map.remove(&key) {
                    map.insert(redactor.text(&key).into_owned(), v);
                }
            }
            map.values_mut().for_each(|v| json(redactor, v));
        }
        _ => {}
    }
}

/// The redactor of log lines. The log writer is made when the process
/// starts, before the host has read its secrets, so it holds this handle
/// and the command that reads them sets it (once; later calls are ignored).
/// Cheap to clone; until set, lines pass unchanged.
#[derive(Clone, Default)]
pub struct LogRedaction(Arc<OnceLock<Arc<Redactor>>>);

impl LogRedaction {
    /// Redacts every line logged from now on with `redactor`.
    pub fn set(&self, redactor: Arc<Redactor>) {
        let _ = self.0.set(redactor);
    }

    /// The redactor, if one with secrets is set.
    fn get(&self) -> Option<&Redactor> {
        self.0.get().map(|r| &**r).filter(|r| !r.is_empty())
    }

    /// `line` with every secret known so far replaced.
    pub fn redact<'a>(&self, line: &'a [u8]) -> Cow<'a, [u8]> {
        match self.get() {
            Some(r) => r.bytes(line),
            None => Cow::Borrowed(line),
        }
    }

    /// A writer of one log line to stderr, redacted.
    pub fn stderr(&self) -> RedactingStderr {
        RedactingStderr(self.clone())
    }
}

/// A log writer that redacts each formatted line before it reaches stderr.
pub struct RedactingStderr(LogRedaction);

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        std::io::stderr().lock().write_all(&self.0.redact(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_what_redacting_all_and_cutting_gives() {
        let secret = "tok-1234567890";
        let r = Redactor::new(&[("t".into(), Zeroizing::new(secret.into()))]);
        for max in [1, 5, 16, 40, 300] {
            for filler in 0..30 {
                let text = format!(
                    "{}{secret}{}{}é{}",
                    "x".repeat(filler),
                    "y".repeat(filler % 7),
                    secret.repeat(filler),
                    "z".repeat(200)
                );
                let all = r.text(&text);
                let head = r.text_head(&text, max);
                let kept = max.min(all.len());
                assert_eq!(head.as_bytes()[..kept], all.as_bytes()[..kept], "{text}");
                let head = r.bytes_head(text.as_bytes(), max);
                assert_eq!(head[..kept], all.as_bytes()[..kept], "{text}");
            }
        }
        // A huge line is read no further than the window.
        let long = format!("{}{secret}", "a".repeat(1 << 20));
        assert_eq!(r.bytes_head(long.as_bytes(), 10).len(), 11 * r.longest);
        assert!(r.longest < 30);
        let none = Redactor::default();
        assert_eq!(none.bytes_head(long.as_bytes(), 10).len(), 10);
    }

    #[test]
    fn every_form_of_a_secret_is_replaced() {
        let secret = "s3cr3t/val+ue=?&x";
        let r = Redactor::new(&[("crm_token".into(), Zeroizing::new(secret.into()))]);
        let b64 = STANDARD.encode(secret);
        let url = URL_SAFE_NO_PAD.encode(secret);
        let pct = utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string();
        let text = format!("a {secret} b {b64} c {url} d {pct} e");
        let out = r.text(&text);
        assert!(!out.contains(secret) && !out.contains(&b64) && !out.contains(&pct));
        assert_eq!(out.matches("[REDACTED:crm_token]").count(), 4, "{out}");
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
        assert!(Redactor::default().is_empty());
    }
}
