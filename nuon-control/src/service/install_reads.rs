//! Installs as the API reads them: the org's (those a label selector
//! matches) and one install, each with its app's name, the release it has
//! and its health and sync; and an install's workflows.

use nuon_core::wire::{
    AppInfo, InstallCursor, InstallInfo, InstallList, WorkflowInfo, WorkflowList,
};
use nuon_core::{InstallId, WorkflowId};

use super::groups::selector_of;
use super::installs::install_info;
use super::workflows::workflow_view;
use super::{Caller, Services};
use crate::error::Error;
use nuon_core::model::Install;

impl Services<'_> {
    /// `GET /v1/installs`: the org's installs whose labels match
    /// `selector` (every install when it is empty), each with its app's
    /// name, the release it has, and its health and sync (what they are
    /// made of read once for the list); all of them, or the page of at
    /// most `limit` after `after` (from the first without it) and where
    /// the next starts.
    pub(crate) async fn list_installs(
        &self,
        caller: &Caller,
        selector: &str,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<InstallList, Error> {
        let selector = selector_of(selector)?;
        let org = &caller.principal.org_id;
        let after = (after.map(str::parse::<InstallCursor>).transpose())
            .map_err(|e| Error::bad_request(format!("after: {e}")))?;
        let (stored, next): (Vec<Install>, _) = match (limit, after) {
            (None, None) => (self.store.select_installs(org, &selector).await?, None),
            (None, Some(_)) => {
                return Err(Error::bad_request(
                    "after is a page's cursor: pass limit too (1 to 1000)",
                ));
            }
            (Some(limit), after) => {
                if !(1..=InstallCursor::MAX_PAGE).contains(&limit) {
                    return Err(Error::bad_request(format!(
                        "limit {limit}: a page holds 1 to {} installs",
                        InstallCursor::MAX_PAGE
                    )));
                }
                // One more than the page: whether there is a next one.
                let mut page = (self.store)
                    .select_installs_page(org, &selector, after.as_ref(), limit + 1)
                    .await?;
                let more = page.len() > limit as usize;
                page.truncate(limit as usize);
                let next = (page.last().filter(|_| more)).map(|i| InstallCursor {
                    created_at_ms: i.created_at_ms,
                    id: i.id.clone(),
                });
                (page, next)
            }
        };
        let fleet = self.fleet(caller).await?;
        let installs = stored
            .into_iter()
            .map(|i| Ok(fleet.show(&i, install_info(i.clone())?)))
            .collect::<Result<_, Error>>()?;
        Ok(InstallList {
            installs: self.named(caller, installs).await?,
            next,
        })
    }

    /// The org's installs as the model keeps them, oldest first, in this
    /// replica's view of the fleet: what the dashboard's lists make their
    /// rows of.
    pub(crate) async fn installs(
        &self,
        caller: &Caller,
    ) -> Result<std::sync::Arc<super::fleet::FleetView>, Error> {
        self.fleet_view(&caller.principal.org_id).await
    }

    /// The install `id` of the caller's org and its app, while they are
    /// there: where a page about one of its workflows or jobs says it
    /// belongs (none once it is forgotten).
    pub(crate) async fn install_and_app(
        &self,
        caller: &Caller,
        id: &InstallId,
    ) -> Result<Option<(Install, Option<AppInfo>)>, Error> {
        let org = &caller.principal.org_id;
        let Some(install) = self.store.find_install(org, id.as_str()).await? else {
            return Ok(None);
        };
        let app = self.store.find_app(org, install.app_id.as_str()).await?;
        Ok(Some((install, app)))
    }

    /// The names of the inputs the install's customer set through its
    /// installer.
    pub(crate) async fn customer_inputs(
        &self,
        caller: &Caller,
        install: &Install,
    ) -> Result<Vec<String>, Error> {
        Ok(self
            .store
            .customer_inputs(&caller.principal.org_id, &install.id)
            .await?)
    }

    /// `GET /v1/installs/{id}`: the install with its app's name, the
    /// release it has, the inputs its customer set, and its health and
    /// sync as `listInstalls` shows them.
    pub(crate) async fn get_install(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallInfo, Error> {
        let install = self.find_install(caller, key).await?;
        let customer_inputs = self.customer_inputs(caller, &install).await?;
        let mut info = self.install_view(caller, install.clone()).await?;
        info.customer_inputs = customer_inputs;
        let fleet = self.fleet(caller).await?;
        Ok(fleet.show(&install, info))
    }

    /// `GET /v1/installs/{id}/workflows`: the install's workflows, newest
    /// first, with their steps (sensitive outputs masked).
    pub(crate) async fn install_workflows(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<WorkflowList, Error> {
        let install = self.find_install(caller, key).await?;
        let workflows = self
            .store
            .list_workflows(&caller.principal.org_id, &install.id)
            .await?;
        Ok(WorkflowList {
            workflows: workflows.into_iter().map(workflow_view).collect(),
        })
    }

    /// `GET /v1/workflows/{id}`: one workflow of the org with its steps,
    /// saying what a waiting one waits for; a malformed id is simply not
    /// found.
    pub(crate) async fn get_workflow(
        &self,
        caller: &Caller,
        raw: &str,
    ) -> Result<WorkflowInfo, Error> {
        let no_such = || Error::not_found(format!("no workflow {raw:?}"));
        let id: WorkflowId = raw.parse().map_err(|_| no_such())?;
        let org = &caller.principal.org_id;
        let wf = self
            .store
            .get_workflow(org, &id)
            .await?
            .ok_or_else(no_such)?;
        self.workflow_live(org, wf).await
    }

    /// `installs` with their apps' names and the releases they have (the
    /// org's apps and releases read once).
    async fn named(
        &self,
        caller: &Caller,
        mut installs: Vec<InstallInfo>,
    ) -> Result<Vec<InstallInfo>, Error> {
        let org = &caller.principal.org_id;
        let apps = self.app_names(org).await?;
        let releases = self.store.install_releases(org).await?;
        for i in &mut installs {
            i.app_name = apps.get(&i.app_id).cloned();
            i.release_id = releases.get(&i.id).cloned();
        }
        Ok(installs)
    }
}
