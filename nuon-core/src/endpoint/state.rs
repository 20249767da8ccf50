//! The operations served by `nuon-control/src/api/state.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `GET /v1/installs/{id}/state`.
    ListInstallStates: Get routes::INSTALL_STATES, "listInstallStates",
        () => crate::wire::StateList, body = false,
        summary = "The Terraform states of an install: versions and locks, never the state itself.";
    /// `POST /v1/installs/{id}/state/{component}/unlock`.
    ForceUnlockState: Post routes::INSTALL_STATE_UNLOCK, "forceUnlockState",
        () => crate::wire::StateUnlocked, body = false,
        summary = "Release a component's Terraform state lock by force (a runner died holding it).";
}
