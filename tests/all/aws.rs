//! A customer's AWS account, for real: the runner's `--credentials aws`
//! against moto's AWS API on loopback with IAM enforced, real Terraform and
//! the real `hashicorp/aws` provider (from the machine's filesystem
//! mirror). Each job acts as its operation's role, through `sts:AssumeRole`
//! with the AWS CLI; what a role may not do, IAM refuses.

use nuon_core::workflow::WorkflowKind;
use nuon_test_fixtures::moto::Moto;

use crate::deploy::{METADATA, Manual, run_workflow_for, step, walk};

/// A module making one S3 bucket, tagged with the install.
/// How long a workflow of the real AWS provider may take here (eight
/// Terraform runs of a 700 MB provider on a 2-core machine running other
/// tests).
const CLOUD_WORKFLOW: std::time::Duration = std::time::Duration::from_secs(600);

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

/// Real Terraform, the real AWS provider's mirror and moto's account with
/// IAM enforced; `None` (a loud skip) when one is missing.
fn fake_account() -> Option<(std::path::PathBuf, Moto)> {
    if !nuon_tests::have_tool("terraform", "run Terraform") {
        return None;
    }
    let mirror = nuon_test_fixtures::aws_provider_mirror("apply AWS resources")?;
    Some((mirror, Moto::start().unwrap()?))
}

/// The tagging API lists nothing of an install but what AWS keeps showing
/// a while after it is gone (a terminated instance, a deleted NAT
/// gateway); anything else is named.
fn assert_nothing_left(moto: &Moto) {
    let left = moto
        .aws(&[
            "resourcegroupstaggingapi",
            "get-resources",
            "--tag-filters",
            "Key=nuon:install",
        ])
        .unwrap();
    let left: serde_json::Value = serde_json::from_str(&left).unwrap();
    for r in left["ResourceTagMappingList"].as_array().unwrap() {
        let arn = r["ResourceARN"].as_str().unwrap();
        let id = arn.rsplit('/').next().unwrap();
        let state = if arn.contains(":instance/") {
            let d = moto
                .aws(&["ec2", "describe-instances", "--instance-ids", id])
                .unwrap();
            let d: serde_json::Value = serde_json::from_str(&d).unwrap();
            d["Reservations"][0]["Instances"][0]["State"]["Name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else if arn.contains(":natgateway/") {
            let d = moto
                .aws(&["ec2", "describe-nat-gateways", "--nat-gateway-ids", id])
                .unwrap();
            let d: serde_json::Value = serde_json::from_str(&d).unwrap();
            d["NatGateways"][0]["State"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else {
            String::new()
        };
        assert!(
            ["terminated", "shutting-down", "deleted", "deleting"].contains(&state.as_str()),
            "left in the account after the stack's destroy: {arn} ({state})"
        );
    }
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
    let Some((mirror, moto)) = fake_account() else {
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
    // A break-glass role: made by the stack, assumable only once the
    // customer turns it on on their runner.
    let emergency = moto
        .role("demo-emergency", &runner, &["sts:GetCallerIdentity"])
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
        (
            "break_glass.toml".into(),
            "[[role]]\nname = \"{{ .nuon.install.name }}-emergency\"\ndescription = \"in an emergency\"\n".into(),
        ),
        (
            "actions/emergency.toml".into(),
            "name = \"emergency\"\ntimeout = \"1m\"\nbreak_glass_role = \"{{ .nuon.install.name }}-emergency\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"who\"\ncommand = \"echo acting as $(aws sts get-caller-identity --query Arn --output text); sleep 4; echo still as $(aws sts get-caller-identity --query Arn --output text)\"\n".into(),
        ),
    ];
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut m = Manual::start(&files);
    let outputs = format!(
        "account_id={} provision_iam_role_arn={provision} maintenance_iam_role_arn={maintenance} deprovision_iam_role_arn={deprovision} break_glass_iam_role_arn_emergency={emergency}",
        nuon_test_fixtures::moto::ACCOUNT
    );
    let mut env = moto.env(&runner_keys);
    env.retain(|(k, _)| k != "AWS_REGION");
    // Sessions of 15 minutes, renewed in their last 897 s: a job of more
    // than 3 s outlives its first keys.
    let args = [
        "--credentials",
        "aws",
        "--stack-outputs",
        &outputs,
        "--aws-session-duration",
        "900",
        "--aws-renew-before",
        "897",
    ];
    m.restart_runner_with_env(&args, env);
    let c = m.cp.client();

    let w = run_workflow_for(&c, WorkflowKind::Provision, CLOUD_WORKFLOW);
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

    // The break-glass role is refused until the customer turns it on.
    let run = |m: &Manual| {
        m.cp.nuon(&[
            "installs",
            "run-action",
            "demo",
            "emergency",
            "--wait",
            "--logs",
        ])
    };
    let refused = run(&m);
    let t = crate::deploy::text(&refused);
    assert!(!refused.status.success(), "{t}");
    assert!(
        t.contains("break-glass role demo-emergency is off")
            && t.contains("nuon-runner break-glass enable demo-emergency"),
        "{t}"
    );
    let on = nuon_tests::ours("nuon-runner")
        .args(["break-glass", "enable", "demo-emergency", "--work-dir"])
        .arg(m.runner_work_dir())
        .output()
        .unwrap();
    assert!(on.status.success(), "{}", crate::deploy::text(&on));
    let ran = run(&m);
    let t = crate::deploy::text(&ran);
    assert!(ran.status.success(), "{t}");
    let arn = format!(
        "arn:aws:sts::{}:assumed-role/demo-emergency/nuon-job_",
        nuon_test_fixtures::moto::ACCOUNT
    );
    assert!(t.contains(&format!("acting as {arn}")), "{t}");
    // The job outlived its first session: the runner assumed the role
    // again when the AWS CLI asked (its journal says so), and the job
    // still acts as the break-glass role.
    assert!(t.contains(&format!("still as {arn}")), "{t}");
    let journal = std::fs::read_to_string(m.runner_work_dir().join("audit.jsonl")).unwrap();
    let said = |outcome: &str| {
        journal
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["action"] == "job.credentials" && e["outcome"] == outcome)
            .filter(|e| {
                e["detail"]
                    .as_str()
                    .unwrap_or("")
                    .contains("role/demo-emergency")
            })
            .count()
    };
    assert_eq!(said("assumed"), 1, "{journal}");
    assert!(said("renewed") >= 1, "{journal}");

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
    let w = run_workflow_for(&c, WorkflowKind::Deploy, CLOUD_WORKFLOW);
    assert_eq!(w.status, "failed", "{w:#?}");
    let reason = step(&w, "apply data").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("AccessDenied") || reason.contains("Access Denied"),
        "the maintenance role may not delete a bucket: {reason}"
    );
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert!(buckets.contains("data-demo"), "{buckets}");

    // A teardown, as the deprovision role, removes what provision made.
    let w = run_workflow_for(&c, WorkflowKind::Teardown, CLOUD_WORKFLOW);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert_eq!(
        step(&w, "plan destroy data").outputs["changes"]["destroy"],
        1,
        "{w:#?}"
    );
    assert!(!buckets.contains("data-demo"), "{buckets}");
    // Nothing the install made is left, as the tagging API lists it.
    assert_nothing_left(&moto);

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

/// `examples/apps/aws`'s files, as `Manual::start` takes them.
fn aws_example() -> Vec<(String, String)> {
    let root = nuon_tests::manifest_dir().join("../examples/apps/aws");
    walk(&root)
        .into_iter()
        .map(|f| {
            let rel = f
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            (rel, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// `terraform ARGS` in `dir` as the customer (`env`): its output, or a
/// panic with it.
fn terraform(dir: &std::path::Path, env: &[(String, String)], args: &[&str]) -> String {
    let out = std::process::Command::new("terraform")
        .args(args)
        .arg("-no-color")
        .current_dir(dir)
        .env_remove("AWS_PROFILE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("TF_IN_AUTOMATION", "1")
        .output()
        .unwrap();
    let text = crate::deploy::text(&out);
    assert!(out.status.success(), "terraform {}: {text}", args.join(" "));
    text
}

/// The example app, end to end in a fake AWS account: the customer
/// applies the install stack in its Terraform form with their own
/// credentials, entering `db_password`; the runner the stack configured
/// (its launch template's user data: the outputs and the token's secret)
/// phones home, and the provision makes every resource of the sandbox and
/// the three components, each job as its operation's role; the action
/// reads `db_password` from the customer's Secrets Manager, and no form
/// of the value is in the control plane's data dir, API or logs. A tag
/// changed by hand is drift. After teardown, deprovision and the stack's
/// destroy, the tagging API lists nothing of the install.
#[test]
fn the_example_app_deploys_into_a_fake_account_from_a_terraform_stack_with_the_customers_secret() {
    let Some((mirror, moto)) = fake_account() else {
        return;
    };
    let account = nuon_test_fixtures::moto::ACCOUNT;
    // A host of the customer's runs the runner (moto runs no instance):
    // its own user may only assume roles.
    let host = moto.user("runner-host", &["sts:AssumeRole"]).unwrap();
    let host_arn = format!("arn:aws:iam::{account}:user/runner-host");

    let files = aws_example();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let mut m = Manual::start(&files);
    // No hand-started runner: the stack brings it.
    m.stop_runner();
    let c = m.cp.client();
    let install = nuon_tests::rt().block_on(c.get_install("demo")).unwrap();
    // The vendor cannot give the customer's secret.
    let typed = m.dir.path().join("typed");
    std::fs::write(&typed, "vendor-typed-it").unwrap();
    let refused = m.cp.nuon(&[
        "installs",
        "secrets",
        "set",
        "demo",
        "db_password",
        "--from-file",
        typed.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    assert!(
        crate::deploy::text(&refused).contains("is held by the customer"),
        "{}",
        crate::deploy::text(&refused)
    );

    let listed = crate::deploy::ok(m.cp.nuon(&["installs", "secrets", "list", "demo", "--json"]));
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed["secrets"][0]["held_by"], "customer", "{listed}");
    assert_eq!(listed["secrets"][0]["set"], false, "{listed}");

    // The customer's side: the stack in Terraform form, applied with the
    // administrator's keys.
    let stack_dir = m.dir.path().join("stack");
    crate::deploy::ok(m.cp.nuon(&[
        "installs",
        "stack",
        "demo",
        "--format",
        "terraform",
        "--out",
        stack_dir.to_str().unwrap(),
    ]));
    let rc = nuon_test_fixtures::provider_mirror_config(&mirror, m.dir.path()).unwrap();
    let mut admin = moto.env(&moto.admin);
    admin.push((
        "TF_CLI_CONFIG_FILE".into(),
        rc.to_string_lossy().into_owned(),
    ));
    let image = moto
        .aws(&["ec2", "describe-images", "--owners", "amazon"])
        .unwrap();
    let image: serde_json::Value = serde_json::from_str(&image).unwrap();
    let image = image["Images"][0]["ImageId"].as_str().unwrap().to_owned();
    let password = "Customer-Only-Pa55word-7f3a9c";
    terraform(&stack_dir, &admin, &["init", "-input=false"]);
    terraform(
        &stack_dir,
        &admin,
        &[
            "apply",
            "-auto-approve",
            "-input=false",
            &format!("-var=secret_db_password={password}"),
            &format!("-var=runner_principals=[\"{host_arn}\"]"),
            &format!("-var=runner_image_id={image}"),
        ],
    );

    // What the stack told the runner: its launch template's user data.
    let templates: serde_json::Value =
        serde_json::from_str(&moto.aws(&["ec2", "describe-launch-templates"]).unwrap()).unwrap();
    let template = templates["LaunchTemplates"][0]["LaunchTemplateName"]
        .as_str()
        .unwrap();
    let lt = moto
        .aws(&[
            "ec2",
            "describe-launch-template-versions",
            "--launch-template-name",
            template,
        ])
        .unwrap();
    let lt: serde_json::Value = serde_json::from_str(&lt).unwrap();
    use base64::Engine as _;
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(
            lt["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
    let user_data = String::from_utf8(user_data).unwrap();
    let line = |key: &str| {
        user_data
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in the user data:\n{user_data}"))
            .trim_matches('"')
            .to_owned()
    };
    let outputs = line("NUON_RUNNER_STACK_OUTPUTS");
    assert_eq!(line("NUON_RUNNER_API_URL"), m.cp.runner_url);
    assert!(
        outputs.contains(&format!(
            "db_password_arn=arn:aws:secretsmanager:us-east-1:{account}:secret:{}/db_password",
            install.id
        )),
        "{outputs}"
    );
    // The token, from its secret, as the runner's role (which the host may
    // assume, and which may read it).
    let secret_id = user_data
        .split("--secret-id ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_owned();
    let runner_role = outputs
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("runner_iam_role_arn="))
        .unwrap()
        .to_owned();
    // moto authorizes Secrets Manager calls against resource `*` only (it
    // knows the ARN of IAM, STS and SQS requests alone), so the stack's
    // statements scoped to the token's and the install's secrets' ARNs
    // cannot match there: the same read is granted on `*` to those roles.
    let runner_name = runner_role.rsplit('/').next().unwrap().to_owned();
    for role in [runner_name.clone()]
        .into_iter()
        .chain(["provision", "maintenance", "deprovision"].map(|k| format!("{}-{k}", install.id)))
    {
        moto.aws(&[
            "iam",
            "put-role-policy",
            "--role-name",
            &role,
            "--policy-name",
            "moto-secretsmanager-resource",
            "--policy-document",
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"secretsmanager:GetSecretValue","Resource":"*"}]}"#,
        ])
        .unwrap();
    }
    let session = moto
        .aws_as(
            &host,
            &[
                "sts",
                "assume-role",
                "--role-arn",
                &runner_role,
                "--role-session-name",
                "host",
            ],
        )
        .unwrap();
    let session: serde_json::Value = serde_json::from_str(&session).unwrap();
    let runner_keys = nuon_test_fixtures::moto::Keys {
        id: session["Credentials"]["AccessKeyId"]
            .as_str()
            .unwrap()
            .into(),
        secret: session["Credentials"]["SecretAccessKey"]
            .as_str()
            .unwrap()
            .into(),
    };
    let token_cmd = std::process::Command::new("aws")
        .args([
            "secretsmanager",
            "get-secret-value",
            "--secret-id",
            &secret_id,
            "--query",
            "SecretString",
            "--output",
            "text",
        ])
        .envs(moto.env(&runner_keys))
        .env(
            "AWS_SESSION_TOKEN",
            session["Credentials"]["SessionToken"].as_str().unwrap(),
        )
        .output()
        .unwrap();
    assert!(
        token_cmd.status.success(),
        "{}",
        crate::deploy::text(&token_cmd)
    );
    let token = String::from_utf8(token_cmd.stdout)
        .unwrap()
        .trim()
        .to_owned();
    assert!(token.starts_with("stk_"), "{token}");

    // The runner, as the stack configured it, phones home.
    let work = m.dir.path().join("aws-runner");
    let log = std::fs::File::create(m.dir.path().join("aws-runner.log")).unwrap();
    let mut env = moto.env(&host);
    env.push((
        "TF_CLI_CONFIG_FILE".into(),
        rc.to_string_lossy().into_owned(),
    ));
    let runner = crate::stack::phone_home(&m, &work, &token)
        .args(["--credentials", "aws", "--stack-outputs", &outputs])
        .envs(m.runner_store_env())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let _runner = crate::stack::KillOnDrop(runner);
    let runner_log =
        || std::fs::read_to_string(m.dir.path().join("aws-runner.log")).unwrap_or_default();

    let w = run_workflow_for(&c, WorkflowKind::Provision, CLOUD_WORKFLOW);
    assert_eq!(w.status, "succeeded", "{w:#?}\n{}", runner_log());
    // The control plane knows where the secret is, and says who holds it.
    let listed = nuon_tests::rt()
        .block_on(c.install_secrets("demo"))
        .unwrap();
    let s = &listed.secrets[0];
    assert!(s.set && s.held_by == "customer", "{listed:?}");
    assert!(
        s.location
            .as_deref()
            .unwrap_or_default()
            .contains(":secret:"),
        "{listed:?}"
    );
    let shown = crate::deploy::ok(m.cp.nuon(&["installs", "secrets", "list", "demo"]));
    assert!(
        shown.contains("in the customer's account: arn:aws:secretsmanager:"),
        "{shown}"
    );
    let buckets = moto.aws(&["s3api", "list-buckets"]).unwrap();
    assert!(
        buckets.contains(&format!("data-{}", install.id)),
        "{buckets}"
    );
    let queues = moto.aws(&["sqs", "list-queues"]).unwrap();
    assert!(
        queues.contains(&format!("events-{}", install.id)),
        "{queues}"
    );
    let roles = moto.aws(&["iam", "list-roles"]).unwrap();
    assert!(roles.contains(&format!("app-{}", install.id)), "{roles}");
    let vpcs = moto
        .aws(&[
            "ec2",
            "describe-vpcs",
            "--filters",
            &format!("Name=tag:nuon:install,Values={}", install.id),
        ])
        .unwrap();
    assert!(vpcs.contains("10.42.0.0/16"), "{vpcs}");
    // The queue read the bucket's ARN.
    let outputs_now = nuon_tests::rt()
        .block_on(c.install_outputs("demo"))
        .unwrap();
    assert_eq!(
        outputs_now.components["queue"]["queue_arn"],
        format!("arn:aws:sqs:us-east-1:{account}:events-{}", install.id)
    );

    // The action had the customer's secret: its digest is in its log.
    let digest = nuon_core::artifact::Digest::of(password.as_bytes());
    let digest = digest.hex();
    let action = step(&w, "action check_secret");
    let job = action.job_id.clone().unwrap();
    let logs = crate::deploy::ok(m.cp.nuon(&["jobs", "logs", job.as_str()]));
    assert!(
        logs.contains(&format!("db_password sha256 {digest}")),
        "{logs}"
    );

    // Nowhere in the control plane, in any form.
    let hex: String = password.bytes().map(|b| format!("{b:02x}")).collect();
    let forms = [
        password.to_owned(),
        password.to_uppercase(),
        password.to_lowercase(),
        base64::engine::general_purpose::STANDARD.encode(password),
        hex,
    ];
    for f in walk(&m.cp.data_dir) {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        for form in &forms {
            assert!(
                !bytes.windows(form.len()).any(|w| w == form.as_bytes()),
                "{form} is in {}",
                f.display()
            );
        }
    }
    let shown = crate::deploy::ok(m.cp.nuon(&["jobs", "get", job.as_str(), "--json"]));
    for form in &forms {
        assert!(
            !shown.contains(form.as_str()) && !logs.contains(form.as_str()),
            "{form}"
        );
    }

    // Drift: a tag changed by the customer's administrator.
    moto.aws(&[
        "s3api",
        "put-bucket-tagging",
        "--bucket",
        &format!("data-{}", install.id),
        "--tagging",
        "TagSet=[{Key=nuon:install,Value=tampered}]",
    ])
    .unwrap();
    let out =
        m.cp.nuon(&["installs", "drift", "demo", "--check", "bucket", "--wait"]);
    assert!(out.status.success(), "{}", crate::deploy::text(&out));
    let shown = crate::deploy::ok(m.cp.nuon(&["installs", "drift", "demo"]));
    assert!(
        shown.contains("changed outside: aws_s3_bucket.data ("),
        "{shown}"
    );

    // Teardown and deprovision as the deprovision role; then the customer
    // destroys the stack: nothing of the install is left.
    let w = run_workflow_for(&c, WorkflowKind::Teardown, CLOUD_WORKFLOW);
    assert_eq!(w.status, "succeeded", "{w:#?}\n{}", runner_log());
    let w = run_workflow_for(&c, WorkflowKind::Deprovision, CLOUD_WORKFLOW);
    assert_eq!(w.status, "succeeded", "{w:#?}\n{}", runner_log());
    terraform(
        &stack_dir,
        &admin,
        &[
            "destroy",
            "-auto-approve",
            "-input=false",
            &format!("-var=secret_db_password={password}"),
            &format!("-var=runner_principals=[\"{host_arn}\"]"),
            &format!("-var=runner_image_id={image}"),
        ],
    );
    assert_nothing_left(&moto);
    // IAM is not in the tagging API: its roles and policies by name.
    let roles = moto.aws(&["iam", "list-roles"]).unwrap();
    assert!(!roles.contains(install.id.as_str()), "{roles}");
    let policies = moto
        .aws(&["iam", "list-policies", "--scope", "Local"])
        .unwrap();
    assert!(!policies.contains(install.id.as_str()), "{policies}");
    let secrets = moto.aws(&["secretsmanager", "list-secrets"]).unwrap();
    assert!(!secrets.contains(install.id.as_str()), "{secrets}");
}

/// `nuon dev --cloud aws-fake --once`: a newcomer's BYOC install into
/// "their" AWS account on a laptop: the fake account started, the
/// Terraform stack applied with the customer's secret, the runner it
/// configured phoning home, the example app provisioned in the account,
/// and how to look into it with the AWS CLI printed.
#[test]
fn nuon_dev_deploys_the_aws_example_into_a_fake_account() {
    if !nuon_tests::have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(mirror) = nuon_test_fixtures::aws_provider_mirror("apply AWS resources") else {
        return;
    };
    if !nuon_tests::have_tool("moto_server", "run an AWS account on loopback")
        || !nuon_tests::have_tool("aws", "call the fake AWS account")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let rc = nuon_test_fixtures::provider_mirror_config(&mirror, tmp.path()).unwrap();
    let data = tmp.path().join("data");
    let ports = (crate::deploy::free_port(), crate::deploy::free_port());
    let app = nuon_tests::manifest_dir().join("../examples/apps/aws");
    let out = crate::deploy::dev_of(&app, &data, ports, &["--cloud", "aws-fake", "--once"])
        .env("TF_CLI_CONFIG_FILE", &rc)
        .output()
        .unwrap();
    let log = crate::deploy::text(&out);
    let files = |name: &str| std::fs::read_to_string(data.join(name)).unwrap_or_default();
    assert!(
        out.status.success(),
        "{log}\n--- terraform\n{}\n",
        files("stack-terraform.log")
    );
    for said in [
        "starting the customer's fake AWS account",
        "the customer enters secret db_password",
        "terraform apply",
        "queue.queue_arn = ",
        "access.role_arn = ",
        "export AWS_ENDPOINT_URL=http://127.0.0.1:",
        "aws resourcegroupstaggingapi get-resources",
    ] {
        assert!(log.contains(said), "{said:?} not in:\n{log}");
    }
}
