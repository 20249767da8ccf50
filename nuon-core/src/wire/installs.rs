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
    /// Its values changed and not deployed everywhere yet (a workflow
    /// deploying them was denied, failed or was cancelled, or still runs),
    /// with the commands to apply or discard them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingValues>,
    /// When it was created.
    pub created_at_ms: i64,
}

/// An install's values changed and not deployed everywhere yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingValues {
    /// Each value changed: an input's value before and after, a sensitive
    /// input or a secret by name only.
    pub changes: Vec<PendingValue>,
    /// The components that do not run the change yet.
    pub components: Vec<String>,
    /// The components that run it already (a discard deploys them again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// The newest workflow that deploys it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<crate::WorkflowId>,
    /// How that workflow ended (`denied`, `failed`, `cancelled`), or none
    /// while it runs or when none was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// When the first change was made.
    pub since_ms: i64,
    /// The command that deploys it.
    pub apply: String,
    /// The command that returns the deployed values.
    pub discard: String,
}

impl PendingValues {
    /// In words: `input queue_size: 5 → 9; not deployed (workflow wfl_…
    /// was denied)`.
    pub fn summary(&self) -> String {
        let changes: Vec<String> = self.changes.iter().map(PendingValue::line).collect();
        let why = match (&self.workflow_id, self.ended.as_deref()) {
            (Some(w), Some(how)) => format!("workflow {w} was {how}"),
            (Some(w), None) => format!("workflow {w} deploys it"),
            (None, _) => "no workflow deployed it yet".to_owned(),
        };
        format!(
            "{}; not deployed to {} ({why})",
            changes.join(", "),
            self.components.join(", ")
        )
    }
}

/// One value of an install changed and not deployed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingValue {
    /// `input`, `sensitive_input`, `secret`, `component` (turned on or
    /// off) or `overrides` (a component's own values).
    pub kind: String,
    /// The input's, secret's or component's name.
    pub name: String,
    /// What is deployed (none: unset, or never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployed: Option<String>,
    /// What is desired (none: unset, or never shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<String>,
}

impl PendingValue {
    /// `input queue_size: 5 → 9`, `secret token: changed`.
    pub fn line(&self) -> String {
        let side = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".into());
        match self.kind.as_str() {
            "input" | "component" => format!(
                "{} {}: {} → {}",
                self.kind,
                self.name,
                side(&self.deployed),
                side(&self.desired)
            ),
            _ => format!("{} {}: changed", self.kind, self.name),
        }
    }
}

/// What applying or discarding an install's pending values did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PendingResolved {
    /// The install after.
    pub install: InstallInfo,
    /// The workflows started: the deploy of the components (and a
    /// teardown of each component turned off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<super::WorkflowInfo>,
    /// What was done, for people.
    pub message: String,
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

/// A list of installs: all of them, or a page of them (`limit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallList {
    /// Oldest first (by creation, then id).
    pub installs: Vec<InstallInfo>,
    /// Where the next page starts, when there are more than this page
    /// holds: what to pass as `after` for it. Absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<InstallCursor>,
}

/// Where a page of installs ends: the creation time and id of its last
/// install (`1733300000000.ins_…`), the order installs are listed in. A
/// cursor still holds when that install is removed in between.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstallCursor {
    /// The last install's creation, milliseconds since the epoch.
    pub created_at_ms: i64,
    /// The last install.
    pub id: crate::InstallId,
}

impl InstallCursor {
    /// The most installs one page holds.
    pub const MAX_PAGE: u32 = 1000;
}

impl std::fmt::Display for InstallCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.created_at_ms, self.id)
    }
}

impl std::str::FromStr for InstallCursor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            // Its start only: what a caller sent is echoed bounded.
            let shown: String = s.chars().take(64).collect();
            format!(
                "{shown:?} is not a cursor of installs: pass the `next` of the page before \
                 (CREATED_MS.INSTALL_ID)"
            )
        };
        let (at, id) = s.split_once('.').ok_or_else(bad)?;
        Ok(InstallCursor {
            created_at_ms: at.parse().map_err(|_| bad())?,
            id: id.parse().map_err(|_| bad())?,
        })
    }
}

impl Serialize for InstallCursor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InstallCursor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for InstallCursor {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "InstallCursor".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^-?[0-9]+\\.ins_[0-9A-HJKMNP-TV-Z]{26}$",
            "description": "Where a page of installs ends: `CREATED_MS.INSTALL_ID` of its last install.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_of_installs_reads_back_as_written_and_says_what_it_wants() {
        let id: InstallId = "ins_01JDZQ8F9N7T3V5W2X4Y6Z8A0B".parse().unwrap();
        let c = InstallCursor {
            created_at_ms: 1_733_300_000_000,
            id,
        };
        let text = c.to_string();
        assert_eq!(text, "1733300000000.ins_01JDZQ8F9N7T3V5W2X4Y6Z8A0B");
        assert_eq!(text.parse::<InstallCursor>().unwrap(), c);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<InstallCursor>(&json).unwrap(), c);
        for bad in [
            "",
            "1733300000000",
            "x.ins_01JDZQ8F9N7T3V5W2X4Y6Z8A0B",
            "1733300000000.ins_short",
            "1733300000000.app_01JDZQ8F9N7T3V5W2X4Y6Z8A0B",
        ] {
            let e = bad.parse::<InstallCursor>().unwrap_err();
            assert!(
                e.contains("pass the `next` of the page before"),
                "{bad:?}: {e}"
            );
        }
    }
}
