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
    #[error("cannot reach {url}: {}", causes(.source))]
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
