//! Install labels and the groups of installs selected by them.

use super::rows::{Cells, Record};
use super::sql::{Arg, Sql, Stmt, args};
use super::*;
use nuon_core::labels::Selector;
use nuon_core::model::Install;
use nuon_core::now_ms;
use nuon_core::wire::InstallCursor;

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

    /// The org's installs whose labels `selector` matches, oldest first:
    /// read from the label index (`install_labels`), not matched one
    /// install at a time.
    async fn select_installs(&self, org: &OrgId, selector: &Selector) -> Result<Vec<Install>>;

    /// A page of [`LabelStore::select_installs`]: at most `limit` of the
    /// installs listed after `after` (from the first without it), from the
    /// index of installs by creation.
    async fn select_installs_page(
        &self,
        org: &OrgId,
        selector: &Selector,
        after: Option<&InstallCursor>,
        limit: u32,
    ) -> Result<Vec<Install>>;

    /// Stores a group of installs: a name unique in the org and a label
    /// selector (a conflict when the name is taken).
    async fn create_group(&self, org: &OrgId, name: &str, selector: &str) -> Result<StoredGroup>;

    /// The org's groups, by name.
    async fn list_groups(&self, org: &OrgId) -> Result<Vec<StoredGroup>>;

    /// Removes a group (its installs stay); whether there was one.
    async fn delete_group(&self, org: &OrgId, name: &str) -> Result<bool>;
}

impl Record for StoredGroup {
    const COLUMNS: &'static str = "name, selector, created_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StoredGroup {
            name: r.text(0)?,
            selector: r.text(1)?,
            created_at_ms: r.int(2)?,
        })
    }
}

/// `SELECT` of the org's installs (`$1`) that `selector` matches, with
/// its arguments after the org's; of a page of them when given (after
/// a cursor, and how many).
fn selected(
    selector: &Selector,
    mut args: Vec<Arg>,
    page: Option<(Option<&InstallCursor>, u32)>,
) -> Stmt {
    use nuon_core::labels::Requirement as R;
    let mut sql = format!(
        "SELECT {} FROM installs WHERE org_id = $1",
        Install::COLUMNS
    );
    for r in selector.requirements() {
        let mut bind = |v: &str| {
            args.push(Arg::from(v));
            format!("${}", args.len())
        };
        let (key, values, holds) = match r {
            R::Equals(k, v) => (bind(k), Some(vec![bind(v)]), true),
            R::NotEquals(k, v) => (bind(k), Some(vec![bind(v)]), false),
            R::In(k, vs) => (bind(k), Some(vs.iter().map(|v| bind(v)).collect()), true),
            R::NotIn(k, vs) => (bind(k), Some(vs.iter().map(|v| bind(v)).collect()), false),
            R::Exists(k) => (bind(k), None, true),
            R::Absent(k) => (bind(k), None, false),
        };
        let value = values.map_or(String::new(), |vs| {
            format!(" AND value IN ({})", vs.join(", "))
        });
        sql.push_str(&format!(
            " AND id {}IN (SELECT install_id FROM install_labels WHERE org_id = $1 AND key = {key}{value})",
            if holds { "" } else { "NOT " }
        ));
    }
    if let Some(after) = page.and_then(|(after, _)| after) {
        args.push(Arg::from(after.created_at_ms));
        args.push(Arg::from(after.id.as_str()));
        let (at, id) = (args.len() - 1, args.len());
        sql.push_str(&format!(
            " AND (created_at > ${at} OR (created_at = ${at} AND id > ${id}))"
        ));
    }
    sql.push_str(" ORDER BY created_at, id");
    if let Some((_, limit)) = page {
        sql.push_str(&format!(" LIMIT {limit}"));
    }
    Stmt::new(sql, args)
}

#[async_trait]
impl<S: Sql + 'static> LabelStore for S {
    async fn select_installs(&self, org: &OrgId, selector: &Selector) -> Result<Vec<Install>> {
        self.query(selected(selector, args![org.as_str()], None))
            .await
    }

    async fn select_installs_page(
        &self,
        org: &OrgId,
        selector: &Selector,
        after: Option<&InstallCursor>,
        limit: u32,
    ) -> Result<Vec<Install>> {
        let page = Some((after, limit));
        self.query(selected(selector, args![org.as_str()], page))
            .await
    }

    async fn change_install_labels(
        &self,
        org: &OrgId,
        id: &InstallId,
        set: &nuon_core::labels::Labels,
        remove: &[String],
        max: usize,
    ) -> Result<nuon_core::labels::Labels> {
        let (org, id, set, remove) = (org.clone(), id.clone(), set.clone(), remove.to_vec());
        let read = Stmt::new(
            "SELECT labels FROM installs WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str()],
        );
        // Read, change and write in one step, so that two changes at once
        // both count.
        self.change_locked(read, move |rows: Vec<Option<String>>| {
            let Some(stored) = rows.into_iter().next() else {
                return Err(StoreError::Invalid(format!("no install {id}")));
            };
            let labels = super::shared::changed_labels(stored, &set, &remove, max)?;
            let text =
                serde_json::to_string(&labels).map_err(|e| StoreError::Invalid(e.to_string()))?;
            let write = Stmt::new(
                "UPDATE installs SET labels = $3 WHERE id = $1 AND org_id = $2",
                args![id.as_str(), org.as_str(), text],
            );
            Ok((vec![write], labels))
        })
        .await
    }

    async fn create_group(&self, org: &OrgId, name: &str, selector: &str) -> Result<StoredGroup> {
        let now = now_ms();
        self.execute_one(
            Stmt::new(
                "INSERT INTO install_groups (org_id, name, selector, created_at) \
                 VALUES ($1, $2, $3, $4)",
                args![org.as_str(), name, selector, now],
            )
            .name_taken("a group", name),
        )
        .await?;
        Ok(StoredGroup {
            name: name.to_owned(),
            selector: selector.to_owned(),
            created_at_ms: now,
        })
    }

    async fn list_groups(&self, org: &OrgId) -> Result<Vec<StoredGroup>> {
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM install_groups WHERE org_id = $1 ORDER BY name",
                StoredGroup::COLUMNS
            ),
            args![org.as_str()],
        ))
        .await
    }

    async fn delete_group(&self, org: &OrgId, name: &str) -> Result<bool> {
        let n = self
            .execute_one(Stmt::new(
                "DELETE FROM install_groups WHERE org_id = $1 AND name = $2",
                args![org.as_str(), name],
            ))
            .await?;
        Ok(n > 0)
    }
}
