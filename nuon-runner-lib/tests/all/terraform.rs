//! The `terraform` plugin on a real runner with real `terraform`: a module
//! from the install's store is planned (the plan kept in the store by
//! digest, its changes summarized), then exactly that plan is applied and
//! the outputs reported.

use std::sync::Arc;

use nuon_core::wire::LogStream;
use nuon_core::{ArtifactRef, Outcome, TerraformAction, TerraformJob};
use nuon_plugins::oci::LayoutStore;
use nuon_plugins::oci::modulepkg::push_module;
use nuon_plugins::terraform::TerraformPlugin;

use crate::fake::{Harness, secs};

const MODULE: &str = r#"
variable "name" {
  type = string
}

resource "terraform_data" "db" {
  input = "db-${var.name}"
}

output "url" {
  value = "postgres://${terraform_data.db.output}:5432"
}
"#;

/// An install's store (its directory kept by the caller) holding
/// [`MODULE`] as `hello/database`, and the module's digest.
async fn module_in_a_store() -> (
    tempfile::TempDir,
    Arc<LayoutStore>,
    nuon_core::artifact::Digest,
) {
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("main.tf"), MODULE).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LayoutStore::open(store_dir.path()).unwrap());
    let digest = push_module(&*store, "hello/database", src.path(), None)
        .await
        .unwrap();
    (store_dir, store, digest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_is_planned_then_exactly_that_plan_is_applied() {
    if which::which("terraform").is_err() {
        let msg = "terraform is not installed: the terraform plugin is not run";
        assert!(
            std::env::var("NUON_TEST_REQUIRE").as_deref() != Ok("all"),
            "{msg}"
        );
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let h = Harness::new();
    let (_store_dir, store, digest) = module_in_a_store().await;

    let mut config = h.config();
    config
        .plugins
        .register(Arc::new(TerraformPlugin::new(store.clone())));
    let runner = h.start(config);

    let job = |action, plan: Option<ArtifactRef>| TerraformJob {
        action,
        module: ArtifactRef {
            repo: "hello/database".into(),
            digest: digest.clone(),
            size: None,
        },
        terraform_version: ">= 1.4".into(),
        vars: [("name".to_owned(), serde_json::json!("acme"))].into(),
        env: Default::default(),
        var_files: Vec::new(),
        backend: None,
        plan,
        policies: Vec::new(),
    };
    let spec_of = |j: &TerraformJob| {
        let mut spec = h.spec(serde_json::to_value(j).unwrap(), 120);
        spec.kind = "terraform".into();
        spec
    };

    let key = h.enqueue_spec(&spec_of(&job(TerraformAction::Plan, None)));
    let planned = h.fake.completion(&key.0, secs(120)).await;
    let logs = h.fake.with(|s| s.texts(&key, LogStream::Stdout).join("\n"));
    assert_eq!(
        planned.result.outcome,
        Outcome::Succeeded,
        "{:?}\n{logs}",
        planned.result
    );
    let changes = &planned.result.outputs["changes"];
    assert_eq!(
        (changes["add"].as_u64(), changes["destroy"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(changes["resources"][0]["address"], "terraform_data.db");
    assert!(
        logs.contains("Plan: 1 to add"),
        "terraform's own output is in the log: {logs}"
    );
    let plan: ArtifactRef = serde_json::from_value(planned.result.outputs["plan"].clone()).unwrap();

    let key = h.enqueue_spec(&spec_of(&job(TerraformAction::Apply, Some(plan.clone()))));
    let applied = h.fake.completion(&key.0, secs(120)).await;
    assert_eq!(
        applied.result.outcome,
        Outcome::Succeeded,
        "{:?}",
        applied.result
    );
    assert_eq!(
        applied.result.outputs["outputs"]["url"],
        "postgres://db-acme:5432"
    );

    // A plan whose bytes changed in the store is never applied.
    let path = store.blob_path("hello/database", &plan.digest).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let key = h.enqueue_spec(&spec_of(&job(TerraformAction::Apply, Some(plan))));
    let refused = h.fake.completion(&key.0, secs(120)).await;
    assert_eq!(refused.result.outcome, Outcome::Failed);
    let reason = refused.result.reason.unwrap_or_default();
    assert!(
        reason.contains("not usable") && reason.contains("digest"),
        "{reason}"
    );
    runner.stop(secs(30)).await.unwrap();
}

/// A runner with no Terraform on its `PATH` installs the version a job
/// pins from a mirror (its SHA256SUMS signature and the zip's checksum
/// checked), plans with it, and tells the control plane it holds it; a
/// corrupt download fails the job with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_without_terraform_installs_the_pinned_version_and_plans_with_it() {
    use nuon_plugins::terraform::install::{Installer, Product};
    use nuon_test_fixtures::mirror::{Flavor, ReleaseMirror};

    if !nuon_test_fixtures::have_tool("terraform", "serve it from a release mirror") {
        return;
    }
    let machine = nuon_plugins::terraform::all_in(std::env::var_os("PATH"))
        .into_iter()
        .find(|t| t.path.ends_with("terraform"))
        .expect("terraform answers its version");
    let v = machine.version.to_string();
    let Some(mirror) = ReleaseMirror::start(Flavor::Terraform, &v, &machine.path).unwrap() else {
        return;
    };
    let h = Harness::new();
    let (_store_dir, store, digest) = module_in_a_store().await;
    let tools = tempfile::tempdir().unwrap();
    let installer = Installer::new(Product::Terraform, tools.path())
        .mirror(&mirror.url)
        .key(&std::fs::read(&mirror.key).unwrap())
        .unwrap();
    let mut config = h.config();
    config.plugins.register(Arc::new(
        TerraformPlugin::new(store.clone())
            .search_path("/nonexistent")
            .installer(installer),
    ));
    let runner = h.start(config);
    let plan = || {
        let job = TerraformJob {
            action: TerraformAction::Plan,
            module: ArtifactRef {
                repo: "hello/database".into(),
                digest: digest.clone(),
                size: None,
            },
            terraform_version: v.clone(),
            vars: [("name".to_owned(), serde_json::json!("acme"))].into(),
            env: Default::default(),
            var_files: Vec::new(),
            backend: None,
            plan: None,
            policies: Vec::new(),
        };
        let mut spec = h.spec(serde_json::to_value(&job).unwrap(), 300);
        spec.kind = "terraform".into();
        spec
    };

    // A corrupt zip: the job fails and says why; nothing is installed.
    mirror.corrupt_zip().unwrap();
    let key = h.enqueue_spec(&plan());
    let done = h.fake.completion(&key.0, secs(300)).await;
    assert_eq!(done.result.outcome, Outcome::Failed, "{:?}", done.result);
    let reason = done.result.reason.unwrap_or_default();
    assert!(
        reason.contains("does not match") && reason.contains(&format!("terraform_version \"{v}\"")),
        "{reason}"
    );

    // The release as published: installed, then planned with.
    mirror.republish(&machine.path).unwrap();
    let key = h.enqueue_spec(&plan());
    let done = h.fake.completion(&key.0, secs(300)).await;
    let logs = h.fake.with(|s| {
        [LogStream::Stdout, LogStream::Stderr, LogStream::System]
            .iter()
            .flat_map(|st| s.texts(&key, *st))
            .collect::<Vec<_>>()
            .join("\n")
    });
    assert_eq!(
        done.result.outcome,
        Outcome::Succeeded,
        "{:?}\n{logs}",
        done.result
    );
    assert!(
        logs.contains(&format!("installing terraform {v}")),
        "{logs}"
    );
    assert!(logs.contains("signature good"), "{logs}");
    assert!(logs.contains("Plan: 1 to add"), "{logs}");
    let installed = tools.path().join(format!("terraform/{v}/terraform"));
    assert!(
        logs.contains(&format!("using {}", installed.display())),
        "{logs}"
    );

    // The runner tells the control plane what it holds.
    let told = crate::fake::within("a claim telling the installed version", secs(60), async {
        loop {
            let seen = h.fake.with(|s| {
                s.claims.iter().rev().find_map(|c| {
                    let t = c.telemetry.as_ref()?;
                    t.tools.iter().find(|t| t.installed).cloned()
                })
            });
            if let Some(t) = seen {
                return t;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(
        (told.name.as_str(), told.version.as_str()),
        ("terraform", v.as_str())
    );
    runner.stop(secs(30)).await.unwrap();
}

/// A module using the real `hashicorp/aws` provider (from the machine's
/// filesystem mirror): the first job installs it into the runner's
/// provider cache and the module's lock file is kept; the next job links
/// it from the cache, and the checksum Terraform records for it is
/// checked against the kept lock's (a changed cached package fails the job
/// by name); a kept lock file that no longer fits is dropped and the init
/// runs again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_are_installed_once_into_the_runners_cache() {
    if !nuon_test_fixtures::have_tool("terraform", "install providers") {
        return;
    }
    let Some(mirror) = nuon_test_fixtures::aws_provider_mirror("install the AWS provider") else {
        return;
    };
    let h = Harness::new();
    let src = tempfile::tempdir().unwrap();
    std::fs::write(
        src.path().join("main.tf"),
        r#"terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}
provider "aws" {
  region                      = "us-east-1"
  access_key                  = "test"
  secret_key                  = "test"
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
}
"#,
    )
    .unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LayoutStore::open(store_dir.path()).unwrap());
    let digest = push_module(&*store, "app/bucket", src.path(), None)
        .await
        .unwrap();
    let cli = tempfile::tempdir().unwrap();
    let rc = nuon_test_fixtures::provider_mirror_config(&mirror, cli.path()).unwrap();
    let tools = tempfile::tempdir().unwrap();
    let cache = tools.path().join("terraform-providers");
    let mut config = h.config();
    config.plugins.register(Arc::new(
        TerraformPlugin::new(store.clone()).provider_cache(&cache),
    ));
    let runner = h.start(config);
    let plan = || {
        let job = TerraformJob {
            action: TerraformAction::Plan,
            module: ArtifactRef {
                repo: "app/bucket".into(),
                digest: digest.clone(),
                size: None,
            },
            terraform_version: ">= 1.5".into(),
            vars: Default::default(),
            env: [(
                "TF_CLI_CONFIG_FILE".to_owned(),
                rc.to_string_lossy().into_owned(),
            )]
            .into(),
            var_files: Vec::new(),
            backend: None,
            plan: None,
            policies: Vec::new(),
        };
        let mut spec = h.spec(serde_json::to_value(&job).unwrap(), 600);
        spec.kind = "terraform".into();
        spec
    };
    let run = |label: &'static str| {
        let key = h.enqueue_spec(&plan());
        let h = &h;
        async move {
            let done = h.fake.completion(&key.0, secs(600)).await;
            let logs = h.fake.with(|s| {
                let mut all = s.texts(&key, LogStream::Stdout);
                all.extend(s.texts(&key, LogStream::System));
                all.join("\n")
            });
            assert_eq!(
                done.result.outcome,
                Outcome::Succeeded,
                "{label}: {:?}\n{logs}",
                done.result
            );
            logs
        }
    };

    let first = run("first").await;
    assert!(
        first.contains("Installing hashicorp/aws v5.100.0"),
        "{first}"
    );
    let cached = cache.join("plugins/registry.terraform.io/hashicorp/aws/5.100.0");
    assert!(cached.is_dir(), "the provider is in the cache");
    let kept = cache.join("locks/app_bucket.terraform.lock.hcl");
    let lock = std::fs::read_to_string(&kept).unwrap();
    assert!(
        lock.contains("registry.terraform.io/hashicorp/aws") && lock.contains("h1:"),
        "{lock}"
    );

    let second = run("second").await;
    assert!(
        second.contains("Using hashicorp/aws v5.100.0 from the shared cache directory"),
        "the second job links it from the cache: {second}"
    );

    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        lock,
        "the kept lock stays as its first install wrote it"
    );

    // A cached package that changed since it was installed: the checksum
    // Terraform records for it is not the kept one, and the job fails by
    // name (the kept lock is left as it was).
    let platform = cached.join("linux_amd64");
    std::fs::remove_file(&platform)
        .or_else(|_| std::fs::remove_dir_all(&platform))
        .unwrap();
    std::fs::create_dir(&platform).unwrap();
    std::fs::write(
        platform.join("terraform-provider-aws_v5.100.0_x5"),
        "#!/bin/sh\nexit 1\n",
    )
    .unwrap();
    let key = h.enqueue_spec(&plan());
    let done = h.fake.completion(&key.0, secs(600)).await;
    assert_eq!(done.result.outcome, Outcome::Failed, "{:?}", done.result);
    let reason = done.result.reason.clone().unwrap_or_default();
    assert!(
        reason.contains(
            "the runner's provider cache holds registry.terraform.io/hashicorp/aws 5.100.0 with checksum h1:"
        ) && reason.contains("was changed"),
        "{reason}"
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), lock);
    std::fs::remove_dir_all(&cached).unwrap();

    // A kept lock file that no longer fits: dropped, and the init again.
    std::fs::write(&kept, "this is not HCL {").unwrap();
    let third = run("third").await;
    assert!(
        third.contains("does not fit it now: initialising without it"),
        "{third}"
    );
    assert!(std::fs::read_to_string(&kept).unwrap().contains("h1:"));
    runner.stop(secs(30)).await.unwrap();
}
