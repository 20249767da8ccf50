//! The service layer: one method per operation, taking the [`Caller`] and
//! the operation's request and answering its response. Authorization,
//! validation, sealing and the audit trail live here; the Control API's
//! handlers and the dashboard's forms are adapters of a few lines over
//! it, so both refuse, change and record the same way.
//!
//! Below the API: nothing here imports `api` or `server`, and every API
//! handler of an operation reaches only this (tidy holds both; the
//! OpenID Connect sign-in flow is the exception it lists). A file per
//! noun; each write records itself in the audit trail (`audited_at`):
//! nothing over the router records.

pub(crate) mod apps;
mod audit;
mod builds;
mod configs;
mod debug;
mod drift;
pub(crate) mod fleet;
pub(crate) mod groups;
pub(crate) mod health;
mod install_reads;
pub(crate) mod installs;
pub(crate) mod invitations;
mod jobs;
pub(crate) mod lifecycle;
pub(crate) mod pending;
pub(crate) mod people;
mod releases;
mod render;
pub(crate) mod rollouts;
pub(crate) mod runner_binaries;
mod runner_releases;
pub(crate) mod runners;
pub(crate) mod sign_in;
mod stack;
pub(crate) mod states;
pub(crate) mod toggles;
mod webhooks;
pub(crate) mod workflows;

use std::time::Duration;

use axum::http::StatusCode;
use nuon_core::audit::AuditEntry;
use nuon_core::endpoint::{Endpoint, path_of};
use nuon_core::now_ms;
use nuon_core::wire::ErrorCode;

use crate::engine::{Engine, EngineError};
use crate::error::Error;
use crate::hub::Wakes;
use crate::keys::{JobKeys, KeyError};
use crate::ops::{Auditor, OpsConfig};
use crate::secrets::SecretBox;
use crate::store::{ApiPrincipal, Store};

/// Who calls an operation, and from where.
#[derive(Clone)]
pub(crate) struct Caller {
    /// The token's principal: org, scope, person.
    pub(crate) principal: ApiPrincipal,
    /// The caller's IP address ("" when unknown), for the audit trail.
    pub(crate) source: String,
}

/// The operations, over the store and the audit trail.
#[derive(Clone, Copy)]
pub(crate) struct Services<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) auditor: &'a Auditor,
    /// Seals what is secret, bound to where it belongs.
    pub(crate) secrets: &'a SecretBox,
    /// The orgs' signing keys.
    pub(crate) keys: &'a JobKeys,
    /// The workflow engine (the Runner API's address it knows).
    pub(crate) engine: &'a Engine,
    /// Wakes a runner's parked claims, here and on the other replicas.
    pub(crate) wakes: &'a Wakes,
    /// Health thresholds.
    pub(crate) ops: &'a OpsConfig,
    /// How long since its last call a runner still counts as there.
    pub(crate) live_window: Duration,
    /// The runner tokens this replica checked lately.
    pub(crate) runner_tokens: &'a runners::RunnerTokens,
    /// Each org's fleet as this replica last read it.
    pub(crate) fleet_views: &'a fleet::FleetViews,
}

impl Services<'_> {
    /// `result` of operation `E` on `target`, recorded in the audit trail:
    /// who, what, on what, from where, and how it ended (the status the
    /// API answers with).
    pub(crate) async fn audited<E: Endpoint, T>(
        &self,
        caller: &Caller,
        target: String,
        result: Result<T, Error>,
    ) -> Result<T, Error> {
        let ok = StatusCode::from_u16(E::STATUS).unwrap_or(StatusCode::OK);
        self.audited_as::<E, T>(caller, target, ok, result).await
    }

    /// [`Services::audited`] on the operation's own path, made from
    /// `keys` (the request's path parameters, as the caller gave them).
    pub(crate) async fn audited_at<E: Endpoint, T>(
        &self,
        caller: &Caller,
        keys: &[&str],
        result: Result<T, Error>,
    ) -> Result<T, Error> {
        self.audited::<E, T>(caller, path_of::<E>(keys), result)
            .await
    }

    /// The status a success with `dry_run` is answered with: a dry run
    /// changes nothing (200), anything else makes what it asks (201).
    pub(crate) fn made_unless(dry_run: bool) -> StatusCode {
        if dry_run {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        }
    }

    /// [`Services::audited`] for an operation that may succeed with
    /// another status than its usual one (a dry run's 200): `ok`, the
    /// status the API answers this success with.
    pub(crate) async fn audited_as<E: Endpoint, T>(
        &self,
        caller: &Caller,
        target: String,
        ok: StatusCode,
        result: Result<T, Error>,
    ) -> Result<T, Error> {
        let status = result.as_ref().map_or_else(Error::status, |_| ok);
        record(
            self.auditor,
            &caller.principal,
            E::ID,
            target,
            caller.source.clone(),
            status,
        )
        .await;
        result
    }
}

/// Records a state-changing call of `p` in the audit trail.
pub(crate) async fn record(
    auditor: &Auditor,
    p: &ApiPrincipal,
    op: &str,
    target: String,
    source: String,
    status: StatusCode,
) {
    let outcome = status.as_u16().to_string();
    let mut entry = AuditEntry::new(now_ms(), p.actor(), op, target, source, outcome);
    if p.user.is_some() {
        entry = entry.with_detail(format!("token {}", p.token_id));
    }
    auditor.record(&p.org_id, entry).await;
}

/// Refuses anything but an admin token (403).
pub(crate) fn require_admin(p: &ApiPrincipal) -> Result<(), Error> {
    match p.scope.as_str() {
        "admin" => Ok(()),
        "deployer" => Err(Error::refused(
            ErrorCode::Forbidden,
            "this token is a deployer's: it starts, approves and rolls out workflows; this change needs an admin token",
        )),
        _ => Err(Error::refused(
            ErrorCode::Forbidden,
            "this token is read-only; use an admin token for changes",
        )),
    }
}

/// Refuses a read-only token (403): starting, approving, cancelling and
/// retrying workflows, builds, releases and rollouts are for deployers and
/// admins.
pub(crate) fn require_deployer(p: &ApiPrincipal) -> Result<(), Error> {
    match p.scope.as_str() {
        "admin" | "deployer" => Ok(()),
        _ => Err(Error::refused(
            ErrorCode::Forbidden,
            "this token is read-only; a deployer or admin token starts, approves and rolls out workflows",
        )),
    }
}

/// Whether `name` is a valid name of a resource: 1 to 64 letters, digits,
/// `-`, `_` or `.`.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Refuses an invalid name of a `what` (400), saying what a name may be.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), Error> {
    if valid_name(name) {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "invalid {what} name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
            name.chars().take(80).collect::<String>()
        )))
    }
}

/// A 500 for something the control plane itself cannot read or write;
/// the detail goes to its log.
pub(crate) fn internal(what: &str, e: impl std::fmt::Display) -> Error {
    tracing::error!(error = %e, "{what}");
    Error::refused(
        ErrorCode::Internal,
        format!("{what}; see the control plane's log"),
    )
}

/// The engine's errors as answers.
impl From<EngineError> for Error {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Invalid(m) => Error::bad_request(m),
            EngineError::NotFound(m) => Error::not_found(m),
            EngineError::Conflict { code, message } => Error::conflict(code, message),
            EngineError::ShuttingDown => Error::refused(
                ErrorCode::ShuttingDown,
                EngineError::ShuttingDown.to_string(),
            ),
            EngineError::Store(e) => Error::Store(e),
            EngineError::Internal(m) => Error::internal(m),
        }
    }
}

impl From<KeyError> for Error {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::NoOrg(org) => Error::not_found(format!("org {org} not found")),
            KeyError::Store(e) => Error::Store(e),
            KeyError::Sealed(m) => Error::internal(m),
            e @ KeyError::Sign(_) => Error::refused(ErrorCode::SignerUnavailable, e.to_string()),
        }
    }
}
