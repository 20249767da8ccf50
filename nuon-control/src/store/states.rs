//! Terraform state and its locks, behind the `http` backend.
//!
//! Written once for both databases. The writers of one state queue, even
//! while it has no row to lock (its first version, its first lock): on a
//! lock by the state's name (see [`Lock::Name`]).

use super::rows::{Cells, HeldLock, Offset, Record};
use super::shared::corrupt;
use super::sql::{Change, Lock, Sql, Stmt, args};
use super::*;
use nuon_core::now_ms;

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

/// A state's next version, and its lock if held.
struct NextState(u32, Option<StateLock>);

impl Record for NextState {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        let lock = match r.opt_text(1)? {
            Some(_) => Some(StateLock::read(&Offset(r, 1))?),
            None => None,
        };
        Ok(NextState(r.u32(0)?, lock))
    }
}

/// A state's lock, and whether the job that took it has not ended.
struct HeldBy(StateLock, bool);

impl Record for HeldBy {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(HeldBy(StateLock::read(r)?, r.int(4)? > 0))
    }
}

/// What every writer of one state takes first: the writers of a state
/// queue even while it has no row to lock (its first version, its first
/// lock).
fn state_writers(install: &InstallId, component: &str) -> Lock {
    Lock::Name(format!("state:{install}:{component}"))
}

/// Takes a state's lock for `lock`, over `held` (and whether its job has
/// not ended); the statements, and the answer.
fn take_lock(
    install: &InstallId,
    component: &str,
    lock: StateLock,
    held: Option<HeldBy>,
) -> (Vec<Stmt>, Result<(), StateLock>) {
    let mut stmts = Vec::new();
    if let Some(HeldBy(held, live)) = held {
        if held.id == lock.id {
            return (stmts, Ok(()));
        }
        // A lock whose job has ended is stale: its Terraform is gone
        // (cancelled, killed, its runner lost).
        if held.job_id.is_none() || live {
            return (stmts, Err(held));
        }
        tracing::warn!(
            install = %install,
            component,
            lock = %held.id,
            job = ?held.job_id,
            "terraform state lock of an ended job released for a new lock"
        );
        stmts.push(drop_state_lock(install, component));
    }
    stmts.push(Stmt::new(
        "INSERT INTO tf_locks (install_id, component, lock_id, info, created_at, job_id) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        args![
            install.as_str(),
            component,
            lock.id,
            lock.info,
            lock.created_at_ms,
            lock.job_id.as_ref().map(|j| j.as_str()),
        ],
    ));
    (stmts, Ok(()))
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

/// Terraform state, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> StateStore for S {
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
        let read = Stmt::new(
            format!(
                "SELECT COALESCE((SELECT MAX(version) FROM tf_states \
                 WHERE install_id = $1 AND component = $2), 0) + 1, {} \
                 FROM (SELECT 1 AS one) o LEFT JOIN tf_locks l \
                 ON l.install_id = $1 AND l.component = $2",
                "l.lock_id, l.info, l.created_at, l.job_id"
            ),
            args![install.as_str(), component],
        );
        let plan = Change::after_lock(state_writers(install, component), read);
        let (install, component, lock_id) = (
            install.clone(),
            component.to_owned(),
            lock_id.map(str::to_owned),
        );
        self.change(plan, move |rows: Vec<NextState>| {
            let Some(NextState(version, held)) = rows.into_iter().next() else {
                return Err(corrupt("a state's next version read no row"));
            };
            if let Some(held) = held
                && lock_id.as_deref() != Some(held.id.as_str())
            {
                return Ok((Vec::new(), Err(held)));
            }
            let insert = Stmt::new(
                "INSERT INTO tf_states (install_id, component, version, body, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                args![install.as_str(), component, version, sealed, now_ms()],
            );
            Ok((vec![insert], Ok(version)))
        })
        .await
    }

    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        let read = Stmt::new(
            "SELECT l.lock_id, l.info, l.created_at, l.job_id, (SELECT COUNT(*) FROM jobs j \
             WHERE j.id = l.job_id AND j.status IN ('queued', 'running')) \
             FROM tf_locks l WHERE l.install_id = $1 AND l.component = $2",
            args![install.as_str(), component],
        );
        let plan = Change::after_lock(state_writers(install, component), read);
        let (install, component) = (install.clone(), component.to_owned());
        self.change(plan, move |rows: Vec<HeldBy>| {
            Ok(take_lock(
                &install,
                &component,
                lock,
                rows.into_iter().next(),
            ))
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
