//! An install's stack: its one-time phone-home token, and what the stack
//! reported when it phoned home.

use super::rows::{Cells, Record};
use super::sql::{Change, Lock, Sql, Stmt, args};
use super::*;
use nuon_core::wire::ErrorCode;

/// What redeeming a stack's one-time token found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackRedeem {
    /// Redeemed now: the token is spent.
    Redeemed {
        /// The install's org.
        org: OrgId,
        /// The install.
        install: InstallId,
        /// Its runner.
        runner: RunnerId,
    },
    /// Spent already, at this time.
    Used(i64),
    /// It expired at this time.
    Expired(i64),
    /// No install has it (or a newer download replaced it).
    Unknown,
    /// The install's runner is revoked: a stack does not bring it back.
    RunnerRevoked,
}

/// An install's stack token as stored, with its runner's revocation.
struct StackTokenRow {
    org: OrgId,
    install: InstallId,
    runner: RunnerId,
    expires_ms: i64,
    used_ms: Option<i64>,
    runner_revoked: bool,
}

impl StackTokenRow {
    /// What spending the token at `now` gives (the same in every store).
    fn state(row: Option<Self>, now: i64) -> StackRedeem {
        let Some(r) = row else {
            return StackRedeem::Unknown;
        };
        match r.used_ms {
            Some(at) => StackRedeem::Used(at),
            None if now >= r.expires_ms => StackRedeem::Expired(r.expires_ms),
            None if r.runner_revoked => StackRedeem::RunnerRevoked,
            None => StackRedeem::Redeemed {
                org: r.org,
                install: r.install,
                runner: r.runner,
            },
        }
    }
}

/// An install's stack: its one-time phone-home token, and what it
/// reported.
#[async_trait]
pub trait StackStore: Send + Sync + 'static {
    /// Gives the install's stack a new one-time token (its hash), good
    /// until `expires_ms`; the one before stops working.
    async fn set_stack_token(
        &self,
        org: &OrgId,
        id: &InstallId,
        token_hash: &str,
        expires_ms: i64,
    ) -> Result<()>;

    /// What spending a stack's one-time token at `now_ms` would give,
    /// without spending it.
    async fn peek_stack_token(&self, token_hash: &str, now_ms: i64) -> Result<StackRedeem>;

    /// A stack's phone-home, in one transaction: spends its one-time token
    /// at `now_ms` (once), gives the install's runner the token
    /// `runner_token_hash` (the one before stops working; a revoked runner
    /// stays revoked: [`StackRedeem::RunnerRevoked`], nothing changed) and
    /// keeps what the stack reported (`outputs`: a JSON object of
    /// strings, sealed).
    async fn redeem_stack_token(
        &self,
        token_hash: &str,
        now_ms: i64,
        runner_token_hash: &str,
        outputs: &str,
    ) -> Result<StackRedeem>;
}

impl Record for StackTokenRow {
    const COLUMNS: &'static str = "i.org_id, i.id, i.runner_id, i.stack_token_expires, \
         i.stack_token_used, r.revoked_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StackTokenRow {
            org: r.id(0)?,
            install: r.id(1)?,
            runner: r.id(2)?,
            expires_ms: r.int(3)?,
            used_ms: r.opt_int(4)?,
            runner_revoked: r.opt_int(5)?.is_some(),
        })
    }
}

/// The code a redeem's runner update fails with when the runner was
/// revoked meanwhile (no other statement of it can fail with a conflict):
/// answered as [`StackRedeem::RunnerRevoked`].
const REVOKED: ErrorCode = ErrorCode::InstallTokenRefused;

/// The install and runner of stack token `hash` (parameter 1).
fn token_row() -> String {
    format!(
        "SELECT {} FROM installs i JOIN runners r ON r.id = i.runner_id WHERE i.stack_token = $1",
        StackTokenRow::COLUMNS
    )
}

#[async_trait]
impl<S: Sql + 'static> StackStore for S {
    async fn set_stack_token(
        &self,
        org: &OrgId,
        id: &InstallId,
        token_hash: &str,
        expires_ms: i64,
    ) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE installs SET stack_token = $3, stack_token_expires = $4, \
             stack_token_used = NULL WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str(), token_hash, expires_ms],
        ))
        .await?;
        Ok(())
    }

    async fn peek_stack_token(&self, token_hash: &str, now: i64) -> Result<StackRedeem> {
        let row = self
            .query_one(Stmt::new(token_row(), args![token_hash]))
            .await?;
        Ok(StackTokenRow::state(row, now))
    }

    async fn redeem_stack_token(
        &self,
        token_hash: &str,
        now: i64,
        runner_token_hash: &str,
        outputs: &str,
    ) -> Result<StackRedeem> {
        let (runner_hash, outputs) = (runner_token_hash.to_owned(), outputs.to_owned());
        // The install's row locked (and only it: a lock on the runner's row
        // would wait on, and deadlock with, a job queued for that runner),
        // then the token read: another phone-home at the same time waits
        // for this one.
        let lock = Lock::Rows(Stmt::new(
            "SELECT id FROM installs WHERE stack_token = $1",
            args![token_hash],
        ));
        let read = Stmt::new(token_row(), args![token_hash]);
        let redeemed = self
            .change(
                Change::after_lock(lock, read),
                move |rows: Vec<StackTokenRow>| {
                    let state = StackTokenRow::state(rows.into_iter().next(), now);
                    let StackRedeem::Redeemed {
                        install, runner, ..
                    } = &state
                    else {
                        return Ok((Vec::new(), state));
                    };
                    let writes = vec![
                        // Revoked meanwhile: refused, nothing spent.
                        Stmt::new(
                            "UPDATE runners SET token_hash = $2, session = NULL \
                         WHERE id = $1 AND revoked_at IS NULL",
                            args![runner.as_str(), runner_hash],
                        )
                        .must_change(REVOKED, "the install's runner is revoked".into()),
                        Stmt::new(
                            "UPDATE installs SET stack_token_used = $2, stack_outputs = $3 \
                         WHERE id = $1 AND stack_token_used IS NULL",
                            args![install.as_str(), now, outputs],
                        ),
                    ];
                    Ok((writes, state))
                },
            )
            .await;
        match redeemed {
            Err(StoreError::Conflict { code: REVOKED, .. }) => Ok(StackRedeem::RunnerRevoked),
            other => other,
        }
    }
}
