//! The operations served by `nuon-control/src/api/runner_releases.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/runner-releases`.
    PublishRunnerRelease: Post routes::RUNNER_RELEASES, "publishRunnerRelease",
        crate::wire::PublishRunnerRelease => crate::wire::RunnerReleaseInfo, status = 201, body = true,
        summary = "Publish a runner version: a runner binary the vendor pushed to its artifact store as an OCI artifact (`repository`, the manifest and the binary by digest). The control plane signs the release (version, platform, the binary's digest and size) with the org's key; runners take no binary whose release does not verify. A version is published once.";
    /// `GET /v1/runner-releases`.
    ListRunnerReleases: Get routes::RUNNER_RELEASES, "listRunnerReleases",
        () => crate::wire::RunnerReleaseList, body = false,
        summary = "The org's runner releases, newest first.";
    /// `GET /v1/runner-releases/{version}`.
    GetRunnerRelease: Get routes::RUNNER_RELEASE, "getRunnerRelease",
        () => crate::wire::RunnerReleaseInfo, body = false,
        summary = "One runner release, by version (or id).";
    /// `PUT /v1/runner-releases/{version}/binary`: the body is the binary
    /// (`application/octet-stream`), not JSON.
    UploadRunnerBinary: Put routes::RUNNER_RELEASE_BINARY, "uploadRunnerBinary",
        () => crate::wire::RunnerReleaseInfo, body = false,
        summary = "Upload a published runner release's binary (the body, `application/octet-stream`, at most 256 MiB) for the control plane to serve: install stacks then download the runner from the Runner API (`GET /v1/runner/releases/{version}/{os}-{arch}`) and check its digest before it runs. The bytes must be the release's (its SHA-256 and size); uploading them again changes nothing.";
    /// `POST /v1/runner-releases/{version}/rollouts`.
    CreateRunnerRollout: Post routes::RUNNER_RELEASE_ROLLOUTS, "createRunnerRollout",
        crate::rollout::CreateRollout => crate::rollout::RolloutInfo, status = 201, body = true,
        summary = "Update the runners of the installs a label selector picks (`to`, of every app) to this version, in waves; a runner pinned by its customer (`nuon-runner run --pin-version`) is passed over. Each runner downloads, checks and switches to the version itself; an install passes when its runner calls on the version, healthy, and fails with the reason its runner reports (the runner went back to the version before); the first failure stops the rollout. With `dry_run`, only say who gets it, in which wave (200, nothing stored).";
    /// `GET /v1/runner-releases/{version}/rollouts`.
    ListRunnerRollouts: Get routes::RUNNER_RELEASE_ROLLOUTS, "listRunnerRollouts",
        () => crate::rollout::RolloutList, body = false,
        summary = "A runner release's rollouts (and the rollbacks of them), newest first.";
}
