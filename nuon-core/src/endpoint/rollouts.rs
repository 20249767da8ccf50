//! The operations served by `nuon-control/src/api/rollouts.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/releases/{id}/rollouts`.
    CreateRollout: Post routes::RELEASE_ROLLOUTS, "createRollout",
        crate::rollout::CreateRollout => crate::rollout::RolloutInfo, status = 201, body = true,
        summary = "Roll a release out to the installs of its app that a label selector picks (`to`), in waves (`1,10%,100%`), at most `max_parallel` at once, each by its normal deploy workflow; a failed install stops it. With `dry_run`, only say who gets what, in which wave (200, nothing stored).";
    /// `GET /v1/releases/{id}/rollouts`.
    ListRollouts: Get routes::RELEASE_ROLLOUTS, "listRollouts",
        () => crate::rollout::RolloutList, body = false,
        summary = "A release's rollouts (and the rollbacks of them), newest first.";
    /// `GET /v1/rollouts/{id}`.
    GetRollout: Get routes::ROLLOUT, "getRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "One rollout: its status, wave, and every install's state, workflow and reason.";
    /// `POST /v1/rollouts/{id}/resume`.
    ResumeRollout: Post routes::ROLLOUT_RESUME, "resumeRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "Go on: start the next wave of a rollout that waits for an approval, go on with a paused one, or pass over the installs that failed and go on without them.";
    /// `POST /v1/rollouts/{id}/pause`.
    PauseRollout: Post routes::ROLLOUT_PAUSE, "pauseRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "Pause a rollout: what deploys (or updates) finishes and is recorded; nothing new starts until `resume`.";
    /// `POST /v1/rollouts/{id}/retry`.
    RetryRollout: Post routes::ROLLOUT_RETRY, "retryRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "Deploy the installs that failed again (a new workflow each, with their inputs as they are now), then go on.";
    /// `POST /v1/rollouts/{id}/cancel`.
    CancelRollout: Post routes::ROLLOUT_CANCEL, "cancelRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "Start nothing more: the deploys that run finish.";
    /// `POST /v1/rollouts/{id}/rollback`.
    RollbackRollout: Post routes::ROLLOUT_ROLLBACK, "rollbackRollout",
        () => crate::rollout::RolloutInfo, body = false,
        summary = "Return every install the rollout reached to the release it had before, by a new rollout (answered); installs that had none are left as they are.";
}
