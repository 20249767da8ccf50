//! Install stacks: what the customer applies once in their own account to
//! run an install's runner (made by `nuon_core::stack`: CloudFormation, a
//! Helm chart, or a shell bundle and a systemd unit), and the stack's
//! phone-home on the Runner API, which
//! trades the stack's one-time token for the runner's token and records
//! the stack's outputs as `.nuon.install_stack.outputs.*`; and the
//! download, with that token, of the runner release the stack installs
//! (`GET /v1/runner/releases/{version}/{platform}`).

use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use nuon_core::audit::AuditEntry;
use nuon_core::stack::{StackFormat, contract};
use nuon_core::token::{hash_token, issue_runner_token};
use nuon_core::wire::{InstallStack, PhoneHome, PhoneHomeAnswer, routes};
use nuon_core::{OrgId, now_ms};
use serde::Deserialize;
use serde_json::json;

use super::doc::Op;
use super::{Body, Caller, Q, SharedState, Source};
use crate::error::Error;
use crate::service::runner_binaries::platform_of;
use crate::store::StackRedeem;

/// The most outputs a stack may report, and the longest value.
const MAX_OUTPUTS: usize = 100;
const MAX_OUTPUT_CHARS: usize = 4096;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetInstallStack>(get(stack))
            .query("format", json!({"type": "string", "enum": StackFormat::NAMES}), "The flavour: cloudformation (AWS), terraform (the same AWS stack as a Terraform configuration), helm (a chart for a Kubernetes cluster) or vm (a shell bundle and a systemd unit). Default: the one the app's runner_type asks for (cloudformation for aws, aws-ecs and aws-eks; helm for azure and gcp; vm for local)."),
    ]
}

/// The Runner API's calls of a stack: its phone-home, and the download of
/// the runner it installs.
pub(super) fn runner_routes() -> axum::Router<SharedState> {
    axum::Router::new()
        .route(routes::PHONE_HOME, post(phone_home))
        .route(routes::RUNNER_DOWNLOAD, get(download))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StackQuery {
    format: Option<String>,
}

async fn stack(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    Q(q): Q<StackQuery>,
) -> Result<Json<InstallStack>, Error> {
    let format = q
        .format
        .as_deref()
        .map(StackFormat::parse)
        .transpose()
        .map_err(|e| Error::bad_request(format!("format: {e}")))?;
    Ok(Json(
        state
            .services()
            .install_stack(&caller, &key, format)
            .await?,
    ))
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
pub(super) fn redeemed(
    r: StackRedeem,
) -> Result<(OrgId, nuon_core::InstallId, nuon_core::RunnerId), Error> {
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
    Err(Error::refused(ErrorCode::InstallTokenRefused, why))
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
        Ok(Some(i)) => state
            .services()
            .rendered_for(org, &i)
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

/// Whose download it is: an install stack's one-time token (not yet
/// spent: the stack downloads before it phones home) or a runner's token.
async fn downloader(state: &SharedState, source: &str, parts: &Parts) -> Result<OrgId, Error> {
    let token = super::bearer(parts)?;
    let token = token.trim();
    let hash = nuon_core::token::hash_token(token);
    if token.starts_with("stk_") {
        let found = super::throttled(state, source, token, &hash, async {
            match state.store.peek_stack_token(&hash, now_ms()).await? {
                crate::store::StackRedeem::Unknown => Ok(None),
                other => Ok(Some(other)),
            }
        })
        .await?
        .unwrap_or(crate::store::StackRedeem::Unknown);
        return redeemed(found).map(|(org, _, _)| org);
    }
    super::throttled(state, source, token, &hash, async {
        Ok(state.store.authenticate_runner(&hash).await?)
    })
    .await?
    .map(|p| p.org_id)
    .ok_or_else(|| {
        Error::refused(ErrorCode::Unauthorized, "a runner download takes an install stack's one-time token (`stk_…`, in the stack's settings) or a runner's token",
        )
    })
}

/// `GET /v1/runner/releases/{version}/{platform}`: the binary, streamed
/// part by part, with its digest and the release's signature in headers.
async fn download(
    State(state): State<SharedState>,
    Source(source): Source,
    Path((version, platform)): Path<(String, String)>,
    parts: Parts,
) -> Result<axum::response::Response, Error> {
    let org = downloader(&state, &source, &parts).await?;
    let release = state.services().runner_release(&org, &version).await?;
    if platform_of(&release) != platform {
        return Err(Error::not_found(format!(
            "runner version {} is built for {}, not {platform}; publish a build for {platform} as its own version",
            release.version,
            platform_of(&release)
        )));
    }
    let parts = state
        .store
        .runner_binary_parts(&org, &release.digest)
        .await?;
    if parts == 0 {
        return Err(Error::not_found(format!(
            "this control plane does not serve runner version {}'s binary: upload it with `nuon runners release upload {} --binary PATH`",
            release.version, release.version
        )));
    }
    let digest = release.digest.clone();
    let stream = futures_util::stream::unfold(0u32, move |part| {
        let (state, org, digest) = (state.clone(), org.clone(), digest.clone());
        async move {
            if part >= parts {
                return None;
            }
            let next = match state.store.runner_binary_part(&org, &digest, part).await {
                Ok(Some(bytes)) => Ok(Bytes::from(bytes)),
                Ok(None) => Err(std::io::Error::other(format!(
                    "part {part} of {digest} is gone"
                ))),
                Err(e) => Err(std::io::Error::other(e.to_string())),
            };
            Some((next, part + 1))
        }
    });
    let mut resp = axum::body::Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    let value = |v: &str| {
        axum::http::HeaderValue::from_str(v)
            .map_err(|_| Error::internal(format!("a header value of release {}", release.version)))
    };
    h.insert(header::CONTENT_TYPE, value("application/octet-stream")?);
    h.insert(header::CONTENT_LENGTH, value(&release.size.to_string())?);
    h.insert("x-nuon-digest", value(&release.digest)?);
    h.insert("x-nuon-signature", value(&release.signature)?);
    h.insert("x-nuon-version", value(&release.version)?);
    Ok(resp)
}
