//! Terraform state and its locks, behind the `http` backend.

use super::*;

#[async_trait]
impl StateStore for SqliteStore {
    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>> {
        let (install, component) = (install.clone(), component.to_owned());
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT version, body FROM tf_states WHERE install_id = ?1 AND component = ?2 \
                 ORDER BY version DESC LIMIT 1",
                params![install.as_str(), component],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .await
    }

    async fn put_state(
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

    async fn lock_state(
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

    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>> {
        let (install, component, lock_id) =
            (install.clone(), component.to_owned(), lock_id.to_owned());
        self.write(
            move |conn| match current_lock(conn, &install, &component)? {
                Some(held) if held.id != lock_id => Ok(Err(held)),
                Some(_) => {
                    conn.execute(
                        "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                        params![install.as_str(), component],
                    )
                    .map_err(db_err)?;
                    Ok(Ok(()))
                }
                None => Ok(Ok(())),
            },
        )
        .await
    }

    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>> {
        let (org, install, component) = (org.clone(), install.clone(), component.to_owned());
        self.write(move |conn| {
            if !install_in_org(conn, &org, &install)? {
                return Ok(None);
            }
            let held = current_lock(conn, &install, &component)?;
            conn.execute(
                "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                params![install.as_str(), component],
            )
            .map_err(db_err)?;
            Ok(held)
        })
        .await
    }

    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>> {
        let (org, install) = (org.clone(), install.clone());
        self.read(move |conn| {
            if !install_in_org(conn, &org, &install)? {
                return Ok(Vec::new());
            }
            let components: Vec<String> = conn
                .prepare_cached(
                    "SELECT component FROM tf_states WHERE install_id = ?1 \
                     UNION SELECT component FROM tf_locks WHERE install_id = ?1 ORDER BY 1",
                )
                .and_then(|mut st| st.query_map([install.as_str()], |r| r.get(0))?.collect())
                .map_err(db_err)?;
            let mut out = Vec::new();
            for component in components {
                let (latest, versions, updated_at_ms): (Option<u32>, u32, Option<i64>) = conn
                    .query_row(
                        "SELECT MAX(version), count(*), MAX(created_at) FROM tf_states \
                         WHERE install_id = ?1 AND component = ?2",
                        params![install.as_str(), component],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .map_err(db_err)?;
                let lock = current_lock(conn, &install, &component)?;
                out.push(ComponentState {
                    component,
                    latest,
                    versions,
                    updated_at_ms,
                    lock,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            record(
                conn,
                &format!(
                    "SELECT {} FROM state_tokens t JOIN jobs j ON j.id = t.job_id \
                     WHERE t.token_hash = ?1 AND j.status IN ('queued', 'running')",
                    StatePrincipal::COLUMNS
                ),
                [hash],
            )
        })
        .await
    }

    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>> {
        let job = job.clone();
        self.write(move |conn| {
            let held: Vec<HeldLock> = records(
                conn,
                &format!(
                    "SELECT {} FROM tf_locks WHERE job_id = ?1",
                    HeldLock::COLUMNS
                ),
                [job.as_str()],
            )?;
            conn.execute("DELETE FROM tf_locks WHERE job_id = ?1", [job.as_str()])
                .map_err(db_err)?;
            conn.execute("DELETE FROM state_tokens WHERE job_id = ?1", [job.as_str()])
                .map_err(db_err)?;
            Ok(held.into_iter().map(|h| (h.0, h.1)).collect())
        })
        .await
    }
}
