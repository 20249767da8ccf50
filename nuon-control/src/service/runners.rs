//! Runners as the operations show them: whether each is there, from its
//! last call, and its health now.

use nuon_core::wire::{RunnerInfo, RunnerStatus};

use super::Services;

impl Services<'_> {
    /// Whether a runner is there, from its last call.
    pub(crate) fn runner_status(&self, revoked: bool, last_seen_ms: Option<i64>) -> RunnerStatus {
        let window = i64::try_from(self.live_window.as_millis()).unwrap_or(i64::MAX);
        match (revoked, last_seen_ms) {
            (true, _) => RunnerStatus::Revoked,
            (false, None) => RunnerStatus::NeverSeen,
            (false, Some(at)) if nuon_core::now_ms() - at < window => RunnerStatus::Connected,
            (false, Some(_)) => RunnerStatus::Gone,
        }
    }

    /// A runner as the API shows it: with whether it is there, and its
    /// health now (the transition to it is recorded within a few seconds).
    pub(crate) fn runner_view(&self, mut r: RunnerInfo) -> RunnerInfo {
        r.status = self.runner_status(r.revoked, r.last_seen_at_ms);
        let health = self
            .ops
            .health(r.revoked, r.last_seen_at_ms, nuon_core::now_ms());
        if health != r.health {
            r.health = health;
            r.health_since_ms = None;
        }
        r
    }
}
