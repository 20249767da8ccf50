//! Installs: an app deployed into one customer's account, with its
//! state, values, labels and the checks pushed for it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ApprovalMode, InstallState, Unapplied};
use crate::app::{Component, ComponentOverride};
use crate::labels::Labels;
use crate::{AppId, InstallId, RunnerId};

/// An install's own values for its components, by component name.
pub type Overrides = BTreeMap<String, ComponentOverride>;

/// An install: what the store keeps of it and the engine deploys by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Install {
    /// The install.
    pub id: InstallId,
    /// Unique in the org.
    pub name: String,
    /// Its app.
    pub app_id: AppId,
    /// The config version it runs.
    pub config_version: u32,
    /// Its runner.
    pub runner_id: RunnerId,
    /// Its state.
    pub state: InstallState,
    /// Plain input values, JSON object.
    pub inputs_json: String,
    /// Sealed values, JSON.
    pub sealed_json: String,
    /// Outputs, JSON, once deployed.
    pub outputs_json: Option<String>,
    /// When it was created.
    pub created_at_ms: i64,
    /// Whether its applies wait for a person.
    pub approval: ApprovalMode,
    /// Components turned on or off on this install (`nuon installs
    /// components enable|disable`); the others follow their
    /// `default_enabled`.
    pub toggles: BTreeMap<String, bool>,
    /// Its own Helm values or Terraform variables for components
    /// (`nuon installs components override`), merged over the config's.
    pub overrides: Overrides,
    /// Its labels (`tier=prod`), which groups and rollouts select by.
    pub labels: Labels,
    /// The checks the vendor's systems pushed for it, by name, as last
    /// reported (`nuon installs checks push`).
    pub checks: BTreeMap<String, InstallCheck>,
    /// What its stack reported when it phoned home: a JSON object of
    /// strings, sealed (so a value changed in the store is refused; see
    /// `engine::render::stack_outputs`).
    pub stack_outputs: Option<String>,
    /// Its values changed and not deployed everywhere yet.
    pub pending: Option<Unapplied>,
    /// The revision of `pending`, which a change of it is made over.
    pub pending_rev: i64,
}

impl Install {
    /// Whether `component` is on for this install.
    pub fn enabled(&self, component: &Component) -> bool {
        !component.toggleable
            || self
                .toggles
                .get(&component.name)
                .copied()
                .unwrap_or(component.default_enabled)
    }
}

/// A pushed check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// What it checks is ready.
    Healthy,
    /// What it checks is not.
    Unhealthy,
}

impl CheckStatus {
    /// The status as the API spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Healthy => "healthy",
            CheckStatus::Unhealthy => "unhealthy",
        }
    }
}

/// A check as last pushed for an install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallCheck {
    /// Its name (what `required_checks` names).
    pub name: String,
    /// As last reported.
    pub status: CheckStatus,
    /// What it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// When it was reported, milliseconds since the Unix epoch.
    pub at_ms: i64,
}
