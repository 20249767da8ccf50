//! Rendering an install's workflow without running it: what `nuon
//! installs render` shows, with the control plane's own rendering
//! (`nuon_core::rendered`) and stand-ins for what is secret; and the app's
//! README rendered for the install (`nuon installs readme`).

use nuon_core::app::AppConfig;
use nuon_core::app::template::RenderContext;
use nuon_core::rendered::{self, RenderedReadme, RenderedWorkflow};
use nuon_core::wire::ErrorCode;
use nuon_core::workflow::WorkflowKind;

use super::{Caller, Services};
use crate::engine::render::{Owner, Values, render_context_as};
use crate::error::Error;
use nuon_core::model::Install;

/// An install, its app's config version, and the values it renders with
/// where anyone of the org may look: secrets and sensitive values as
/// stand-ins.
struct Shown {
    install: Install,
    app_name: String,
    config: AppConfig,
    ctx: RenderContext,
}

impl Services<'_> {
    /// The install `key` of the caller's org, its config and its values
    /// with stand-ins (`destroying`: as a destroy renders them).
    async fn shown(&self, caller: &Caller, key: &str, destroying: bool) -> Result<Shown, Error> {
        let install = self.find_install(caller, key).await?;
        let org = &caller.principal.org_id;
        let (app_name, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let org_name = self.engine.org_name(org).await?;
        let owner = Owner {
            org: &org_name,
            app: &app_name,
            secrets: &config.secrets,
        };
        let ctx = render_context_as(
            self.secrets,
            org,
            &install,
            owner,
            destroying,
            Values::StandIns,
        )
        .map_err(|e| Error::conflict(ErrorCode::InstallValuesRefused, e))?;
        Ok(Shown {
            install,
            app_name,
            config: std::sync::Arc::unwrap_or_clone(config),
            ctx,
        })
    }

    /// `GET /v1/installs/{id}/render/{workflow}`: any token of the org;
    /// secrets, sensitive inputs and sensitive outputs are stand-ins, so a
    /// read-only token sees what a job's view shows.
    pub(crate) async fn render_install(
        &self,
        caller: &Caller,
        key: &str,
        workflow: &str,
    ) -> Result<RenderedWorkflow, Error> {
        let kind: WorkflowKind = serde_json::from_value(serde_json::Value::String(workflow.into()))
            .ok()
            .filter(|k| {
                matches!(
                    k,
                    WorkflowKind::Provision
                        | WorkflowKind::Deploy
                        | WorkflowKind::Teardown
                        | WorkflowKind::Deprovision
                        | WorkflowKind::Reprovision
                )
            })
            .ok_or_else(|| {
                Error::bad_request(format!(
                    "workflow {workflow:?}: give provision, deploy, teardown, deprovision or reprovision"
                ))
            })?;
        let destroying = matches!(kind, WorkflowKind::Teardown | WorkflowKind::Deprovision);
        let Shown {
            install,
            config,
            mut ctx,
            ..
        } = self.shown(caller, key, destroying).await?;
        let stack_given = !ctx.install_stack_outputs.is_empty();
        // Rendering is a tenant's work: off the runtime's threads, under
        // the render budget every job's render has.
        let (artifacts, problems) = crate::render_pool::blocking(move || {
            rendered::fill_unknown_outputs(&config, &mut ctx, stack_given);
            rendered::render_workflow(&config, kind, &ctx, &install.overrides, &install.name)
        })
        .await
        .map_err(Error::internal)?;
        Ok(RenderedWorkflow {
            workflow: kind,
            artifacts,
            problems,
        })
    }

    /// `GET /v1/installs/{id}/readme`: any token of the org; rendered as
    /// Nuon renders it (a reference that does not render is a warning and
    /// the text is shown as written), secrets as stand-ins.
    pub(crate) async fn install_readme(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RenderedReadme, Error> {
        let Shown {
            install,
            app_name,
            config,
            ctx,
        } = self.shown(caller, key, false).await?;
        // The app's README, then each component's under its name.
        let mut parts: Vec<(Option<String>, String)> = Vec::new();
        if let Some(t) = &config.metadata.readme {
            parts.push((None, t.clone()));
        }
        for c in &config.components {
            if let Some(t) = &c.readme {
                parts.push((Some(c.name.clone()), t.clone()));
            }
        }
        if parts.is_empty() {
            return Err(Error::not_found(format!(
                "app {app_name} has no README in config version {}: give one in metadata.toml (`readme = \"./README.md\"`, or the Markdown itself), or a component's `readme`",
                install.config_version
            )));
        }
        crate::render_pool::blocking(move || {
            let mut out = RenderedReadme::default();
            for (component, text) in parts {
                let r = rendered::render_with_warnings(&text, &ctx);
                let (rendered, original) = match &component {
                    None => (r.rendered, r.original),
                    Some(name) => (
                        format!("## {name}\n\n{}", r.rendered),
                        format!("## {name}\n\n{}", r.original),
                    ),
                };
                // One blank line between the parts, one newline at the end.
                for (all, one) in [(&mut out.rendered, rendered), (&mut out.original, original)] {
                    if !all.is_empty() {
                        all.push('\n');
                    }
                    all.push_str(one.trim_end());
                    all.push('\n');
                }
                out.warnings
                    .extend(r.warnings.into_iter().map(|w| match &component {
                        None => w,
                        Some(name) => format!("component {name}'s readme: {w}"),
                    }));
            }
            out
        })
        .await
        .map_err(Error::internal)
    }
}
