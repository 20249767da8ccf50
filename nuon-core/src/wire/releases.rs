//! Releases as the Control API shows them: a config version of an app
//! frozen with its builds.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::AppId;

/// Freeze a release: a config version of an app and the newest successful
/// build of each of its components (and its sandbox).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRelease {
    /// The app, by name or id.
    pub app: String,
    /// The config version (default: the latest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u32>,
}

/// A release: what every install it is deployed to gets, whatever is
/// synced or built after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseInfo {
    /// Its id.
    pub id: crate::ReleaseId,
    /// The app.
    pub app_id: AppId,
    /// The app's name, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// The config version.
    pub config_version: u32,
    /// The artifact of each component and of `sandbox`, by digest.
    pub builds: BTreeMap<String, crate::job::ArtifactRef>,
    /// When it was made.
    pub created_at_ms: i64,
}

/// Releases, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReleaseList {
    /// Newest first.
    pub releases: Vec<ReleaseInfo>,
}
