//! What the browser's sessions are made of: random secrets, cookies read
//! and set, and comparisons that do not tell where two secrets differ.

use axum::http::{HeaderMap, HeaderValue, header};

/// A random secret, hex.
pub(super) fn secret() -> String {
    let mut raw = [0u8; 32];
    nuon_core::random_bytes(&mut raw);
    hex::encode(raw)
}

/// The value of cookie `name`.
pub(super) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

pub(super) fn set_cookie(name: &str, value: &str, max_age_s: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}"
    ))
    .expect("a cookie of hex and fixed words")
}

/// Equal, in time that does not depend on where they differ.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}
