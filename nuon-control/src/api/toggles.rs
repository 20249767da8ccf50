//! An install's components on the Control API: each on or off, and
//! turning a `toggleable` one off (it is torn down, with what depends on
//! it) or on again (it is deployed); and the install's own values for a
//! component (Helm values, Terraform variables), deployed when set. The
//! service ([`crate::service::toggles`]) does them; this is the thin HTTP
//! side.

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, post, put};
use nuon_core::endpoint::{self as ep, Endpoint};
use nuon_core::wire::{
    ComponentOverridden, ComponentToggled, InstallComponents, SetComponentOverride, ToggleComponent,
};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::ListInstallComponents>(get(list)),
        Op::endpoint::<ep::DisableInstallComponent>(post(disable)),
        Op::endpoint::<ep::EnableInstallComponent>(post(enable)),
        Op::endpoint::<ep::SetInstallComponentOverrides>(put(set_override)),
    ]
}

async fn list(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallComponents>, Error> {
    state
        .services()
        .install_components(&caller, &key)
        .await
        .map(Json)
}

async fn disable(
    state: State<SharedState>,
    caller: Caller,
    path: Path<(String, String)>,
    body: Result<Body<ToggleComponent>, Error>,
) -> Result<Json<ComponentToggled>, Error> {
    toggle::<ep::DisableInstallComponent>(state, caller, path, body, false).await
}

async fn enable(
    state: State<SharedState>,
    caller: Caller,
    path: Path<(String, String)>,
    body: Result<Body<ToggleComponent>, Error>,
) -> Result<Json<ComponentToggled>, Error> {
    toggle::<ep::EnableInstallComponent>(state, caller, path, body, true).await
}

/// Operation `E`: the component turned on (`on`) or off; its body says
/// nothing more.
async fn toggle<E: Endpoint>(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, name)): Path<(String, String)>,
    body: Result<Body<ToggleComponent>, Error>,
    on: bool,
) -> Result<Json<ComponentToggled>, Error> {
    body_of::<E, _>(&state, &caller, &[&key, &name], body).await?;
    state
        .services()
        .toggle_component(&caller, &key, &name, on)
        .await
        .map(Json)
}

async fn set_override(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, name)): Path<(String, String)>,
    body: Result<Body<SetComponentOverride>, Error>,
) -> Result<Json<ComponentOverridden>, Error> {
    let req = body_of::<ep::SetInstallComponentOverrides, _>(&state, &caller, &[&key, &name], body)
        .await?;
    state
        .services()
        .set_component_override(&caller, &key, &name, req)
        .await
        .map(Json)
}
