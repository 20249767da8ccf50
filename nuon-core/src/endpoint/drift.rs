//! The operations served by `nuon-control/src/api/drift.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installs/{id}/drift`.
    GetInstallDrift: Get routes::INSTALL_DRIFT, "getInstallDrift",
        () => crate::wire::InstallDrift, body = false,
        summary = "What the newest drift check of the install's sandbox and of each component found (drifted, in sync, checking, failed), with the plan's summary and when its schedule checks it next.";
}
