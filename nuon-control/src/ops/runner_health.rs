//! The leader's look at every runner's last call: each change of health
//! recorded (in batches), in the audit trail and for the webhooks.

use std::collections::{HashMap, HashSet};

use nuon_core::audit::AuditEntry;
use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{RunnerHealth, RunnerInfo};
use nuon_core::{OrgId, RunnerId, now_ms};

use super::{Fleet, emit};
use crate::store::StoreError;

/// Looks at every runner's last call, records each change of health in
/// the audit trail and tells the webhooks.
pub(crate) async fn check_runners(state: Fleet<'_>) -> Result<(), StoreError> {
    let now = now_ms();
    let moves: Vec<(OrgId, RunnerInfo, RunnerHealth)> = (state.store.all_runners().await?)
        .into_iter()
        .filter_map(|(org, r)| {
            let health = state.config.health(false, r.last_seen_at_ms, now);
            (health != r.health).then_some((org, r, health))
        })
        .collect();
    // Whether an org has a webhook for runners' health, asked once a pass
    // (a fleet's first calls move thousands of runners at once).
    let mut hooked: HashMap<OrgId, bool> = HashMap::new();
    for chunk in moves.chunks(crate::store::MAX_HEALTH_MOVES) {
        let asked: Vec<_> = (chunk.iter())
            .map(|(_, r, health)| (r.id.clone(), r.health, *health))
            .collect();
        let moved: HashSet<RunnerId> = (state.store.set_runners_health(&asked, now).await?)
            .into_iter()
            .collect();
        let mut entries = Vec::new();
        let mut events = Vec::new();
        for (org, r, health) in chunk.iter().filter(|(_, r, _)| moved.contains(&r.id)) {
            let silent = r
                .last_seen_at_ms
                .map(|at| format!("last call {} s ago", (now - at).max(0) / 1000))
                .unwrap_or_else(|| "never called".into());
            tracing::info!(runner = %r.name, from = r.health.as_str(), to = health.as_str(), "{silent}");
            let entry = AuditEntry::new(
                now,
                "control-plane",
                "runner.health",
                format!("runner:{}", r.id),
                "",
                health.as_str(),
            )
            .with_detail(format!("{} was {}; {silent}", r.name, r.health.as_str()));
            entries.push((org.clone(), entry));
            let event = match (r.health, *health) {
                (_, RunnerHealth::Unhealthy | RunnerHealth::Offline) => {
                    WebhookEvent::RunnerUnhealthy
                }
                (RunnerHealth::Unhealthy | RunnerHealth::Offline, RunnerHealth::Healthy) => {
                    WebhookEvent::RunnerHealthy
                }
                _ => continue,
            };
            events.push((org, event, runner_event(r, *health, &silent)));
        }
        state.auditor.record_all(entries).await;
        for (org, event, data) in events {
            if !hooked.contains_key(org) {
                let any = (state.store.list_webhooks(org).await?).iter().any(|w| {
                    w.events.contains(&WebhookEvent::RunnerHealthy)
                        || w.events.contains(&WebhookEvent::RunnerUnhealthy)
                });
                hooked.insert(org.clone(), any);
            }
            if hooked[org] {
                emit(state.store, org, event, data).await;
            }
        }
    }
    Ok(())
}

fn runner_event(r: &RunnerInfo, health: RunnerHealth, silent: &str) -> serde_json::Value {
    serde_json::json!({
        "runner_id": r.id,
        "runner": r.name,
        "health": health.as_str(),
        "was": r.health.as_str(),
        "last_seen_at_ms": r.last_seen_at_ms,
        "detail": silent,
    })
}
