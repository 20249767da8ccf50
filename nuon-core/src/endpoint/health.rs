//! The operations served by `nuon-control/src/api/health.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installs/{id}/health`.
    GetInstallHealth: Get routes::INSTALL_HEALTH, "getInstallHealth",
        () => crate::wire::InstallHealth, body = false,
        summary = "An install's health: healthy, unhealthy (a component's last deploy or a health-check action's last run failed) or offline (its runner is not there), with what it is made of.";
    /// `PUT /v1/installs/{id}/checks/{name}`.
    PushInstallCheck: Put routes::INSTALL_CHECK, "pushInstallCheck",
        crate::wire::PushCheck => crate::wire::InstallCheck, body = true,
        summary = "Report a check for an install from the vendor's own systems: `healthy` or `unhealthy`, with a detail. A component whose `[health] required_checks` names it waits, after its apply, until it is reported healthy; the install's health shows it.";
}
