//! The domain's own states: what the store keeps, the engine's rules
//! decide on and the APIs show, each spelled once (its serde name).
//!
//! The wire types carry these as they are; a state compared by its text
//! anywhere else is a bug tidy looks for.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workflow::status;

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
