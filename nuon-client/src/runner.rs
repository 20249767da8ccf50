use std::time::Duration;

use async_trait::async_trait;
use nuon_core::wire::{
    ClaimRequest, ClaimResponse, Completion, CompletionAck, ErrorCode, HeartbeatRequest,
    HeartbeatResponse, LOG_RECORDS_CONTENT_TYPE, LogAck, LogBatch, LogBatchQuery, RunnerSession,
    SESSION_HEADER, routes,
};
use nuon_core::{JobId, Transport, TransportError};

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::http::Http;

/// A client of the Runner API, authenticated by one runner's token.
#[derive(Debug, Clone)]
pub struct RunnerClient {
    http: Http,
}

impl RunnerClient {
    /// A client for the configured control plane's Runner API.
    ///
    /// Every Runner API request names its runner process (one token, one
    /// live runner): the client names this process, by its token, until
    /// [`Self::with_session`] names another session.
    pub fn new(config: ClientConfig) -> Result<Self> {
        let session = Self::default_session(&config);
        RunnerClient {
            http: Http::new(config)?,
        }
        .with_session(&session, false)
    }

    /// This process's session for `config`'s token.
    fn default_session(config: &ClientConfig) -> RunnerSession {
        let token = nuon_core::token::hash_token(&config.token);
        session_of_this_process(&format!("client {}", &token[..16]))
    }

    /// A client that sends its requests through `client`, so that many
    /// runners in one process (a fleet simulator, a host of several runners)
    /// share one connection pool and TLS setup. `config` still gives the
    /// token, the URLs and the request timeout.
    pub fn with_http_client(config: ClientConfig, client: reqwest::Client) -> Self {
        let session = Self::default_session(&config).header(false);
        let mut c = RunnerClient {
            http: Http::with_client(client, config),
        };
        // The header is made of ASCII letters, digits and `=; .-_`.
        if let Ok(v) = reqwest::header::HeaderValue::from_str(&session) {
            c.http.always = Some((SESSION_HEADER, v));
        }
        c
    }

    /// Names the runner process's session on every request: one token, one
    /// live runner. With `replace`, this session takes the token over from
    /// a live one, which is refused from then on.
    pub fn with_session(mut self, session: &RunnerSession, replace: bool) -> Result<Self> {
        let value = reqwest::header::HeaderValue::from_str(&session.header(replace))
            .map_err(|e| Error::Config(format!("runner session: {e}")))?;
        self.http.always = Some((SESSION_HEADER, value));
        Ok(self)
    }

    /// A `reqwest` client built from `config` (its CA bundle, HTTP/2 and
    /// timeouts), to share between clients with [`Self::with_http_client`].
    pub fn http_client(config: &ClientConfig) -> Result<reqwest::Client> {
        config.build_http()
    }
}

/// An install stack's first call (no runner token yet): trades the stack's
/// one-time token for the runner's token, reporting the stack's outputs.
/// `config` names the Runner API (its token is not used).
pub async fn phone_home(
    config: ClientConfig,
    req: &nuon_core::wire::PhoneHome,
) -> Result<nuon_core::wire::PhoneHomeAnswer> {
    Http::new(config)?
        .post(nuon_core::wire::routes::PHONE_HOME, req, Duration::ZERO)
        .await
}

fn map_err(e: Error) -> TransportError {
    match e {
        Error::Api {
            status: 401 | 403,
            message,
            ..
        } => TransportError::Unauthorized(message),
        // Another process runs with this token: this one must stop.
        Error::Api {
            status: 409,
            code,
            message,
            ..
        } if matches!(
            code.parse(),
            Ok(ErrorCode::RunnerInUse | ErrorCode::WrongSigningKey)
        ) =>
        {
            TransportError::Unauthorized(message)
        }
        Error::Api {
            status: 409,
            code,
            acked_seq,
            message,
            ..
        } => {
            if ErrorCode::LogsPending == code.as_str() {
                TransportError::LogsPending {
                    acked_seq: acked_seq.unwrap_or(0),
                }
            } else {
                TransportError::Stale(message)
            }
        }
        // Too many requests and server errors are worth retrying.
        Error::Api {
            status: 429 | 500..,
            message,
            ..
        } => TransportError::Unavailable(message),
        Error::Api {
            status, message, ..
        } => TransportError::Rejected { status, message },
        // Sent, and the connection broke before the answer: not a refused
        // connection, not a timeout.
        Error::Connect { ref source, .. } if !source.is_connect() && !source.is_timeout() => {
            TransportError::Cut(e.to_string())
        }
        other => TransportError::Unavailable(other.to_string()),
    }
}

#[async_trait]
impl Transport for RunnerClient {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimResponse, TransportError> {
        self.http
            .post(routes::CLAIM, req, Duration::from_millis(req.wait_ms))
            .await
            .map_err(map_err)
    }

    async fn settings(&self) -> Result<nuon_core::wire::RunnerSettingsInfo, TransportError> {
        self.http
            .get(routes::RUNNER_SETTINGS)
            .await
            .map_err(map_err)
    }

    async fn heartbeat(&self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, TransportError> {
        self.http
            .post(routes::HEARTBEAT, req, Duration::from_millis(req.wait_ms))
            .await
            .map_err(map_err)
    }

    async fn append_logs(&self, job: &JobId, batch: &LogBatch) -> Result<LogAck, TransportError> {
        let path = routes::with_id(routes::LOGS, job.as_str());
        let query = LogBatchQuery {
            attempt: batch.attempt,
            first_seq: batch.first_seq,
        };
        let req = self
            .http
            .request(reqwest::Method::POST, &path)
            .query(&query)
            .header(reqwest::header::CONTENT_TYPE, LOG_RECORDS_CONTENT_TYPE)
            .body(batch.lines.as_bytes().to_vec());
        self.http.send(req).await.map_err(map_err)
    }

    async fn complete(
        &self,
        job: &JobId,
        completion: &Completion,
    ) -> Result<CompletionAck, TransportError> {
        let path = routes::with_id(routes::COMPLETE, job.as_str());
        self.http
            .post(&path, completion, Duration::ZERO)
            .await
            .map_err(map_err)
    }
}

/// This process's runner session in `place` (a work dir, or what a tool
/// names itself by): its id is the same for every process on this host in
/// that place; the pid tells them apart.
pub fn session_of_this_process(place: &str) -> RunnerSession {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let id = nuon_core::token::hash_token(&format!("{host}\n{place}"));
    RunnerSession {
        id: id[..24].to_owned(),
        host,
        pid: std::process::id(),
        addr: None,
        since_ms: 0,
        version: None,
        os: Some(std::env::consts::OS.to_owned()),
        arch: Some(std::env::consts::ARCH.to_owned()),
    }
}
