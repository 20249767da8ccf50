//! Runners: registered, listed, revoked and given a new token by the
//! operations of the Control API (the changes admins only, recorded in
//! the audit trail), and shown with whether each is there, from its last
//! call, and its health now.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nuon_core::endpoint::{self as ep};
use nuon_core::token::issue_runner_token;
use nuon_core::wire::{CreateRunner, RunnerCreated, RunnerInfo, RunnerList, RunnerStatus};
use nuon_core::{OrgId, RunnerId};

use super::{Caller, Services, check_name, require_admin};
use crate::error::Error;
use crate::store::RunnerPrincipal;

/// The runner tokens this replica's Runner API checked lately, by hash:
/// a runner's calls within [`RunnerTokens::TTL`] of a check are not looked
/// up again. Revoking or rotating a runner forgets its tokens here at once,
/// before it is woken (other replicas forget within the TTL).
#[derive(Default)]
pub(crate) struct RunnerTokens(Mutex<HashMap<String, (Arc<RunnerPrincipal>, Instant)>>);

impl RunnerTokens {
    /// How long a check is trusted.
    pub(crate) const TTL: Duration = Duration::from_secs(5);

    /// The runner of the token hashed `hash`, when checked within the TTL.
    pub(crate) fn get(&self, hash: &str) -> Option<Arc<RunnerPrincipal>> {
        self.0
            .lock()
            .expect("runner tokens lock")
            .get(hash)
            .filter(|(_, at)| at.elapsed() < Self::TTL)
            .map(|(p, _)| p.clone())
    }

    /// Keeps `principal` as the runner of the token hashed `hash`.
    pub(crate) fn keep(&self, hash: String, principal: Arc<RunnerPrincipal>) {
        self.0
            .lock()
            .expect("runner tokens lock")
            .insert(hash, (principal, Instant::now()));
    }

    /// Forgets every token of `runner`.
    pub(crate) fn forget(&self, runner: &RunnerId) {
        self.0
            .lock()
            .expect("runner tokens lock")
            .retain(|_, (p, _)| &p.runner_id != runner);
    }
}

impl Services<'_> {
    /// `POST /v1/runners`: a runner registered under a new id, with its
    /// token (shown only in this answer), the org's signing key and the
    /// Runner API's address to configure it with. Admins only; recorded
    /// in the audit trail, refusals included.
    pub(crate) async fn create_runner(
        &self,
        caller: &Caller,
        req: CreateRunner,
    ) -> Result<RunnerCreated, Error> {
        let result = self.register_runner(caller, req).await;
        self.audited_at::<ep::CreateRunner, _>(caller, &[], result)
            .await
    }

    async fn register_runner(
        &self,
        caller: &Caller,
        req: CreateRunner,
    ) -> Result<RunnerCreated, Error> {
        require_admin(&caller.principal)?;
        check_name("runner", &req.name)?;
        let org = &caller.principal.org_id;
        let id = RunnerId::generate();
        let token = issue_runner_token(&id);
        let runner = self
            .store
            .create_runner(org, &id, &req.name, &token.hash)
            .await?;
        let key = self.keys.signer(org).await?.public_key();
        tracing::info!(runner = %id, name = %req.name, org = %org, "runner registered");
        Ok(RunnerCreated {
            runner,
            token: token.secret,
            signing_public_key: key.to_string(),
            runner_api_url: self.engine.runner_url_known().map(str::to_owned),
        })
    }

    /// `GET /v1/runners`: the org's runners, each with whether it is
    /// there and, for an install's runner, the install's name.
    pub(crate) async fn list_runners(&self, caller: &Caller) -> Result<RunnerList, Error> {
        let org = &caller.principal.org_id;
        let runners = self.store.list_runners(org).await?;
        // An install's runner is named after the install's id: say its name.
        let installs: HashMap<_, _> = self
            .store
            .list_installs(org)
            .await?
            .into_iter()
            .map(|i| (i.runner_id, i.name))
            .collect();
        Ok(RunnerList {
            runners: runners
                .into_iter()
                .map(|r| {
                    let install = installs.get(&r.id).cloned();
                    RunnerInfo {
                        install,
                        ..self.runner_view(r)
                    }
                })
                .collect(),
        })
    }

    /// `POST /v1/runners/{id}/revoke`: the runner's token stops working;
    /// its parked calls are woken. The runner after. Admins only; recorded
    /// in the audit trail, refusals included.
    ///
    /// This replica forgets the token at once, before the runner is woken
    /// (other replicas within [`RunnerTokens::TTL`]).
    pub(crate) async fn revoke_runner(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RunnerInfo, Error> {
        let result = self.withdraw_runner(caller, key).await;
        self.audited_at::<ep::RevokeRunner, _>(caller, &[key], result)
            .await
    }

    async fn withdraw_runner(&self, caller: &Caller, key: &str) -> Result<RunnerInfo, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let runner = self
            .runner_named(org, key)
            .await?
            .ok_or_else(|| no_runner(key))?;
        let revoked = self
            .store
            .revoke_runner(org, &runner.id)
            .await?
            .ok_or_else(|| no_runner(key))?;
        // Its old token stops here before it is woken to try it again.
        self.runner_tokens.forget(&runner.id);
        self.wakes.runner(&runner.id);
        tracing::info!(runner = %runner.id, "runner token revoked");
        Ok(self.runner_view(revoked))
    }

    /// `POST /v1/runners/{id}/rotate-token`: the runner gets a new token
    /// (shown only in this answer) in place of its old one, a revoked
    /// runner is active again; an install's runner too. Admins only;
    /// recorded in the audit trail, refusals included.
    ///
    /// This replica forgets the old token at once, before the runner is
    /// woken (other replicas within [`RunnerTokens::TTL`]).
    pub(crate) async fn rotate_runner_token(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RunnerCreated, Error> {
        let result = self.reissue_runner_token(caller, key).await;
        self.audited_at::<ep::RotateRunnerToken, _>(caller, &[key], result)
            .await
    }

    async fn reissue_runner_token(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RunnerCreated, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let runner = self
            .runner_named(org, key)
            .await?
            .ok_or_else(|| no_runner(key))?;
        let token = issue_runner_token(&runner.id);
        let runner = self
            .store
            .rotate_runner_token(org, &runner.id, &token.hash)
            .await?
            .ok_or_else(|| no_runner(key))?;
        // Its old token stops here before it is woken to try it again.
        self.runner_tokens.forget(&runner.id);
        self.wakes.runner(&runner.id);
        let signing = self.keys.signer(org).await?.public_key();
        tracing::info!(runner = %runner.id, "runner token rotated");
        Ok(RunnerCreated {
            runner: self.runner_view(runner),
            token: token.secret,
            signing_public_key: signing.to_string(),
            runner_api_url: self.engine.runner_url_known().map(str::to_owned),
        })
    }

    /// A runner of the org by its name or id, or by the name or id of the
    /// install it runs for (an install's runner is named after the
    /// install's id).
    pub(crate) async fn runner_named(
        &self,
        org: &OrgId,
        key: &str,
    ) -> Result<Option<RunnerInfo>, Error> {
        if let Some(r) = self.store.find_runner(org, key).await? {
            return Ok(Some(r));
        }
        match self.store.find_install(org, key).await? {
            Some(i) => Ok(self.store.find_runner(org, i.runner_id.as_str()).await?),
            None => Ok(None),
        }
    }

    /// Whether a runner is there, from its last call.
    pub(crate) fn runner_status(&self, revoked: bool, last_seen_ms: Option<i64>) -> RunnerStatus {
        self.runner_status_at(revoked, last_seen_ms, nuon_core::now_ms())
    }

    /// [`Services::runner_status`] as of `now` (ms since the epoch).
    fn runner_status_at(&self, revoked: bool, last_seen_ms: Option<i64>, now: i64) -> RunnerStatus {
        let window = i64::try_from(self.live_window.as_millis()).unwrap_or(i64::MAX);
        match (revoked, last_seen_ms) {
            (true, _) => RunnerStatus::Revoked,
            (false, None) => RunnerStatus::NeverSeen,
            (false, Some(at)) if now - at < window => RunnerStatus::Connected,
            (false, Some(_)) => RunnerStatus::Gone,
        }
    }

    /// A runner as the API shows it: with whether it is there, and its
    /// health now (the transition to it is recorded within a few seconds).
    pub(crate) fn runner_view(&self, mut r: RunnerInfo) -> RunnerInfo {
        self.show_runner(&mut r);
        r
    }

    /// [`Services::runner_view`] in place, of a runner as stored.
    pub(crate) fn show_runner(&self, r: &mut RunnerInfo) {
        self.show_runner_at(r, nuon_core::now_ms());
    }

    /// When what [`Services::show_runner_at`] shows of `r` next moves
    /// after `now` (ms since the epoch): the first of the thresholds from
    /// its last call (gone, unhealthy, offline) still ahead; never for a
    /// revoked runner or one never seen.
    pub(crate) fn runner_shown_until(&self, r: &RunnerInfo, now: i64) -> i64 {
        (self.ops).shown_until(self.live_window, r.revoked, r.last_seen_at_ms, now)
    }

    /// [`Services::show_runner`] as of `now` (ms since the epoch).
    pub(crate) fn show_runner_at(&self, r: &mut RunnerInfo, now: i64) {
        r.status = self.runner_status_at(r.revoked, r.last_seen_at_ms, now);
        let health = self.ops.health(r.revoked, r.last_seen_at_ms, now);
        if health != r.health {
            r.health = health;
            r.health_since_ms = None;
        }
    }
}

/// There is no runner `key` in the caller's org.
fn no_runner(key: &str) -> Error {
    Error::not_found(format!("no runner {key:?} in this org"))
}
