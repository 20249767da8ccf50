//! An install's secrets as the Control API shows them (who holds each and
//! whether it is set, never a value), and a change of its inputs and
//! secrets.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An install's secrets, as its config declares them: never a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallSecrets {
    /// The install's name.
    pub install: String,
    /// Each secret of the config, by name.
    pub secrets: Vec<InstallSecret>,
}

/// One secret of an install: who holds its value and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallSecret {
    /// Its name (`{{ .nuon.secrets.NAME }}`).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// `customer` (in the customer's cloud secret store, entered in the
    /// install stack; the control plane never has it) or `vendor` (sealed
    /// by the control plane, given with `--secret`).
    pub held_by: String,
    /// An install must have it.
    pub required: bool,
    /// Whether it has a value: sealed here (vendor), or reported by the
    /// install stack (customer).
    pub set: bool,
    /// Where a customer-held secret is: the ARN the install stack reported
    /// (`NAME_arn`); none before the stack phoned home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}

/// Change some inputs and secrets of an install, and redeploy what reads
/// them (the `update-inputs` workflow).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateInputs {
    /// Input values by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Secret values by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
    /// Only say what would run: nothing is changed or started.
    #[serde(default)]
    pub dry_run: bool,
}
