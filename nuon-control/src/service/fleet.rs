//! Each org's fleet as this replica keeps it between reads: its installs,
//! runners and workflow summaries, brought up to date at each read by what
//! the store says changed since the last ([`crate::store::FleetStore`]).
//! The overview and `listInstalls` of a fleet of 10,000 installs read the
//! few rows that moved, not 30,000 rows at every GET.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use nuon_core::app::AppConfig;
use nuon_core::model::Install;
use nuon_core::wire::{HealthStatus, RunnerHealth, RunnerInfo, RunnerStatus, RunnerTelemetry};
use nuon_core::{AppId, InstallId, OrgId, RunnerId};

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
    /// Each app's newest config as last opened, with its version.
    configs: Mutex<HashMap<AppId, (u32, Arc<AppConfig>)>>,
}

/// An org's view, `None` until read (or after a read failed).
type Slot = Arc<tokio::sync::Mutex<Option<Arc<FleetView>>>>;

impl FleetViews {
    fn slot(&self, org: &OrgId) -> Slot {
        let mut orgs = self.orgs.lock().unwrap_or_else(|e| e.into_inner());
        orgs.entry(org.clone()).or_default().clone()
    }

    fn configs(&self) -> std::sync::MutexGuard<'_, HashMap<AppId, (u32, Arc<AppConfig>)>> {
        self.configs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The app's config of `version`, if it is the one kept.
    pub(crate) fn config(&self, app: &AppId, version: u32) -> Option<Arc<AppConfig>> {
        (self.configs().get(app))
            .filter(|(v, _)| *v == version)
            .map(|(_, c)| c.clone())
    }

    /// Keeps `config` as the app's newest, unless a newer one is kept.
    pub(crate) fn keep_config(&self, app: &AppId, version: u32, config: Arc<AppConfig>) {
        let mut configs = self.configs();
        if configs.get(app).is_none_or(|(v, _)| *v <= version) {
            configs.insert(app.clone(), (version, config));
        }
    }
}

/// A fleet's installs by health status (in [`HealthStatus::ALL`]'s order;
/// those whose app has no config in none), and its steps waiting for an
/// approval.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct FleetCounts {
    pub(crate) by_health: [usize; HealthStatus::ALL.len()],
    pub(crate) waiting: usize,
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
    /// The installs of each runner.
    of_runner: HashMap<RunnerId, Vec<InstallId>>,
    /// Each runner as the API shows it, with its health as stored (what
    /// it is shown from again at each read: it changes with time).
    runners: HashMap<RunnerId, (RunnerInfo, RunnerHealth, Option<i64>)>,
    summaries: HashMap<InstallId, InstallSummary>,
    /// The revision of a summary read stale (made again from the install's
    /// workflows, and saved at it).
    stale: HashMap<InstallId, i64>,
    /// Each install's health status as last made (`None`: its app has no
    /// config), dropped when its row or summary changes, or what of its
    /// runner a status is made of ([`status_part`]: not the time of its
    /// last call); all of them when a config does.
    statuses: HashMap<InstallId, Option<HealthStatus>>,
    /// The config versions the statuses were made with.
    configs: BTreeMap<AppId, u32>,
    /// The installs whose status is to be made: a read makes what changed,
    /// not 10,000 lookups.
    unmade: HashSet<InstallId>,
    /// The installs that may have no summary (new, or theirs was stale).
    unsummed: HashSet<InstallId>,
    /// Until when every runner shows as it was last shown (ms since the
    /// epoch; what they show moves with time only past a threshold from
    /// their last call): a read before it shows again only the rows that
    /// changed, not 10,000 runners.
    shown_until: i64,
    /// The runners whose rows changed since they were last shown.
    unshown: HashSet<RunnerId>,
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

    /// An install's health status as last made (`None` until made, or
    /// when its app has no config).
    pub(crate) fn status(&self, id: &InstallId) -> Option<HealthStatus> {
        self.statuses.get(id).copied().flatten()
    }

    /// The whole fleet's counts, as the overview shows them first: made
    /// from the kept statuses and summaries alone, never looked up install
    /// by install (10,000 lookups, each a cache miss on the install's id,
    /// were most of an overview's time); `None` while a status is unmade.
    pub(crate) fn counts(&self) -> Option<FleetCounts> {
        if !self.unmade.is_empty() || self.statuses.len() != self.installs.len() {
            return None;
        }
        let mut counts = FleetCounts::default();
        for status in self.statuses.values().flatten() {
            if let Some(n) = HealthStatus::ALL.iter().position(|k| k == status) {
                counts.by_health[n] += 1;
            }
        }
        counts.waiting = (self.summaries.values())
            .map(|s| s.brief.waiting.len())
            .sum();
        Some(counts)
    }

    /// Takes in what changed; `false` when the view no longer holds the
    /// org's rows one for one (something was removed): read it whole.
    fn apply(&mut self, changes: FleetChanges) -> bool {
        self.mark = changes.mark;
        let mut added = false;
        for i in &changes.installs {
            self.forget_status(&i.id);
        }
        for i in changes.installs {
            match self.at.get(&i.id) {
                Some(&n) => {
                    let was = std::mem::replace(&mut self.installs[n], i);
                    if was.runner_id != self.installs[n].runner_id {
                        self.unlink(&was);
                        self.link(n);
                    }
                }
                None => {
                    self.unsummed.insert(i.id.clone());
                    self.at.insert(i.id.clone(), self.installs.len());
                    self.installs.push(i);
                    self.link(self.installs.len() - 1);
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
        // A runner's row changes at each of its calls (the time of the
        // last one): its installs' statuses only when what they are made
        // of does. Until shown again it shows as before.
        let mut moved = HashSet::new();
        for mut r in changes.runners {
            let (health, since) = (r.health, r.health_since_ms);
            match self.runners.get(&r.id) {
                Some((was, _, _)) => {
                    (r.status, r.health, r.health_since_ms) =
                        (was.status, was.health, was.health_since_ms);
                    if status_part(was) != status_part(&r) {
                        moved.insert(r.id.clone());
                    }
                }
                None => {
                    moved.insert(r.id.clone());
                }
            }
            self.unshown.insert(r.id.clone());
            self.runners.insert(r.id.clone(), (r, health, since));
        }
        self.forget_statuses_of(&moved);
        for c in changes.summaries {
            self.forget_status(&c.install_id);
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
                    self.unsummed.insert(c.install_id.clone());
                    self.stale.insert(c.install_id, c.rev);
                }
            }
        }
        self.installs.len() == changes.install_count && self.runners.len() == changes.runner_count
    }

    /// Notes the install at `n` as its runner's.
    fn link(&mut self, n: usize) {
        let i = &self.installs[n];
        (self.of_runner.entry(i.runner_id.clone()).or_default()).push(i.id.clone());
    }

    /// Forgets `i` as its runner's.
    fn unlink(&mut self, i: &Install) {
        if let Some(ids) = self.of_runner.get_mut(&i.runner_id) {
            ids.retain(|id| *id != i.id);
        }
    }

    /// Drops an install's status, to be made again.
    fn forget_status(&mut self, id: &InstallId) {
        self.statuses.remove(id);
        self.unmade.insert(id.clone());
    }

    /// Drops the statuses of the installs of `runners`.
    fn forget_statuses_of(&mut self, runners: &HashSet<RunnerId>) {
        let ids: Vec<InstallId> = (runners.iter())
            .flat_map(|r| self.of_runner.get(r).into_iter().flatten().cloned())
            .collect();
        for id in &ids {
            self.forget_status(id);
        }
    }

    /// Shows the runners again at `now` with `show` (whether it is there,
    /// and its health, move with time), from its health as stored: every
    /// one once `now` reaches [`FleetView::shown_until`], else those whose
    /// rows changed; `until` says when what a runner shows next moves.
    /// Drops the statuses of the installs of those whose shown status
    /// moved.
    fn show_runners(
        &mut self,
        now: i64,
        show: impl Fn(&mut RunnerInfo),
        until: impl Fn(&RunnerInfo) -> i64,
    ) {
        let mut moved = HashSet::new();
        let walk = now >= self.shown_until;
        let mut next = if walk { i64::MAX } else { self.shown_until };
        let mut show_one = |(r, health, since): &mut (RunnerInfo, RunnerHealth, Option<i64>)| {
            let was = r.status;
            (r.health, r.health_since_ms) = (*health, *since);
            show(r);
            next = next.min(until(r));
            if was != r.status {
                moved.insert(r.id.clone());
            }
        };
        let unshown = std::mem::take(&mut self.unshown);
        if walk {
            self.runners.values_mut().for_each(&mut show_one);
        } else {
            for id in &unshown {
                if let Some(entry) = self.runners.get_mut(id) {
                    show_one(entry);
                }
            }
        }
        self.shown_until = next;
        self.forget_statuses_of(&moved);
    }

    /// Makes the statuses missing, with the apps' newest configs (by app:
    /// version and config); all again when a config changed.
    fn make_statuses(&mut self, configs: &BTreeMap<AppId, (u32, Arc<AppConfig>)>) {
        let versions: BTreeMap<AppId, u32> = configs
            .iter()
            .map(|(app, (v, _))| (app.clone(), *v))
            .collect();
        if versions != self.configs {
            self.statuses.clear();
            self.unmade = self.installs.iter().map(|i| i.id.clone()).collect();
            self.configs = versions;
        }
        let none = crate::health::Brief::default();
        for id in std::mem::take(&mut self.unmade) {
            // One removed since: the view is read whole before a read.
            let Some(i) = self.at.get(&id).map(|&n| &self.installs[n]) else {
                continue;
            };
            let status = configs.get(&i.app_id).map(|(_, config)| {
                let brief = self.summaries.get(&i.id).map_or(&none, |s| &s.brief);
                let runner = self.runners.get(&i.runner_id).map(|(r, _, _)| r);
                crate::health::status_of(config, i, runner, brief)
            });
            self.statuses.insert(i.id.clone(), status);
        }
    }
}

/// What of a runner an install's health status is made of
/// ([`crate::health::status_of`]): whether it is there, revoked, ever
/// called, and what it last reported (probes, turned off).
fn status_part(r: &RunnerInfo) -> (RunnerStatus, bool, bool, Option<&RunnerTelemetry>) {
    (
        r.status,
        r.revoked,
        r.last_seen_at_ms.is_some(),
        r.telemetry.as_ref(),
    )
}

impl Services<'_> {
    /// The org's fleet now: this replica's view of it brought up to date
    /// by what changed since it was last read (the whole of it at the
    /// first read, and after a removal); each install's summary made from
    /// its workflows where the stored one is stale.
    pub(crate) async fn fleet_view(&self, org: &OrgId) -> Result<Arc<FleetView>, Error> {
        self.fleet_view_with(org, None).await
    }

    /// [`Services::fleet_view`], with each install's health status made
    /// where it is missing from `configs` (by app: the newest config and
    /// its version).
    pub(crate) async fn fleet_view_with(
        &self,
        org: &OrgId,
        configs: Option<&BTreeMap<AppId, (u32, Arc<AppConfig>)>>,
    ) -> Result<Arc<FleetView>, Error> {
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
        let now = nuon_core::now_ms();
        v.show_runners(
            now,
            |r| self.show_runner_at(r, now),
            |r| self.runner_shown_until(r, now),
        );
        let missing: Vec<InstallId> = (std::mem::take(&mut v.unsummed).into_iter())
            .filter(|id| v.at.contains_key(id) && !v.summaries.contains_key(id))
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
        let mut stale = Vec::new();
        for id in missing {
            if with.contains(&id) {
                let rev = v.stale.remove(&id).unwrap_or(0);
                stale.push((id, rev));
            } else {
                v.summaries
                    .insert(id, InstallSummary::made(Default::default()));
            }
        }
        for (id, made) in crate::health::remake_summaries(self.store, org, &stale).await? {
            v.summaries.insert(id, InstallSummary::made(made));
        }
        if let Some(configs) = configs {
            v.make_statuses(configs);
        }
        *slot = Some(view.clone());
        Ok(view)
    }
}

#[cfg(test)]
mod tests {
    use nuon_appconfig::parse;
    use nuon_core::app::SourceFile;
    use nuon_core::model::InstallState;
    use nuon_core::wire::{HealthStatus, RunnerInfo, RunnerStatus};
    use serde_json::json;

    use super::*;

    /// A kept status is made again when what it is made of changes: the
    /// install's row, its runner's shown status or what the runner
    /// reported, a config; not the time of the runner's last call.
    #[test]
    fn a_kept_status_is_made_again_when_what_it_is_made_of_changes() {
        let files = [
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "components/db.toml",
                "name = \"db\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./db\"\n",
            ),
        ];
        let (config, d) = parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let install = crate::health::tests::active_install();
        let runner = |last_seen: i64| -> RunnerInfo {
            serde_json::from_value(json!({
                "id": "rnr_01M8C0AY87516WYXNY8MS8239D", "name": "r", "created_at_ms": 0,
                "last_seen_at_ms": last_seen, "revoked": false, "role": "install",
            }))
            .unwrap()
        };
        let changes = |installs: Vec<Install>, runners: Vec<RunnerInfo>| FleetChanges {
            mark: 1,
            installs,
            runners,
            summaries: Vec::new(),
            install_count: 1,
            runner_count: 1,
        };
        let shown = |status: RunnerStatus| move |r: &mut RunnerInfo| r.status = status;
        let configs: BTreeMap<AppId, (u32, Arc<AppConfig>)> =
            [(install.app_id.clone(), (1, Arc::new(config)))].into();

        let mut view = FleetView::default();
        assert!(view.apply(changes(vec![install.clone()], vec![runner(1)])));
        view.show_runners(1, shown(RunnerStatus::Connected), |_| 0);
        view.make_statuses(&configs);
        assert_eq!(view.status(&install.id), Some(HealthStatus::Healthy));
        // The overview's counts, from the kept statuses alone.
        let counted = |k: HealthStatus| {
            let mut c = FleetCounts::default();
            c.by_health[HealthStatus::ALL.iter().position(|s| *s == k).unwrap()] = 1;
            Some(c)
        };
        assert_eq!(view.counts(), counted(HealthStatus::Healthy));

        // Its runner called again: the row changed, the status holds.
        assert!(view.apply(changes(vec![], vec![runner(2)])));
        view.show_runners(1, shown(RunnerStatus::Connected), |_| 0);
        assert_eq!(
            view.status(&install.id),
            Some(HealthStatus::Healthy),
            "kept"
        );

        // Its runner's shown status moves with time: made again.
        view.show_runners(1, shown(RunnerStatus::Gone), |_| 0);
        assert_eq!(view.status(&install.id), None, "dropped");
        assert_eq!(view.counts(), None, "not counted while a status is unmade");
        view.make_statuses(&configs);
        assert_eq!(view.status(&install.id), Some(HealthStatus::Offline));
        assert_eq!(view.counts(), counted(HealthStatus::Offline));

        // Its runner reports it is turned off: made again.
        let mut off = runner(3);
        off.telemetry = Some(nuon_core::wire::RunnerTelemetry {
            disabled: Some("maintenance".into()),
            ..Default::default()
        });
        assert!(view.apply(changes(vec![], vec![off])));
        view.show_runners(1, shown(RunnerStatus::Connected), |_| 0);
        assert_eq!(view.status(&install.id), None, "dropped");
        view.make_statuses(&configs);
        assert_eq!(view.status(&install.id), Some(HealthStatus::Disabled));

        // Its row changes.
        let mut failed = install.clone();
        failed.state = InstallState::Failed;
        assert!(view.apply(changes(vec![failed], vec![runner(4)])));
        view.show_runners(1, shown(RunnerStatus::Connected), |_| 0);
        view.make_statuses(&configs);
        assert_eq!(view.status(&install.id), Some(HealthStatus::Unhealthy));

        // A config's version moves: every status made again (here the
        // app has none any more: no status).
        view.make_statuses(&BTreeMap::new());
        assert_eq!(view.status(&install.id), None);
        assert_eq!(view.counts(), Some(FleetCounts::default()), "in no status");

        // What a runner shows holds until its next threshold: a read
        // before it shows again only the rows that changed.
        view.show_runners(10, shown(RunnerStatus::Connected), |_| 100);
        view.show_runners(50, shown(RunnerStatus::Gone), |_| 100);
        assert_eq!(
            view.runner(&install.runner_id).map(|r| r.status),
            Some(RunnerStatus::Connected),
            "held"
        );
        assert!(view.apply(changes(vec![], vec![runner(5)])));
        view.show_runners(60, shown(RunnerStatus::Gone), |_| 100);
        assert_eq!(
            view.runner(&install.runner_id).map(|r| r.status),
            Some(RunnerStatus::Gone),
            "a changed row is shown"
        );
        view.show_runners(70, shown(RunnerStatus::Connected), |_| 200);
        assert_eq!(
            view.runner(&install.runner_id).map(|r| r.status),
            Some(RunnerStatus::Gone),
            "held"
        );
        view.show_runners(100, shown(RunnerStatus::Connected), |_| 200);
        assert_eq!(
            view.runner(&install.runner_id).map(|r| r.status),
            Some(RunnerStatus::Connected),
            "every runner past the threshold"
        );

        // Another install's row counts as a removal when the counts say so.
        let mut more = changes(vec![], vec![]);
        more.install_count = 0;
        assert!(
            !view.apply(more),
            "a view holding more installs than the org"
        );
    }
}
