//! Install labels and groups, and the org's installs read by them: those
//! a selector matches, all at once or a page at a time.

use super::*;
use nuon_core::wire::{CreateGroup, GroupInfo, GroupList, InstallCursor, LabelChange};

impl ControlClient {
    /// The installs whose labels match `selector` (`tier=prod,region!=us`).
    pub async fn list_installs_matching(&self, selector: &str) -> Result<InstallList> {
        let req = self
            .http
            .request(reqwest::Method::GET, routes::INSTALLS)
            .query(&[("selector", selector)]);
        self.http.send(req).await
    }

    /// A page of the org's installs: at most `limit` (1 to 1000) after
    /// `after` (a page's `next`; from the first without it), only those
    /// `selector` matches when given. The page's `next` is where the one
    /// after it starts; `None` on the last. A control plane that does not
    /// page installs (before 0.2) answers every install: refused here,
    /// not taken for a page.
    pub async fn list_installs_page(
        &self,
        selector: Option<&str>,
        after: Option<&InstallCursor>,
        limit: u32,
    ) -> Result<InstallList> {
        let mut query = vec![("limit", limit.to_string())];
        if let Some(s) = selector {
            query.push(("selector", s.to_owned()));
        }
        if let Some(a) = after {
            query.push(("after", a.to_string()));
        }
        let req = self
            .http
            .request(reqwest::Method::GET, routes::INSTALLS)
            .query(&query);
        let page: InstallList = self.http.send(req).await?;
        if page.installs.len() > limit as usize {
            return Err(Error::Protocol {
                url: self.http.url(routes::INSTALLS).to_string(),
                message: format!(
                    "{} installs for a page of at most {limit}: this control plane does not \
                     page installs (a version before 0.2); list them without a limit",
                    page.installs.len()
                ),
            });
        }
        Ok(page)
    }

    /// Adds, replaces or removes some of an install's labels.
    pub async fn set_install_labels(
        &self,
        install: &str,
        change: &LabelChange,
    ) -> Result<InstallInfo> {
        self.call::<ep::SetInstallLabels>(&[install], change).await
    }

    /// Creates a group of installs: a name and a label selector.
    pub async fn create_group(&self, name: &str, selector: &str) -> Result<GroupInfo> {
        let body = CreateGroup {
            name: name.to_owned(),
            selector: selector.to_owned(),
        };
        self.call::<ep::CreateInstallGroup>(&[], &body).await
    }

    /// The org's groups of installs, each with the installs it selects.
    pub async fn list_groups(&self) -> Result<GroupList> {
        self.call::<ep::ListInstallGroups>(&[], &()).await
    }

    /// One group of installs.
    pub async fn get_group(&self, name: &str) -> Result<GroupInfo> {
        self.call::<ep::GetInstallGroup>(&[name], &()).await
    }

    /// Deletes a group (its installs stay).
    pub async fn delete_group(&self, name: &str) -> Result<GroupInfo> {
        self.call::<ep::DeleteInstallGroup>(&[name], &()).await
    }
}
