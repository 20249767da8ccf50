use nuon_core::wire::{ApiError, ErrorCode};

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error.
    #[error("{message} ({status} {code})")]
    Api {
        /// The HTTP status.
        status: u16,
        /// The server's stable error code (`not_found`, `unauthorized`, ...).
        code: String,
        /// The server's message.
        message: String,
        /// With `logs_pending`, the highest log line the server holds.
        acked_seq: Option<u64>,
        /// With `invalid_config`, every problem of the config.
        diagnostics: Vec<nuon_core::app::Diagnostic>,
    },
    /// The server could not be reached, or the connection broke.
    #[error("cannot reach {url}: {}", tls_problem(.source).unwrap_or_else(|| causes(.source)))]
    Connect {
        /// The URL asked for.
        url: String,
        /// What went wrong.
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not what the API promises.
    #[error("unexpected answer from {url}: {message}")]
    Protocol {
        /// The URL asked for.
        url: String,
        /// What was wrong with it.
        message: String,
    },
    /// The client configuration is unusable (bad URL, unreadable CA bundle).
    #[error("invalid client configuration: {0}")]
    Config(String),
}

impl Error {
    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// An API error's code, when this build knows it (a newer control
    /// plane may answer with one it does not: see the `code` field).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api { code, .. } => code.parse().ok(),
            _ => None,
        }
    }

    /// Whether this is an API error with the given code.
    pub fn is_code(&self, wanted: ErrorCode) -> bool {
        self.code() == Some(wanted)
    }

    pub(crate) fn from_body(status: u16, body: &[u8]) -> Error {
        match serde_json::from_slice::<ApiError>(body) {
            Ok(e) => Error::Api {
                status,
                code: e.error.code,
                message: e.error.message,
                acked_seq: e.error.acked_seq,
                diagnostics: e.error.diagnostics,
            },
            Err(_) => Error::Api {
                status,
                code: ErrorCode::HttpError.as_str().into(),
                message: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
                acked_seq: None,
                diagnostics: Vec::new(),
            },
        }
    }
}

/// An error and its causes, `outer: inner: root`, as reqwest's own message
/// ("error sending request") says little without them.
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// What a failed TLS handshake with the control plane means, and what to
/// do, when that is why `e` failed (rustls's own words name an enum).
fn tls_problem(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::{CertificateError as C, Error as T};
    let found = find_rustls(e)?;
    let ago = |then: u64, now: u64| match now.saturating_sub(then) / 86_400 {
        0 => "today".to_owned(),
        1 => "a day ago".to_owned(),
        n => format!("{n} days ago"),
    };
    Some(match found {
        T::InvalidCertificate(C::Expired) => "its TLS certificate has expired (by this machine's clock): the control plane's operator must renew it (nuon-ctl serves a renewed --tls-cert without a restart)".to_owned(),
        T::InvalidCertificate(C::ExpiredContext { time, not_after }) => format!(
            "its TLS certificate expired {} (by this machine's clock): the control plane's operator must renew it (nuon-ctl serves a renewed --tls-cert without a restart)",
            ago(not_after.as_secs(), time.as_secs())
        ),
        T::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => "its TLS certificate is not valid yet: check this machine's clock, or the certificate's start date".to_owned(),
        T::InvalidCertificate(C::NotValidForNameContext { expected, presented }) => format!(
            "its TLS certificate is for {}, not {}: connect by a name the certificate lists, or have it reissued for this one",
            if presented.is_empty() {
                "no name".to_owned()
            } else {
                presented.iter().map(|n| plain_name(n)).collect::<Vec<_>>().join(", ")
            },
            expected.to_str()
        ),
        T::InvalidCertificate(C::NotValidForName) => "its TLS certificate is not for the host name in the URL: connect by a name the certificate lists, or have it reissued for this one".to_owned(),
        T::InvalidCertificate(C::UnknownIssuer) => "its TLS certificate is signed by an authority this machine does not trust: pass --ca-bundle with the PEM certificate of the CA that signed it (or add that CA to the system's roots)".to_owned(),
        T::InvalidCertificate(C::Revoked) => "its TLS certificate has been revoked: the control plane's operator must replace it".to_owned(),
        T::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => "the server does not speak TLS at this address: use http:// (or serve TLS with nuon-ctl --tls-cert and --tls-key)".to_owned(),
        other => format!("the TLS handshake failed: {other}"),
    })
}

/// The rustls error in `e`'s causes, looking inside I/O errors (which
/// hide what they wrap from `source()`, and may wrap each other).
fn find_rustls<'e>(e: &'e (dyn std::error::Error + 'static)) -> Option<&'e rustls::Error> {
    if let Some(found) = e.downcast_ref::<rustls::Error>() {
        return Some(found);
    }
    let wrapped = (e.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::get_ref)
        .and_then(|inner| find_rustls(inner));
    wrapped.or_else(|| e.source().and_then(find_rustls))
}

/// A name as the certificate verifier writes it (`DnsName("a.b")`,
/// `IpAddress(10.0.0.1)`), as people write it.
fn plain_name(name: &str) -> &str {
    let inner = |prefix: &str, suffix: &str| name.strip_prefix(prefix)?.strip_suffix(suffix);
    inner("DnsName(\"", "\")")
        .or_else(|| inner("IpAddress(", ")"))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrapped(e: rustls::Error) -> std::io::Error {
        // As hyper-rustls hands it on: an I/O error in an I/O error.
        std::io::Error::other(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    #[test]
    fn tls_failures_say_what_is_wrong_and_what_to_do() {
        use rustls::CertificateError as C;
        use rustls::pki_types::{ServerName, UnixTime};
        let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(100 * 86_400));
        let expired = wrapped(rustls::Error::InvalidCertificate(C::ExpiredContext {
            time: now,
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(97 * 86_400)),
        }));
        let said = tls_problem(&expired).unwrap();
        assert!(said.contains("expired 3 days ago"), "{said}");
        let name = wrapped(rustls::Error::InvalidCertificate(
            C::NotValidForNameContext {
                expected: ServerName::try_from("cp.example.com").unwrap().to_owned(),
                presented: vec!["DnsName(\"other.example.com\")".into()],
            },
        ));
        let said = tls_problem(&name).unwrap();
        assert!(
            said.contains("is for other.example.com, not cp.example.com"),
            "{said}"
        );
        let unknown = wrapped(rustls::Error::InvalidCertificate(C::UnknownIssuer));
        assert!(tls_problem(&unknown).unwrap().contains("--ca-bundle"));
        let plain = std::io::Error::other("connection reset");
        assert_eq!(tls_problem(&plain), None);
    }
}
