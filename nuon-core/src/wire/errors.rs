//! The API's error codes: the stable word an error answer carries beside
//! its message, spelled once here for the control plane that answers with
//! it and the client that acts on it.
//!
//! The body keeps the code as text ([`ApiErrorBody::code`]), so a client
//! reads a code a newer control plane added; [`ApiErrorBody::error_code`]
//! gives it typed when this build knows it.
//!

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::Diagnostic;
use crate::model::status;

/// The body of every error answer of both APIs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiError {
    /// The error.
    pub error: ApiErrorBody,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ApiErrorBody {
    /// A stable machine-readable code (`not_found`, `stale_attempt`, ...).
    pub code: String,
    /// A sentence for people: what, where, and how to fix it.
    pub message: String,
    /// With `logs_pending`: the highest log sequence number the server holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_seq: Option<u64>,
    /// With `invalid_config`: every problem of the config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<Diagnostic>,
}

status! {
    /// A stable, machine-readable reason for an error answer.
    ErrorCode {
        // ---- Any operation
        /// The request is malformed or asks for something that cannot be.
        BadRequest = "bad_request",
        /// What it names is not there (or not visible to the caller).
        NotFound = "not_found",
        /// The control plane failed; its log says why.
        #[default]
        Internal = "internal",
        /// No credential, or one that is not valid.
        Unauthorized = "unauthorized",
        /// The credential is valid but may not do this.
        Forbidden = "forbidden",
        /// An app config that does not validate (with `diagnostics`).
        InvalidConfig = "invalid_config",
        /// Too many failed sign-ins or token checks (with `Retry-After`).
        TooManyAttempts = "too_many_attempts",
        /// The control plane is stopping; try again when it is back.
        ShuttingDown = "shutting_down",
        /// The body is over the operation's limit.
        TooLarge = "too_large",
        /// The body's media type is not one the operation reads.
        UnsupportedMediaType = "unsupported_media_type",
        /// The path exists, not with this method.
        MethodNotAllowed = "method_not_allowed",
        /// A token of one API used on the other (runner against control).
        WrongApi = "wrong_api",
        /// A dashboard form without its CSRF token.
        Csrf = "csrf",
        /// The org's signing key cannot be opened.
        SignerUnavailable = "signer_unavailable",
        /// The answer was not an API error body (said by the client).
        HttpError = "http_error",
        // ---- Names, people and keys
        /// The name is used by another of its kind.
        NameTaken = "name_taken",
        /// The email belongs to another person of the org.
        EmailTaken = "email_taken",
        /// The org's last owner cannot leave or lose the role.
        LastOwner = "last_owner",
        /// A sign-in's subject is not the one the person is bound to.
        SubjectMismatch = "subject_mismatch",
        /// The key was rotated meanwhile; read it again.
        KeyRotated = "key_rotated",
        /// A token cannot revoke itself.
        OwnToken = "own_token",
        /// Single sign-on refused.
        SignInRefused = "sign_in_refused",
        /// No person of the org has this sign-in.
        UnknownSignIn = "unknown_sign_in",
        /// The person was never invited to the org.
        NotInvited = "not_invited",
        /// The identity provider failed or answered wrongly.
        IdentityProvider = "identity_provider",
        /// The control plane has no OIDC provider configured.
        OidcNotConfigured = "oidc_not_configured",
        // ---- Runners and jobs
        /// The job's attempt is no longer the current one.
        StaleAttempt = "stale_attempt",
        /// Log lines the control plane does not hold yet (with `acked_seq`).
        LogsPending = "logs_pending",
        /// Another process holds the runner's session.
        RunnerInUse = "runner_in_use",
        /// The operation needs the runner's session.
        RunnerSessionRequired = "runner_session_required",
        /// The runner's settings do not render.
        SettingsNotRendered = "settings_not_rendered",
        /// The runner signs with a key the control plane does not know.
        WrongSigningKey = "wrong_signing_key",
        /// The runner release is already published.
        RunnerReleaseExists = "runner_release_exists",
        /// The runner is not an install's runner.
        NotAnInstallRunner = "not_an_install_runner",
        /// The install's customer refused this on their runner.
        InstallRunnerPolicy = "install_runner_policy",
        /// No build runner serves the org.
        NoBuildRunner = "no_build_runner",
        /// The component's build has not succeeded.
        NotBuilt = "not_built",
        // ---- Installs, stacks and state
        /// A workflow runs on the install.
        InstallBusy = "install_busy",
        /// The install is in a rollout that is not finished.
        InstallInRollout = "install_in_rollout",
        /// An app with installs cannot be deleted.
        AppHasInstalls = "app_has_installs",
        /// The install's values do not render or check.
        InstallValuesRefused = "install_values_refused",
        /// The install's inputs do not check.
        InvalidInputs = "invalid_inputs",
        /// The install cannot be made as asked.
        InvalidInstall = "invalid_install",
        /// Labels that do not check.
        InvalidLabels = "invalid_labels",
        /// A label selector that does not parse.
        InvalidSelector = "invalid_selector",
        /// The install's stack token is refused.
        InstallTokenRefused = "install_token_refused",
        /// The install's stack has not been made.
        StackNotMade = "stack_not_made",
        /// The stack's outputs are refused.
        StackOutputsRefused = "stack_outputs_refused",
        /// A state belongs to another component.
        WrongComponent = "wrong_component",
        /// The state is locked by another job.
        StateLocked = "state_locked",
        // ---- Workflows and rollouts
        /// The workflow has ended.
        WorkflowEnded = "workflow_ended",
        /// The step does not wait for an approval.
        NotWaiting = "not_waiting",
        /// No such step in the workflow.
        NoSuchStep = "no_such_step",
        /// The step is not a plan.
        NotAPlan = "not_a_plan",
        /// The workflow has not failed.
        NotFailed = "not_failed",
        /// The step comes after one that did not finish: retry from that one.
        AfterTheFailure = "after_the_failure",
        /// The step is not the failed one.
        NotFailedStep = "not_failed_step",
        /// The step still runs.
        StepRunning = "step_running",
        /// It has already started.
        AlreadyStarted = "already_started",
        /// The rollout changed meanwhile; read it again.
        StaleRollout = "stale_rollout",
        /// The rollout is not in a state that takes this command.
        RolloutState = "rollout_state",
        /// The install has no pending values to apply or discard.
        NothingPending = "nothing_pending",
    }
}

impl ErrorCode {
    /// The HTTP status an answer with this code has: one status per code,
    /// so what refuses a request names only its code (the service layer
    /// speaks in codes; the API answers with this), and a client knows
    /// what a status means from the code it reads.
    pub const fn http_status(self) -> u16 {
        match self {
            Self::BadRequest
            | Self::InvalidConfig
            | Self::UnknownSignIn
            | Self::RunnerSessionRequired
            | Self::InvalidInputs
            | Self::InvalidInstall
            | Self::InvalidLabels
            | Self::InvalidSelector => 400,
            Self::Unauthorized | Self::SignInRefused | Self::InstallTokenRefused => 401,
            Self::Forbidden
            | Self::Csrf
            | Self::NotInvited
            | Self::NotAnInstallRunner
            | Self::InstallRunnerPolicy
            | Self::WrongComponent => 403,
            Self::NotFound | Self::WrongApi | Self::OidcNotConfigured => 404,
            Self::MethodNotAllowed => 405,
            Self::NameTaken
            | Self::EmailTaken
            | Self::LastOwner
            | Self::SubjectMismatch
            | Self::KeyRotated
            | Self::OwnToken
            | Self::StaleAttempt
            | Self::LogsPending
            | Self::RunnerInUse
            | Self::SettingsNotRendered
            | Self::WrongSigningKey
            | Self::RunnerReleaseExists
            | Self::NoBuildRunner
            | Self::NotBuilt
            | Self::InstallBusy
            | Self::InstallInRollout
            | Self::AppHasInstalls
            | Self::InstallValuesRefused
            | Self::StackNotMade
            | Self::StackOutputsRefused
            | Self::StateLocked
            | Self::WorkflowEnded
            | Self::NotWaiting
            | Self::NoSuchStep
            | Self::NotAPlan
            | Self::NotFailed
            | Self::AfterTheFailure
            | Self::NotFailedStep
            | Self::StepRunning
            | Self::AlreadyStarted
            | Self::StaleRollout
            | Self::RolloutState
            | Self::NothingPending => 409,
            Self::TooLarge => 413,
            Self::UnsupportedMediaType => 415,
            Self::TooManyAttempts => 429,
            Self::Internal => 500,
            Self::HttpError | Self::IdentityProvider => 502,
            Self::ShuttingDown | Self::SignerUnavailable => 503,
        }
    }
}

impl ApiErrorBody {
    /// Its code, when this build knows it (a newer control plane may
    /// answer with one it does not).
    pub fn error_code(&self) -> Option<ErrorCode> {
        self.code.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_reads_back_and_is_snake_case() {
        for c in ErrorCode::ALL {
            assert_eq!(c.as_str().parse::<ErrorCode>(), Ok(*c));
            assert!(
                c.as_str()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{c}"
            );
            let json = serde_json::to_string(c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
        }
        assert!("no_such_code".parse::<ErrorCode>().is_err());
    }

    /// Every code answers with an error status, a refusal of the caller's
    /// (4xx) or the control plane's own failure (5xx) as the code says.
    #[test]
    fn every_code_has_one_error_status() {
        for c in ErrorCode::ALL {
            let status = c.http_status();
            assert!((400..=599).contains(&status), "{c}: {status}");
        }
        let server_side = [
            ErrorCode::Internal,
            ErrorCode::HttpError,
            ErrorCode::IdentityProvider,
            ErrorCode::ShuttingDown,
            ErrorCode::SignerUnavailable,
        ];
        for c in ErrorCode::ALL {
            assert_eq!(server_side.contains(c), c.http_status() >= 500, "{c}");
        }
        assert_eq!(ErrorCode::NotFound.http_status(), 404);
        assert_eq!(ErrorCode::StaleAttempt.http_status(), 409);
    }
}
