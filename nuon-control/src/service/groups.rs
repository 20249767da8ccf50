//! Groups of installs: a name and a label selector, whose members are
//! whichever installs match it when it is read. Made and deleted by
//! admins (recorded in the audit trail), read by any token.

use nuon_core::endpoint::{CreateInstallGroup, DeleteInstallGroup};
use nuon_core::labels::Selector;
use nuon_core::wire::{CreateGroup, ErrorCode, GroupInfo, GroupList};

use super::{Caller, Services, require_admin, valid_name};
use crate::error::Error;
use crate::store::StoredGroup;
use nuon_core::model::Install;

/// A label selector as written, or a 400 (`invalid_selector`) that says
/// what is wrong with it.
pub(crate) fn selector_of(text: &str) -> Result<Selector, Error> {
    text.parse()
        .map_err(|e: String| Error::refused(ErrorCode::InvalidSelector, e))
}

impl Services<'_> {
    /// `POST /v1/install-groups`: a group of the installs `req.selector`
    /// matches, with them. Admins only; recorded in the audit trail,
    /// refusals included.
    pub(crate) async fn create_group(
        &self,
        caller: &Caller,
        req: CreateGroup,
    ) -> Result<GroupInfo, Error> {
        let result = self.make_group(caller, req).await;
        self.audited_at::<CreateInstallGroup, _>(caller, &[], result)
            .await
    }

    async fn make_group(&self, caller: &Caller, req: CreateGroup) -> Result<GroupInfo, Error> {
        require_admin(&caller.principal)?;
        if !valid_name(&req.name) || req.name.chars().all(|c| c == '.') {
            return Err(Error::bad_request(format!(
                "invalid group name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
                req.name.chars().take(80).collect::<String>()
            )));
        }
        // Stored as the selector prints, so what is shown is what it means.
        let selector = selector_of(&req.selector)?;
        let org = &caller.principal.org_id;
        let g = self
            .store
            .create_group(org, &req.name, &selector.to_string())
            .await?;
        let installs = self.store.list_installs(org).await?;
        Ok(group_info(g, &installs))
    }

    /// `GET /v1/install-groups`: the org's groups, each with the installs
    /// it selects now.
    pub(crate) async fn list_groups(&self, caller: &Caller) -> Result<GroupList, Error> {
        let org = &caller.principal.org_id;
        let installs = self.store.list_installs(org).await?;
        let groups = self
            .store
            .list_groups(org)
            .await?
            .into_iter()
            .map(|g| group_info(g, &installs))
            .collect();
        Ok(GroupList { groups })
    }

    /// `GET /v1/install-groups/{name}`: the group `name`, with the
    /// installs it selects now.
    pub(crate) async fn get_group(&self, caller: &Caller, name: &str) -> Result<GroupInfo, Error> {
        let g = self.find_group(caller, name).await?;
        let installs = self.store.list_installs(&caller.principal.org_id).await?;
        Ok(group_info(g, &installs))
    }

    /// `DELETE /v1/install-groups/{name}`: the group goes, its installs
    /// stay; answered with the group as it was. Admins only; recorded in
    /// the audit trail, refusals included.
    pub(crate) async fn delete_group(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<GroupInfo, Error> {
        let result = self.remove_group(caller, name).await;
        self.audited_at::<DeleteInstallGroup, _>(caller, &[name], result)
            .await
    }

    async fn remove_group(&self, caller: &Caller, name: &str) -> Result<GroupInfo, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let g = self.find_group(caller, name).await?;
        let installs = self.store.list_installs(org).await?;
        if !self.store.delete_group(org, name).await? {
            return Err(Error::not_found(format!("no group {name:?}")));
        }
        Ok(group_info(g, &installs))
    }

    /// The caller's org's group `name`, or a 404 that says where the
    /// groups are listed.
    async fn find_group(&self, caller: &Caller, name: &str) -> Result<StoredGroup, Error> {
        self.store
            .list_groups(&caller.principal.org_id)
            .await?
            .into_iter()
            .find(|g| g.name == name)
            .ok_or_else(|| {
                Error::not_found(format!(
                    "no group {name:?} (see `nuon installs groups list`)"
                ))
            })
    }
}

/// A group with the names of the installs it selects, out of `installs`.
fn group_info(g: StoredGroup, installs: &[Install]) -> GroupInfo {
    // Stored selectors were checked when the group was made; one that no
    // longer parses selects nobody, never everybody.
    let selector: Option<Selector> = match g.selector.parse() {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(group = %g.name, error = %e, "a stored group selector does not parse; it selects no install");
            None
        }
    };
    GroupInfo {
        installs: installs
            .iter()
            .filter(|i| selector.as_ref().is_some_and(|s| s.matches(&i.labels)))
            .map(|i| i.name.clone())
            .collect(),
        name: g.name,
        selector: g.selector,
        created_at_ms: g.created_at_ms,
    }
}
