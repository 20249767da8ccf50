//! Runner releases: a runner binary the vendor pushed to its artifact
//! store as an OCI artifact (`nuon runners release publish`), signed here
//! with the org's key, and rolled out to install runners in waves by the
//! rollout engine (`kind: runner`). Reading one, and its binary, are in
//! [`super::runner_binaries`].

use nuon_core::Signed as _;
use nuon_core::endpoint::{self as ep, path_of};
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};
use nuon_core::wire::{PublishRunnerRelease, RunnerReleaseInfo};
use nuon_core::{ReleaseId, now_ms};

use super::{Caller, Services, require_admin, require_deployer};
use crate::error::Error;

impl Services<'_> {
    /// `POST /v1/runner-releases`: a runner version published, its
    /// release (version, platform, the binary's digest and size) signed
    /// with the org's key. Admins only: a runner binary runs in every
    /// install it reaches. Recorded in the audit trail, refusals included.
    pub(crate) async fn publish_runner_release(
        &self,
        caller: &Caller,
        req: PublishRunnerRelease,
    ) -> Result<RunnerReleaseInfo, Error> {
        let result = self.sign_runner_release(caller, req).await;
        self.audited_at::<ep::PublishRunnerRelease, _>(caller, &[], result)
            .await
    }

    async fn sign_runner_release(
        &self,
        caller: &Caller,
        req: PublishRunnerRelease,
    ) -> Result<RunnerReleaseInfo, Error> {
        // A runner binary runs in every install it reaches: an admin's act.
        require_admin(&caller.principal)?;
        check_version(&req.version)?;
        check_word("os", &req.os)?;
        check_word("arch", &req.arch)?;
        check_digest("manifest", &req.manifest)?;
        check_digest("digest", &req.digest)?;
        if !valid_repository(&req.repository) {
            return Err(Error::bad_request(format!(
                "repository {:?}: an OCI repository name (lower-case letters, digits, '.', '_', '-', parts separated by '/')",
                req.repository
            )));
        }
        if req.size == 0 {
            return Err(Error::bad_request("size: a runner binary is not empty"));
        }
        let org = &caller.principal.org_id;
        let mut release = RunnerReleaseInfo {
            id: ReleaseId::generate(),
            version: req.version,
            os: req.os,
            arch: req.arch,
            repository: req.repository,
            manifest: req.manifest,
            digest: req.digest,
            size: req.size,
            signature: String::new(),
            served: false,
            created_at_ms: now_ms(),
            created_by: Some(caller.principal.actor()),
        };
        let signer = self
            .keys
            .signer(org)
            .await
            .map_err(|e| Error::internal(format!("cannot sign the runner release: {e}")))?;
        release.signature = signer
            .sign(&release.signed_bytes())
            .await
            .map_err(|e| Error::internal(format!("cannot sign the runner release: {e}")))?;
        self.store.create_runner_release(org, &release).await?;
        tracing::info!(version = %release.version, digest = %release.digest, "runner release published");
        Ok(release)
    }

    /// `POST /v1/runner-releases/{version}/rollouts`: runner release `key`
    /// rolled out to the install runners `req` picks, in waves (201), or
    /// with `dry_run` only its plan (200, nothing stored; any token may
    /// ask). Deployers and admins; recorded in the audit trail, dry runs
    /// and refusals included, with the status answered.
    pub(crate) async fn create_runner_rollout(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateRollout,
    ) -> Result<RolloutInfo, Error> {
        let ok = Self::made_unless(req.dry_run);
        let result = self.start_runner_rollout(caller, key, &req).await;
        let target = path_of::<ep::CreateRunnerRollout>(&[key]);
        self.audited_as::<ep::CreateRunnerRollout, _>(caller, target, ok, result)
            .await
    }

    async fn start_runner_rollout(
        &self,
        caller: &Caller,
        key: &str,
        req: &CreateRollout,
    ) -> Result<RolloutInfo, Error> {
        if !req.dry_run {
            require_deployer(&caller.principal)?;
        }
        let org = &caller.principal.org_id;
        let release = self.runner_release(org, key).await?;
        let by = Some(caller.principal.actor());
        Ok(self
            .engine
            .create_runner_rollout(org, &release, req, by)
            .await?)
    }

    /// `GET /v1/runner-releases/{version}/rollouts`: runner release
    /// `key`'s rollouts (and the rollbacks of them), newest first.
    pub(crate) async fn list_runner_rollouts(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<RolloutList, Error> {
        let org = &caller.principal.org_id;
        let release = self.runner_release(org, key).await?;
        let rollouts = self.store.list_rollouts(org, Some(&release.id)).await?;
        Ok(RolloutList { rollouts })
    }
}

/// A version as a runner reports it: `1.4.0`, `1.4.0-rc.1+abc`.
fn check_version(v: &str) -> Result<(), Error> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
    // Releases are looked up by version or id: a version is never an id.
    if ok && v.parse::<ReleaseId>().is_err() {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "version {v:?}: letters, digits, '.', '-', '+' and '_', starting with a letter or digit, at most 64 (as `nuon-runner --version` prints it)"
        )))
    }
}

/// A platform word (`linux`, `x86_64`).
fn check_word(what: &str, v: &str) -> Result<(), Error> {
    if !v.is_empty() && v.len() <= 32 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "{what} {v:?}: one word of letters, digits and '_' (as Rust names it: linux, x86_64, aarch64)"
        )))
    }
}

/// An OCI digest (`sha256:` and its hex), or a 400 saying what is wrong
/// with `what`.
fn check_digest(what: &str, v: &str) -> Result<(), Error> {
    v.parse::<nuon_core::artifact::Digest>()
        .map(|_| ())
        .map_err(|e| Error::bad_request(format!("{what}: {e}")))
}

/// Whether `repo` is an OCI repository name: parts of lower-case letters,
/// digits, '.', '_' and '-' (each starting with a letter or digit),
/// separated by '/', at most 255 in all.
fn valid_repository(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
        })
}
