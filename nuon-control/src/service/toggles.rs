//! An install's components: each on or off, and turning a `toggleable`
//! one off (it is torn down, with what depends on it) or on again (it is
//! deployed); and the install's own values for a component (Helm values,
//! Terraform variables), deployed when set.

use nuon_core::app::AppConfig;
use nuon_core::endpoint::{self as ep};
use nuon_core::model::{Install, InstallState};
use nuon_core::wire::{
    ComponentOverridden, ComponentToggled, InstallComponent, InstallComponents, InstallOutputs,
    SetComponentOverride,
};
use nuon_core::workflow::{WorkflowKind, left_out_by_denial};

use super::{Caller, Services, require_admin};
use crate::engine::Start;
use crate::error::Error;

impl Services<'_> {
    /// `GET /v1/installs/{id}/components`: the components of the app's
    /// latest config as they stand on the install; any token of the org.
    pub(crate) async fn install_components(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallComponents, Error> {
        let (install, _, latest) = self.install_app_config(caller, key).await?;
        Ok(InstallComponents {
            components: components(&latest.config, &install),
        })
    }

    /// `POST /v1/installs/{id}/components/{component}/disable` (`on`
    /// false) and `.../enable` (`on` true): the component of install `key`
    /// turned off (torn down, with what depends on it) or on (deployed).
    /// Admins only; recorded in the audit trail, refusals included. The
    /// workflow answered is masked; the API says who it waits for.
    pub(crate) async fn toggle_component(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        on: bool,
    ) -> Result<ComponentToggled, Error> {
        let result = self.turn_component(caller, key, name, on).await;
        if on {
            self.audited_at::<ep::EnableInstallComponent, _>(caller, &[key, name], result)
                .await
        } else {
            self.audited_at::<ep::DisableInstallComponent, _>(caller, &[key, name], result)
                .await
        }
    }

    async fn turn_component(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        on: bool,
    ) -> Result<ComponentToggled, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let name = name.to_owned();
        let (install, app, latest) = self.install_app_config(caller, key).await?;
        let config = &latest.config;
        let Some(c) = config.component(&name) else {
            return Err(no_component(&app.name, config, &name));
        };
        if !c.toggleable {
            return Err(Error::bad_request(format!(
                "component {name} of app {} is not toggleable: add `toggleable = true` to its config to let installs turn it off",
                app.name
            )));
        }
        let dependents: Vec<String> = left_out_by_denial(config, Some(&name), false)
            .0
            .into_iter()
            .filter(|d| *d != name)
            .collect();
        let verb = if on { "on" } else { "off" };
        if install.enabled(c) == on {
            return Ok(ComponentToggled {
                component: name.clone(),
                enabled: on,
                workflow: None,
                dependents,
                message: format!(
                    "component {name} is {verb} for install {} already: nothing to do",
                    install.name
                ),
            });
        }
        self.store
            .set_install_toggle(org, &install.id, &name, Some(on))
            .await?;
        let mut turned = install.clone();
        turned.toggles.insert(name.clone(), on);
        // An install never provisioned has nothing to tear down or deploy
        // yet: its first provision follows the toggle.
        let workflow = if install.state == InstallState::Created {
            None
        } else {
            let start = Start {
                component: Some(name.clone()),
                trigger: Some(if on {
                    "enable-component"
                } else {
                    "disable-component"
                }),
                ..Start::new(
                    &turned,
                    &app.name,
                    config,
                    latest.version,
                    if on {
                        WorkflowKind::Deploy
                    } else {
                        WorkflowKind::Teardown
                    },
                )
            };
            match self.engine.start(org, start).await {
                Ok(wf) => {
                    self.note_change(org, &install, vec![name.clone()], Some(&wf.id))
                        .await?;
                    Some(self.workflow_live(org, wf).await?)
                }
                Err(e) => {
                    // Nothing half done: the toggle goes back as it was.
                    self.store
                        .set_install_toggle(
                            org,
                            &install.id,
                            &name,
                            install.toggles.get(&name).copied(),
                        )
                        .await?;
                    return Err(e.into());
                }
            }
        };
        let what = match (&workflow, on) {
            (Some(w), false) => format!("; workflow {} tears it down", w.id),
            (Some(w), true) => format!("; workflow {} deploys it", w.id),
            (None, _) => "; the install was never provisioned, so nothing runs now".into(),
        };
        let told = match (dependents.is_empty(), on) {
            (true, _) => String::new(),
            (false, false) => format!(
                "; {} depend on it: torn down with it, and skipped by deploys until it is on again",
                dependents.join(", ")
            ),
            (false, true) => format!(
                "; {} depend on it: deploy them again with `nuon installs deploy {}`",
                dependents.join(", "),
                install.name
            ),
        };
        Ok(ComponentToggled {
            component: name.clone(),
            enabled: on,
            workflow,
            dependents,
            message: format!(
                "component {name} is {verb} for install {}{what}{told}",
                install.name
            ),
        })
    }

    /// `PUT /v1/installs/{id}/components/{component}/overrides`: the
    /// install's own values for the component set (or cleared), checked
    /// against the app's latest config, and the component deployed with
    /// them unless `deploy` is false or the install was never provisioned.
    /// Admins only; recorded in the audit trail, refusals included. The
    /// workflow answered is masked; the API says who it waits for.
    pub(crate) async fn set_component_override(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        req: SetComponentOverride,
    ) -> Result<ComponentOverridden, Error> {
        let result = self.change_override(caller, key, name, req).await;
        self.audited_at::<ep::SetInstallComponentOverrides, _>(caller, &[key, name], result)
            .await
    }

    async fn change_override(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        req: SetComponentOverride,
    ) -> Result<ComponentOverridden, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let name = name.to_owned();
        let (install, app, latest) = self.install_app_config(caller, key).await?;
        let config = &latest.config;
        let values = req.override_();
        if let Some(v) = &values {
            let problems = nuon_core::app::override_problems(config, &name, v);
            if !problems.is_empty() {
                return Err(Error::bad_request(format!(
                    "the overrides of component {name} for install {} (app {}, config version {}): {}",
                    install.name,
                    app.name,
                    latest.version,
                    problems.join("; ")
                )));
            }
        } else if config.component(&name).is_none() && !install.overrides.contains_key(&name) {
            return Err(no_component(&app.name, config, &name));
        }
        let before = install.overrides.get(&name).cloned();
        if before == values {
            return Ok(ComponentOverridden {
                component: name.clone(),
                overrides: values,
                workflow: None,
                message: format!(
                    "component {name} of install {} has these overrides already: nothing to do",
                    install.name
                ),
            });
        }
        self.store
            .set_install_override(org, &install.id, &name, values.as_ref())
            .await?;
        let mut changed = install.clone();
        match &values {
            Some(v) => changed.overrides.insert(name.clone(), v.clone()),
            None => changed.overrides.remove(&name),
        };
        let on = config.component(&name).is_some_and(|c| changed.enabled(c));
        let deploy = req.deploy && on && install.state != InstallState::Created;
        let workflow = if deploy {
            let start = Start {
                component: Some(name.clone()),
                ..Start::new(
                    &changed,
                    &app.name,
                    config,
                    latest.version,
                    WorkflowKind::Deploy,
                )
            };
            match self.engine.start(org, start).await {
                Ok(wf) => {
                    self.note_change(org, &install, vec![name.clone()], Some(&wf.id))
                        .await?;
                    Some(self.workflow_live(org, wf).await?)
                }
                Err(e) => {
                    // Nothing half done: the overrides go back as they were.
                    self.store
                        .set_install_override(org, &install.id, &name, before.as_ref())
                        .await?;
                    return Err(e.into());
                }
            }
        } else {
            // Not deployed now: pending until a deploy of the component.
            if on {
                self.note_change(org, &install, vec![name.clone()], None)
                    .await?;
            }
            None
        };
        let set = if values.is_some() { "set" } else { "cleared" };
        let what = match &workflow {
            Some(w) => format!("; workflow {} deploys it with them", w.id),
            None if !req.deploy => format!(
                "; they take effect at its next deploy (`nuon installs deploy {} --component {name}`)",
                install.name
            ),
            None if install.state == InstallState::Created => {
                "; the install was never provisioned: its first provision uses them".into()
            }
            None if !on => "; the component is off: they take effect when it is on again".into(),
            None => String::new(),
        };
        Ok(ComponentOverridden {
            component: name.clone(),
            overrides: values,
            workflow,
            message: format!(
                "overrides of component {name} {set} for install {}{what}",
                install.name
            ),
        })
    }
}

/// The components of `config` as they stand on `install`: on or off
/// (and which component turned off holds one off), deployed or not, with
/// the install's own values for each.
pub(crate) fn components(config: &AppConfig, install: &Install) -> Vec<InstallComponent> {
    let outputs: InstallOutputs = install
        .outputs_json
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_default();
    let off: Vec<&str> = config
        .components
        .iter()
        .filter(|c| !install.enabled(c))
        .map(|c| c.name.as_str())
        .collect();
    let held = |name: &str| {
        off.iter()
            .find(|o| left_out_by_denial(config, Some(o), false).0.contains(name))
            .map(|o| o.to_string())
    };
    config
        .components
        .iter()
        .map(|c| InstallComponent {
            name: c.name.clone(),
            kind: c.kind().as_str().to_owned(),
            toggleable: c.toggleable,
            enabled: install.enabled(c),
            held_off_by: held(&c.name),
            deployed: outputs.components.contains_key(&c.name),
            depends_on: c.depends_on.clone(),
            overrides: install.overrides.get(&c.name).cloned(),
            labels: c.labels.clone(),
        })
        .collect()
}

/// App `app` has no component `name`: the ones it has, and the nearest.
fn no_component(app: &str, config: &AppConfig, name: &str) -> Error {
    let names: Vec<&str> = config.components.iter().map(|c| c.name.as_str()).collect();
    Error::not_found(format!(
        "app {app} has no component {name:?}{} (components: {})",
        nuon_core::app::did_you_mean(name, names.iter().copied()),
        names.join(", ")
    ))
}
