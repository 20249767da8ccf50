//! Terraform state and its locks, behind the `http` backend.
//!
//! Written once for both databases, but for the two writes each database
//! serializes its own way ([`StateWrites`]).

use super::rows::{Cells, HeldLock, Offset, Record};
use super::sql::{Sql, Stmt, args};
use super::*;

/// A credential for Terraform's `http` backend, good for one component's
/// state while one job runs.
#[derive(Debug, Clone)]
pub struct StateToken {
    /// The hash of the token.
    pub hash: String,
    /// The install.
    pub install_id: InstallId,
    /// The component, or `sandbox`.
    pub component: String,
}

/// Who a state token was given to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePrincipal {
    /// The org.
    pub org_id: OrgId,
    /// The install.
    pub install_id: InstallId,
    /// The only state it may touch.
    pub component: String,
    /// The job it was given to.
    pub job_id: JobId,
}

/// Who holds a Terraform state lock: the lock info Terraform sent, as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLock {
    /// Terraform's lock id.
    pub id: String,
    /// Terraform's lock info JSON (ID, Operation, Who, Version, Created, ...).
    pub info: String,
    /// When it was taken.
    pub created_at_ms: i64,
    /// The job whose Terraform took it, when it came with a state token.
    pub job_id: Option<JobId>,
}

/// The Terraform state of one component (or the sandbox) of an install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentState {
    /// The component, or `sandbox`.
    pub component: String,
    /// The newest version, if any was written.
    pub latest: Option<u32>,
    /// How many versions are kept.
    pub versions: u32,
    /// When the newest version was written.
    pub updated_at_ms: Option<i64>,
    /// The lock, if held.
    pub lock: Option<StateLock>,
}

/// Terraform state and its locks, behind the `http` backend.
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// The newest state of a component: its version and sealed body.
    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>>;

    /// Writes the next state version. Refused (with the holder) when the
    /// state is locked under another id, or locked and `lock_id` is `None`.
    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>>;

    /// Takes the lock, or answers who holds it.
    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>>;

    /// Releases the lock `lock_id`; answers the holder when it is another.
    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>>;

    /// Releases whatever lock is held, for an operator; returns it.
    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>>;

    /// Every component with a state or a lock.
    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>>;

    /// The holder of a state token, while its job has not ended.
    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>>;

    /// Releases every state lock taken by `job`'s Terraform; returns them.
    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>>;
}

/// The two writes of a state that each database serializes its own way,
/// as [`StateStore::put_state`] and [`StateStore::lock_state`] are: the
/// writers of one state must queue even while it has no row to lock (its
/// first version, its first lock), so PostgreSQL takes an advisory lock
/// per state, and SQLite has its one writer.
#[async_trait]
pub(super) trait StateWrites: Send + Sync + 'static {
    /// [`StateStore::put_state`].
    async fn write_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>>;

    /// [`StateStore::lock_state`].
    async fn take_state_lock(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>>;
}

/// A state's version and its sealed body.
struct StateVersion(u32, String);

impl Record for StateVersion {
    const COLUMNS: &'static str = "version, body";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StateVersion(r.u32(0)?, r.text(1)?))
    }
}

impl Record for ComponentState {
    const COLUMNS: &'static str = "c.component, s.latest, COALESCE(s.versions, 0), s.updated, \
         l.lock_id, l.info, l.created_at, l.job_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ComponentState {
            component: r.text(0)?,
            latest: r.opt_u32(1)?,
            versions: r.u32(2)?,
            updated_at_ms: r.opt_int(3)?,
            lock: match r.opt_text(4)? {
                Some(_) => Some(StateLock::read(&Offset(r, 4))?),
                None => None,
            },
        })
    }
}

/// The lock of a state, if held.
fn state_lock(install: &InstallId, component: &str) -> Stmt {
    Stmt::new(
        format!(
            "SELECT {} FROM tf_locks WHERE install_id = $1 AND component = $2",
            StateLock::COLUMNS
        ),
        args![install.as_str(), component],
    )
}

/// Releases the lock of a state.
fn drop_state_lock(install: &InstallId, component: &str) -> Stmt {
    Stmt::new(
        "DELETE FROM tf_locks WHERE install_id = $1 AND component = $2",
        args![install.as_str(), component],
    )
}

/// Terraform state, written once for both databases (its two serialized
/// writes are each database's [`StateWrites`]).
#[async_trait]
impl<S: Sql + StateWrites + 'static> StateStore for S {
    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>> {
        let newest: Option<StateVersion> = self
            .query_one(Stmt::new(
                format!(
                    "SELECT {} FROM tf_states WHERE install_id = $1 AND component = $2 \
                     ORDER BY version DESC LIMIT 1",
                    StateVersion::COLUMNS
                ),
                args![install.as_str(), component],
            ))
            .await?;
        Ok(newest.map(|v| (v.0, v.1)))
    }

    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>> {
        self.write_state(install, component, lock_id, sealed).await
    }

    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        self.take_state_lock(install, component, lock).await
    }

    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>> {
        let (install, component, lock_id) =
            (install.clone(), component.to_owned(), lock_id.to_owned());
        let read = state_lock(&install, &component);
        self.change_locked(read, move |held: Vec<StateLock>| {
            Ok(match held.into_iter().next() {
                Some(held) if held.id != lock_id => (Vec::new(), Err(held)),
                Some(_) => (vec![drop_state_lock(&install, &component)], Ok(())),
                None => (Vec::new(), Ok(())),
            })
        })
        .await
    }

    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>> {
        let (install, component) = (install.clone(), component.to_owned());
        // None when the install is not the org's.
        let read = Stmt::new(
            format!(
                "SELECT {} FROM tf_locks WHERE install_id = $1 AND component = $2 \
                 AND EXISTS (SELECT 1 FROM installs WHERE id = $1 AND org_id = $3)",
                StateLock::COLUMNS
            ),
            args![install.as_str(), component.as_str(), org.as_str()],
        );
        self.change_locked(read, move |held: Vec<StateLock>| {
            let held = held.into_iter().next();
            let release = held.iter().map(|_| drop_state_lock(&install, &component));
            Ok((release.collect(), held))
        })
        .await
    }

    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>> {
        let sql = format!(
            "SELECT {} \
             FROM (SELECT component FROM tf_states WHERE install_id = $1 \
                   UNION SELECT component FROM tf_locks WHERE install_id = $1) c \
             LEFT JOIN (SELECT component, MAX(version) AS latest, count(*) AS versions, \
                               MAX(created_at) AS updated \
                        FROM tf_states WHERE install_id = $1 GROUP BY component) s \
                    ON s.component = c.component \
             LEFT JOIN tf_locks l ON l.install_id = $1 AND l.component = c.component \
             WHERE EXISTS (SELECT 1 FROM installs WHERE id = $1 AND org_id = $2) \
             ORDER BY c.component",
            ComponentState::COLUMNS
        );
        self.query(Stmt::new(sql, args![install.as_str(), org.as_str()]))
            .await
    }

    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>> {
        self.query_one(Stmt::new(
            format!(
                "SELECT {} FROM state_tokens t JOIN jobs j ON j.id = t.job_id \
                 WHERE t.token_hash = $1 AND j.status IN ('queued', 'running')",
                StatePrincipal::COLUMNS
            ),
            args![token_hash],
        ))
        .await
    }

    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>> {
        let job = job.clone();
        let read = Stmt::new(
            format!(
                "SELECT {} FROM tf_locks WHERE job_id = $1",
                HeldLock::COLUMNS
            ),
            args![job.as_str()],
        );
        self.change_locked(read, move |held: Vec<HeldLock>| {
            let release = vec![
                Stmt::new(
                    "DELETE FROM tf_locks WHERE job_id = $1",
                    args![job.as_str()],
                ),
                Stmt::new(
                    "DELETE FROM state_tokens WHERE job_id = $1",
                    args![job.as_str()],
                ),
            ];
            Ok((release, held.into_iter().map(|h| (h.0, h.1)).collect()))
        })
        .await
    }
}
