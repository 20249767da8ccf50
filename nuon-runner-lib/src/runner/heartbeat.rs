//! The runner's one heartbeat task: every lease it holds extended in one
//! request, held by the control plane until something changes, and the
//! jobs the control plane cancels or calls stale (a newer attempt holds
//! the lease, or the store does not know the job) stopped.

use std::sync::Arc;
use std::time::Duration;

use nuon_core::wire::{HeartbeatRequest, LeaseState};
use nuon_core::{StopReason, TransportError};
use tokio::time::{Instant, sleep};

use super::{Key, Shared};

/// The shortest pause between two heartbeats answered early with nothing new.
const MIN_HEARTBEAT_GAP: Duration = Duration::from_millis(50);

/// The one heartbeat task of the runner: extends every lease the runner
/// holds, and stops jobs the control plane cancels or calls stale.
pub(super) async fn heartbeat_loop(shared: Arc<Shared>) {
    let transport = shared.config.transport.clone();
    let mut backoff = shared.backoff();
    loop {
        let changed = shared.leases_changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let leases = shared.leased();
        if leases.is_empty() {
            changed.await;
            continue;
        }
        let wait = shared.hold.wait(shared.config.heartbeat_wait);
        let req = HeartbeatRequest {
            leases,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            telemetry: Some(shared.config.stats.telemetry()),
        };
        let sent = Instant::now();
        match transport.heartbeat(&req).await {
            Ok(resp) => {
                backoff.reset();
                shared
                    .refresh_settings(resp.settings_version.as_deref())
                    .await;
                let mut news = false;
                for status in &resp.leases {
                    let key: Key = (status.job_id.clone(), status.attempt);
                    let reason = match status.state {
                        LeaseState::Active => continue,
                        LeaseState::Cancel => StopReason::Cancelled,
                        LeaseState::Stale => StopReason::Stale,
                    };
                    if shared.stop_job(&key, reason) {
                        news = true;
                        tracing::info!(job = %key.0, attempt = key.1, ?reason, "control plane stops the job");
                    }
                }
                // The server holds a heartbeat until something happens; if it
                // answered early with nothing new, pause instead of spinning,
                // but never past the interval it asked for.
                let elapsed = sent.elapsed();
                if !news && (wait.is_zero() || elapsed < wait / 2) {
                    let next = Duration::from_millis(resp.next_heartbeat_ms);
                    let pause = if wait.is_zero() {
                        next
                    } else {
                        next.min(wait - elapsed)
                    };
                    sleep(pause.max(MIN_HEARTBEAT_GAP)).await;
                }
            }
            Err(TransportError::Unauthorized(m)) => {
                shared.report_fatal(TransportError::Unauthorized(m));
                return;
            }
            Err(TransportError::Cut(_)) if shared.hold.cut("heartbeat", wait, sent.elapsed()) => {
                // Cut on the way after being held a while (its leases were
                // extended if it arrived): again at once, held shorter.
                backoff.reset();
            }
            Err(e) => {
                // Jobs keep running: the control plane may be down for hours.
                let delay = backoff.next_delay();
                shared.config.stats.error(format!("heartbeat failed: {e}"));
                tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "heartbeat failed; jobs keep running; will retry");
                sleep(delay).await;
            }
        }
    }
}
