//! The operations served by `nuon-control/src/api/installers.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installers`.
    ListInstallers: Get routes::INSTALLERS, "listInstallers",
        () => crate::wire::InstallerList, body = false,
        summary = "The org's installers: each app whose latest config has an installer.toml, with what its installer page shows.";
    /// `GET /v1/installers/{id}`.
    GetInstaller: Get routes::INSTALLER, "getInstaller",
        () => crate::wire::InstallerInfo, body = false,
        summary = "One app's installer (by the app's id or name); 404 when its latest config has no installer.toml.";
    /// `POST /v1/invitations`.
    CreateInvitation: Post routes::INVITATIONS, "createInvitation",
        crate::wire::CreateInvitation => crate::wire::InvitationCreated, status = 201, body = true,
        summary = "Invite a customer to install an app (or to finish an install): a link to the installer page, https://CTL/install/TOKEN, working until it expires (default 7d), for one install. The link is in this answer only; the control plane keeps its hash. Needs an admin token.";
    /// `GET /v1/invitations`.
    ListInvitations: Get routes::INVITATIONS, "listInvitations",
        () => crate::wire::InvitationList, body = false,
        summary = "The org's invitations, newest first: pending, used (with the install), expired or revoked.";
    /// `DELETE /v1/invitations/{id}`.
    RevokeInvitation: Delete routes::INVITATION, "revokeInvitation",
        () => crate::wire::InvitationInfo, body = false,
        summary = "Take an invitation back: its link stops working at once (a customer's install it made stays). Needs an admin token.";
}
