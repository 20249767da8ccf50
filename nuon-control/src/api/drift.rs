//! An install's drift on the Control API: what the newest drift check of
//! the sandbox and of each component found. The service
//! ([`crate::service::Services::install_drift`]) reads it; this is the
//! thin HTTP side.

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::get;
use nuon_core::endpoint as ep;
use nuon_core::wire::InstallDrift;

use super::doc::Op;
use super::{Caller, SharedState};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![Op::endpoint::<ep::GetInstallDrift>(get(drift))]
}

async fn drift(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallDrift>, Error> {
    state
        .services()
        .install_drift(&caller, &key)
        .await
        .map(Json)
}
