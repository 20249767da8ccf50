//! An install's Terraform states as the operator sees them: each
//! component's versions and lock (never the state itself), and a lock
//! released by force when the run holding it is gone. The `http` backend
//! Terraform itself talks to is the Runner API's (`api/state.rs`).

use nuon_core::InstallId;
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{ComponentStateInfo, StateList, StateLockInfo, StateUnlocked};

use super::{Caller, Services, require_admin, valid_name};
use crate::error::Error;
use crate::store::StateLock;

impl Services<'_> {
    /// `GET /v1/installs/{id}/state`: install `key`'s Terraform states,
    /// each component's versions and lock.
    pub(crate) async fn list_states(&self, caller: &Caller, key: &str) -> Result<StateList, Error> {
        let install = self.state_install(caller, key).await?;
        let states = self
            .store
            .list_states(&caller.principal.org_id, &install)
            .await?
            .into_iter()
            .map(|s| ComponentStateInfo {
                component: s.component,
                latest_version: s.latest,
                versions: s.versions,
                updated_at_ms: s.updated_at_ms,
                lock: s.lock.map(lock_view),
            })
            .collect();
        Ok(StateList { states })
    }

    /// `POST /v1/installs/{id}/state/{component}/unlock`: the lock on
    /// install `key`'s state of `component` released, whoever holds it,
    /// and what was released. Admins only; recorded in the audit trail,
    /// refusals included.
    pub(crate) async fn force_unlock_state(
        &self,
        caller: &Caller,
        key: &str,
        component: &str,
    ) -> Result<StateUnlocked, Error> {
        let result = self.unlock_by_force(caller, key, component).await;
        self.audited_at::<ep::ForceUnlockState, _>(caller, &[key, component], result)
            .await
    }

    async fn unlock_by_force(
        &self,
        caller: &Caller,
        key: &str,
        component: &str,
    ) -> Result<StateUnlocked, Error> {
        require_admin(&caller.principal)?;
        check_component(component)?;
        let install = self.state_install(caller, key).await?;
        let released = self
            .store
            .force_unlock_state(&caller.principal.org_id, &install, component)
            .await?
            .map(lock_view);
        let message = match &released {
            Some(l) => {
                let who = l
                    .info
                    .get("Who")
                    .and_then(|w| w.as_str())
                    .unwrap_or("unknown");
                let op = l
                    .info
                    .get("Operation")
                    .and_then(|w| w.as_str())
                    .unwrap_or("unknown");
                tracing::warn!(install = %install, component, lock = %l.id, who, "terraform state lock released by force");
                format!(
                    "released the lock {} on {component} held by {who} for {op}; if that run is still going, it may now write a state that another run overwrites",
                    l.id
                )
            }
            None => format!("{component} was not locked; nothing was released"),
        };
        Ok(StateUnlocked {
            component: component.to_owned(),
            released,
            message,
        })
    }

    /// The id of install `key` (an id or a name) of the caller's org, or a
    /// plain 404 (these operations have always answered it so).
    async fn state_install(&self, caller: &Caller, key: &str) -> Result<InstallId, Error> {
        self.store
            .find_install(&caller.principal.org_id, key)
            .await?
            .map(|i| i.id)
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))
    }
}

/// Refuses a component name that cannot be one (400), in a state's
/// address: the Runner API's backend and the operator's unlock alike.
pub(crate) fn check_component(component: &str) -> Result<(), Error> {
    if valid_name(component) {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "invalid component name {:?} in the state address",
            component.chars().take(80).collect::<String>()
        )))
    }
}

/// A state lock as the API shows it: Terraform's lock info as JSON (as
/// text when it is not).
fn lock_view(l: StateLock) -> StateLockInfo {
    StateLockInfo {
        id: l.id,
        info: serde_json::from_str(&l.info).unwrap_or(serde_json::Value::String(l.info)),
        created_at_ms: l.created_at_ms,
    }
}
