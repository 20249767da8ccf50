//! The runner binaries the control plane serves: a published runner
//! release's bytes, uploaded once (`nuon runners release publish` does it)
//! and downloaded by install stacks from the Runner API, so that a stack
//! fetches its runner from the vendor's own control plane and checks the
//! digest the release was signed with.

use std::collections::BTreeSet;

use nuon_core::OrgId;
use nuon_core::endpoint as ep;
use nuon_core::wire::RunnerReleaseInfo;

use super::{Caller, Services, require_admin};
use crate::error::Error;
use crate::store::BINARY_PART_BYTES;

/// The largest runner binary the control plane takes.
pub(crate) const MAX_RUNNER_BINARY_BYTES: usize = 256 * 1024 * 1024;

/// `bytes`' digest as OCI writes it (`sha256:` and 64 hex digits).
pub(crate) fn sha256_digest(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    format!("sha256:{}", hex::encode(d.as_ref()))
}

/// A release's platform as download paths name it: `linux-x86_64`.
pub(crate) fn platform_of(r: &RunnerReleaseInfo) -> String {
    format!("{}-{}", r.os, r.arch)
}

impl Services<'_> {
    /// The org's runner release `key` (a version or an id).
    pub(crate) async fn runner_release(
        &self,
        org: &OrgId,
        key: &str,
    ) -> Result<RunnerReleaseInfo, Error> {
        let mut r = self.store.get_runner_release(org, key).await?.ok_or_else(|| {
            Error::not_found(format!(
                "no runner version {key:?}: publish it with `nuon runners release publish --version {key} --binary PATH --store STORE` (see `nuon runners release list`)"
            ))
        })?;
        r.served = self.store.runner_binary_parts(org, &r.digest).await? > 0;
        Ok(r)
    }

    /// The org's runner releases, newest first, each saying whether its
    /// binary is served.
    pub(crate) async fn runner_releases(
        &self,
        org: &OrgId,
    ) -> Result<Vec<RunnerReleaseInfo>, Error> {
        let served = self.store.runner_binaries(org).await?;
        let mut all = self.store.list_runner_releases(org).await?;
        for r in &mut all {
            r.served = served.contains(&r.digest);
        }
        Ok(all)
    }

    /// `PUT /v1/runner-releases/{version}/binary`: keeps `bytes` as
    /// release `key`'s binary when they are the ones it was signed for.
    pub(crate) async fn upload_runner_binary(
        &self,
        caller: &Caller,
        key: &str,
        bytes: &[u8],
    ) -> Result<RunnerReleaseInfo, Error> {
        let result = self.store_runner_binary(caller, key, bytes).await;
        self.audited_at::<ep::UploadRunnerBinary, _>(caller, &[key], result)
            .await
    }

    async fn store_runner_binary(
        &self,
        caller: &Caller,
        key: &str,
        bytes: &[u8],
    ) -> Result<RunnerReleaseInfo, Error> {
        // What runs in every install a stack reaches: an admin's act.
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let mut release = self.runner_release(org, key).await?;
        let digest = sha256_digest(bytes);
        if bytes.len() as u64 != release.size || digest != release.digest {
            return Err(Error::bad_request(format!(
                "this is not runner version {}'s binary: the body is {} bytes with digest {digest}, the release was published with {} bytes and digest {}; upload the binary that was published (`nuon runners release upload {} --binary PATH`)",
                release.version,
                bytes.len(),
                release.size,
                release.digest,
                release.version,
            )));
        }
        let parts = bytes
            .chunks(BINARY_PART_BYTES)
            .map(<[u8]>::to_vec)
            .collect();
        self.store
            .put_runner_binary(org, &release.digest, parts)
            .await?;
        tracing::info!(version = %release.version, digest = %release.digest, "runner binary uploaded");
        release.served = true;
        Ok(release)
    }

    /// The release a stack made now installs on `platforms` (`linux-x86_64`;
    /// empty: any): the newest served one.
    pub(crate) async fn stack_runner_release(
        &self,
        org: &OrgId,
        platforms: &BTreeSet<String>,
    ) -> Result<Option<RunnerReleaseInfo>, Error> {
        Ok(self
            .runner_releases(org)
            .await?
            .into_iter()
            .find(|r| r.served && (platforms.is_empty() || platforms.contains(&platform_of(r)))))
    }
}
