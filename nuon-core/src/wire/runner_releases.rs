//! Runner releases as the Control API shows them: a runner binary the
//! vendor published, signed by the org's key, which rollouts update
//! install runners to and install stacks download.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The body of `POST /v1/runner-releases`: a runner binary the vendor
/// pushed to its artifact store (`nuon runners release publish`), for the
/// control plane to sign with the org's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishRunnerRelease {
    /// The version the binary reports (`nuon-runner --version`): letters,
    /// digits, `.`, `-`, `+`; at most 64.
    pub version: String,
    /// The OS it runs on (`linux`).
    pub os: String,
    /// The CPU it runs on (`x86_64`, `aarch64`).
    pub arch: String,
    /// The repository of the vendor's store that holds it.
    pub repository: String,
    /// The OCI manifest that holds it, by digest.
    pub manifest: String,
    /// The binary itself (the manifest's one layer), by digest.
    pub digest: String,
    /// The binary's size in bytes.
    pub size: u64,
}

/// A runner release: a runner binary in the vendor's store, signed by the
/// org's key, that rollouts update install runners to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerReleaseInfo {
    /// Its id.
    pub id: crate::ReleaseId,
    /// The version.
    pub version: String,
    /// The OS it runs on.
    pub os: String,
    /// The CPU it runs on.
    pub arch: String,
    /// The repository of the vendor's store that holds it.
    pub repository: String,
    /// The OCI manifest that holds it, by digest.
    pub manifest: String,
    /// The binary, by digest: a runner downloads exactly these bytes.
    pub digest: String,
    /// The binary's size in bytes.
    pub size: u64,
    /// Base64 Ed25519 signature by the org's key of the release's signed
    /// bytes (the line `nuon-runner-release`, then the id, version,
    /// platform, digest and size as JSON): a runner takes no binary whose
    /// release it cannot verify.
    pub signature: String,
    /// Whether the control plane serves the binary itself (uploaded with
    /// `nuon runners release publish`): install stacks then download the
    /// runner from the control plane's Runner API.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub served: bool,
    /// When it was published.
    pub created_at_ms: i64,
    /// Who published it (the API token's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

impl crate::signing::Signed for RunnerReleaseInfo {
    const DOMAIN: &'static str = "nuon-runner-release";

    /// The version, platform and the binary's digest and size.
    fn signed_body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Signed<'a> {
            id: &'a str,
            version: &'a str,
            os: &'a str,
            arch: &'a str,
            digest: &'a str,
            size: u64,
        }
        crate::signing::json_body(&Signed {
            id: self.id.as_str(),
            version: &self.version,
            os: &self.os,
            arch: &self.arch,
            digest: &self.digest,
            size: self.size,
        })
    }
}

/// Runner releases, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerReleaseList {
    /// Newest first.
    pub releases: Vec<RunnerReleaseInfo>,
}

/// The runner version the control plane asks a runner to run (in its
/// settings): the release, and how many times it was asked (a retry asks
/// again, so a runner that gave up on a version tries it once more).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerUpdate {
    /// The release.
    pub release: RunnerReleaseInfo,
    /// The ask's number.
    pub tries: u32,
}
