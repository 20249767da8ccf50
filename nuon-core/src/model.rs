//! The domain: installs, workflows, their steps and jobs as the store
//! keeps them and the engine's rules decide on, and their states, each
//! spelled once (its serde name).
//!
//! The model knows nothing of the wire (tidy holds it). The wire shows
//! these types as they are, under the API's names (`WorkflowInfo`,
//! `JobInfo`, ...), until a wire form has to differ; the store and the
//! engine name them by the model's names. A state compared by its text
//! anywhere else is a bug tidy looks for.

mod install;
mod job;
mod pending;
mod workflow;

pub use install::{CheckStatus, Install, InstallCheck, Overrides};
pub use job::QueuedJob;
pub use pending::{InstallValues, Unapplied};
pub use workflow::{
    Step, StepAttempt, StepKind, StepStatus, Workflow, WorkflowKind, WorkflowStatus,
};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Declares a status enum whose every variant is spelled once, in its serde
/// name: [`as_str`](WorkflowStatus::as_str), `Display`, `FromStr` and
/// comparisons with a `&str` all use that spelling.
macro_rules! status {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant,)*
        }

        impl $name {
            /// Every status, in order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The status as the API spells it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| format!("unknown {} {s:?}", stringify!($name)))
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

pub(crate) use status;

status! {
    /// Where an install is in its life: set by the workflows that run on
    /// it (`provisioning` while one provisions it, `active` once one
    /// succeeded, ...).
    InstallState {
        /// Made, never provisioned.
        #[default]
        Created = "created",
        /// A provision or reprovision runs.
        Provisioning = "provisioning",
        /// A deploy or runbook runs.
        Deploying = "deploying",
        /// A teardown runs (its components are destroyed).
        TearingDown = "tearing_down",
        /// A deprovision runs (components and sandbox are destroyed).
        Deprovisioning = "deprovisioning",
        /// Its last workflow succeeded.
        Active = "active",
        /// Its last workflow failed, or a cancel stopped an apply part way.
        Failed = "failed",
        /// Every component is down; the sandbox stays.
        TornDown = "torn_down",
        /// Nothing of it is left in the customer's cloud.
        Deprovisioned = "deprovisioned",
    }
}

impl InstallState {
    /// Whether it is going away or gone (rollouts and schedules leave it
    /// out).
    pub const fn is_leaving(self) -> bool {
        matches!(
            self,
            InstallState::Deprovisioning | InstallState::Deprovisioned
        )
    }
}

status! {
    /// Whether an install's applies wait for a person.
    ApprovalMode {
        /// Applies run after their plans.
        #[default]
        ApproveAll = "approve-all",
        /// Each apply waits for `nuon workflows approve`.
        Prompt = "prompt",
    }
}

impl ApprovalMode {
    /// The mode an app config or a flag names: Nuon's `auto` is
    /// `approve-all`.
    pub fn from_config(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(ApprovalMode::ApproveAll),
            other => other.parse().map_err(|_| {
                format!("approval mode {other:?} is not one of approve-all (or auto), prompt")
            }),
        }
    }
}

status! {
    /// A runner's health, from the age of its last call against the control
    /// plane's thresholds (`nuon-ctl serve --runner-unhealthy-after`,
    /// `--runner-offline-after`).
    RunnerHealth {
        /// It never called.
        #[default]
        Unknown = "unknown",
        /// It called within the unhealthy threshold.
        Healthy = "healthy",
        /// It has been silent longer than the unhealthy threshold.
        Unhealthy = "unhealthy",
        /// It has been silent longer than the offline threshold, or its token
        /// is revoked.
        Offline = "offline",
    }
}

status! {
    /// Whether a runner is there, as the control plane sees it.
    RunnerStatus {
        /// No process has called with its token yet.
        #[default]
        NeverSeen = "never_seen",
        /// A process called within the time a live runner calls in.
        Connected = "connected",
        /// Its process has not called for longer than that.
        Gone = "gone",
        /// Its token is revoked.
        Revoked = "revoked",
    }
}

status! {
    /// What one of an install's health checks says (the runner, a
    /// component's last deploy, a probe, a pushed check, an action).
    CheckState {
        /// Never run, deployed or reported.
        #[default]
        Unknown = "unknown",
        /// It passed.
        Ok = "ok",
        /// It failed.
        Failed = "failed",
        /// The runner is not there.
        Offline = "offline",
        /// The customer turned the runner off.
        Disabled = "disabled",
        /// Not there: a component never deployed or destroyed, an install
        /// never provisioned, torn down or deprovisioned.
        Absent = "absent",
    }
}

status! {
    /// An install's health, from its state and its checks: only an
    /// `active` install can be healthy.
    HealthStatus {
        /// It is active, its runner is there and nothing failed.
        Healthy = "healthy",
        /// Its last workflow failed, or a component's last deploy, a probe,
        /// a pushed check or a health-check action's last run failed.
        Unhealthy = "unhealthy",
        /// A workflow changes it (it provisions, deploys, tears down or
        /// deprovisions).
        Progressing = "progressing",
        /// Nothing of it is deployed: never provisioned, torn down or
        /// deprovisioned.
        NotDeployed = "not_deployed",
        /// Its runner is not there.
        #[default]
        Offline = "offline",
        /// The customer turned its runner off (`nuon-runner disable`).
        Disabled = "disabled",
    }
}

impl InstallState {
    /// The install's part of its health: `None` when it is active (its
    /// checks decide), else what its state makes it.
    pub const fn health(self) -> Option<HealthStatus> {
        match self {
            InstallState::Active => None,
            InstallState::Failed => Some(HealthStatus::Unhealthy),
            InstallState::Provisioning
            | InstallState::Deploying
            | InstallState::TearingDown
            | InstallState::Deprovisioning => Some(HealthStatus::Progressing),
            InstallState::Created | InstallState::TornDown | InstallState::Deprovisioned => {
                Some(HealthStatus::NotDeployed)
            }
        }
    }
}

status! {
    /// Whether what is desired of an install is deployed (Argo CD's second
    /// axis, beside health).
    SyncStatus {
        /// Every component's last change was applied.
        #[default]
        InSync = "in_sync",
        /// A component's last change was denied, failed or cancelled: what
        /// runs is what an earlier deploy left.
        OutOfSync = "out_of_sync",
    }
}

status! {
    /// What the newest drift check of a component or the sandbox found.
    DriftStatus {
        /// It has a schedule and no check yet.
        #[default]
        NeverChecked = "never_checked",
        /// A check runs or waits.
        Checking = "checking",
        /// Its plan has no changes.
        InSync = "in_sync",
        /// Its plan has changes.
        Drifted = "drifted",
        /// The check did not finish.
        CheckFailed = "check_failed",
    }
}

status! {
    /// Where a webhook delivery is.
    DeliveryStatus {
        /// Not yet delivered; retried with backoff.
        #[default]
        Pending = "pending",
        /// The receiver took it.
        Delivered = "delivered",
        /// Given up on.
        Failed = "failed",
    }
}

status! {
    /// Where a customer's invitation (an installer link) is.
    InvitationState {
        /// It can be opened, and the customer has not installed yet.
        #[default]
        Pending = "pending",
        /// The customer made the install: the link shows that install, to
        /// the browser that made it, and says so to any other.
        Used = "used",
        /// Its time ran out before it was used.
        Expired = "expired",
        /// The vendor took it back.
        Revoked = "revoked",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for s in InstallState::ALL {
            assert_eq!(s.as_str().parse::<InstallState>(), Ok(*s));
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        assert!("torn-down".parse::<InstallState>().is_err());
    }

    #[test]
    fn approval_modes_take_nuons_auto() {
        assert_eq!(
            ApprovalMode::from_config("auto"),
            Ok(ApprovalMode::ApproveAll)
        );
        assert_eq!(
            ApprovalMode::from_config("prompt"),
            Ok(ApprovalMode::Prompt)
        );
        let err = ApprovalMode::from_config("manual").unwrap_err();
        assert!(
            err.contains("approve-all") && err.contains("prompt"),
            "{err}"
        );
    }
}
