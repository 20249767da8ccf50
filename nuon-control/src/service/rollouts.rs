//! Rollouts: a release deployed to the installs a label selector picks,
//! in waves (or a dry run of it), each install's state, and what an
//! operator does to one: pause, resume, retry, cancel, roll back. The
//! engine ([`crate::engine`]) plans and drives them; here are who may,
//! how a rollout is shown and the audit trail.

use nuon_core::endpoint::{self as ep, path_of};
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList, RolloutStatus, TargetState};
use nuon_core::wire::ReleaseInfo;
use nuon_core::{OrgId, ReleaseId, RolloutId, WorkflowId};

use super::{Caller, Services, require_deployer};
use crate::engine::RolloutAct;
use crate::error::Error;

impl Services<'_> {
    /// `POST /v1/releases/{id}/rollouts`: the release rolled out to the
    /// installs its request picks, in waves (201), or with `dry_run` only
    /// its plan (200, nothing stored; any token may ask). Deployers and
    /// admins; recorded in the audit trail, dry runs and refusals
    /// included, with the status answered.
    pub(crate) async fn create_rollout(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateRollout,
    ) -> Result<RolloutInfo, Error> {
        let ok = Self::made_unless(req.dry_run);
        let result = self.start_rollout(caller, key, &req).await;
        let target = path_of::<ep::CreateRollout>(&[key]);
        self.audited_as::<ep::CreateRollout, _>(caller, target, ok, result)
            .await
    }

    /// The plan of a rollout of release `key` (`req` as a dry run): who
    /// gets it, in which wave. Nothing is stored or started, and nothing
    /// recorded: the dashboard shows it before the person confirms.
    pub(crate) async fn plan_rollout(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateRollout,
    ) -> Result<RolloutInfo, Error> {
        let req = CreateRollout {
            dry_run: true,
            ..req
        };
        self.start_rollout(caller, key, &req).await
    }

    async fn start_rollout(
        &self,
        caller: &Caller,
        key: &str,
        req: &CreateRollout,
    ) -> Result<RolloutInfo, Error> {
        if !req.dry_run {
            require_deployer(&caller.principal)?;
        }
        let org = &caller.principal.org_id;
        let release = self.release_for_rollout(org, key).await?;
        let by = Some(caller.principal.actor());
        Ok(self.engine.create_rollout(org, &release, req, by).await?)
    }

    /// `GET /v1/releases/{id}/rollouts`: the release's rollouts, newest
    /// first, with their apps' names; any token of the org.
    pub(crate) async fn list_rollouts(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RolloutList, Error> {
        let org = &caller.principal.org_id;
        let release = self.release_for_rollout(org, key).await?;
        let rollouts = self.store.list_rollouts(org, Some(&release.id)).await?;
        Ok(RolloutList {
            rollouts: self.rollouts_shown(org, rollouts).await?,
        })
    }

    /// Every rollout of the org, newest first, as kept: the dashboard's
    /// list of rollouts.
    pub(crate) async fn all_rollouts(&self, caller: &Caller) -> Result<Vec<RolloutInfo>, Error> {
        Ok(self
            .store
            .list_rollouts(&caller.principal.org_id, None)
            .await?)
    }

    /// `GET /v1/rollouts/{id}`: one rollout with its app's name, and where
    /// its installs wait for a person; any token of the org.
    pub(crate) async fn get_rollout(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RolloutInfo, Error> {
        let org = &caller.principal.org_id;
        let id = rollout_id(key)?;
        let found = self
            .store
            .get_rollout(org, &id)
            .await?
            .ok_or_else(|| no_rollout(key))?;
        self.rollout_shown(org, found).await
    }

    /// `POST /v1/rollouts/{id}/pause` and the other acts: done by the
    /// engine, for deployers and admins; recorded in the audit trail under
    /// the act's operation, refusals included. The rollout after (a
    /// rollback answers with the new rollout that does it).
    pub(crate) async fn act_on_rollout(
        &self,
        caller: &Caller,
        key: &str,
        act: RolloutAct,
    ) -> Result<RolloutInfo, Error> {
        let result = self.rollout_act(caller, key, act).await;
        match act {
            RolloutAct::Resume => {
                self.audited_at::<ep::ResumeRollout, _>(caller, &[key], result)
                    .await
            }
            RolloutAct::Pause => {
                self.audited_at::<ep::PauseRollout, _>(caller, &[key], result)
                    .await
            }
            RolloutAct::Retry => {
                self.audited_at::<ep::RetryRollout, _>(caller, &[key], result)
                    .await
            }
            RolloutAct::Cancel => {
                self.audited_at::<ep::CancelRollout, _>(caller, &[key], result)
                    .await
            }
            RolloutAct::Rollback => {
                self.audited_at::<ep::RollbackRollout, _>(caller, &[key], result)
                    .await
            }
        }
    }

    async fn rollout_act(
        &self,
        caller: &Caller,
        key: &str,
        act: RolloutAct,
    ) -> Result<RolloutInfo, Error> {
        require_deployer(&caller.principal)?;
        let org = &caller.principal.org_id;
        let id = rollout_id(key)?;
        let by = Some(caller.principal.actor());
        let r = self.engine.rollout_act(org, &id, act, by).await?;
        self.rollout_shown(org, r).await
    }

    /// The release `key` of the org, with its app's name, or a 404.
    async fn release_for_rollout(&self, org: &OrgId, key: &str) -> Result<ReleaseInfo, Error> {
        let missing = || Error::not_found(format!("no release {key:?} (see `nuon releases list`)"));
        let id: ReleaseId = key.parse().map_err(|_| missing())?;
        let mut release = self
            .store
            .get_release(org, &id)
            .await?
            .ok_or_else(missing)?;
        release.app_name = self.app_names(org).await?.get(&release.app_id).cloned();
        Ok(release)
    }

    /// Rollouts with their apps' names (read once, when one lacks it), and
    /// where the running ones wait for a person.
    async fn rollouts_shown(
        &self,
        org: &OrgId,
        mut rollouts: Vec<RolloutInfo>,
    ) -> Result<Vec<RolloutInfo>, Error> {
        if rollouts
            .iter()
            .any(|r| r.app_name.is_none() && r.app_id.is_some())
        {
            let apps = self.app_names(org).await?;
            for r in rollouts.iter_mut().filter(|r| r.app_name.is_none()) {
                r.app_name = r.app_id.as_ref().and_then(|a| apps.get(a)).cloned();
            }
        }
        for r in rollouts
            .iter_mut()
            .filter(|r| r.status == RolloutStatus::Running)
        {
            self.waiting_approvals(org, r).await?;
        }
        Ok(rollouts)
    }

    /// One rollout with its app's name.
    async fn rollout_shown(&self, org: &OrgId, r: RolloutInfo) -> Result<RolloutInfo, Error> {
        Ok(self.rollouts_shown(org, vec![r]).await?.remove(0))
    }

    /// Says of each install of a running rollout whose deploy waits for a
    /// person where it waits (`waiting for approval at INSTALL/STEP`), and
    /// the rollout with it: a rollout at an approval does not just run.
    async fn waiting_approvals(&self, org: &OrgId, r: &mut RolloutInfo) -> Result<(), Error> {
        let mut at = Vec::new();
        // The deploying installs' waiting steps in one read, not each
        // workflow whole.
        let deploying: Vec<WorkflowId> = r
            .targets
            .iter()
            .filter(|t| t.state == TargetState::Running)
            .filter_map(|t| t.workflow_id.clone())
            .collect();
        let waiting: std::collections::HashMap<WorkflowId, String> = self
            .store
            .waiting_steps(org, &deploying)
            .await?
            .into_iter()
            .collect();
        for t in r
            .targets
            .iter_mut()
            .filter(|t| t.state == TargetState::Running)
        {
            let Some(wf) = &t.workflow_id else { continue };
            if let Some(step) = waiting.get(wf) {
                let said = format!("waiting for approval at {}/{}", t.install, step);
                t.reason = Some(format!(
                    "{said}: `nuon workflows approve {wf} --step \"{step}\"`"
                ));
                at.push(said);
            }
        }
        if !at.is_empty() && r.reason.is_none() {
            r.reason = Some(at.join("; "));
        }
        Ok(())
    }
}

/// The rollout id `key`; a malformed one is not found.
fn rollout_id(key: &str) -> Result<RolloutId, Error> {
    key.parse().map_err(|_| no_rollout(key))
}

/// There is no rollout `key` in the org.
fn no_rollout(key: &str) -> Error {
    Error::not_found(format!(
        "no rollout {key:?} (see `nuon releases status REL`)"
    ))
}
