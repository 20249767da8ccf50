//! Install stacks: what the customer applies once in their own account to
//! run an install's runner (made by `nuon_core::stack`: CloudFormation, a
//! Helm chart, or a shell bundle and a systemd unit), and the stack's
//! phone-home on the Runner API, which
//! trades the stack's one-time token for the runner's token and records
//! the stack's outputs as `.nuon.install_stack.outputs.*`.

use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::app::RunnerSettings;
use nuon_core::audit::AuditEntry;
use nuon_core::stack::{StackFormat, StackSpec, contract, generate};
use nuon_core::token::{hash_token, issue_runner_token, issue_stack_token};
use nuon_core::wire::{InstallStack, PhoneHome, PhoneHomeAnswer, routes};
use nuon_core::{OrgId, now_ms};
use serde::Deserialize;
use serde_json::json;

use super::apps::install_of;
use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, Body, Q, SharedState, Source};
use crate::engine::render::render_context;
use crate::error::Error;
use crate::store::{StackRedeem, StoredInstall};
use nuon_core::rendered::render_part;

/// The most outputs a stack may report, and the longest value.
const MAX_OUTPUTS: usize = 100;
const MAX_OUTPUT_CHARS: usize = 4096;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetInstallStack>(get(stack))
            .query("format", json!({"type": "string", "enum": StackFormat::NAMES}), "The flavour: cloudformation (AWS), terraform (the same AWS stack as a Terraform configuration), helm (a chart for a Kubernetes cluster) or vm (a shell bundle and a systemd unit). Default: the one the app's runner_type asks for (cloudformation for aws, aws-ecs and aws-eks; helm for azure and gcp; vm for local)."),
    ]
}

pub(super) fn runner_routes() -> axum::Router<SharedState> {
    axum::Router::new().route(routes::PHONE_HOME, post(phone_home))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StackQuery {
    format: Option<String>,
}

async fn stack(
    State(state): State<SharedState>,
    Source(source): Source,
    auth: ApiAuth,
    Path(key): Path<String>,
    Q(q): Q<StackQuery>,
) -> Result<Json<InstallStack>, Error> {
    // It issues a token: an admin's call, though a read.
    require_admin(&auth)?;
    let format = q
        .format
        .as_deref()
        .map(StackFormat::parse)
        .transpose()
        .map_err(|e| Error::bad_request(format!("format: {e}")))?;
    let install = install_of(&state, &auth, &key).await?;
    let org = &auth.0.org_id;
    let Rendered {
        app_name,
        runner,
        permissions,
        stack: stack_toml,
        secrets,
    } = rendered_for(&state, org, &install).await?;
    let format = format.unwrap_or_else(|| StackFormat::for_runner_type(&runner.runner_type));
    // What can fail first: the token before stays good until a new one
    // is handed out.
    let api = state.engine.runner_url_known().ok_or_else(|| {
        Error::internal("the Runner API's address is not known yet: the control plane is starting")
    })?;
    let signing_key = state.signing_public_key(&auth.0.org_id).await?.to_string();
    let token = issue_stack_token();
    let ttl = state.ops.stack_token_ttl;
    let expires = now_ms() + ttl.as_millis() as i64;
    let spec = StackSpec {
        install_id: install.id.to_string(),
        install_name: install.name.clone(),
        app_name,
        runner_api: api.to_owned(),
        signing_key,
        install_token: token.secret.clone(),
        token_expires_at_ms: expires,
        token_ttl: crate::engine::in_words(ttl),
        version: env!("CARGO_PKG_VERSION").into(),
        runner,
        stack: stack_toml,
        permissions,
        secrets,
        org_id: org.to_string(),
    };
    // Made before the token is stored: a stack that cannot be made leaves
    // the token before working.
    let made = generate(&spec, format).map_err(|e| {
        Error::bad_request(format!(
            "the {format} stack of install {} cannot be made from its app's config: {e}",
            install.name
        ))
    })?;
    state
        .store
        .set_stack_token(&auth.0.org_id, &install.id, &token.hash, expires)
        .await?;
    // A GET, so not in the write layer's record: a credential was issued.
    let entry = AuditEntry::new(
        now_ms(),
        auth.0.actor(),
        "getInstallStack",
        format!("/v1/installs/{}/stack", install.id),
        source,
        "200",
    )
    .with_detail(format!(
        "a new one-time stack token for install {} (the one before stops working)",
        install.name
    ));
    state.auditor.record(&auth.0.org_id, entry).await;
    Ok(Json(made))
}

/// What a stack is made from: the install's runner settings, and its cloud
/// roles and `stack.toml` with their templates rendered for the install.
struct Rendered {
    app_name: String,
    runner: RunnerSettings,
    permissions: nuon_core::app::Permissions,
    stack: Option<nuon_core::app::Stack>,
    secrets: Vec<nuon_core::app::SecretDecl>,
}

async fn rendered_for(
    state: &SharedState,
    org: &OrgId,
    install: &StoredInstall,
) -> Result<Rendered, Error> {
    let (app_name, config) = state
        .engine
        .app_config(org, &install.app_id, install.config_version)
        .await?;
    let runner = config.runner.clone().unwrap_or_else(RunnerSettings::local);
    // Role names and documents are templates (`{{ .nuon.install.id }}`).
    // Without the stack's own outputs: a stack is made before them, and
    // made again when they are refused (that is how they are given anew).
    let without_outputs = StoredInstall {
        stack_outputs: None,
        ..install.clone()
    };
    let org_name = state.engine.org_name(org).await?;
    let owner = crate::engine::render::Owner {
        org: &org_name,
        app: &app_name,
        secrets: &config.secrets,
    };
    let ctx = render_context(&state.secrets, org, &without_outputs, owner, false)
        .map_err(|e| Error::conflict(ErrorCode::StackNotMade, e))?;
    // Rendering is a tenant's work: off the runtime's threads.
    let (permissions, stack) = {
        let (permissions, stack) = (config.permissions.clone(), config.stack.clone());
        crate::render_pool::blocking(move || {
            let permissions = render_part(&permissions, &ctx, "permissions")?;
            let stack_toml = stack
                .as_ref()
                .map(|s| render_part(s, &ctx, "stack.toml"))
                .transpose()?;
            Ok::<_, String>((permissions, stack_toml))
        })
        .await
        .map_err(Error::internal)?
        .map_err(Error::bad_request)?
    };
    Ok(Rendered {
        app_name,
        runner,
        permissions,
        stack,
        secrets: config.secrets.clone(),
    })
}

/// What a stack may report: names like Terraform outputs, plain text.
fn check_outputs(outputs: &BTreeMap<String, String>) -> Result<(), Error> {
    if outputs.len() > MAX_OUTPUTS {
        return Err(Error::bad_request(format!(
            "a stack reports at most {MAX_OUTPUTS} outputs, not {}",
            outputs.len()
        )));
    }
    for (k, v) in outputs {
        let name_ok = k.len() <= 64
            && k.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !name_ok {
            return Err(Error::bad_request(format!(
                "stack output {:?} is not a name: letters, digits and _, starting with a letter or _, at most 64",
                k.chars().take(80).collect::<String>()
            )));
        }
        if v.chars().count() > MAX_OUTPUT_CHARS || v.contains('\0') {
            return Err(Error::bad_request(format!(
                "stack output {k}: the value is longer than {MAX_OUTPUT_CHARS} characters or holds a NUL"
            )));
        }
    }
    Ok(())
}

fn when(ms: i64) -> String {
    format!("{} s ago", (now_ms() - ms).max(0) / 1000)
}

/// A token that can be spent: its org, install and runner; otherwise
/// why it is refused, saying what to do.
fn redeemed(r: StackRedeem) -> Result<(OrgId, nuon_core::InstallId, nuon_core::RunnerId), Error> {
    let again = "download the stack again (`nuon installs stack INSTALL`, each download carries a new one-time token) and apply it";
    let why = match r {
        StackRedeem::Redeemed {
            org,
            install,
            runner,
        } => return Ok((org, install, runner)),
        StackRedeem::Used(at) => format!(
            "this install token was used already ({}): a stack's token works once; {again}",
            when(at)
        ),
        StackRedeem::Expired(at) => format!("this install token expired {}; {again}", when(at)),
        StackRedeem::Unknown => format!(
            "unknown install token: not one of this control plane's, or a newer download of the stack replaced it; {again}"
        ),
        StackRedeem::RunnerRevoked => format!(
            "the install's runner is revoked (`nuon runners revoke`): its stack cannot bring it back; issue it a new token with `nuon runners rotate-token`, then {again}"
        ),
    };
    Err(Error::api(
        StatusCode::UNAUTHORIZED,
        ErrorCode::InstallTokenRefused,
        why,
    ))
}

/// Trades a stack's one-time token for the runner's token (the one before
/// stops working) and records the stack's outputs, in one transaction.
async fn phone_home(
    State(state): State<SharedState>,
    Source(source): Source,
    Body(req): Body<PhoneHome>,
) -> Result<Json<PhoneHomeAnswer>, Error> {
    check_outputs(&req.outputs)?;
    let hash = hash_token(req.install_token.trim());
    // Whose token it is (the outputs are sealed for that install), then
    // everything in one transaction, which checks it all again.
    let (org, install, runner) = redeemed(state.store.peek_stack_token(&hash, now_ms()).await?)?;
    let token = issue_runner_token(&runner);
    let outputs = nuon_outputs(&state, &org, &install, &req.outputs).await;
    let outputs = serde_json::to_string(&outputs)
        .map_err(|e| Error::internal(format!("cannot encode the outputs: {e}")))?;
    let outputs = state
        .secrets
        .seal(&outputs, &crate::secrets::stack_context(&install));
    // What can fail is done before the transaction: once it commits, the
    // runner must get its new token.
    let signing_public_key = state.signing_public_key(&org).await?.to_string();
    let done = state
        .store
        .redeem_stack_token(&hash, now_ms(), &token.hash, &outputs)
        .await?;
    let (_, spent, _) = redeemed(done)?;
    if spent != install {
        return Err(Error::internal(
            "the stack token changed install while it was spent",
        ));
    }
    state.forget_runner_tokens(&runner);
    record(&state, &org, &install, source, &req.outputs).await;
    tracing::info!(%install, %runner, "install stack phoned home");
    Ok(Json(PhoneHomeAnswer {
        install_id: install,
        runner_id: runner,
        runner_token: token.secret,
        signing_public_key,
    }))
}

/// What the stack reported, in Nuon's contract (`nuon_core::stack::contract`):
/// its role ARNs by the roles' names as rendered for the install. When the
/// config cannot say (the install or its config gone, a role name that no
/// longer renders), what the stack reported alone, with a warning: the
/// runner gets its token whatever the config says.
async fn nuon_outputs(
    state: &SharedState,
    org: &OrgId,
    install: &nuon_core::InstallId,
    reported: &BTreeMap<String, String>,
) -> BTreeMap<String, serde_json::Value> {
    let rendered = match state.store.find_install(org, install.as_str()).await {
        Ok(Some(i)) => rendered_for(state, org, &i)
            .await
            .map_err(|e| e.to_string()),
        Ok(None) => Err("the install is gone".to_owned()),
        Err(e) => Err(e.to_string()),
    };
    match rendered {
        Ok(r) => contract::nuon_outputs(reported, &r.runner.runner_type, &r.permissions),
        Err(e) => {
            tracing::warn!(%install, error = %e, "the stack's outputs are kept as reported, without the role maps");
            contract::nuon_outputs(reported, "local", &Default::default())
        }
    }
}

async fn record(
    state: &SharedState,
    org: &OrgId,
    install: &nuon_core::InstallId,
    source: String,
    outputs: &BTreeMap<String, String>,
) {
    let names: Vec<&str> = outputs.keys().map(String::as_str).collect();
    let entry = AuditEntry::new(
        now_ms(),
        "install-stack",
        "phoneHome",
        format!("/v1/installs/{install}"),
        source,
        "200",
    )
    .with_detail(format!(
        "the runner's token issued anew; outputs: {}",
        names.join(", ")
    ));
    state.auditor.record(org, entry).await;
}
