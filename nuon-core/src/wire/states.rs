//! The state backend's view of an install (Terraform's states, and the
//! stacks Pulumi jobs keep there): versions and locks, never the states.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A held Terraform state lock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateLockInfo {
    /// Terraform's lock id.
    pub id: String,
    /// Terraform's lock info as it sent it (`ID`, `Operation`, `Who`,
    /// `Version`, `Created`, ...).
    pub info: serde_json::Value,
    /// When it was taken.
    pub created_at_ms: i64,
}

/// The Terraform state of one component (or `sandbox`) of an install. The
/// state itself is never shown: it holds the install's secrets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentStateInfo {
    /// The component, or `sandbox`.
    pub component: String,
    /// The newest version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_version: Option<u32>,
    /// How many versions are kept.
    pub versions: u32,
    /// When the newest version was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at_ms: Option<i64>,
    /// The lock, when held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<StateLockInfo>,
}

/// The Terraform states of an install.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateList {
    /// By component.
    pub states: Vec<ComponentStateInfo>,
}

/// The answer to a forced unlock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StateUnlocked {
    /// The component.
    pub component: String,
    /// The lock that was released, if one was held.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released: Option<StateLockInfo>,
    /// What happened, for people.
    pub message: String,
}
