//! The control plane's state, behind domain-level store traits.
//!
//! Each domain has a small trait of its own: [`OrgStore`] (orgs, settings,
//! signing keys, API tokens), [`AppStore`] (apps and config versions),
//! [`InstallStore`], [`InvitationStore`] (the customers' installer
//! links), [`StackStore`] (an install stack's phone-home),
//! [`CheckStore`] (the checks the vendor's systems push for an install),
//! [`DeployedStore`] (an install's values not deployed, its release),
//! [`RunnerStore`], [`JobStore`] (jobs as the Control API
//! sees them), [`QueueStore`] (the runner side: claims, leases, logs,
//! completions), [`WorkflowStore`], [`StateStore`] (Terraform state),
//! [`BuildStore`], [`MaintenanceStore`] (replicas, rescue, pruning),
//! [`AuditStore`] (the hash-chained audit trail), [`WebhookStore`],
//! [`LabelStore`] (labels and install groups), [`ReleaseStore`] and
//! [`RolloutStore`] (rollouts: a head and a row per install, under a version),
//! [`RemovalStore`] (an install or app and what is only theirs) and
//! [`UserStore`] (people, and OpenID Connect sign-ins in flight),
//! [`WebSessionStore`] (the dashboard's sessions).
//! [`Store`] is all of them at once, implemented for every type that
//! implements each.
//!
//! Two databases: [`SqliteStore`] (`sqlite/`, the embedded default) and
//! [`PostgresStore`] (`postgres/`, behind the `postgres` feature, for any
//! number of replicas). Each domain is written once, for both, over
//! `sql::Sql` (how each runs a statement, and a change under its locks):
//! `rows.rs` maps each row type from its columns, `shared.rs` holds the
//! rules (the attempt fence, which lines of a log batch are new, the fate
//! of an expired lease, log paging). The queue and claims and the upkeep
//! stay per database, on purpose. Every method that reads or writes org
//! data takes the org, and every runner-side method takes the calling
//! runner, so scoping is in the signature, not left to the caller.
//! `tests/` is the conformance suite, every check run on both stores.

mod apps;
mod audit;
mod binaries;
mod builds;
mod fleet;
mod installs;
mod invitations;
mod jobs;
mod labels;
mod links;
mod maintenance;
mod orgs;
#[cfg(feature = "postgres")]
mod postgres;
mod queue;
mod releases;
mod removal;
mod rollouts;
mod rows;
mod runners;
mod sealing;
mod sessions;
mod shared;
mod sql;
mod sqlite;
mod stack;
mod states;
mod users;
mod webhooks;
mod workflows;

use async_trait::async_trait;
use nuon_core::model::{Install, Overrides, Workflow};
use nuon_core::token::IssuedToken;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{
    AppInfo, BuildInfo, ClaimedJob, Completion, CompletionAck, LeaseRef, LeaseStatus, LogAck,
    LogBatch, OrgInfo, RunnerInfo, TokenInfo, TokenScope,
};
use nuon_core::workflow::{PlannedStep, StepStatus, WorkflowKind, WorkflowStatus};
use nuon_core::{
    AppId, InstallId, JobId, JobSpec, OrgId, RunnerId, SignedRotation, TokenId, WorkflowId,
};

pub use apps::{AppStore, StoredConfig};
pub use audit::{AuditHeads, AuditStore, NewAudit, verify_audit};
pub use binaries::{BINARY_PART_BYTES, RunnerBinaryStore};
pub use builds::BuildStore;
pub use fleet::{FleetChanges, FleetStore};
pub use installs::{
    CheckStore, DeployedStore, InstallChange, InstallStore, NewInstall, Scheduled, SettingsBasis,
};
pub use invitations::{InvitationStore, Spend, StoredInvitation};
pub use jobs::{JobStore, NewJob};
pub use labels::{LabelStore, StoredGroup};
pub use links::JobLinkStore;
pub use maintenance::{Gauges, MaintenanceStore, Rescued, Wake, Wakes};
pub use orgs::{ApiPrincipal, NewApiToken, NewOrg, OrgStore, PrincipalUser};
#[cfg(feature = "postgres")]
pub use postgres::{NOTIFY_GAP, PostgresStore};
pub use queue::{Claimed, LogQuota, QueueStore};
pub use releases::ReleaseStore;
pub use removal::RemovalStore;
pub use rollouts::{RolloutSave, RolloutStore};
pub use runners::{MAX_HEALTH_MOVES, RunnerPrincipal, RunnerStore};
pub use sealing::{SealedColumn, SealingStore};
pub use sessions::{WebSession, WebSessionStore};
pub use sqlite::SqliteStore;
pub use stack::{StackRedeem, StackStore};
pub use states::{ComponentState, StateLock, StatePrincipal, StateStore, StateToken};
pub use users::{Identity, PendingSignIn, UserStore};
pub use webhooks::{DeliveryTry, DueDelivery, WebhookStore};
pub use workflows::{
    ActiveWorkflow, CachedSummary, Carried, Moving, NewWorkflow, StepUpdate, SummaryText,
    WorkflowStore, workflow_to_move,
};

/// Every store trait, to call a concrete store's methods:
/// `use nuon_control::store::prelude::*;`.
pub mod prelude {
    pub use super::{
        AppStore, AuditStore, BuildStore, CheckStore, DeployedStore, FleetStore, InstallStore,
        InvitationStore, JobStore, LabelStore, MaintenanceStore, OrgStore, QueueStore,
        ReleaseStore, RemovalStore, RolloutStore, RunnerStore, SealingStore, StackStore,
        StateStore, Store, WebhookStore, WorkflowStore,
    };
}

/// The result type of store calls.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The write conflicts with the current state (stale attempt, name taken,
    /// logs pending); `code` is the API's error code.
    #[error("{message}")]
    Conflict {
        /// Stable code: `stale_attempt`, `logs_pending`, `name_taken`.
        code: ErrorCode,
        /// What and how to fix it.
        message: String,
        /// With `logs_pending`, the highest log line held.
        acked_seq: Option<u64>,
    },
    /// The request is invalid against the stored state.
    #[error("{0}")]
    Invalid(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store was closed (the server is shutting down).
    #[error("store is closed")]
    Closed,
}

impl StoreError {
    pub(crate) fn stale(message: impl Into<String>) -> Self {
        StoreError::Conflict {
            code: ErrorCode::StaleAttempt,
            message: message.into(),
            acked_seq: None,
        }
    }
}

/// The control plane's whole state: every domain's store in one.
pub trait Store:
    OrgStore
    + AppStore
    + InstallStore
    + DeployedStore
    + InvitationStore
    + StackStore
    + CheckStore
    + LabelStore
    + FleetStore
    + ReleaseStore
    + RemovalStore
    + RolloutStore
    + RunnerStore
    + JobStore
    + JobLinkStore
    + RunnerBinaryStore
    + QueueStore
    + MaintenanceStore
    + WorkflowStore
    + StateStore
    + BuildStore
    + SealingStore
    + AuditStore
    + WebhookStore
    + UserStore
    + WebSessionStore
{
}

impl<T> Store for T where
    T: OrgStore
        + AppStore
        + InstallStore
        + DeployedStore
        + InvitationStore
        + StackStore
        + CheckStore
        + LabelStore
        + FleetStore
        + ReleaseStore
        + RemovalStore
        + RolloutStore
        + RunnerStore
        + JobStore
        + JobLinkStore
        + RunnerBinaryStore
        + QueueStore
        + MaintenanceStore
        + WorkflowStore
        + StateStore
        + BuildStore
        + SealingStore
        + AuditStore
        + WebhookStore
        + UserStore
        + WebSessionStore
{
}

#[cfg(test)]
mod tests;
