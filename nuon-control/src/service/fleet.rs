//! Each org's fleet as this replica keeps it between reads: its installs,
//! runners and workflow summaries, brought up to date at each read by what
//! the store says changed since the last ([`crate::store::FleetStore`]).
//! The overview and `listInstalls` of a fleet of 10,000 installs read the
//! few rows that moved, not 30,000 rows at every GET.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use nuon_core::model::Install;
use nuon_core::wire::{RunnerHealth, RunnerInfo};
use nuon_core::{InstallId, OrgId, RunnerId};

use super::Services;
use crate::error::Error;
use crate::health::InstallSummary;
use crate::store::FleetChanges;

/// The fleet views of the orgs this replica served, each behind its own
/// lock: one read brings an org's view up to date at a time, others wait
/// for it and take what it made.
#[derive(Default)]
pub(crate) struct FleetViews {
    orgs: Mutex<HashMap<OrgId, Slot>>,
}

/// An org's view, `None` until read (or after a read failed).
type Slot = Arc<tokio::sync::Mutex<Option<Arc<FleetView>>>>;

impl FleetViews {
    fn slot(&self, org: &OrgId) -> Slot {
        let mut orgs = self.orgs.lock().unwrap_or_else(|e| e.into_inner());
        orgs.entry(org.clone()).or_default().clone()
    }
}

/// An org's installs, runners (as stored) and workflow summaries, as of a
/// mark of the store's changes.
#[derive(Clone, Default)]
pub(crate) struct FleetView {
    mark: i64,
    /// Oldest first (by creation, then id), as the store lists them.
    installs: Vec<Install>,
    /// Where each install is in `installs`.
    at: HashMap<InstallId, usize>,
    /// Each runner as the API shows it, with its health as stored (what
    /// it is shown from again at each read: it changes with time).
    runners: HashMap<RunnerId, (RunnerInfo, RunnerHealth, Option<i64>)>,
    summaries: HashMap<InstallId, InstallSummary>,
    /// The revision of a summary read stale (made again from the install's
    /// workflows, and saved at it).
    stale: HashMap<InstallId, i64>,
}

impl FleetView {
    /// The org's installs, oldest first.
    pub(crate) fn installs(&self) -> &[Install] {
        &self.installs
    }

    /// An install's workflow summary.
    pub(crate) fn summary(&self, id: &InstallId) -> Option<&InstallSummary> {
        self.summaries.get(id)
    }

    /// A runner of the org as the API shows it (as of the view's read).
    pub(crate) fn runner(&self, id: &RunnerId) -> Option<&RunnerInfo> {
        self.runners.get(id).map(|(r, _, _)| r)
    }

    /// Takes in what changed; `false` when the view no longer holds the
    /// org's rows one for one (something was removed): read it whole.
    fn apply(&mut self, changes: FleetChanges) -> bool {
        self.mark = changes.mark;
        let mut added = false;
        for i in changes.installs {
            match self.at.get(&i.id) {
                Some(&n) => self.installs[n] = i,
                None => {
                    self.at.insert(i.id.clone(), self.installs.len());
                    self.installs.push(i);
                    added = true;
                }
            }
        }
        if added {
            self.installs
                .sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
            self.at = (self.installs.iter().enumerate())
                .map(|(n, i)| (i.id.clone(), n))
                .collect();
        }
        for r in changes.runners {
            let (health, since) = (r.health, r.health_since_ms);
            self.runners.insert(r.id.clone(), (r, health, since));
        }
        for c in changes.summaries {
            let fresh = c
                .fresh()
                .and_then(|s| InstallSummary::stored(&s.brief, s.full.clone()));
            match fresh {
                Some(s) => {
                    self.stale.remove(&c.install_id);
                    self.summaries.insert(c.install_id, s);
                }
                None => {
                    self.summaries.remove(&c.install_id);
                    self.stale.insert(c.install_id, c.rev);
                }
            }
        }
        self.installs.len() == changes.install_count && self.runners.len() == changes.runner_count
    }
}

impl Services<'_> {
    /// The org's fleet now: this replica's view of it brought up to date
    /// by what changed since it was last read (the whole of it at the
    /// first read, and after a removal); each install's summary made from
    /// its workflows where the stored one is stale.
    pub(crate) async fn fleet_view(&self, org: &OrgId) -> Result<Arc<FleetView>, Error> {
        let slot = self.fleet_views.slot(org);
        let mut slot = slot.lock().await;
        // Out of the slot while it changes: a read that fails leaves none,
        // and the next reads the whole fleet.
        let mut view = slot.take().unwrap_or_default();
        let changes = self.store.fleet_changes(org, view.mark).await?;
        if !Arc::make_mut(&mut view).apply(changes) {
            let mut whole = FleetView::default();
            whole.apply(self.store.fleet_changes(org, 0).await?);
            view = Arc::new(whole);
        }
        let v = Arc::make_mut(&mut view);
        // Whether a runner is there, and its health, change with time.
        for (r, health, since) in v.runners.values_mut() {
            (r.health, r.health_since_ms) = (*health, *since);
            self.show_runner(r);
        }
        let missing: Vec<InstallId> = (v.installs.iter())
            .filter(|i| !v.summaries.contains_key(&i.id))
            .map(|i| i.id.clone())
            .collect();
        // An install that never had a workflow has nothing to make its
        // summary of (a new fleet of thousands is not read install by
        // install); the others are made from their workflows, and saved.
        let with: HashSet<InstallId> = if missing.is_empty() {
            HashSet::new()
        } else {
            (self.store.installs_with_workflows(org).await?)
                .into_iter()
                .collect()
        };
        for id in missing {
            let made = if with.contains(&id) {
                let rev = v.stale.remove(&id).unwrap_or(0);
                crate::health::remake_summary(self.store, org, &id, rev).await?
            } else {
                Default::default()
            };
            v.summaries.insert(id, InstallSummary::made(made));
        }
        *slot = Some(view.clone());
        Ok(view)
    }
}
