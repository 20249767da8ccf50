//! The control plane's own steps, which run no job but wait: for the
//! install's stack to phone home, then for its runner to be healthy
//! (Nuon's provision order). Each is looked at on every tick; while it
//! waits it is `running` with a reason that says what it waits for and
//! how to give it, and it fails with that reason once its bound passes.

use std::time::Duration;

use nuon_core::now_ms;
use nuon_core::wire::RunnerHealth;
use nuon_core::workflow::{StepKind, StepStatus};
use serde_json::json;

use super::{Ctx, Engine, EngineError, Result};
use crate::store::StepUpdate;

/// How long a provision waits for the stack: as long as its one-time token
/// works.
const AWAIT_STACK: Duration = Duration::from_secs(24 * 3600);
/// How long it then waits for the runner to be healthy.
const AWAIT_RUNNER: Duration = Duration::from_secs(15 * 60);

/// What an await step found.
struct Look {
    done: bool,
    /// What it waits for, for people; or, when done, what it found.
    said: String,
    bound: Duration,
}

impl Engine {
    /// Looks at await step `i`: `true` when it passed (the workflow goes
    /// on), `false` when it still waits or failed.
    pub(super) async fn await_step(&self, cx: &mut Ctx, i: usize) -> Result<bool> {
        let step = cx.wf.steps[i].clone();
        let now = now_ms();
        let runner = self
            .store
            .find_runner(&cx.org, cx.install.runner_id.as_str())
            .await?
            .ok_or_else(|| EngineError::NotFound("the install's runner is gone".into()))?;
        let name = &cx.install.name;
        let look = match step.kind {
            StepKind::AwaitStack => {
                let phoned = cx.install.stack_outputs.is_some();
                // A runner started another way (by hand, with its token)
                // needs no stack.
                let connected = runner.last_seen_at_ms.is_some();
                Look {
                    done: phoned || connected,
                    said: if phoned {
                        "the install's stack phoned home".into()
                    } else if connected {
                        "the install's runner is connected (started without a stack)".into()
                    } else {
                        format!(
                            "waiting for install {name}'s stack to phone home: download it with `nuon installs stack {name}` \
                             (CloudFormation, a Helm chart or a VM bundle, as the app's runner.toml asks) and apply it in the customer's account"
                        )
                    },
                    bound: AWAIT_STACK,
                }
            }
            _ => {
                let health = self.ops.health(runner.revoked, runner.last_seen_at_ms, now);
                Look {
                    done: health == RunnerHealth::Healthy,
                    said: match health {
                        RunnerHealth::Healthy => format!("runner {} is healthy", runner.name),
                        _ if runner.revoked => format!(
                            "waiting for install {name}'s runner: it is revoked; issue it a new token with `nuon runners rotate-token {}`",
                            runner.name
                        ),
                        _ => format!(
                            "waiting for install {name}'s runner to be healthy (it is {}): see it with `nuon runners list`, and its host's logs",
                            health.as_str()
                        ),
                    },
                    bound: AWAIT_RUNNER,
                }
            }
        };
        if look.done {
            let u = StepUpdate {
                status: StepStatus::Succeeded,
                reason: Some(look.said),
                outputs_json: Some(json!({"runner": runner.id, "passed_at_ms": now}).to_string()),
                ..StepUpdate::default()
            };
            self.set_step(cx, step.index, u).await?;
            return Ok(true);
        }
        match step.outputs["waiting_since_ms"].as_i64() {
            Some(since) if now - since > look.bound.as_millis() as i64 => {
                let reason = format!(
                    "gave up after {} min: {}",
                    look.bound.as_secs() / 60,
                    look.said
                );
                self.fail(cx, &step, reason).await?;
            }
            Some(_) if step.reason.as_deref() == Some(look.said.as_str()) => {}
            since => {
                let u = StepUpdate {
                    status: StepStatus::Running,
                    reason: Some(look.said),
                    outputs_json: Some(
                        json!({"waiting_since_ms": since.unwrap_or(now)}).to_string(),
                    ),
                    ..StepUpdate::default()
                };
                self.set_step(cx, step.index, u).await?;
            }
        }
        Ok(false)
    }
}
