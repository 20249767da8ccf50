//! A rollback: the rollout that returns each install a rollout reached to
//! what it ran before (its release, or the config version it ran before
//! its first release).

use super::{RolloutInfo, RolloutStatus, RolloutTarget, TargetState};
use crate::id::{InstallId, ReleaseId, RolloutId};

impl RolloutInfo {
    /// The rollout that returns each install this one reached to its
    /// release before (`id`, `now`), and this one marked rolled back.
    /// Installs that had no release before go back to the config version
    /// they ran; those with neither are left as they are, and named in
    /// the rollback's reason. Refused while one deploys, and when one has
    /// had another release or deploy since (`current`: each install's
    /// release now, none when it runs none; not looked at when `None`).
    pub fn rollback(
        &mut self,
        id: RolloutId,
        now: i64,
        current: Option<&std::collections::BTreeMap<InstallId, ReleaseId>>,
    ) -> Result<RolloutInfo, String> {
        if matches!(
            self.status,
            RolloutStatus::RolledBack | RolloutStatus::Planned
        ) {
            return Err(self.cannot("roll back", self.status));
        }
        if let Some(t) = self
            .targets
            .iter()
            .find(|t| t.state == TargetState::Running)
        {
            return Err(format!(
                "install {} still deploys in rollout {}: wait for it to end (`cancel` first to start nothing more), then roll back",
                t.install, self.id
            ));
        }
        let moved: Vec<String> = self
            .targets
            .iter()
            .filter(|t| t.tries > 0)
            .filter_map(|t| {
                let now = current?.get(&t.install_id);
                // What this rollout gave it (a config version: no release).
                let gave = match t.config_version {
                    Some(_) => now.is_none(),
                    None => now == Some(&t.release_id),
                };
                let had = now == t.from_release.as_ref();
                let deployed = matches!(t.state, TargetState::Succeeded | TargetState::Baking);
                (!gave && (deployed || !had)).then(|| match now {
                    Some(r) => format!("{} (now on {r})", t.install),
                    None => format!("{} (deployed outside releases since)", t.install),
                })
            })
            .collect();
        if !moved.is_empty() {
            return Err(format!(
                "{} had another release or deploy since rollout {}: roll back the newer rollout first, or deploy what it should run (`nuon installs deploy INSTALL --release REL | --config V`)",
                moved.join(", "),
                self.id
            ));
        }
        let reached = self.targets.iter().filter(|t| t.tries > 0);
        let (back, left): (Vec<_>, Vec<_>) =
            reached.partition(|t| t.from_release.is_some() || t.from_config.is_some());
        if back.is_empty() {
            return Err(if left.is_empty() {
                format!(
                    "rollout {} has deployed no install: nothing to roll back",
                    self.id
                )
            } else {
                format!(
                    "no install of rollout {} had a release or a config version before it: nothing to return them to",
                    self.id
                )
            });
        }
        let targets = back
            .iter()
            .map(|t| {
                // An install's first release goes back to the config
                // version it ran before.
                let (release, config) = match &t.from_release {
                    Some(r) => (r.clone(), None),
                    None => (t.release_id.clone(), t.from_config),
                };
                let mut back = RolloutTarget::pending(
                    (t.install_id.clone(), t.install.clone()),
                    0,
                    release,
                    Some(t.release_id.clone()),
                );
                back.config_version = config;
                back
            })
            .collect();
        let names: Vec<&str> = left.iter().map(|t| t.install.as_str()).collect();
        let back = RolloutInfo {
            id,
            kind: self.kind,
            release_id: self.release_id.clone(),
            runner_version: self.runner_version.clone(),
            app_id: self.app_id.clone(),
            app_name: self.app_name.clone(),
            selector: self.selector.clone(),
            waves: "100%".into(),
            max_parallel: self.max_parallel,
            approve_each_wave: false,
            bake_ms: 0,
            rollback_of: Some(self.id.clone()),
            status: RolloutStatus::Running,
            wave: 0,
            wave_count: 1,
            reason: (!names.is_empty()).then(|| {
                format!(
                    "left as they are (no release or config version before): {}",
                    names.join(", ")
                )
            }),
            targets,
            created_by: None,
            created_at_ms: now,
            updated_at_ms: now,
            version: 0,
        };
        self.status = RolloutStatus::RolledBack;
        self.reason = Some(format!("rolled back by rollout {}", back.id));
        Ok(back)
    }
}
