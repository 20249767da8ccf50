//! Each Control API operation declared once, as a type: its method, path,
//! operation id, summary, request and response. The control plane makes
//! its route and its OpenAPI entry from the declaration; `nuon-client`
//! calls it through one generic `call::<E>()`. In the spirit of kube-rs's
//! `Resource`: the declaration lives here, with no client and no server.
//!
//! ```
//! use nuon_core::endpoint::{Endpoint, Method, UpdateInstall, path_of};
//!
//! assert_eq!(UpdateInstall::METHOD, Method::Patch);
//! assert_eq!(path_of::<UpdateInstall>(&["my app"]), "/v1/installs/my%20app");
//! ```

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An HTTP method of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Reads.
    Get,
    /// Creates or acts.
    Post,
    /// Sets a whole value.
    Put,
    /// Changes part of a resource.
    Patch,
    /// Removes.
    Delete,
}

impl Method {
    /// The method as OpenAPI spells it (lower case).
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Put => "put",
            Method::Patch => "patch",
            Method::Delete => "delete",
        }
    }

    /// Whether it changes state (and so needs more than a read token, and
    /// is written to the audit trail).
    pub const fn writes(self) -> bool {
        !matches!(self, Method::Get)
    }
}

/// One operation of the Control API.
pub trait Endpoint {
    /// Its method.
    const METHOD: Method;
    /// Its route, with `{name}` parameters.
    const PATH: &'static str;
    /// Its OpenAPI operation id (and its name in the audit trail).
    const ID: &'static str;
    /// One line for people.
    const SUMMARY: &'static str;
    /// The status of its success.
    const STATUS: u16 = 200;
    /// Whether the request is sent as a JSON body (else there is none).
    const BODY: bool;
    /// What it takes (`()` for nothing).
    type Request: Serialize + DeserializeOwned + JsonSchema + Send + Sync + 'static;
    /// What it answers.
    type Response: Serialize + DeserializeOwned + JsonSchema + Send + 'static;
}

/// `E`'s path with its parameters filled in order, each percent-encoded
/// as one segment (anything but letters, digits, `-`, `_` and `.`).
///
/// # Panics
/// When `params` has fewer values than the path has parameters: a bug in
/// the caller, never input.
pub fn path_of<E: Endpoint>(params: &[&str]) -> String {
    let mut out = String::with_capacity(E::PATH.len() + 32);
    let mut values = params.iter();
    for (i, part) in E::PATH.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if part.starts_with('{') && part.ends_with('}') {
            let value = values
                .next()
                .unwrap_or_else(|| panic!("{} needs a value for {part}", E::ID));
            push_segment(&mut out, value);
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Appends `s` as one percent-encoded path segment.
pub fn push_segment(out: &mut String, s: &str) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Declares endpoints, each as
/// `Name: Method PATH, "operationId", Request => Response[, status = N], body = BOOL, summary = "...";`
/// (the summary is OpenAPI's, for people reading the document).
macro_rules! endpoints {
    ($(
        $(#[$meta:meta])*
        $name:ident: $method:ident $path:expr, $id:literal,
        $req:ty => $resp:ty $(, status = $status:literal)?, body = $body:literal,
        summary = $summary:literal;
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;

        impl Endpoint for $name {
            const METHOD: Method = Method::$method;
            const PATH: &'static str = $path;
            const ID: &'static str = $id;
            const SUMMARY: &'static str = $summary;
            $(const STATUS: u16 = $status;)?
            const BODY: bool = $body;
            type Request = $req;
            type Response = $resp;
        }
    )*};
}

mod apps;
mod drift;
mod groups;
mod health;
mod installers;
mod lifecycle;
mod ops;
mod orgs;
mod people;
mod releases;
mod rollouts;
mod runner_releases;
mod runners;
mod stack;
mod state;
mod toggles;
mod workflows;

pub use apps::*;
pub use drift::*;
pub use groups::*;
pub use health::*;
pub use installers::*;
pub use lifecycle::*;
pub use ops::*;
pub use orgs::*;
pub use people::*;
pub use releases::*;
pub use rollouts::*;
pub use runner_releases::*;
pub use runners::*;
pub use stack::*;
pub use state::*;
pub use toggles::*;
pub use workflows::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_fill_their_parameters_as_segments() {
        assert_eq!(path_of::<GetInstall>(&["demo"]), "/v1/installs/demo");
        assert_eq!(
            path_of::<UpdateInstall>(&["a/b?c"]),
            "/v1/installs/a%2Fb%3Fc"
        );
        assert!(UpdateInstall::METHOD.writes() && !GetInstall::METHOD.writes());
    }
}
