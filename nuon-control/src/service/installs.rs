//! Installs: reading one as the API shows it, and changing its name and
//! approval mode.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use nuon_core::OrgId;
use nuon_core::endpoint::{Endpoint, SetInstallLabels, UpdateInstall, path_of};
use nuon_core::labels::{check_key, check_labels};
use nuon_core::wire::{EditInstall, InstallInfo, InstallOutputs, LabelChange};
use serde_json::Value;

use super::{Caller, Services, check_name, internal, require_admin};
use crate::error::Error;
use crate::secrets::Sealed;
use crate::store::{InstallChange, StoreError, StoredInstall};

impl Services<'_> {
    /// The install `key` (an id or a name) of the caller's org, or a 404.
    pub(crate) async fn find_install(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<StoredInstall, Error> {
        self.store
            .find_install(&caller.principal.org_id, key)
            .await?
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))
    }

    /// An install as the API shows it: with its app's name and the
    /// release it has.
    pub(crate) async fn install_view(
        &self,
        caller: &Caller,
        install: StoredInstall,
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

    /// `GET /v1/installs/{id}`.
    pub(crate) async fn get_install(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallInfo, Error> {
        let install = self.find_install(caller, key).await?;
        self.install_view(caller, install).await
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
        self.audited::<UpdateInstall, _>(caller, path_of::<UpdateInstall>(&[key]), result)
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

/// The most labels an install has.
const MAX_LABELS: usize = 64;

fn bad_labels(e: String) -> Error {
    Error::api(StatusCode::BAD_REQUEST, "invalid_labels", e)
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
        let target = path_of::<SetInstallLabels>(&[key]);
        self.audited::<SetInstallLabels, _>(caller, target, result)
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
        self.install_view(caller, StoredInstall { labels, ..install })
            .await
    }
}

/// A stored install as the API shows it (sensitive inputs and secrets by
/// name only, sensitive outputs masked), without its app's name.
pub(crate) fn install_info(i: StoredInstall) -> Result<InstallInfo, Error> {
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
        approval: i.approval,
        inputs,
        sensitive_inputs: sealed.inputs.into_keys().collect(),
        secrets: sealed.secrets.into_keys().collect(),
        outputs,
        labels: i.labels,
        release_id: None,
        created_at_ms: i.created_at_ms,
    })
}
