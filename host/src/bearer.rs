//! `Authorization: Bearer <token>`, as both HTTP listeners read it.

use axum::http::{HeaderMap, header};

/// What a request's `Authorization` header holds.
pub enum Bearer<'a> {
    /// No header: an anonymous request.
    Absent,
    /// A bearer token (the scheme name is case-insensitive, RFC 7235).
    Token(&'a str),
    /// A header of another scheme, or not text.
    Malformed,
}

impl<'a> Bearer<'a> {
    pub fn of(headers: &'a HeaderMap) -> Bearer<'a> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Bearer::Absent;
        };
        let Ok(value) = value.to_str() else {
            return Bearer::Malformed;
        };
        match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => match token.trim() {
                "" => Bearer::Malformed,
                token => Bearer::Token(token),
            },
            _ => Bearer::Malformed,
        }
    }
}
