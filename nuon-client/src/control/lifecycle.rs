//! An install's lifecycle: deleting or forgetting it, changing its
//! inputs, and applying or discarding what it changed and did not deploy;
//! deleting an app.

use super::*;

impl ControlClient {
    /// Deletes an install: starts its deprovision (the answer); the
    /// install is removed when it succeeds.
    pub async fn delete_install(&self, install: &str) -> Result<WorkflowInfo> {
        self.call::<ep::DeleteInstall>(&[install], &()).await
    }

    /// Removes an install's record only: nothing is destroyed.
    pub async fn forget_install(&self, install: &str) -> Result<nuon_core::wire::InstallRemoved> {
        self.call::<ep::ForgetInstall>(&[install], &()).await
    }

    /// Changes inputs and secrets of an install and starts the workflow
    /// that redeploys what reads them (or, with `dry_run`, says what would
    /// run).
    pub async fn update_inputs(
        &self,
        install: &str,
        req: &nuon_core::wire::UpdateInputs,
    ) -> Result<nuon_core::wire::InputsUpdated> {
        self.call::<ep::UpdateInstallInputs>(&[install], req).await
    }

    /// Deletes an app (refused while it has installs).
    pub async fn delete_app(&self, app: &str) -> Result<nuon_core::wire::AppInfo> {
        self.call::<ep::DeleteApp>(&[app], &()).await
    }

    /// Sets some inputs of an install.
    pub async fn set_inputs(
        &self,
        install: &str,
        inputs: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> Result<InstallInfo> {
        self.call::<ep::SetInstallInputs>(&[install], &SetInputs { inputs })
            .await
    }

    /// Deploys an install's pending values (changed by a workflow that was
    /// denied, failed or cancelled): the components that do not run them
    /// yet are deployed again.
    pub async fn apply_pending(&self, install: &str) -> Result<nuon_core::wire::PendingResolved> {
        self.call::<ep::ApplyInstallPending>(&[install], &()).await
    }

    /// Drops an install's pending values: what is deployed comes back, and
    /// the components the change was for are deployed again with it.
    pub async fn discard_pending(&self, install: &str) -> Result<nuon_core::wire::PendingResolved> {
        self.call::<ep::DiscardInstallPending>(&[install], &())
            .await
    }
}
