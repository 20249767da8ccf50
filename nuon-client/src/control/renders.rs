//! What the client asks the Control API to render for an install without
//! running anything: a workflow's steps, and the app's README.

use super::*;

impl ControlClient {
    /// What each step of `workflow` (`provision`, `deploy`, ...) would be
    /// given on `install`, rendered; secrets as stand-ins. Nothing runs.
    pub async fn render_install(
        &self,
        install: &str,
        workflow: &str,
    ) -> Result<nuon_core::rendered::RenderedWorkflow> {
        self.call::<nuon_core::endpoint::RenderInstall>(&[install, workflow], &())
            .await
    }

    /// `install`'s secrets: who holds each, whether it is set, and where a
    /// customer-held one is. Never a value.
    pub async fn install_secrets(&self, install: &str) -> Result<nuon_core::wire::InstallSecrets> {
        self.call::<nuon_core::endpoint::ListInstallSecrets>(&[install], &())
            .await
    }

    /// The app's README rendered for `install`: what does not render is a
    /// warning, and the README is then shown as written.
    pub async fn install_readme(
        &self,
        install: &str,
    ) -> Result<nuon_core::rendered::RenderedReadme> {
        self.call::<nuon_core::endpoint::GetInstallReadme>(&[install], &())
            .await
    }
}
