//! The operations served by `nuon-control/src/api/releases.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/releases`.
    CreateRelease: Post routes::RELEASES, "createRelease",
        crate::wire::CreateRelease => crate::wire::ReleaseInfo, status = 201, body = true,
        summary = "Freeze a release: a config version of an app (default: the latest) and the newest successful build of each of its components and its sandbox; refused while one has none.";
    /// `GET /v1/releases`.
    ListReleases: Get routes::RELEASES, "listReleases",
        () => crate::wire::ReleaseList, body = false,
        summary = "The org's releases (of `app`, when given), newest first.";
    /// `GET /v1/releases/{id}`.
    GetRelease: Get routes::RELEASE, "getRelease",
        () => crate::wire::ReleaseInfo, body = false,
        summary = "One release with the artifact of each component, by digest.";
}
