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
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("main.tf"), MODULE).unwrap();
    let store_dir = tempfile::tempdir().unwrap();
    let store = Arc::new(LayoutStore::open(store_dir.path()).unwrap());
    let digest = push_module(&*store, "hello/database", src.path(), None)
        .await
        .unwrap();

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
