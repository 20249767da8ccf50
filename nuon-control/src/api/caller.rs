//! The [`Caller`] of a service operation, from an API request: the
//! token's principal and the caller's address.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::{ApiAuth, Caller, SharedState};
use crate::error::Error;

/// Who calls a service operation: the token's principal and the
/// caller's address.
impl FromRequestParts<SharedState> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let ApiAuth(principal) = ApiAuth::from_request_parts(parts, state).await?;
        Ok(Caller {
            principal,
            source: source_of(&parts.extensions),
        })
    }
}

impl ApiAuth {
    /// The caller of a service operation (its address unknown).
    pub(crate) fn caller(&self) -> Caller {
        self.caller_at(String::new())
    }

    /// The caller of a service operation from `source`.
    pub(crate) fn caller_at(&self, source: String) -> Caller {
        Caller {
            principal: self.0.clone(),
            source,
        }
    }
}

/// The caller's IP address from a request's extensions ("" when unknown).
pub(crate) fn source_of(ext: &axum::http::Extensions) -> String {
    ext.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_default()
}

/// The control plane's address as the caller reached it (the dashboard
/// and the installer page are on this listener): its `Host`, the scheme a
/// proxy in front says, else the address it listens on.
pub(crate) fn public_base(state: &super::SharedState, headers: &axum::http::HeaderMap) -> String {
    headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        })
        .map(|h| {
            let scheme = if over_https(headers) { "https" } else { "http" };
            format!("{scheme}://{h}")
        })
        .or_else(|| state.control_url.get().cloned())
        .unwrap_or_default()
}

/// Whether the browser reached us over HTTPS (directly, or through a proxy
/// that says so): the session cookie is then `Secure`.
pub(crate) fn over_https(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"))
}
