use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use nuon_core::app::Diagnostic;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{ApiError, ApiErrorBody};

use crate::store::StoreError;

/// The crate's error: starting the server, or an API answer that is not a success.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An HTTP error answer with a stable code and a message for people.
    #[error("{message}")]
    Api {
        /// The HTTP status.
        status: StatusCode,
        /// A stable code (`not_found`, `stale_attempt`, ...).
        code: ErrorCode,
        /// What, where, how to fix.
        message: String,
        /// With `logs_pending`, the highest log line held.
        acked_seq: Option<u64>,
    },
    /// An app config that does not validate: every problem.
    #[error("{message}")]
    InvalidConfig {
        /// One sentence.
        message: String,
        /// Every problem, as `nuon apps validate` shows them.
        diagnostics: Vec<Diagnostic>,
    },
    /// Too many failed sign-ins or token checks: answered `429` with
    /// `Retry-After`.
    #[error("{message}")]
    TooManyAttempts {
        /// What was throttled and when to try again.
        message: String,
        /// Seconds until the next try is allowed.
        retry_after_secs: u64,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The data directory could not be prepared.
    #[error("data dir {path}: {message}")]
    DataDir {
        /// The path involved.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A backup cannot be written or restored.
    #[error("backup {path}: {message}")]
    Backup {
        /// The backup file.
        path: String,
        /// What went wrong, and what to do.
        message: String,
    },
    /// The TLS certificate or key cannot be served.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// A listener failed.
    #[error("server i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<crate::throttle::Throttled> for Error {
    fn from(t: crate::throttle::Throttled) -> Self {
        Error::TooManyAttempts {
            message: t.message(),
            retry_after_secs: t.retry_after_secs(),
        }
    }
}

impl Error {
    pub(crate) fn api(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Error::Api {
            status,
            code,
            message: message.into(),
            acked_seq: None,
        }
    }

    /// A refusal named by its code, answered with the code's own status
    /// ([`ErrorCode::http_status`]): what refuses names what went wrong,
    /// and the API knows how that is answered.
    pub(crate) fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        let status =
            StatusCode::from_u16(code.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::api(status, code, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::refused(ErrorCode::NotFound, message)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::refused(ErrorCode::BadRequest, message)
    }

    /// A conflict (409) under `code`, whatever status the code has
    /// otherwise: the engine's and the store's conflicts, and a conflict
    /// best named by a code of another kind (an invitation for an install
    /// already provisioned is `invalid_install`, 409).
    pub(crate) fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::api(StatusCode::CONFLICT, code, message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::refused(ErrorCode::Internal, message)
    }
}

impl Error {
    /// Seconds until a throttled caller may try again.
    pub(crate) fn retry_after(&self) -> Option<u64> {
        match self {
            Error::TooManyAttempts {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            _ => None,
        }
    }

    /// The HTTP status this error answers with (the API's and the
    /// dashboard's).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Error::InvalidConfig { .. } | Error::Store(StoreError::Invalid(_)) => {
                StatusCode::BAD_REQUEST
            }
            Error::Api { status, .. } => *status,
            Error::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::Store(StoreError::Conflict { .. }) => StatusCode::CONFLICT,
            Error::Store(StoreError::Closed) => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let mut diagnostics = Vec::new();
        let status = self.status();
        let retry_after = self.retry_after();
        let (code, message, acked_seq) = match self {
            Error::InvalidConfig {
                message,
                diagnostics: d,
            } => {
                diagnostics = d;
                (ErrorCode::InvalidConfig, message, None)
            }
            Error::Api {
                code,
                message,
                acked_seq,
                ..
            } => (code, message, acked_seq),
            Error::Store(StoreError::Conflict {
                code,
                message,
                acked_seq,
            }) => (code, message, acked_seq),
            Error::TooManyAttempts { message, .. } => (ErrorCode::TooManyAttempts, message, None),
            Error::Store(StoreError::Invalid(message)) => (ErrorCode::BadRequest, message, None),
            Error::Store(StoreError::Closed) => (
                ErrorCode::ShuttingDown,
                "the control plane is shutting down; retry shortly".into(),
                None,
            ),
            other => {
                tracing::error!(error = %other, "internal error");
                (
                    ErrorCode::Internal,
                    "internal error; see the control plane's log".into(),
                    None,
                )
            }
        };
        let body = ApiError {
            error: ApiErrorBody {
                code: code.as_str().into(),
                message,
                acked_seq,
                diagnostics,
            },
        };
        let mut resp = (status, Json(body)).into_response();
        if let Some(secs) = retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        resp
    }
}
