//! Values kept sealed: what an earlier version kept in the clear, found
//! and sealed at start (see [`crate::keys`]).

use super::*;

/// Values kept sealed: finding and sealing what an earlier version kept in
/// the clear.
#[async_trait]
pub trait SealingStore: Send + Sync + 'static {
    /// Orgs whose signing key is kept in the clear (its 32 bytes).
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>>;

    /// Replaces an org's signing key kept in the clear by its sealed form.
    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()>;

    /// Up to `limit` jobs whose spec is kept in the clear (no payload as
    /// shown stored beside it), with that spec.
    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>>;

    /// Replaces a job's spec kept in the clear by its sealed form, and
    /// stores its payload as the Control API shows it.
    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()>;

    /// Up to `limit` jobs of `org` that have not ended (queued or
    /// running), after `after` in id order, with their sealed specs: the
    /// jobs to sign again when the org's key is rotated.
    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>>;

    /// Replaces a job's signature.
    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()>;
}
