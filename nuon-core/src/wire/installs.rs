//! An install as the Control API shows it: its values (sensitive ones
//! only by name), its state, and who set what.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApprovalMode, HealthStatus, InstallState, SyncStatus};
use crate::id::{AppId, InstallId, RunnerId};

/// An install. Sensitive inputs and secrets are never shown: only which
/// ones are set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallInfo {
    /// Its id.
    pub id: InstallId,
    /// Its name.
    pub name: String,
    /// Its app.
    pub app_id: AppId,
    /// The app's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// The app config version it runs.
    pub config_version: u32,
    /// Its runner.
    pub runner_id: RunnerId,
    /// `created`, later `provisioning`, `active`, ...
    pub state: InstallState,
    /// Its health (`getInstallHealth`'s status; only an `active` install
    /// is `healthy`): filled by `listInstalls` and `getInstall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthStatus>,
    /// Whether every component's last change was applied (`in_sync`) or
    /// one was denied, failed or cancelled (`out_of_sync`): filled by
    /// `listInstalls` and `getInstall`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncStatus>,
    /// `approve-all` or `prompt`.
    pub approval: ApprovalMode,
    /// The values of its inputs that are not sensitive (defaults included).
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// The sensitive inputs that have a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive_inputs: Vec<String>,
    /// The secrets that have a value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Outputs of its sandbox and components, once deployed.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub outputs: serde_json::Value,
    /// Its labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The release it has: the last one a rollout deployed to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_id: Option<crate::ReleaseId>,
    /// The inputs the customer set on the installer page, by name (a
    /// sensitive one's value is never shown); only `getInstall` fills it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub customer_inputs: Vec<String>,
    /// When it was created.
    pub created_at_ms: i64,
}

/// A new install, with its runner's token (shown only here, once).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallCreated {
    /// The install.
    pub install: InstallInfo,
    /// The install runner's token for the Runner API.
    pub runner_token: String,
    /// The org's job-signing public key to configure the runner with.
    pub signing_public_key: String,
    /// The Runner API's URL as the control plane knows it (its
    /// `--runner-url`, or its runner listener's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_api_url: Option<String>,
}

/// A list of installs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallList {
    /// Oldest first.
    pub installs: Vec<InstallInfo>,
}
