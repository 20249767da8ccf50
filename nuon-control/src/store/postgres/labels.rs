//! Install labels and groups.

use super::*;
use crate::store::{LabelStore, StoredGroup};

#[async_trait]
impl LabelStore for PostgresStore {
    async fn change_install_labels(
        &self,
        org: &OrgId,
        id: &InstallId,
        set: &nuon_core::labels::Labels,
        remove: &[String],
        max: usize,
    ) -> Result<nuon_core::labels::Labels> {
        let mut tx = self.begin().await?;
        // The row locked: a change at the same time waits for this one.
        let row =
            sqlx::query("SELECT labels FROM installs WHERE id = $1 AND org_id = $2 FOR UPDATE")
                .bind(id.as_str())
                .bind(org.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
        let Some(row) = row else {
            return Err(StoreError::Invalid(format!("no install {id}")));
        };
        let stored: Option<String> = get(&row, 0)?;
        let labels = crate::store::shared::changed_labels(stored, set, remove, max)?;
        let text =
            serde_json::to_string(&labels).map_err(|e| StoreError::Invalid(e.to_string()))?;
        sqlx::query("UPDATE installs SET labels = $3 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(labels)
    }

    async fn create_group(&self, org: &OrgId, name: &str, selector: &str) -> Result<StoredGroup> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO install_groups (org_id, name, selector, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(org.as_str())
        .bind(name)
        .bind(selector)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            taken(e, || {
                format!("a group named {name:?} already exists in this org; pick another name")
            })
        })?;
        Ok(StoredGroup {
            name: name.to_owned(),
            selector: selector.to_owned(),
            created_at_ms: now,
        })
    }

    async fn list_groups(&self, org: &OrgId) -> Result<Vec<StoredGroup>> {
        sqlx::query(
            "SELECT name, selector, created_at FROM install_groups WHERE org_id = $1 ORDER BY name",
        )
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|r| {
            Ok(StoredGroup {
                name: get(r, 0)?,
                selector: get(r, 1)?,
                created_at_ms: get(r, 2)?,
            })
        })
        .collect()
    }

    async fn delete_group(&self, org: &OrgId, name: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM install_groups WHERE org_id = $1 AND name = $2")
            .bind(org.as_str())
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(done.rows_affected() > 0)
    }
}
