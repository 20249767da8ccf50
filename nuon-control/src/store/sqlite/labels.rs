//! Install labels and groups.

use super::*;
use crate::store::{LabelStore, StoredGroup};

#[async_trait]
impl LabelStore for SqliteStore {
    async fn change_install_labels(
        &self,
        org: &OrgId,
        id: &InstallId,
        set: &nuon_core::labels::Labels,
        remove: &[String],
        max: usize,
    ) -> Result<nuon_core::labels::Labels> {
        let (org, id, set, remove) = (org.clone(), id.clone(), set.clone(), remove.to_vec());
        // The writer thread runs one write at a time: read, change and
        // write are one step.
        self.write(move |conn| {
            let stored: Option<Option<String>> = conn
                .query_row(
                    "SELECT labels FROM installs WHERE id = ?1 AND org_id = ?2",
                    params![id.as_str(), org.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            let Some(stored) = stored else {
                return Err(StoreError::Invalid(format!("no install {id}")));
            };
            let labels = crate::store::shared::changed_labels(stored, &set, &remove, max)?;
            let text =
                serde_json::to_string(&labels).map_err(|e| StoreError::Invalid(e.to_string()))?;
            conn.execute(
                "UPDATE installs SET labels = ?3 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), text],
            )
            .map_err(db_err)?;
            Ok(labels)
        })
        .await
    }

    async fn create_group(&self, org: &OrgId, name: &str, selector: &str) -> Result<StoredGroup> {
        let (org, name, selector) = (org.clone(), name.to_owned(), selector.to_owned());
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO install_groups (org_id, name, selector, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![org.as_str(), name, selector, now],
            )
            .map_err(|e| name_taken(e, "a group", &name))?;
            Ok(StoredGroup {
                name,
                selector,
                created_at_ms: now,
            })
        })
        .await
    }

    async fn list_groups(&self, org: &OrgId) -> Result<Vec<StoredGroup>> {
        let org = org.clone();
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT name, selector, created_at FROM install_groups WHERE org_id = ?1 ORDER BY name",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(params![org.as_str()], |r| {
                    Ok(StoredGroup {
                        name: r.get(0)?,
                        selector: r.get(1)?,
                        created_at_ms: r.get(2)?,
                    })
                })
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
        })
        .await
    }

    async fn delete_group(&self, org: &OrgId, name: &str) -> Result<bool> {
        let (org, name) = (org.clone(), name.to_owned());
        self.write(move |conn| {
            let n = conn
                .execute(
                    "DELETE FROM install_groups WHERE org_id = ?1 AND name = ?2",
                    params![org.as_str(), name],
                )
                .map_err(db_err)?;
            Ok(n > 0)
        })
        .await
    }
}
