//! Removing installs and apps.

use super::*;
use crate::store::RemovalStore;
use crate::store::removal::{ACTIVE, APP_ROWS, INSTALL_ROWS, app_has_installs, install_busy};

#[async_trait]
impl RemovalStore for SqliteStore {
    async fn remove_install(&self, org: &OrgId, id: &InstallId) -> Result<bool> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            if !install_in_org(conn, &org, &id)? {
                return Ok(false);
            }
            let busy = one_row(
                conn,
                &format!(
                    "SELECT 1 FROM workflows WHERE install_id = ?1 AND status IN {ACTIVE} LIMIT 1"
                ),
                [id.as_str()],
                |_| Ok(()),
            )?;
            if busy.is_some() {
                return Err(install_busy(&id));
            }
            let now = now_ms();
            for sql in INSTALL_ROWS {
                if sql.contains("?2") {
                    conn.execute(sql, params![id.as_str(), now])
                        .map_err(db_err)?;
                } else {
                    conn.execute(sql, [id.as_str()]).map_err(db_err)?;
                }
            }
            Ok(true)
        })
        .await
    }

    async fn remove_app(&self, org: &OrgId, id: &AppId) -> Result<bool> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let owned = one_row(
                conn,
                "SELECT 1 FROM apps WHERE id = ?1 AND org_id = ?2",
                [id.as_str(), org.as_str()],
                |_| Ok(()),
            )?;
            if owned.is_none() {
                return Ok(false);
            }
            let names: Vec<String> = all_rows(
                conn,
                "SELECT name FROM installs WHERE app_id = ?1 ORDER BY name",
                [id.as_str()],
                |r| r.get(0),
            )?;
            if !names.is_empty() {
                return Err(app_has_installs(&names));
            }
            for sql in APP_ROWS {
                conn.execute(sql, [id.as_str()]).map_err(db_err)?;
            }
            Ok(true)
        })
        .await
    }
}
