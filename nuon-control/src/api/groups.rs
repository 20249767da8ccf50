//! Install labels and groups on the Control API: labels are set on an
//! install (`PATCH /v1/installs/{id}/labels`), a group is a name and a
//! label selector whose members are whichever installs match it when it
//! is read.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post};
use nuon_core::endpoint as ep;
use nuon_core::labels::Selector;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{CreateGroup, GroupInfo, GroupList, InstallInfo, LabelChange};
use serde::Deserialize;

use super::control::{require_admin, valid_name};
use super::doc::Op;
use super::{ApiAuth, Body, Caller, SharedState, body_of};
use crate::error::Error;
use crate::store::{StoredGroup, StoredInstall};

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::SetInstallLabels>(patch(set_labels)).audited_by_service(),
        Op::endpoint::<ep::CreateInstallGroup>(post(create_group)),
        Op::endpoint::<ep::ListInstallGroups>(get(list_groups)),
        Op::endpoint::<ep::GetInstallGroup>(get(get_group)),
        Op::endpoint::<ep::DeleteInstallGroup>(delete(delete_group)),
    ]
}

/// `?selector=` of a list of installs.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SelectorQuery {
    pub(super) selector: Option<String>,
}

/// A selector from the API, or a 400 that says what is wrong with it.
pub(super) fn selector_of(text: &str) -> Result<Selector, Error> {
    text.parse()
        .map_err(|e: String| Error::api(StatusCode::BAD_REQUEST, ErrorCode::InvalidSelector, e))
}

pub(super) async fn set_labels(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<LabelChange>, Error>,
) -> Result<Json<InstallInfo>, Error> {
    let req = body_of::<ep::SetInstallLabels, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .set_install_labels(&caller, &key, req)
        .await
        .map(Json)
}

/// A group with the names of the installs it selects, out of `installs`.
fn group_info(g: StoredGroup, installs: &[StoredInstall]) -> GroupInfo {
    // Stored selectors were checked when the group was made; one that no
    // longer parses selects nobody, never everybody.
    let selector: Option<Selector> = match g.selector.parse() {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(group = %g.name, error = %e, "a stored group selector does not parse; it selects no install");
            None
        }
    };
    GroupInfo {
        installs: installs
            .iter()
            .filter(|i| selector.as_ref().is_some_and(|s| s.matches(&i.labels)))
            .map(|i| i.name.clone())
            .collect(),
        name: g.name,
        selector: g.selector,
        created_at_ms: g.created_at_ms,
    }
}

async fn find_group(state: &SharedState, auth: &ApiAuth, name: &str) -> Result<StoredGroup, Error> {
    state
        .store
        .list_groups(&auth.0.org_id)
        .await?
        .into_iter()
        .find(|g| g.name == name)
        .ok_or_else(|| {
            Error::not_found(format!(
                "no group {name:?} (see `nuon installs groups list`)"
            ))
        })
}

pub(super) async fn create_group(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateGroup>,
) -> Result<(StatusCode, Json<GroupInfo>), Error> {
    require_admin(&auth)?;
    if !valid_name(&req.name) || req.name.chars().all(|c| c == '.') {
        return Err(Error::bad_request(format!(
            "invalid group name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
            req.name.chars().take(80).collect::<String>()
        )));
    }
    // Stored as the selector prints, so what is shown is what it means.
    let selector = selector_of(&req.selector)?;
    let g = state
        .store
        .create_group(&auth.0.org_id, &req.name, &selector.to_string())
        .await?;
    let installs = state.store.list_installs(&auth.0.org_id).await?;
    Ok((StatusCode::CREATED, Json(group_info(g, &installs))))
}

pub(super) async fn list_groups(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<GroupList>, Error> {
    let installs = state.store.list_installs(&auth.0.org_id).await?;
    let groups = state
        .store
        .list_groups(&auth.0.org_id)
        .await?
        .into_iter()
        .map(|g| group_info(g, &installs))
        .collect();
    Ok(Json(GroupList { groups }))
}

async fn get_group(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(name): Path<String>,
) -> Result<Json<GroupInfo>, Error> {
    let g = find_group(&state, &auth, &name).await?;
    let installs = state.store.list_installs(&auth.0.org_id).await?;
    Ok(Json(group_info(g, &installs)))
}

pub(super) async fn delete_group(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(name): Path<String>,
) -> Result<Json<GroupInfo>, Error> {
    require_admin(&auth)?;
    let g = find_group(&state, &auth, &name).await?;
    let installs = state.store.list_installs(&auth.0.org_id).await?;
    if !state.store.delete_group(&auth.0.org_id, &name).await? {
        return Err(Error::not_found(format!("no group {name:?}")));
    }
    Ok(Json(group_info(g, &installs)))
}
