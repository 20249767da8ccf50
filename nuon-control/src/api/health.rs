//! An install's health on the Control API, and the checks the vendor's
//! systems push: adapters over the service (`service/health.rs`).

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, put};
use nuon_core::endpoint as ep;
use nuon_core::wire::{InstallCheck, InstallHealth, PushCheck};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetInstallHealth>(get(health)),
        Op::endpoint::<ep::PushInstallCheck>(put(push_check)),
    ]
}

async fn push_check(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, name)): Path<(String, String)>,
    body: Result<Body<PushCheck>, Error>,
) -> Result<Json<InstallCheck>, Error> {
    let req = body_of::<ep::PushInstallCheck, _>(&state, &caller, &[&key, &name], body).await?;
    let services = state.services();
    services
        .push_check(&caller, &key, &name, req)
        .await
        .map(Json)
}

async fn health(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallHealth>, Error> {
    let services = state.services();
    services.get_install_health(&caller, &key).await.map(Json)
}
