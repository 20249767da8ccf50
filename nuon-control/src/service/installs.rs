//! Installs: finding one and showing it as the API does, making one
//! (its inputs and secrets checked and sealed), and changing its name,
//! approval mode, inputs and labels. The API's reads of installs are in
//! `install_reads.rs`.

use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use nuon_core::OrgId;
use nuon_core::app::{AppConfig, SecretHolder};
use nuon_core::endpoint::{self as ep, Endpoint, SetInstallLabels, UpdateInstall};
use nuon_core::labels::{check_key, check_labels};
use nuon_core::token::issue_runner_token;
use nuon_core::wire::{
    CreateInstall, EditInstall, InstallCreated, InstallInfo, InstallOutputs, LabelChange,
    MIN_SECRET_CHARS, SetInputs,
};
use nuon_core::{InstallId, RunnerId};
use serde_json::Value;

use super::apps::decode_config;
use super::{Caller, Services, check_name, internal, require_admin};
use crate::desired::as_text;
use crate::error::Error;
use crate::secrets::{Sealed, SecretBox, seal_context};
use crate::store::{InstallChange, NewInstall, StoreError};
use nuon_core::model::Install;

impl Services<'_> {
    /// The install `key` (an id or a name) of the caller's org, or a 404
    /// that names the closest install's name when `key` looks like a typo
    /// of it.
    pub(crate) async fn find_install(&self, caller: &Caller, key: &str) -> Result<Install, Error> {
        let org = &caller.principal.org_id;
        if let Some(found) = self.store.find_install(org, key).await? {
            return Ok(found);
        }
        // A customer on an installer page is told no other install's name.
        if caller.principal.customer.is_some() {
            return Err(Error::not_found(format!("no install {key:?}")));
        }
        // Only for a miss: the names of the org's installs.
        let names: Vec<String> = self
            .store
            .list_installs(org)
            .await?
            .into_iter()
            .map(|i| i.name)
            .collect();
        let hint = nuon_core::app::did_you_mean(key, names.iter().map(String::as_str));
        Err(Error::not_found(format!(
            "no install {key:?}{hint} (`nuon installs list` shows them)"
        )))
    }

    /// An install as the API shows it: with its app's name and the
    /// release it has.
    pub(crate) async fn install_view(
        &self,
        caller: &Caller,
        install: Install,
    ) -> Result<InstallInfo, Error> {
        self.with_names(&caller.principal.org_id, install_info(install)?)
            .await
    }

    /// `info` with its app's name and the release it has.
    pub(crate) async fn with_names(
        &self,
        org: &OrgId,
        mut info: InstallInfo,
    ) -> Result<InstallInfo, Error> {
        info.app_name = self
            .store
            .find_app(org, info.app_id.as_str())
            .await?
            .map(|a| a.name);
        info.release_id = self.store.install_releases(org).await?.remove(&info.id);
        Ok(info)
    }

    /// `PATCH /v1/installs/{id}`: renames the install and sets its
    /// approval mode, each when given, in one step. Admins only; recorded
    /// in the audit trail, refusals included.
    pub(crate) async fn update_install(
        &self,
        caller: &Caller,
        key: &str,
        req: EditInstall,
    ) -> Result<InstallInfo, Error> {
        let result = self.change_install(caller, key, req).await;
        self.audited_at::<UpdateInstall, _>(caller, &[key], result)
            .await
    }

    async fn change_install(
        &self,
        caller: &Caller,
        key: &str,
        req: EditInstall,
    ) -> Result<InstallInfo, Error> {
        require_admin(&caller.principal)?;
        if let Some(name) = &req.name {
            check_name("install", name)?;
        }
        if req == EditInstall::default() {
            return Err(Error::bad_request(format!(
                "{} changes nothing: give a new `name`, a new `approval` (approve-all or prompt), or both",
                UpdateInstall::ID
            )));
        }
        let install = self.find_install(caller, key).await?;
        let change = InstallChange {
            name: req.name,
            approval: req.approval,
        };
        let updated = self
            .store
            .update_install(&caller.principal.org_id, &install.id, &change)
            .await?
            // Deleted between the two steps.
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))?;
        if updated.name != install.name || updated.approval != install.approval {
            tracing::info!(
                install = %updated.id,
                name = %updated.name,
                approval = %updated.approval,
                "install changed"
            );
        }
        self.install_view(caller, updated).await
    }
}

impl Services<'_> {
    /// `GET /v1/installs/{id}/secrets`: any token of the org; names,
    /// holders and whether each is set, never a value.
    pub(crate) async fn install_secrets(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<nuon_core::wire::InstallSecrets, Error> {
        let install = self.find_install(caller, key).await?;
        let org = &caller.principal.org_id;
        let (_, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let sealed: Sealed = serde_json::from_str(&install.sealed_json)
            .map_err(|e| internal("stored secrets", e))?;
        let outputs = crate::engine::render::stack_outputs(self.secrets, &install)
            .map_err(|e| Error::conflict(ErrorCode::InstallValuesRefused, e))?;
        let secrets = (config.secrets.iter())
            .map(|s| {
                let location = (outputs.get(&format!("{}_arn", s.name)))
                    .and_then(|v| v.as_str())
                    .filter(|v| v.starts_with("arn:"))
                    .map(str::to_owned)
                    .filter(|_| s.held_by_customer());
                nuon_core::wire::InstallSecret {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    held_by: s.held_by.unwrap_or(SecretHolder::Vendor).as_str().into(),
                    required: s.required,
                    set: if s.held_by_customer() {
                        location.is_some()
                    } else {
                        sealed.secrets.contains_key(&s.name)
                    },
                    location,
                }
            })
            .collect();
        Ok(nuon_core::wire::InstallSecrets {
            install: install.name,
            secrets,
        })
    }

    /// `POST /v1/installs`: an install of an app, with its runner, from
    /// the app's latest config: its inputs and secrets checked against it
    /// and sealed, every problem said at once. The runner's token is in
    /// this answer only. Admins only; recorded in the audit trail,
    /// refusals included.
    pub(crate) async fn create_install(
        &self,
        caller: &Caller,
        req: CreateInstall,
    ) -> Result<InstallCreated, Error> {
        let result = self.make_install(caller, req).await;
        self.audited_at::<ep::CreateInstall, _>(caller, &[], result)
            .await
    }

    async fn make_install(
        &self,
        caller: &Caller,
        req: CreateInstall,
    ) -> Result<InstallCreated, Error> {
        require_admin(&caller.principal)?;
        self.insert_install(caller, req).await
    }

    /// Makes the install `req` asks for, every problem said at once, for a
    /// caller already allowed to (an admin, or a customer's invitation).
    pub(crate) async fn insert_install(
        &self,
        caller: &Caller,
        req: CreateInstall,
    ) -> Result<InstallCreated, Error> {
        check_name("install", &req.name)?;
        nuon_core::labels::check_labels(&req.labels)
            .map_err(|e| Error::refused(ErrorCode::InvalidLabels, e))?;
        let approval = req.approval.unwrap_or_default();
        let org = &caller.principal.org_id;
        let app = self.find_app(caller, &req.app).await?;
        let version = self.latest_config(caller, &app).await?;
        let config = &version.config;
        let id = InstallId::generate();
        let mut plain = BTreeMap::new();
        let mut sealed = Sealed::default();
        let mut problems = Vec::new();
        resolve_inputs(
            config,
            &id,
            &req.inputs,
            &mut plain,
            &mut sealed,
            self.secrets,
            &mut problems,
        );
        resolve_secrets(
            config,
            &id,
            &req.secrets,
            &mut sealed,
            self.secrets,
            &mut problems,
        );
        for s in &config.secrets {
            // A customer-held secret is entered in the install stack.
            if sealed.secrets.contains_key(&s.name) || s.held_by_customer() {
                continue;
            }
            if let Some(value) = s.default.as_ref().filter(|_| !s.auto_generate) {
                sealed.secrets.insert(
                    s.name.clone(),
                    self.secrets
                        .seal(value, &seal_context(&id, "secret", &s.name)),
                );
            } else if s.auto_generate {
                let mut raw = [0u8; 24];
                nuon_core::random_bytes(&mut raw);
                // 24 random bytes: 48 hex characters, or 32 of base64.
                let value = if s.format.as_deref() == Some("base64") {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD.encode(raw)
                } else {
                    hex::encode(raw)
                };
                sealed.secrets.insert(
                    s.name.clone(),
                    self.secrets
                        .seal(&value, &seal_context(&id, "secret", &s.name)),
                );
            } else if s.required {
                problems.push(format!(
                    "missing required secret {:?} ({})",
                    s.name, s.description
                ));
            }
        }
        // Only a toggleable component may start off (or be named on).
        let toggleable: Vec<&str> = config
            .components
            .iter()
            .filter(|c| c.toggleable)
            .map(|c| c.name.as_str())
            .collect();
        for name in req.components.keys() {
            if !toggleable.contains(&name.as_str()) {
                let known = if toggleable.is_empty() {
                    "the app has no toggleable component".to_owned()
                } else {
                    format!("toggleable: {}", toggleable.join(", "))
                };
                problems.push(format!(
                "component {name:?} is not toggleable{} ({known}; a component is with `toggleable = true`)",
                nuon_core::app::did_you_mean(name, toggleable.iter().copied())
            ));
            }
        }
        // Its own values for components: each for a component that takes them.
        let mut overrides = nuon_core::model::Overrides::new();
        for (name, o) in &req.overrides {
            let Some(o) = o.normalized() else { continue };
            let found = nuon_core::app::override_problems(config, name, &o);
            if found.is_empty() {
                overrides.insert(name.clone(), o);
            } else {
                problems.extend(
                    found
                        .into_iter()
                        .map(|p| format!("overrides of {name}: {p}")),
                );
            }
        }
        if !problems.is_empty() {
            return Err(Error::refused(
                ErrorCode::InvalidInstall,
                format!(
                    "install {:?} of app {:?} (config version {}): {}",
                    req.name,
                    app.name,
                    version.version,
                    problems.join("; ")
                ),
            ));
        }
        let runner_id = RunnerId::generate();
        let token = issue_runner_token(&runner_id);
        // The install's id: unique, and never a name someone picked.
        let runner_name = id.to_string();
        let stored = self
            .store
            .create_install(
                org,
                NewInstall {
                    id,
                    app_id: app.id.clone(),
                    name: req.name.clone(),
                    config_version: version.version,
                    runner_id,
                    runner_name,
                    runner_token_hash: token.hash,
                    inputs_json: serde_json::to_string(&plain)
                        .map_err(|e| internal("cannot encode inputs", e))?,
                    sealed_json: serde_json::to_string(&sealed)
                        .map_err(|e| internal("cannot encode secrets", e))?,
                    approval,
                    labels: req.labels.clone(),
                    toggles: req.components.clone(),
                    overrides,
                },
            )
            .await?;
        let key = self.keys.signer(org).await?.public_key();
        tracing::info!(install = %stored.id, name = %stored.name, app = %app.id, "install created");
        Ok(InstallCreated {
            install: InstallInfo {
                app_name: Some(app.name.clone()),
                ..install_info(stored)?
            },
            runner_token: token.secret,
            signing_public_key: key.to_string(),
            runner_api_url: self.engine.runner_url_known().map(str::to_owned),
        })
    }
}

impl Services<'_> {
    /// `PATCH /v1/installs/{id}/inputs`: sets some of the install's
    /// inputs, checked against its config version (sensitive ones
    /// sealed), every problem said at once; the others stay. Not deployed
    /// now: pending until the components that read them are. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn set_install_inputs(
        &self,
        caller: &Caller,
        key: &str,
        req: SetInputs,
    ) -> Result<InstallInfo, Error> {
        let result = self.put_inputs(caller, key, req).await;
        self.audited_at::<ep::SetInstallInputs, _>(caller, &[key], result)
            .await
    }

    async fn put_inputs(
        &self,
        caller: &Caller,
        key: &str,
        req: SetInputs,
    ) -> Result<InstallInfo, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let app = self
            .store
            .find_app(org, install.app_id.as_str())
            .await?
            .ok_or_else(|| Error::not_found(format!("no app {}", install.app_id)))?;
        let c = self
            .store
            .get_config(org, &app.id, Some(install.config_version))
            .await?
            .ok_or_else(|| {
                Error::not_found(format!("no config version {}", install.config_version))
            })?;
        let config = decode_config(self.secrets, &app, c)?.config;
        let (mut plain, mut sealed) = stored_values(&install)?;
        let mut problems = Vec::new();
        resolve_inputs(
            &config,
            &install.id,
            &req.inputs,
            &mut plain,
            &mut sealed,
            self.secrets,
            &mut problems,
        );
        if !problems.is_empty() {
            return Err(Error::refused(
                ErrorCode::InvalidInputs,
                format!("install {:?}: {}", install.name, problems.join("; ")),
            ));
        }
        self.write_values(org, &install, key, &plain, &sealed)
            .await?;
        // Not deployed now: pending until the components that read them are.
        let names: Vec<String> = req.inputs.keys().cloned().collect();
        let readers: Vec<String> = nuon_core::app::components_reading(&config, &names, &[])
            .into_iter()
            .filter(|c| config.component(c).is_some_and(|c| install.enabled(c)))
            .collect();
        self.note_change(org, &install, readers, None).await?;
        let again = self.find_install(caller, install.id.as_str()).await?;
        self.install_view(caller, again).await
    }
}

/// Checks `given` secrets against the config and seals them over
/// `sealed`. Every problem is reported at once.
pub(crate) fn resolve_secrets(
    config: &AppConfig,
    install: &InstallId,
    given: &BTreeMap<String, String>,
    sealed: &mut Sealed,
    secrets: &SecretBox,
    problems: &mut Vec<String>,
) {
    for (name, value) in given {
        let decl = config.secrets.iter().find(|s| &s.name == name);
        let known = decl.is_some();
        let base64_ok = |v: &str| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD
                .decode(v.trim())
                .is_ok()
        };
        if decl.is_some_and(|d| d.held_by_customer()) {
            problems.push(format!(
                "secret {name:?} is held by the customer: they enter it when they apply the install stack (`nuon installs stack`), and it stays in their account's Secrets Manager; the control plane never has it (to give it here instead, declare the secret with held_by = \"vendor\")"
            ));
        } else if known && value.chars().count() < MIN_SECRET_CHARS {
            problems.push(too_short("secret", name));
        } else if decl.is_some_and(|d| d.format.as_deref() == Some("base64")) && !base64_ok(value) {
            problems.push(format!(
                "secret {name:?} has format = \"base64\", and its value is not base64 (standard alphabet, padded)"
            ));
        } else if known {
            sealed.secrets.insert(
                name.clone(),
                secrets.seal(value, &seal_context(install, "secret", name)),
            );
        } else {
            let names: Vec<&str> = config.secrets.iter().map(|s| s.name.as_str()).collect();
            problems.push(format!(
                "unknown secret {name:?}{}",
                nuon_core::app::did_you_mean(name, names.iter().copied())
            ));
        }
    }
}

/// Checks `given` inputs against the config and merges them over
/// `current` (plain values and sealed sensitive ones). Every problem is
/// reported at once.
pub(crate) fn resolve_inputs(
    config: &AppConfig,
    install: &InstallId,
    given: &BTreeMap<String, Value>,
    plain: &mut BTreeMap<String, Value>,
    sealed: &mut Sealed,
    secrets: &SecretBox,
    problems: &mut Vec<String>,
) {
    for (name, raw) in given {
        let Some(decl) = config.input(name) else {
            let names: Vec<&str> = config.inputs.iter().map(|i| i.name.as_str()).collect();
            let hint = nuon_core::app::did_you_mean(name, names.iter().copied());
            problems.push(if names.is_empty() {
                format!("unknown input {name:?}: the app declares no inputs")
            } else {
                format!(
                    "unknown input {name:?}{hint} (inputs: {})",
                    names.join(", ")
                )
            });
            continue;
        };
        let empty = raw.is_null() || raw.as_str().is_some_and(|s| s.trim().is_empty());
        if empty && decl.required {
            problems.push(format!(
                "input {name:?} is required and was given an empty value; give it a value"
            ));
            continue;
        }
        match decl.ty.coerce(raw) {
            Ok(v) if decl.sensitive && as_text(&v).chars().count() < MIN_SECRET_CHARS => {
                problems.push(too_short("input", name));
            }
            Ok(v) if decl.sensitive => {
                let text = as_text(&v);
                sealed.inputs.insert(
                    name.clone(),
                    secrets.seal(&text, &seal_context(install, "input", name)),
                );
                plain.remove(name);
            }
            Ok(v) => {
                plain.insert(name.clone(), v);
            }
            // A sensitive value is never echoed, not even in an error.
            Err(_) if decl.sensitive => problems.push(format!(
                "input {name:?} must be a {} (the value is sensitive and not shown)",
                serde_json::to_value(decl.ty)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            )),
            Err(e) => problems.push(format!("input {name:?}: {e}")),
        }
    }
    for decl in &config.inputs {
        let set = plain.contains_key(&decl.name) || sealed.inputs.contains_key(&decl.name);
        if set {
            continue;
        }
        match &decl.default {
            Some(d) if decl.sensitive => {
                let text = as_text(d);
                sealed.inputs.insert(
                    decl.name.clone(),
                    secrets.seal(&text, &seal_context(install, "input", &decl.name)),
                );
            }
            Some(d) => {
                plain.insert(decl.name.clone(), d.clone());
            }
            None if decl.required => problems.push(format!(
                "missing required input {:?}{}",
                decl.name,
                decl.description
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )),
            None => {}
        }
    }
}

/// A secret or sensitive input too short to be hidden in logs (its value is
/// never echoed).
fn too_short(kind: &str, name: &str) -> String {
    format!(
        "{kind} {name:?} is shorter than {MIN_SECRET_CHARS} characters: a value that short cannot be hidden in job logs without hiding ordinary text with it; give a longer one (the value is not shown)"
    )
}

/// The most labels an install has.
const MAX_LABELS: usize = 64;

fn bad_labels(e: String) -> Error {
    Error::refused(ErrorCode::InvalidLabels, e)
}

impl Services<'_> {
    /// `PATCH /v1/installs/{id}/labels`: adds, replaces or removes some of
    /// an install's labels; the others stay. Admins only; recorded in the
    /// audit trail, refusals included.
    pub(crate) async fn set_install_labels(
        &self,
        caller: &Caller,
        key: &str,
        req: LabelChange,
    ) -> Result<InstallInfo, Error> {
        let result = self.change_labels(caller, key, req).await;
        self.audited_at::<SetInstallLabels, _>(caller, &[key], result)
            .await
    }

    async fn change_labels(
        &self,
        caller: &Caller,
        key: &str,
        req: LabelChange,
    ) -> Result<InstallInfo, Error> {
        require_admin(&caller.principal)?;
        let install = self.find_install(caller, key).await?;
        for k in &req.remove {
            check_key(k).map_err(bad_labels)?;
            if req.set.contains_key(k) {
                return Err(bad_labels(format!(
                    "label {k:?} is both set and removed: do one"
                )));
            }
        }
        // What is set is checked here; the change itself is one step in the
        // store, so two at once both count.
        check_labels(&req.set).map_err(bad_labels)?;
        let labels = self
            .store
            .change_install_labels(
                &caller.principal.org_id,
                &install.id,
                &req.set,
                &req.remove,
                MAX_LABELS,
            )
            .await
            .map_err(|e| match e {
                StoreError::Invalid(m) => bad_labels(m),
                other => other.into(),
            })?;
        self.install_view(caller, Install { labels, ..install })
            .await
    }
}

/// An install's stored inputs: the plain ones, and the sealed values
/// (sensitive inputs and secrets).
pub(crate) fn stored_values(install: &Install) -> Result<(BTreeMap<String, Value>, Sealed), Error> {
    let plain = serde_json::from_str(&install.inputs_json)
        .map_err(|e| internal("stored inputs unreadable", e))?;
    let sealed = serde_json::from_str(&install.sealed_json)
        .map_err(|e| internal("stored secrets unreadable", e))?;
    Ok((plain, sealed))
}

impl Services<'_> {
    /// Writes an install's inputs, plain and sealed; the install after, or
    /// a 404 (for `key`) when it went meanwhile.
    pub(crate) async fn write_values(
        &self,
        org: &OrgId,
        install: &Install,
        key: &str,
        plain: &BTreeMap<String, Value>,
        sealed: &Sealed,
    ) -> Result<Install, Error> {
        let plain =
            serde_json::to_string(plain).map_err(|e| internal("cannot encode inputs", e))?;
        let sealed =
            serde_json::to_string(sealed).map_err(|e| internal("cannot encode secrets", e))?;
        self.store
            .set_install_inputs(org, &install.id, &plain, &sealed)
            .await?
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))
    }
}

/// A stored install as the API shows it (sensitive inputs and secrets by
/// name only, sensitive outputs masked), without its app's name.
pub(crate) fn install_info(i: Install) -> Result<InstallInfo, Error> {
    let pending = crate::desired::pending_view(&i);
    let inputs: BTreeMap<String, Value> = serde_json::from_str(&i.inputs_json)
        .map_err(|e| internal("stored inputs unreadable", e))?;
    let sealed: Sealed = serde_json::from_str(&i.sealed_json)
        .map_err(|e| internal("stored secrets unreadable", e))?;
    let outputs = match &i.outputs_json {
        Some(o) => {
            let parsed: InstallOutputs =
                serde_json::from_str(o).map_err(|e| internal("stored outputs unreadable", e))?;
            serde_json::to_value(parsed.masked())
                .map_err(|e| internal("cannot encode outputs", e))?
        }
        None => Value::Null,
    };
    Ok(InstallInfo {
        id: i.id,
        name: i.name,
        app_id: i.app_id,
        app_name: None,
        config_version: i.config_version,
        runner_id: i.runner_id,
        state: i.state,
        health: None,
        sync: None,
        approval: i.approval,
        inputs,
        sensitive_inputs: sealed.inputs.into_keys().collect(),
        secrets: sealed.secrets.into_keys().collect(),
        outputs,
        labels: i.labels,
        release_id: None,
        customer_inputs: Vec::new(),
        pending,
        created_at_ms: i.created_at_ms,
    })
}
