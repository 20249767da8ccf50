//! A customer's AWS account, for real: the runner's `--credentials aws`
//! against moto's AWS API on loopback with IAM enforced, real Terraform and
//! the real `hashicorp/aws` provider (from the machine's filesystem
//! mirror). Each job acts as its operation's role, through `sts:AssumeRole`
//! with the AWS CLI; what a role may not do, IAM refuses.

use nuon_core::workflow::WorkflowKind;
use nuon_test_fixtures::moto::Moto;

use crate::deploy::{METADATA, Manual, run_workflow, step, walk};

/// A module making one S3 bucket, tagged with the install.
fn bucket_module(name: &str) -> String {
    format!(
        r#"terraform {{
  required_providers {{
    aws = {{ source = "hashicorp/aws", version = "5.100.0" }}
  }}
}}
provider "aws" {{
  s3_use_path_style           = true
  skip_credentials_validation = true
  skip_requesting_account_id  = true
  skip_metadata_api_check     = true
}}
variable "install" {{ type = string }}
resource "aws_s3_bucket" "b" {{
  bucket = "{name}-${{var.install}}"
  tags   = {{ "nuon:install" = var.install }}
}}
output "bucket" {{
  value = aws_s3_bucket.b.bucket
}}
"#
    )
}

/// A component `name` (its module in `./name`) whose AWS calls go to the
/// fake account, with `extra` TOML appended.
fn component(name: &str, rc: &str, endpoint: &str, extra: &str) -> String {
    format!(
        "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"{name}\"\n{extra}\n[vars]\ninstall = \"{{{{ .nuon.install.name }}}}\"\n\n[env_vars]\nTF_CLI_CONFIG_FILE = \"{rc}\"\nAWS_ENDPOINT_URL = \"{endpoint}\"\nAWS_REGION = \"us-east-1\"\n"
    )
}

/// Provision with the runner's `--credentials aws`: the bucket component
/// is made as the provision role (the only principal allowed to create
/// buckets); a component whose deploy runs as the deprovision role
/// (`[operation_roles]`) fails with IAM's `AccessDenied` in the step's
/// error, and its bucket is not made; the runner's own identity may only
/// assume roles; a day-two deploy that replaces the bucket runs as the
/// maintenance role, which may not delete, and is refused; a teardown as
/// the deprovision role removes the bucket, and the tagging API then lists
/// nothing of the install; no job's session token is on the runner's or
/// the control plane's disk.
#[test]
fn each_job_acts_as_its_operations_role_and_iam_refuses_what_it_may_not_do() {
    if !nuon_tests::have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(mirror) = nuon_test_fixtures::aws_provider_mirror("apply AWS resources") else {
        return;
    };
    let Some(moto) = Moto::start().unwrap() else {
        return;
    };
    // The customer's account: one role per operation, and the runner's
    // own user, which may only assume them.
    let runner_keys = moto.user("runner", &["sts:AssumeRole"]).unwrap();
    let runner = format!(
        "arn:aws:iam::{}:user/runner",
        nuon_test_fixtures::moto::ACCOUNT
    );
    let provision = moto.role("demo-provision", &runner, &["s3:*"]).unwrap();
    // Reading a bucket is `HeadBucket`, which moto authorizes as
    // `s3:HeadBucket` (AWS: `s3:ListBucket`); a role that may not read it
    // has the provider drop the bucket from its state as gone.
    let read = ["s3:Get*", "s3:List*", "s3:HeadBucket"];
    let maintenance = moto
        .role(
            "demo-maintenance",
            &runner,
            &[&read[..], &["s3:Put*"]].concat(),
        )
        .unwrap();
    let deprovision = moto
        .role(
            "demo-deprovision",
            &runner,
            &[&read[..], &["s3:DeleteBucket"]].concat(),
        )
        .unwrap();
    let err = moto
        .aws_as(
            &runner_keys,
            &["s3api", "create-bucket", "--bucket", "sneaky"],
        )
        .unwrap_err();
    assert!(err.to_string().contains("AccessDenied"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let rc = nuon_test_fixtures::provider_mirror_config(&mirror, dir.path()).unwrap();
    let rc = rc.to_string_lossy().into_owned();
    let role = |kind: &str, what: &str| {
        format!(
            "type = \"{kind}\"\nname = \"{{{{ .nuon.install.name }}}}-{kind}\"\ndescription = \"{what}\"\n"
        )
    };
    let files: Vec<(String, String)> = vec![
        (METADATA.0.into(), METADATA.1.into()),
        (
            "permissions/provision.toml".into(),
            role("provision", "makes"),
        ),
        (
            "permissions/maintenance.toml".into(),
            role("maintenance", "changes"),
        ),
        (
            "permissions/deprovision.toml".into(),
            role("deprovision", "removes"),
        ),
        (
            "components/data.toml".into(),
            component("data", &rc, &moto.url, ""),
        ),
        ("data/main.tf".into(), bucket_module("data")),
        (
            "components/intruder.toml".into(),
            component(
                "intruder",
                &rc,
                &moto.url,
                "dependencies = [\"data\"]\n\n[operation_roles]\ndeploy = \"{{ .nuon.install.name }}-deprovision\"\n",
            ),
        ),
        ("intruder/main.tf".into(), bucket_module("intruder")),
    ];
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut m = Manual::start(&files);
    let outputs = format!(
        "account_id={} provision_iam_role_arn={provision} maintenance_iam_role_arn={maintenance} deprovision_iam_role_arn={deprovision}",
        nuon_test_fixtures::moto::ACCOUNT
    );
    let mut env = moto.env(&runner_keys);
    env.retain(|(k, _)| k != "AWS_REGION");
    m.restart_runner_with_env(&["--credentials", "aws", "--stack-outputs", &outputs], env);
    let c = m.cp.client();

    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "failed", "{w:#?}");
    assert!(step(&w, "apply data").status == "succeeded", "{w:#?}");
    let refused = step(&w, "apply intruder");
    let reason = refused.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("AccessDenied") || reason.contains("Access Denied"),
        "the deprovision role may not create a bucket: {reason}"
    );
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert!(buckets.contains("data-demo"), "{buckets}");
    assert!(!buckets.contains("intruder-demo"), "{buckets}");

    // Drift: a tag changed behind the platform's back (as the customer's
    // administrator) is found by the next drift check, by attribute.
    moto.aws(&[
        "s3api",
        "put-bucket-tagging",
        "--bucket",
        "data-demo",
        "--tagging",
        "TagSet=[{Key=nuon:install,Value=tampered}]",
    ])
    .unwrap();
    let out =
        m.cp.nuon(&["installs", "drift", "demo", "--check", "data", "--wait"]);
    assert!(out.status.success(), "{}", crate::deploy::text(&out));
    let d = nuon_tests::rt().block_on(c.install_drift("demo")).unwrap();
    let data = d.targets.iter().find(|t| t.target == "data").unwrap();
    assert_eq!(data.status, "drifted", "{data:?}");
    assert_eq!(
        data.changes["drifted"][0]["address"], "aws_s3_bucket.b",
        "{data:?}"
    );
    let attributes = data.changes["drifted"][0]["attributes"].to_string();
    assert!(attributes.contains("tags.nuon:install"), "{attributes}");
    let shown = crate::deploy::ok(m.cp.nuon(&["installs", "drift", "demo"]));
    assert!(
        shown.contains("changed outside: aws_s3_bucket.b (") && shown.contains("tags.nuon:install"),
        "{shown}"
    );

    // Day two, config v2: without the intruder, and the bucket renamed (a
    // replacement: the old one deleted first). A deploy runs as the
    // maintenance role, which may not delete: IAM refuses, nothing goes.
    let app = m.dir.path().join("app");
    std::fs::remove_file(app.join("components/intruder.toml")).unwrap();
    std::fs::write(app.join("data/main.tf"), bucket_module("data2")).unwrap();
    crate::deploy::ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    crate::deploy::ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "failed", "{w:#?}");
    let reason = step(&w, "apply data").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("AccessDenied") || reason.contains("Access Denied"),
        "the maintenance role may not delete a bucket: {reason}"
    );
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert!(buckets.contains("data-demo"), "{buckets}");

    // A teardown, as the deprovision role, removes what provision made.
    let w = run_workflow(&c, WorkflowKind::Teardown);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert_eq!(
        step(&w, "plan destroy data").outputs["changes"]["destroy"],
        1,
        "{w:#?}"
    );
    assert!(!buckets.contains("data-demo"), "{buckets}");
    // Nothing the install made is left, as the tagging API lists it.
    let left = moto
        .aws(&[
            "resourcegroupstaggingapi",
            "get-resources",
            "--tag-filters",
            "Key=nuon:install",
        ])
        .unwrap();
    let left: serde_json::Value = serde_json::from_str(&left).unwrap();
    assert_eq!(
        left["ResourceTagMappingList"],
        serde_json::json!([]),
        "{left}"
    );

    // The temporary credentials of the jobs never reached a disk the
    // runner or the control plane writes (moto's session tokens all start
    // with the same bytes).
    let token = b"FQoGZXIvYXdz";
    for dir in [m.runner_work_dir(), m.cp.data_dir.clone()] {
        for f in walk(&dir) {
            let Ok(bytes) = std::fs::read(&f) else {
                continue;
            };
            assert!(
                !bytes.windows(token.len()).any(|w| w == token),
                "a job's session token is in {}",
                f.display()
            );
        }
    }
}
