//! What a workflow writes beyond one step: its status with what goes
//! with it, what an advance held back for the next write, the summaries
//! of the installs whose workflows ended, and an install's pending values
//! once one of its workflows ended.

use std::collections::BTreeMap;

use nuon_core::OrgId;
use nuon_core::model::{Install, InstallState, Workflow};
use nuon_core::workflow::WorkflowStatus;

use super::{Ctx, Engine, Result, rules};
use crate::store::{Carried, StepUpdate};

/// What a workflow's new status writes with it, in the same statement on
/// PostgreSQL (see [`crate::store::WorkflowStore::set_workflow_status`]).
#[derive(Default)]
pub(super) struct StatusWith<'a> {
    /// Its install's state.
    pub install_state: Option<InstallState>,
    /// The release its install runs (`Some(None)`: none).
    pub release: Option<Option<&'a nuon_core::ReleaseId>>,
    /// A step's update: its index, and the update.
    pub step: Option<(u32, StepUpdate)>,
}

impl StatusWith<'_> {
    /// The install's state, and nothing else.
    pub(super) fn state(install_state: InstallState) -> Self {
        StatusWith {
            install_state: Some(install_state),
            ..StatusWith::default()
        }
    }
}

impl Engine {
    /// Sets a workflow's status; where it ends, its install's summary is
    /// made again at the end of the pass, with those of the other installs
    /// whose workflows ended in it ([`Engine::make_summaries`]), so the
    /// overview's next read finds it current (after a fleet-wide rollout:
    /// no read that makes 10,000 again).
    pub(super) async fn set_status(
        &self,
        org: &OrgId,
        id: &nuon_core::WorkflowId,
        install: &nuon_core::InstallId,
        status: WorkflowStatus,
        with: StatusWith<'_>,
    ) -> Result<()> {
        let StatusWith {
            install_state,
            release,
            step,
        } = with;
        let bumped = self
            .store
            .set_workflow_status(org, id, status, install_state, release, step)
            .await?;
        if !status.is_active() {
            self.ended_here().insert(id.clone());
            let mut unsummed = self.unsummed.lock().unwrap_or_else(|e| e.into_inner());
            unsummed.push((org.clone(), install.clone(), bumped));
        }
        Ok(())
    }

    /// Makes again the summaries of the installs whose workflows ended
    /// since it last did: by org, one read of their workflows and one
    /// write for many. What fails is left to the next read, which makes it.
    pub(super) async fn make_summaries(&self) {
        let ended = std::mem::take(&mut *self.unsummed.lock().unwrap_or_else(|e| e.into_inner()));
        if ended.is_empty() {
            return;
        }
        // By org, each install once, at the newest revision it was given.
        let mut by_org: BTreeMap<OrgId, BTreeMap<nuon_core::InstallId, Option<i64>>> =
            BTreeMap::new();
        for (org, install, rev) in ended {
            let at = by_org.entry(org).or_default().entry(install).or_insert(rev);
            *at = (*at).max(rev);
        }
        for (org, installs) in by_org {
            let made = async {
                let mut stale = Vec::with_capacity(installs.len());
                for (install, rev) in installs {
                    let rev = match rev {
                        Some(rev) => rev,
                        None => self.store.install_summary_rev(&install).await?,
                    };
                    stale.push((install, rev));
                }
                crate::health::remake_summaries(&*self.store, &org, &stale).await
            };
            if let Err(e) = made.await {
                tracing::warn!(%org, error = %e, "cannot make the summaries of installs whose workflows ended");
            }
        }
    }

    /// Writes what is held back for the workflow's next write (its start,
    /// a step's success), when another write comes first: each write of a
    /// workflow this engine makes while it moves it writes it first, or
    /// carries it (a dispatch, the end).
    pub(super) async fn write_carried(&self, cx: &Ctx) -> Result<()> {
        let (org, id) = (&cx.org, &cx.wf.id);
        match cx.take_carried() {
            Some(Carried::Started(state)) => {
                let (store, running) = (&self.store, WorkflowStatus::Running);
                store
                    .set_workflow_status(org, id, running, Some(state), None, None)
                    .await?;
            }
            Some(Carried::Ended(index, u)) => self.store.update_step(org, id, index, u).await?,
            None => {}
        }
        Ok(())
    }

    /// The install's pending values once workflow `wf` of it ended (as
    /// stored): each component it applied or destroyed runs them now;
    /// once none waits, nothing is pending. Nothing while it runs.
    pub(crate) async fn settle_pending(
        &self,
        org: &OrgId,
        install: &nuon_core::InstallId,
        wf: &nuon_core::WorkflowId,
    ) -> Result<()> {
        match self.store.get_workflow(org, wf).await? {
            Some(wf) => self.settle_pending_in(org, install, None, &wf).await,
            None => Ok(()),
        }
    }

    /// [`Engine::settle_pending`] of workflow `wf` as this engine just
    /// ended it (its last step and status stored), of `install` as read
    /// at the start of this advance (with the state it left it in): no
    /// read of either again unless the install's pending values moved.
    pub(super) async fn settle_pending_of(
        &self,
        org: &OrgId,
        install: &Install,
        wf: &Workflow,
    ) -> Result<()> {
        self.settle_pending_in(org, &install.id, Some(install), wf)
            .await
    }

    /// [`Engine::settle_pending`] of workflow `wf`, trying `known` first
    /// (see [`crate::desired::update_pending_from`]).
    pub(super) async fn settle_pending_in(
        &self,
        org: &OrgId,
        install: &nuon_core::InstallId,
        known: Option<&Install>,
        wf: &Workflow,
    ) -> Result<()> {
        if wf.status.is_active() || rules::plan_only(wf) {
            return Ok(());
        }
        let (how, deployed) = rules::what_ran(wf, wf.status);
        crate::desired::update_pending_from(&*self.store, org, install, known, |p, i| {
            // Torn down or gone: nothing runs what it changed.
            if matches!(
                i.state,
                InstallState::TornDown | InstallState::Deprovisioned
            ) {
                return None;
            }
            let mut p = p?;
            p.ran(&wf.id, how, deployed.iter().copied()).then_some(p)
        })
        .await?;
        Ok(())
    }
}
