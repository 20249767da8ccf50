//! The Pulumi jobs of a Pulumi sandbox or a `pulumi` component, and the
//! control plane as the state backend of a step's job (Terraform's and
//! Pulumi's).

use std::time::Duration;

use nuon_core::app::template::RenderContext;
use nuon_core::model::Step;
use nuon_core::rendered;
use nuon_core::workflow::StepKind;
use nuon_core::{HttpBackend, PulumiAction, PulumiJob};

use super::dispatch::{deploy_timeout, synced_artifact};
use super::{Ctx, Engine};
use crate::store::StateToken;

/// The environment variable that names a Pulumi backend of the customer's
/// own (`s3://…`, `gs://…`, `azblob://…`).
const PULUMI_BACKEND_URL: &str = "PULUMI_BACKEND_URL";

impl Engine {
    /// The control plane as the state backend of `target`'s job: its
    /// address, and the token good only while the job runs.
    pub(super) fn state_backend(&self, cx: &Ctx, target: &str) -> (HttpBackend, StateToken) {
        let token = nuon_core::token::issue_state_token();
        let backend = HttpBackend {
            address: format!(
                "{}/v1/runner/state/{target}",
                self.runner_url().trim_end_matches('/')
            ),
            username: "nuon".into(),
            password: token.secret,
        };
        let state_token = StateToken {
            hash: token.hash,
            install_id: cx.install.id.clone(),
            component: target.to_owned(),
        };
        (backend, state_token)
    }

    /// A Pulumi preview, up, destroy preview or destroy of the sandbox or
    /// a `pulumi` component, on the install's stack; its state kept by the
    /// control plane unless its environment names the customer's backend.
    pub(super) fn pulumi_job(
        &self,
        cx: &Ctx,
        step: &Step,
        target: &str,
        ctx: &RenderContext,
    ) -> std::result::Result<(PulumiJob, Duration, Option<StateToken>), String> {
        let timeout = match step.target.as_deref().and_then(|t| cx.config.component(t)) {
            Some(c) => c.deploy_timeout.as_deref(),
            None => None,
        };
        let inputs = rendered::pulumi_inputs(&cx.config, step.target.as_deref(), ctx)?;
        let action = match step.kind {
            StepKind::Plan | StepKind::SandboxPlan => PulumiAction::Preview,
            StepKind::Apply | StepKind::SandboxApply => PulumiAction::Up,
            StepKind::DestroyPlan | StepKind::SandboxDestroyPlan => PulumiAction::DestroyPreview,
            _ => PulumiAction::Destroy,
        };
        let (backend, token) = if inputs.env.contains_key(PULUMI_BACKEND_URL) {
            (None, None)
        } else {
            let (b, t) = self.state_backend(cx, target);
            (Some(b), Some(t))
        };
        let job = PulumiJob {
            action,
            component: target.to_owned(),
            program: synced_artifact(cx, step, target)?,
            stack: cx.install.id.to_string(),
            runtime: inputs.settings.runtime,
            pulumi_version: inputs.settings.pulumi_version,
            config: inputs.settings.config,
            env: inputs.env,
            backend,
        };
        Ok((job, deploy_timeout(timeout)?, token))
    }
}
