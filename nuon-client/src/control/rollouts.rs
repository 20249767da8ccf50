//! Releases, rollouts and runner releases: what the client asks of the
//! Control API about shipping a version to installs.

use super::*;

impl ControlClient {
    /// Freezes a release of `app`: a config version (default: the
    /// latest) and the newest successful build of each component.
    pub async fn create_release(
        &self,
        app: &str,
        config_version: Option<u32>,
    ) -> Result<ReleaseInfo> {
        let req = self
            .http
            .request(reqwest::Method::POST, routes::RELEASES)
            .json(&CreateRelease {
                app: app.to_owned(),
                config_version,
            });
        self.http.send(req).await
    }

    /// The org's releases (of `app` when given), newest first.
    pub async fn list_releases(&self, app: Option<&str>) -> Result<ReleaseList> {
        let mut req = self.http.request(reqwest::Method::GET, routes::RELEASES);
        if let Some(app) = app {
            req = req.query(&[("app", app)]);
        }
        self.http.send(req).await
    }

    /// One release.
    pub async fn get_release(&self, id: &str) -> Result<ReleaseInfo> {
        self.call::<ep::GetRelease>(&[id], &()).await
    }

    /// Rolls `release` out (or, with `dry_run`, plans it): see
    /// [`CreateRollout`].
    pub async fn create_rollout(&self, release: &str, req: &CreateRollout) -> Result<RolloutInfo> {
        self.call::<ep::CreateRollout>(&[release], req).await
    }

    /// A release's rollouts (and their rollbacks), newest first.
    pub async fn list_rollouts(&self, release: &str) -> Result<RolloutList> {
        self.call::<ep::ListRollouts>(&[release], &()).await
    }

    /// One rollout, with every install's state.
    pub async fn get_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.call::<ep::GetRollout>(&[id], &()).await
    }

    /// Goes on with a rollout: its next wave (one that waits for an
    /// approval), or past the installs that failed.
    pub async fn resume_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.rollout_act(routes::ROLLOUT_RESUME, id).await
    }

    /// Deploys a rollout's failed installs again.
    pub async fn retry_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.rollout_act(routes::ROLLOUT_RETRY, id).await
    }

    /// Starts nothing more of a rollout.
    pub async fn cancel_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.rollout_act(routes::ROLLOUT_CANCEL, id).await
    }

    /// Rolls a rollout back: the answer is the rollout that returns its
    /// installs to their release before.
    pub async fn rollback_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.rollout_act(routes::ROLLOUT_ROLLBACK, id).await
    }

    /// Pauses a rollout: what runs finishes, nothing new starts until it
    /// is resumed.
    pub async fn pause_rollout(&self, id: &str) -> Result<RolloutInfo> {
        self.rollout_act(routes::ROLLOUT_PAUSE, id).await
    }

    /// Publishes a runner version the caller pushed to the vendor's store;
    /// the control plane signs it with the org's key.
    pub async fn publish_runner_release(
        &self,
        req: &nuon_core::wire::PublishRunnerRelease,
    ) -> Result<nuon_core::wire::RunnerReleaseInfo> {
        self.call::<ep::PublishRunnerRelease>(&[], req).await
    }

    /// Uploads runner release `version`'s binary for the control plane to
    /// serve to install stacks (`bytes` must be the ones published: their
    /// digest and size).
    pub async fn upload_runner_binary(
        &self,
        version: &str,
        bytes: Vec<u8>,
    ) -> Result<nuon_core::wire::RunnerReleaseInfo> {
        let path = nuon_core::endpoint::path_of::<ep::UploadRunnerBinary>(&[version]);
        // A binary of tens of MiB: more time than a JSON call's.
        let req = self
            .http
            .request(reqwest::Method::PUT, &path)
            .timeout(std::time::Duration::from_secs(600))
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(bytes);
        self.http.send(req).await
    }

    /// The org's runner releases, newest first.
    pub async fn list_runner_releases(&self) -> Result<nuon_core::wire::RunnerReleaseList> {
        self.call::<ep::ListRunnerReleases>(&[], &()).await
    }

    /// One runner release, by version or id.
    pub async fn get_runner_release(
        &self,
        version: &str,
    ) -> Result<nuon_core::wire::RunnerReleaseInfo> {
        self.call::<ep::GetRunnerRelease>(&[version], &()).await
    }

    /// Updates install runners to runner `version` in waves (or, with
    /// `dry_run`, plans it): see [`CreateRollout`].
    pub async fn create_runner_rollout(
        &self,
        version: &str,
        req: &CreateRollout,
    ) -> Result<RolloutInfo> {
        self.call::<ep::CreateRunnerRollout>(&[version], req).await
    }

    /// A runner release's rollouts (and their rollbacks), newest first.
    pub async fn list_runner_rollouts(&self, version: &str) -> Result<RolloutList> {
        self.call::<ep::ListRunnerRollouts>(&[version], &()).await
    }

    async fn rollout_act(&self, route: &str, id: &str) -> Result<RolloutInfo> {
        self.http
            .post(&routes::with_id(route, &seg(id)), &(), Duration::ZERO)
            .await
    }
}
