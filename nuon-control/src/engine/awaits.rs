//! The control plane's own steps, which run no job but wait: for the
//! install's stack to phone home, then for its runner to be healthy
//! (Nuon's provision order); and, after a component's apply, for the
//! checks its `[health] required_checks` names. Each is looked at on every tick; while it
//! waits it is `running` with a reason that says what it waits for and
//! how to give it, and it fails with that reason once its bound passes.

use std::time::Duration;

use nuon_core::model::{CheckStatus, InstallCheck, RunnerHealth};
use nuon_core::now_ms;
use nuon_core::workflow::{StepKind, StepStatus};
use serde_json::json;

use super::{Ctx, Engine, EngineError, Result, render};
use crate::store::StepUpdate;

/// What an await step found.
struct Look {
    done: bool,
    /// What it waits for, for people; or, when done, what it found.
    said: String,
    bound: Duration,
}

impl Engine {
    /// How long a stack's one-time token works (`--stack-token-ttl`).
    pub(crate) fn stack_token_ttl(&self) -> std::time::Duration {
        self.ops.stack_token_ttl
    }

    /// Looks at await step `i`: `true` when it passed (the workflow goes
    /// on), `false` when it still waits or failed.
    pub(super) async fn await_step(&self, cx: &mut Ctx, i: usize) -> Result<bool> {
        let step = cx.wf.steps[i].clone();
        let now = now_ms();
        if step.kind == StepKind::AwaitChecks {
            return self.await_checks(cx, i, now).await;
        }
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
                    // As long as a stack's one-time token works.
                    bound: self.ops.stack_token_ttl,
                }
            }
            _ => {
                let health = self.ops.health(runner.revoked, runner.last_seen_at_ms, now);
                let disabled = disabled_reason(&runner);
                Look {
                    done: health == RunnerHealth::Healthy && disabled.is_none(),
                    said: match health {
                        RunnerHealth::Healthy => match &disabled {
                            None => format!("install {name}'s runner is healthy"),
                            Some(why) => disabled_said(name, why),
                        },
                        _ if runner.revoked => format!(
                            "waiting for install {name}'s runner: it is revoked; issue it a new token with `nuon runners rotate-token {}`",
                            runner.name
                        ),
                        _ => format!(
                            "waiting for install {name}'s runner to be healthy (it is {}): see it with `nuon runners list`, and its host's logs",
                            health.as_str()
                        ),
                    },
                    bound: self.ops.await_runner_timeout,
                }
            }
        };
        if look.done {
            self.pass_await(cx, step.index, look.said, &runner.id, now)
                .await?;
            return Ok(true);
        }
        self.keep_waiting(cx, i, look.said, look.bound, now).await?;
        Ok(false)
    }

    /// Looks at the checks a component's `required_checks` names: it
    /// passes once each was reported healthy since this try began to
    /// wait (a report from before is of the version before). When the
    /// component's stabilization window passes first, `block_deploy`
    /// fails it; else it passes, saying what was missing.
    async fn await_checks(&self, cx: &mut Ctx, i: usize, now: i64) -> Result<bool> {
        let step = cx.wf.steps[i].clone();
        let target = step.target.clone().unwrap_or_default();
        let health = cx.config.component(&target).and_then(|c| c.health.clone());
        let Some(health) = health else {
            let reason = format!("component {target:?} has no [health] in this config version");
            self.fail(cx, &step, reason).await?;
            return Ok(false);
        };
        let window = render::render_context(&self.secrets, &cx.org, &cx.install, cx.owner(), false)
            .and_then(|ctx| render::health_window(&target, &health, &ctx));
        let window = match window {
            Ok(w) => w,
            Err(reason) => {
                self.fail(cx, &step, reason).await?;
                return Ok(false);
            }
        };
        let since = waiting_since(&step).unwrap_or(now);
        let missing: Vec<String> = health
            .required_checks
            .iter()
            .filter_map(|name| {
                let c = cx.install.checks.get(name);
                let said = |c: &InstallCheck| {
                    c.detail
                        .as_ref()
                        .map(|d| format!(" ({d})"))
                        .unwrap_or_default()
                };
                match c {
                    Some(c) if c.at_ms >= since && c.status == CheckStatus::Healthy => None,
                    Some(c) if c.at_ms >= since => Some(format!("{name} is unhealthy{}", said(c))),
                    Some(c) => Some(format!(
                        "{name} was last reported {} before this wait began",
                        c.status.as_str()
                    )),
                    None => Some(format!("{name} was never reported")),
                }
            })
            .collect();
        let names = health.required_checks.join(", ");
        // `held`: every check was reported healthy.
        let passed = |said: String, held: bool| StepUpdate {
            status: StepStatus::Succeeded,
            reason: Some(said),
            outputs_json: Some(
                json!({"passed_at_ms": now, "waiting_since_ms": since, "held": held}).to_string(),
            ),
            ..StepUpdate::default()
        };
        if missing.is_empty() {
            let u = passed(format!("reported healthy: {names}"), true);
            self.set_step(cx, step.index, u).await?;
            return Ok(true);
        }
        let said = format!(
            "waiting for the checks component {target} requires to be reported healthy: {}; report them with `nuon installs checks push {} NAME --healthy`",
            missing.join("; "),
            cx.install.name
        );
        if now - since > window.as_millis() as i64 {
            if health.block_deploy {
                let reason = format!(
                    "gave up after {}: {said} (block_deploy fails the deploy)",
                    in_words(window)
                );
                self.fail(cx, &step, reason).await?;
                return Ok(false);
            }
            let said = format!(
                "not reported healthy within {}: {}; block_deploy is off, so the deploy goes on",
                in_words(window),
                missing.join("; ")
            );
            self.set_step(cx, step.index, passed(said, false)).await?;
            return Ok(true);
        }
        // The window above decides; this bound is never reached.
        self.keep_waiting(cx, i, said, window * 2, now).await?;
        Ok(false)
    }

    /// Whether step `i`, about to be dispatched, must wait instead: the
    /// customer disabled the install's runner. Nothing new is queued for
    /// it; the step says so, and fails after `--await-runner-timeout`.
    pub(super) async fn held_by_customer(&self, cx: &mut Ctx, i: usize) -> Result<bool> {
        let runner = match cx.runner.take() {
            Some(read) => read,
            None => {
                self.store
                    .find_runner(&cx.org, cx.install.runner_id.as_str())
                    .await?
            }
        };
        let Some(runner) = runner else {
            return Ok(false);
        };
        let Some(why) = disabled_reason(&runner) else {
            if cx.wf.steps[i].outputs.get("waiting_since_ms").is_some() {
                // Enabled again: what it waited for is there.
                let u = StepUpdate {
                    status: StepStatus::Pending,
                    reason: None,
                    outputs_json: Some("{}".into()),
                    ..StepUpdate::default()
                };
                self.set_step(cx, cx.wf.steps[i].index, u).await?;
            }
            return Ok(false);
        };
        let said = disabled_said(&cx.install.name, &why);
        self.keep_waiting(cx, i, said, self.ops.await_runner_timeout, now_ms())
            .await?;
        Ok(true)
    }

    async fn pass_await(
        &self,
        cx: &mut Ctx,
        index: u32,
        said: String,
        runner: &nuon_core::RunnerId,
        now: i64,
    ) -> Result<()> {
        let u = StepUpdate {
            status: StepStatus::Succeeded,
            reason: Some(said),
            outputs_json: Some(json!({"runner": runner, "passed_at_ms": now}).to_string()),
            ..StepUpdate::default()
        };
        self.set_step(cx, index, u).await
    }

    /// Step `i` goes on waiting, saying why; failed once `bound` has passed
    /// since it began to. An await step is `running` meanwhile, a step held
    /// back stays `pending`.
    async fn keep_waiting(
        &self,
        cx: &mut Ctx,
        i: usize,
        said: String,
        bound: Duration,
        now: i64,
    ) -> Result<()> {
        let step = cx.wf.steps[i].clone();
        let tries = step.attempts.len() as u64;
        match waiting_since(&step) {
            Some(since) if now - since > bound.as_millis() as i64 => {
                let reason = format!("gave up after {}: {said}", in_words(bound));
                self.fail(cx, &step, reason).await
            }
            Some(_) if step.reason.as_deref() == Some(said.as_str()) => Ok(()),
            since => {
                let u = StepUpdate {
                    status: if step.kind.is_await() {
                        StepStatus::Running
                    } else {
                        StepStatus::Pending
                    },
                    reason: Some(said),
                    outputs_json: Some(
                        json!({"waiting_since_ms": since.unwrap_or(now), "try": tries}).to_string(),
                    ),
                    ..StepUpdate::default()
                };
                self.set_step(cx, step.index, u).await
            }
        }
    }
}

/// When step `step` began to wait, in this try: a wait of an earlier try
/// (before a retry) does not count.
fn waiting_since(step: &nuon_core::model::Step) -> Option<i64> {
    let tries = step.attempts.len() as u64;
    step.outputs["waiting_since_ms"]
        .as_i64()
        .filter(|_| step.outputs["try"].as_u64() == Some(tries))
}

/// Why the customer disabled the runner, when they did.
fn disabled_reason(runner: &nuon_core::wire::RunnerInfo) -> Option<String> {
    runner.telemetry.as_ref().and_then(|t| t.disabled.clone())
}

fn disabled_said(install: &str, why: &str) -> String {
    format!(
        "the customer disabled install {install}'s runner ({why}): nothing new is queued for it until they run `nuon-runner enable`"
    )
}

/// `15 min`, `24 h`, `30 s`.
pub(crate) fn in_words(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}
