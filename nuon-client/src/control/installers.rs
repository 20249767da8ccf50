//! Installers and invitations: the customer's installer page as the
//! vendor's tooling sees it.

use super::*;
use nuon_core::wire::{
    CreateInvitation, InstallerInfo, InstallerList, InvitationCreated, InvitationInfo,
    InvitationList,
};

impl ControlClient {
    /// The org's installers: each app whose latest config has an
    /// `installer.toml`.
    pub async fn list_installers(&self) -> Result<InstallerList> {
        self.call::<ep::ListInstallers>(&[], &()).await
    }

    /// One app's installer (by the app's id or name).
    pub async fn get_installer(&self, app: &str) -> Result<InstallerInfo> {
        self.call::<ep::GetInstaller>(&[app], &()).await
    }

    /// Invites a customer: the answer's `url` is the link to send, shown
    /// only here. Admin only.
    pub async fn create_invitation(&self, req: &CreateInvitation) -> Result<InvitationCreated> {
        self.call::<ep::CreateInvitation>(&[], req).await
    }

    /// The org's invitations, newest first.
    pub async fn list_invitations(&self) -> Result<InvitationList> {
        self.call::<ep::ListInvitations>(&[], &()).await
    }

    /// Takes an invitation back: its link stops working. Admin only.
    pub async fn revoke_invitation(&self, id: &str) -> Result<InvitationInfo> {
        self.call::<ep::RevokeInvitation>(&[id], &()).await
    }
}
