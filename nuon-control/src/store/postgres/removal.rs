//! Removing installs and apps.

use super::*;
use crate::store::RemovalStore;
use crate::store::removal::{
    ACTIVE, APP_ROWS, INSTALL_ROWS, app_has_installs, dollars, install_busy,
};

#[async_trait]
impl RemovalStore for PostgresStore {
    async fn remove_install(&self, org: &OrgId, id: &InstallId) -> Result<bool> {
        let mut tx = self.begin().await?;
        // The row locked: a workflow cannot be created for it meanwhile.
        let found = sqlx::query("SELECT 1 FROM installs WHERE id = $1 AND org_id = $2 FOR UPDATE")
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if found.is_none() {
            return Ok(false);
        }
        let busy = sqlx::query(AssertSqlSafe(format!(
            "SELECT 1 FROM workflows WHERE install_id = $1 AND status IN {ACTIVE} LIMIT 1"
        )))
        .bind(id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        if busy.is_some() {
            return Err(install_busy(id));
        }
        let now = now_ms();
        for sql in INSTALL_ROWS {
            let q = sqlx::query(AssertSqlSafe(dollars(sql))).bind(id.as_str());
            let q = if sql.contains("?2") { q.bind(now) } else { q };
            q.execute(&mut *tx).await.map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(true)
    }

    async fn remove_app(&self, org: &OrgId, id: &AppId) -> Result<bool> {
        let mut tx = self.begin().await?;
        let found = sqlx::query("SELECT 1 FROM apps WHERE id = $1 AND org_id = $2 FOR UPDATE")
            .bind(id.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if found.is_none() {
            return Ok(false);
        }
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM installs WHERE app_id = $1 ORDER BY name")
                .bind(id.as_str())
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
        if !names.is_empty() {
            return Err(app_has_installs(&names));
        }
        for sql in APP_ROWS {
            sqlx::query(AssertSqlSafe(dollars(sql)))
                .bind(id.as_str())
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(true)
    }
}
