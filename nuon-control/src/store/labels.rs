//! Install labels and the groups of installs selected by them.

use super::*;

/// A group of installs as stored: a name and a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGroup {
    /// Unique in the org.
    pub name: String,
    /// The selector, as written.
    pub selector: String,
    /// When it was created.
    pub created_at_ms: i64,
}

/// Install labels and groups.
#[async_trait]
pub trait LabelStore: Send + Sync {
    /// Changes an install's labels in one step: `set` added or replaced,
    /// then `remove` removed, so that two changes at once both count. The
    /// labels it has after; refused (`Invalid`) when they would be more
    /// than `max`.
    async fn change_install_labels(
        &self,
        org: &OrgId,
        id: &InstallId,
        set: &nuon_core::labels::Labels,
        remove: &[String],
        max: usize,
    ) -> Result<nuon_core::labels::Labels>;

    /// Stores a group of installs: a name unique in the org and a label
    /// selector (a conflict when the name is taken).
    async fn create_group(&self, org: &OrgId, name: &str, selector: &str) -> Result<StoredGroup>;

    /// The org's groups, by name.
    async fn list_groups(&self, org: &OrgId) -> Result<Vec<StoredGroup>>;

    /// Removes a group (its installs stay); whether there was one.
    async fn delete_group(&self, org: &OrgId, name: &str) -> Result<bool>;
}
