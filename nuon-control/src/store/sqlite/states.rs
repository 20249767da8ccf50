//! The writes of a Terraform state that SQLite serializes on its one
//! writer ([`StateWrites`]); the rest of `StateStore` is written once.

use super::*;
use crate::store::states::StateWrites;

#[async_trait]
impl StateWrites for SqliteStore {
    async fn write_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>> {
        let (install, component, lock_id) = (
            install.clone(),
            component.to_owned(),
            lock_id.map(str::to_owned),
        );
        self.write(move |conn| {
            if let Some(held) = current_lock(conn, &install, &component)?
                && lock_id.as_deref() != Some(held.id.as_str())
            {
                return Ok(Err(held));
            }
            let version: u32 = conn
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM tf_states WHERE install_id = ?1 AND component = ?2",
                    params![install.as_str(), component],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            conn.execute(
                "INSERT INTO tf_states (install_id, component, version, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![install.as_str(), component, version, sealed, now_ms()],
            )
            .map_err(db_err)?;
            Ok(Ok(version))
        })
        .await
    }

    async fn take_state_lock(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        let (install, component) = (install.clone(), component.to_owned());
        self.write(move |conn| {
            if let Some(held) = current_lock(conn, &install, &component)? {
                if held.id == lock.id {
                    return Ok(Ok(()));
                }
                // A lock whose job has ended is stale: its Terraform is
                // gone (cancelled, killed, its runner lost).
                let ended = match &held.job_id {
                    Some(j) => one_row(conn,
                            "SELECT status NOT IN ('queued', 'running') FROM jobs WHERE id = ?1",
                            [j.as_str()],
                            |r| r.get::<_, bool>(0),
                        )?
                        .unwrap_or(true),
                    None => false,
                };
                if !ended {
                    return Ok(Err(held));
                }
                tracing::warn!(
                    install = %install,
                    component,
                    lock = %held.id,
                    job = ?held.job_id,
                    "terraform state lock of an ended job released for a new lock"
                );
                conn.execute(
                    "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                    params![install.as_str(), component],
                )
                .map_err(db_err)?;
            }
            conn.execute(
                "INSERT INTO tf_locks (install_id, component, lock_id, info, created_at, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![install.as_str(), component, lock.id, lock.info, lock.created_at_ms, lock.job_id.as_ref().map(|j| j.as_str())],
            )
            .map_err(db_err)?;
            Ok(Ok(()))
        })
        .await
    }
}
