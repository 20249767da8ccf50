//! The org's audit trail as the operations read it: a page of it, whose
//! entries (a runner's, an install's), and the check of its hash chain.
//! (The whole trail as NDJSON is streamed by the API's export, a page of
//! this at a time.)

use nuon_core::wire::{AuditList, AuditVerification};

use super::{Caller, Services};
use crate::error::Error;

/// Entries a page of the trail holds when the caller names no limit.
const DEFAULT_PAGE: u32 = 1000;

/// The most entries a page of the trail holds.
const MAX_PAGE: u32 = 10_000;

impl Services<'_> {
    /// The actor whose entries an export reads: a runner's (named, or an
    /// install's runner), or everyone's.
    pub(crate) async fn audit_actor(
        &self,
        caller: &Caller,
        runner: Option<&str>,
        install: Option<&str>,
    ) -> Result<Option<String>, Error> {
        let org = &caller.principal.org_id;
        let runner = match (runner, install) {
            (Some(_), Some(_)) => {
                return Err(Error::bad_request(
                    "give runner or install, not both (an install's entries are its runner's)",
                ));
            }
            (Some(r), None) => Some(
                self.store
                    .find_runner(org, r)
                    .await?
                    .ok_or_else(|| Error::not_found(format!("no runner {r:?} in this org")))?
                    .id,
            ),
            (None, Some(i)) => Some(self.find_install(caller, i).await?.runner_id),
            (None, None) => None,
        };
        Ok(runner.map(|r| format!("runner:{r}")))
    }

    /// `GET /v1/audit`: a page of the org's audit trail, oldest first,
    /// from after entry `after` (0: the start), `limit` entries (1 to
    /// 10000, default 1000), of `actor` only when given. The answer names
    /// the entry to read on from when the page is full.
    pub(crate) async fn list_audit(
        &self,
        caller: &Caller,
        after: Option<u64>,
        limit: Option<u32>,
        actor: Option<&str>,
    ) -> Result<AuditList, Error> {
        let limit = limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE);
        let entries = self
            .store
            .list_audit(&caller.principal.org_id, after.unwrap_or(0), limit, actor)
            .await?;
        let next_after = (entries.len() == limit as usize)
            .then(|| entries.last().map(|e| e.n))
            .flatten();
        Ok(AuditList {
            entries,
            next_after,
        })
    }

    /// `GET /v1/audit/verify`: the org's audit chain checked from its
    /// first entry: how many chain, the head hash, and the first entry
    /// that does not chain.
    pub(crate) async fn verify_audit(&self, caller: &Caller) -> Result<AuditVerification, Error> {
        Ok(crate::store::verify_audit(self.store, &caller.principal.org_id).await?)
    }
}
