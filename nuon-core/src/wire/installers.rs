//! Installers (an app's `installer.toml`) and the invitations a vendor
//! sends its customers: a link to the installer page, bound to one org,
//! one app (or one install to finish) and an expiry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::InvitationState;
use crate::app::Installer;
use crate::id::{AppId, InstallId, InvitationId};

/// The routes of installers and invitations.
pub mod routes {
    /// Control API: the org's installers (one per app that has
    /// `installer.toml`).
    pub const INSTALLERS: &str = "/v1/installers";
    /// Control API: one app's installer (by the app's id or name).
    pub const INSTALLER: &str = "/v1/installers/{id}";
    /// Control API: invitations.
    pub const INVITATIONS: &str = "/v1/invitations";
    /// Control API: one invitation.
    pub const INVITATION: &str = "/v1/invitations/{id}";
    /// The customer's installer page an invitation links to (no token but
    /// the link's own).
    pub const INSTALLER_PAGE: &str = "/install/{token}";
}

/// One app's installer: its `installer.toml` as the latest config has it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallerInfo {
    /// The app.
    pub app_id: AppId,
    /// The app's name.
    pub app_name: String,
    /// The config version it was read from.
    pub config_version: u32,
    /// What the installer page shows.
    pub installer: Installer,
}

/// The org's installers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallerList {
    /// By app name.
    pub installers: Vec<InstallerInfo>,
}

/// A new invitation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInvitation {
    /// The app the customer installs (id or name).
    pub app: String,
    /// An install the customer finishes (applies its stack) instead of
    /// making one; it must be of `app` and not provisioned yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
    /// The name the install will have (the customer picks one when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whom it is for (kept for the vendor's records; nothing is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// How long the link works: `30m`, `12h`, `7d` (default `7d`, at most
    /// `90d`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<String>,
}

/// An invitation, as the vendor sees it (never its token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvitationInfo {
    /// Its id.
    pub id: InvitationId,
    /// The app it installs.
    pub app_id: AppId,
    /// The app's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// The install it made or finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_id: Option<InstallId>,
    /// The install's name, when the vendor chose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whom it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// `pending`, `used`, `expired` or `revoked`.
    pub state: InvitationState,
    /// Who made it.
    pub created_by: String,
    /// When it was made.
    pub created_at_ms: i64,
    /// When the link stops working.
    pub expires_at_ms: i64,
    /// When the customer made (or took over) the install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_at_ms: Option<i64>,
    /// When the vendor took it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<i64>,
}

/// A new invitation with its link (shown only here, once: the control
/// plane keeps only the token's hash).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvitationCreated {
    /// The invitation.
    pub invitation: InvitationInfo,
    /// The link to send: `https://CTL/install/TOKEN`.
    pub url: String,
}

/// The org's invitations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InvitationList {
    /// Newest first.
    pub invitations: Vec<InvitationInfo>,
}
