//! Builds, workflows and outputs on the Control API: starting a workflow
//! (checked before any job runs: components that deploy, builds, inputs
//! and secrets its templates read), approving, denying, cancelling and
//! retrying its steps (through the executor), an install's outputs, and
//! building an app's components on the org's build runner.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::app::{ComponentKind, Source, source_dir};
use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{
    ApprovalAnswer, ApproveSteps, BuildInfo, BuildList, ConfigFile, CreateBuilds, CreateWorkflow,
    InstallOutputs, StepChoice, WorkflowInfo,
};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{
    BuildJob, BuildSource, Job, JobId, JobSpec, Package, RetryPolicy, SourceFileContents, now_ms,
};

use super::apps::{app_of, install_of, latest_config};
use super::control::require_deployer;
use super::doc::Op;
use super::{ApiAuth, Body, Caller, SharedState, body_of};
use crate::engine::Start;
use crate::engine::render::deployable;
use crate::error::Error;
use crate::service::workflows::WorkflowAct;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateWorkflow>(post(create_workflow)),
        Op::endpoint::<ep::ApproveWorkflowStep>(post(approve)).audited_by_service(),
        Op::endpoint::<ep::DenyWorkflowStep>(post(deny)).audited_by_service(),
        Op::endpoint::<ep::RespondToApproval>(post(respond)).audited_by_service(),
        Op::endpoint::<ep::CancelWorkflow>(post(cancel)).audited_by_service(),
        Op::endpoint::<ep::RetryWorkflow>(post(retry)).audited_by_service(),
        Op::endpoint::<ep::SkipWorkflowStep>(post(skip)).audited_by_service(),
        Op::endpoint::<ep::GetInstallOutputs>(get(outputs)),
        Op::endpoint::<ep::CreateBuilds>(post(create_builds)),
        Op::endpoint::<ep::ListBuilds>(get(list_builds)),
        Op::endpoint::<ep::GetBuild>(get(get_build)),
    ]
}

pub(super) async fn create_workflow(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<CreateWorkflow>,
) -> Result<(StatusCode, Json<WorkflowInfo>), Error> {
    require_deployer(&auth)?;
    if matches!(req.kind, WorkflowKind::Teardown | WorkflowKind::Deprovision) {
        // Destroying is an admin's.
        super::control::require_admin(&auth)?;
    }
    let org = &auth.0.org_id;
    let install = install_of(&state, &auth, &key).await?;
    let app = app_of(&state, &auth, install.app_id.as_str()).await?;
    // Destroying works from the config the install was deployed with, so
    // a component a newer config dropped is still torn down; everything
    // else from the app's latest config.
    let destroying = matches!(req.kind, WorkflowKind::Teardown | WorkflowKind::Deprovision);
    if req.only && !(destroying && req.component.is_some()) {
        return Err(Error::bad_request(
            "\"only\" is for a teardown of one component (\"component\"): it leaves the components that depend on it deployed",
        ));
    }
    let deploying = req.kind == WorkflowKind::Deploy;
    if let (false, Some(v)) = (destroying || deploying, req.config_version) {
        return Err(Error::bad_request(format!(
            "\"config_version\" ({v}) is for a deploy, a teardown or a deprovision; a {} uses the app's latest config (sync and build another to change it)",
            format!("{:?}", req.kind).to_lowercase()
        )));
    }
    if req.plan_only && (req.release.is_some() || (deploying && req.config_version.is_some())) {
        return Err(Error::bad_request(
            "a plan-only run plans the install's own config version: deploy a release or a config version without \"plan_only\"",
        ));
    }
    if req.release.is_some() && req.component.is_some() {
        return Err(Error::bad_request(
            "a release deploys every component: drop \"component\" (or deploy one component of the app's latest config)",
        ));
    }
    let release = match &req.release {
        None => None,
        Some(_) if !deploying => {
            return Err(Error::bad_request(
                "\"release\" is for a deploy (`nuon installs deploy INSTALL --release REL`)",
            ));
        }
        Some(_) if req.config_version.is_some() => {
            return Err(Error::bad_request(
                "name a release or a config version, not both: a release deploys its own config version",
            ));
        }
        Some(id) => Some(
            state
                .store
                .get_release(org, id)
                .await?
                .filter(|r| r.app_id == install.app_id)
                .ok_or_else(|| {
                    Error::not_found(format!(
                        "app {} has no release {id} (`nuon releases list --app {}` lists them)",
                        app.name, app.name
                    ))
                })?,
        ),
    };
    // A release's config version, one asked for, or (destroying) the one
    // the install was deployed with; else the app's latest.
    let pinned = match (&release, req.config_version) {
        (Some(r), _) => Some(r.config_version),
        (None, Some(v)) => Some(v),
        (None, None) if destroying => Some(install.config_version),
        (None, None) => None,
    };
    let latest = match pinned {
        Some(version) => {
            let stored = state
                .store
                .get_config(org, &app.id, Some(version))
                .await?
                .ok_or_else(|| match req.config_version {
                    Some(v) => Error::not_found(format!(
                        "app {} has no config version {v} (the install runs {}; `nuon apps configs {}` lists them)",
                        app.name, install.config_version, app.name
                    )),
                    None => Error::not_found(format!(
                        "config v{version} of app {} is gone",
                        app.name
                    )),
                })?;
            super::apps::decode_config(&state, &app, stored)?
        }
        None => latest_config(&state, &auth, &app).await?,
    };
    let wf = state
        .engine
        .start(
            org,
            Start {
                component: req.component,
                only: req.only,
                action: req.action,
                runbook: req.runbook,
                inputs: req.inputs,
                plan_only: req.plan_only,
                release: release.as_ref(),
                ..Start::new(
                    &install,
                    &app.name,
                    &latest.config,
                    latest.version,
                    req.kind,
                )
            },
        )
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(super::workflow_view_live(&state, org, wf).await?),
    ))
}

/// Does `act` to workflow `raw` for the caller, through its service.
async fn act(
    state: &SharedState,
    caller: &Caller,
    raw: &str,
    act: WorkflowAct,
    step: Option<String>,
) -> Result<Json<WorkflowInfo>, Error> {
    let services = state.services();
    services
        .act_on_workflow(caller, raw, act, step)
        .await
        .map(Json)
}

async fn approve(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<ApproveSteps>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::ApproveWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    let approve = WorkflowAct::Approve { all: req.all };
    act(&state, &caller, &raw, approve, req.step).await
}

async fn deny(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::DenyWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Deny, req.step).await
}

async fn respond(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<ApprovalAnswer>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::RespondToApproval, _>(&state, &caller, &[&raw], body).await?;
    let answer = WorkflowAct::Respond(req.response);
    act(&state, &caller, &raw, answer, req.step).await
}

async fn cancel(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::CancelWorkflow, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Cancel, req.step).await
}

async fn retry(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::RetryWorkflow, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Retry, req.step).await
}

async fn skip(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::SkipWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Skip, req.step).await
}

pub(super) async fn outputs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<InstallOutputs>, Error> {
    let install = install_of(&state, &auth, &key).await?;
    let mut outputs: InstallOutputs = install
        .outputs_json
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_default();
    outputs.install_stack = crate::engine::render::stack_outputs(&state.secrets, &install)
        .map_err(|e| Error::api(StatusCode::CONFLICT, ErrorCode::StackOutputsRefused, e))?;
    Ok(Json(outputs.masked()))
}

/// How a build packages what it built: by the component's kind (the
/// sandbox's, and a module's, as a Terraform module).
fn package_of(component: Option<&nuon_core::app::Component>) -> Package {
    match component {
        Some(c) if c.kind == ComponentKind::HelmChart => Package::HelmChart,
        Some(c) if c.kind == ComponentKind::Wasm => Package::WasmPlugin,
        Some(c)
            if matches!(
                c.kind,
                ComponentKind::KubernetesManifest | ComponentKind::Pulumi
            ) =>
        {
            Package::Directory
        }
        Some(c) if c.kind == ComponentKind::DockerBuild => Package::DockerImage {
            dockerfile: c.dockerfile.clone().unwrap_or_else(|| "Dockerfile".into()),
            target: c.target.clone(),
            // [env_vars] are build arguments, as in Nuon; [build_args] win.
            build_args: c
                .env_vars
                .iter()
                .chain(&c.build_args)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        _ => Package::TerraformModule,
    }
}

/// A repository name from free text: lowercase letters, digits and `-`.
fn repo_part(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = mapped.trim_matches('-');
    if trimmed.is_empty() {
        "x".into()
    } else {
        trimmed.to_owned()
    }
}

/// Where a component's source comes from, for its build job.
fn build_source(
    who: &str,
    source: &Source,
    sources: &[ConfigFile],
    version: u32,
) -> Result<BuildSource, String> {
    match source {
        Source::Path { path } => {
            let dir = source_dir(path).map_err(|e| format!("{who}: {e}"))?;
            let prefix = if dir.is_empty() {
                String::new()
            } else {
                format!("{dir}/")
            };
            let files: Vec<SourceFileContents> = sources
                .iter()
                .filter_map(|f| {
                    f.path.strip_prefix(&prefix).map(|rel| SourceFileContents {
                        path: rel.to_owned(),
                        contents: f.contents.clone(),
                        encoding: f.encoding.clone(),
                    })
                })
                .collect();
            if files.is_empty() {
                return Err(format!(
                    "{who}: config version {version} has no source files under {path:?}; sync the app with `nuon apps sync DIR`, which uploads the files of path sources"
                ));
            }
            Ok(BuildSource::Files { files })
        }
        Source::Git {
            repo,
            directory,
            branch,
        } => Ok(BuildSource::Git {
            url: repo.clone(),
            branch: branch.clone(),
            directory: directory.clone(),
        }),
        Source::PublicRepo {
            repo,
            directory,
            branch,
        } => Ok(BuildSource::Git {
            url: nuon_core::app::public_repo_url(repo),
            branch: branch.clone(),
            directory: directory.clone(),
        }),
        Source::Image { image_url, tag } => Ok(BuildSource::Image {
            reference: format!("{image_url}:{tag}"),
        }),
        Source::Oci { reference } => Ok(BuildSource::Image {
            reference: reference.clone(),
        }),
        Source::HelmRepo {
            repo_url,
            chart,
            version,
        } => Ok(BuildSource::HelmRepo {
            repo_url: repo_url.clone(),
            chart: chart.clone(),
            version: version.clone(),
        }),
        Source::Inline => Err(format!(
            "{who}: its content is in its config; its build packages that"
        )),
    }
}

pub(super) async fn create_builds(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<CreateBuilds>,
) -> Result<(StatusCode, Json<BuildList>), Error> {
    require_deployer(&auth)?;
    let org = &auth.0.org_id;
    let app = app_of(&state, &auth, &key).await?;
    let latest = latest_config(&state, &auth, &app).await?;
    let stored = state
        .store
        .get_config(org, &app.id, Some(latest.version))
        .await?
        .ok_or_else(|| Error::not_found("the config version vanished"))?;
    let sources =
        crate::keys::open_config(&state.secrets, &app.id, "sources", &stored.sources_json)
            .map_err(Error::internal)?;
    let sources: Vec<ConfigFile> = serde_json::from_str(&sources)
        .map_err(|e| Error::internal(format!("stored sources unreadable: {e}")))?;
    let config = &latest.config;
    let mut wanted: Vec<(String, Source)> = Vec::new();
    if let Some(sb) = &config.sandbox
        && req.component.as_deref().is_none_or(|c| c == "sandbox")
    {
        wanted.push(("sandbox".into(), sb.source.clone()));
    }
    let mut problems = Vec::new();
    for c in &config.components {
        if req.component.as_deref().is_some_and(|w| w != c.name) {
            continue;
        }
        if let Err(e) = deployable(c) {
            if req.component.is_some() {
                problems.push(e);
            }
            continue;
        }
        wanted.push((c.name.clone(), c.source.clone()));
    }
    if let Some(c) = &req.component
        && wanted.is_empty()
        && problems.is_empty()
    {
        return Err(Error::not_found(format!(
            "app {} has no component {c:?} (and no sandbox by that name)",
            app.name
        )));
    }
    let runner = state.store.build_runner(org).await?.ok_or_else(|| {
        Error::conflict(
            ErrorCode::NoBuildRunner,
            "this org has no build runner (its token may be revoked)",
        )
    })?;
    let mut jobs = Vec::new();
    for (who, source) in &wanted {
        let label = if who == "sandbox" {
            "the sandbox".to_owned()
        } else {
            format!("component {who:?}")
        };
        // An inline manifest is packaged from the config itself.
        let inline = config
            .component(who)
            .and_then(|c| c.manifest.as_ref())
            .map(|m| BuildSource::Files {
                files: vec![SourceFileContents {
                    path: "manifest.yaml".into(),
                    contents: m.clone(),
                    encoding: None,
                }],
            });
        if let Some(src) = inline {
            jobs.push((who.clone(), src));
            continue;
        }
        match build_source(&label, source, &sources, latest.version) {
            Ok(src) => jobs.push((who.clone(), src)),
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        return Err(Error::bad_request(problems.join("; ")));
    }
    let mut builds = Vec::new();
    for (who, source) in jobs {
        let job_id = JobId::generate();
        // A Pulumi program is packaged as its directory, as it is.
        let pulumi_sandbox = config.sandbox.as_ref().is_some_and(|s| s.pulumi.is_some());
        let package = match config.component(&who) {
            None if who == "sandbox" && pulumi_sandbox => Package::Directory,
            c => package_of(c),
        };
        let payload = BuildJob {
            component: who.clone(),
            repo: format!("{}/{}", repo_part(app.id.as_str()), repo_part(&who)),
            tag: repo_part(job_id.as_str()),
            source,
            package,
        };
        let spec = JobSpec {
            job_id,
            org_id: org.clone(),
            runner_id: runner.clone(),
            kind: BuildJob::KIND.into(),
            payload: serde_json::to_value(&payload)
                .map_err(|e| Error::internal(format!("cannot encode build: {e}")))?,
            timeout_secs: 1800,
            retry: RetryPolicy { max_attempts: 2 },
            created_at_ms: now_ms(),
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        };
        let job = state.keys.sign(spec).await?;
        let b = state
            .store
            .enqueue_build(job, &app.id, latest.version, &who)
            .await?;
        tracing::info!(build = %b.id, app = %app.id, component = %who, "build queued");
        builds.push(b);
    }
    state.wake_runner(&runner);
    Ok((StatusCode::CREATED, Json(BuildList { builds })))
}

async fn list_builds(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<BuildList>, Error> {
    let app = app_of(&state, &auth, &key).await?;
    let builds = state.store.list_builds(&auth.0.org_id, &app.id).await?;
    Ok(Json(BuildList { builds }))
}

async fn get_build(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<BuildInfo>, Error> {
    let id: JobId = super::path_id("build", &raw)?;
    state
        .store
        .get_build(&auth.0.org_id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| Error::not_found(format!("no build {raw:?}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A docker_build's `[env_vars]` reach the build as build arguments,
    /// as Nuon passes them; `[build_args]` win where both name one; its
    /// `dockerfile` and `target` go with them.
    #[test]
    fn a_docker_builds_env_vars_are_build_arguments() {
        let files = [
            nuon_core::app::SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            nuon_core::app::SourceFile::new(
                "components/api.toml",
                "name = \"api\"\ntype = \"docker_build\"\ndockerfile = \"build/Dockerfile\"\ntarget = \"release\"\npath = \"api\"\n\n[env_vars]\nGO_VERSION = \"1.22\"\nMODE = \"env\"\n\n[build_args]\nMODE = \"arg\"\n",
            ),
            nuon_core::app::SourceFile::new("api/build/Dockerfile", "FROM scratch\n"),
        ];
        let (config, d) = nuon_core::app::parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let Package::DockerImage {
            dockerfile,
            target,
            build_args,
        } = package_of(config.component("api"))
        else {
            panic!("not an image");
        };
        assert_eq!(dockerfile, "build/Dockerfile");
        assert_eq!(target.as_deref(), Some("release"));
        assert_eq!(
            build_args,
            [("GO_VERSION", "1.22"), ("MODE", "arg")]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        );
        assert!(matches!(package_of(None), Package::TerraformModule));
    }
}
