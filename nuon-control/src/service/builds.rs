//! Builds of an app's components on the org's build runner: which
//! components of the latest config build, where each one's source comes
//! from, and how what it built is packaged.

use nuon_core::app::{ComponentSpec, Source, source_dir};
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{BuildInfo, BuildList, ConfigFile, CreateBuilds, ErrorCode};
use nuon_core::{
    BuildJob, BuildSource, Job, JobId, JobSpec, Package, RetryPolicy, SourceFileContents, now_ms,
};

use super::{Caller, Services, require_deployer};
use crate::engine::render::deployable;
use crate::error::Error;

impl Services<'_> {
    /// `POST /v1/apps/{id}/builds`: builds the app's components (or one)
    /// of its latest config on the org's build runner; deployers and
    /// admins. Recorded in the audit trail, refusals included.
    pub(crate) async fn create_builds(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateBuilds,
    ) -> Result<BuildList, Error> {
        let result = self.build(caller, key, req).await;
        self.audited_at::<ep::CreateBuilds, _>(caller, &[key], result)
            .await
    }

    async fn build(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateBuilds,
    ) -> Result<BuildList, Error> {
        require_deployer(&caller.principal)?;
        let org = &caller.principal.org_id;
        let app = self.find_app(caller, key).await?;
        let latest = self.latest_config(caller, &app).await?;
        let stored = self
            .store
            .get_config(org, &app.id, Some(latest.version))
            .await?
            .ok_or_else(|| Error::not_found("the config version vanished"))?;
        let sources =
            crate::keys::open_config(self.secrets, &app.id, "sources", &stored.sources_json)
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
        let runner = self.store.build_runner(org).await?.ok_or_else(|| {
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
                .and_then(|c| c.manifest()?.manifest.as_ref())
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
            let job = self.keys.sign(spec).await?;
            let b = self
                .store
                .enqueue_build(job, &app.id, latest.version, &who)
                .await?;
            tracing::info!(build = %b.id, app = %app.id, component = %who, "build queued");
            builds.push(b);
        }
        self.wakes.runner(&runner);
        Ok(BuildList { builds })
    }

    /// `GET /v1/apps/{id}/builds`: the app's builds.
    pub(crate) async fn list_builds(&self, caller: &Caller, key: &str) -> Result<BuildList, Error> {
        let app = self.find_app(caller, key).await?;
        let builds = self
            .store
            .list_builds(&caller.principal.org_id, &app.id)
            .await?;
        Ok(BuildList { builds })
    }

    /// `GET /v1/builds/{id}`: one build.
    pub(crate) async fn get_build(&self, caller: &Caller, raw: &str) -> Result<BuildInfo, Error> {
        let id: JobId = raw
            .parse()
            .map_err(|_| Error::not_found(format!("no build {raw:?}")))?;
        self.store
            .get_build(&caller.principal.org_id, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("no build {raw:?}")))
    }
}

/// How a build packages what it built: by the component's kind (the
/// sandbox's, and a module's, as a Terraform module).
fn package_of(component: Option<&nuon_core::app::Component>) -> Package {
    match component.map(|c| &c.spec) {
        Some(ComponentSpec::HelmChart(_)) => Package::HelmChart,
        Some(ComponentSpec::Wasm(_)) => Package::WasmPlugin,
        Some(ComponentSpec::KubernetesManifest(_) | ComponentSpec::Pulumi(_)) => Package::Directory,
        Some(ComponentSpec::DockerBuild(b)) => Package::DockerImage {
            dockerfile: b.dockerfile.clone(),
            target: b.target.clone(),
            // [env_vars] are build arguments, as in Nuon; [build_args] win.
            build_args: b
                .env_vars
                .iter()
                .chain(&b.build_args)
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
        let (config, d) = nuon_appconfig::parse(&files);
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
