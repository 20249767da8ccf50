//! `nuon dev --cloud aws-fake`: "the customer's AWS account" on this
//! machine. Starts PyPI's `moto_server` on loopback with IAM enforced
//! (its first three calls make the account's administrator), applies the
//! install's stack in its Terraform form with the administrator's keys (as
//! a customer would, entering the customer-held secrets), and starts the
//! runner as the stack's launch template configured it (moto runs no
//! instance: a host user the stack names in `runner_principals` runs it
//! here). Every job then acts in the fake account as its operation's
//! role, and anyone can look into it with the AWS CLI.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::CliError;

/// The account moto gives its principals.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// The fake account: its URL and the keys of its administrator and of
/// the host user that runs the runner.
pub(crate) struct FakeAws {
    pub(crate) url: String,
    admin: (String, String),
    host: (String, String),
}

fn fail(message: String) -> CliError {
    CliError {
        message,
        code: 1,
        api_code: None,
    }
}

impl FakeAws {
    /// Starts `moto_server` (pushed to `children`) and makes the
    /// administrator and the runner's host user.
    pub(crate) async fn start(children: &mut Vec<Child>, log: &Path) -> Result<Self, CliError> {
        for (tool, install) in [
            ("moto_server", "pip install 'moto[server]'"),
            ("aws", "pip install awscli"),
            (
                "terraform",
                "https://developer.hashicorp.com/terraform/install",
            ),
        ] {
            if which::which(tool).is_err() {
                return Err(CliError::usage(format!(
                    "--cloud aws-fake needs `{tool}` on PATH ({install})"
                )));
            }
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| fail(format!("no free port for the fake account: {e}")))?
            .port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .env("MOTO_IAM_LOAD_MANAGED_POLICIES", "true")
            .stdout(Stdio::null())
            .stderr(append(log)?)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(format!("cannot start moto_server: {e}")))?;
        children.push(child);
        let start = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if start.elapsed() > Duration::from_secs(30) {
                return Err(fail(format!(
                    "moto_server did not listen on port {port} within 30 s (its log: {})",
                    log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut aws = FakeAws {
            url: format!("http://127.0.0.1:{port}"),
            admin: ("bootstrap".into(), "bootstrap".into()),
            host: (String::new(), String::new()),
        };
        // The three unauthenticated calls make the administrator.
        aws.admin = aws.user("admin", "*").await?;
        aws.host = aws.user("runner-host", "sts:AssumeRole").await?;
        Ok(aws)
    }

    /// The environment of an AWS client acting as `keys`.
    fn env(&self, keys: &(String, String)) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.url.clone()),
            ("AWS_ACCESS_KEY_ID", keys.0.clone()),
            ("AWS_SECRET_ACCESS_KEY", keys.1.clone()),
            ("AWS_REGION", REGION.into()),
            ("AWS_DEFAULT_REGION", REGION.into()),
        ]
    }

    /// `aws ARGS` as the administrator: its JSON answer.
    async fn admin_call(&self, args: &[&str]) -> Result<serde_json::Value, CliError> {
        let out = Command::new("aws")
            .args(args)
            .args(["--output", "json", "--endpoint-url", &self.url])
            .env_remove("AWS_PROFILE")
            .envs(self.env(&self.admin))
            .output()
            .await
            .map_err(|e| fail(format!("cannot run aws: {e}")))?;
        if !out.status.success() {
            return Err(fail(format!(
                "aws {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(serde_json::from_str(&text).unwrap_or(serde_json::Value::Null))
    }

    /// A user allowed `action` on everything, and its access key.
    async fn user(&self, user: &str, action: &str) -> Result<(String, String), CliError> {
        self.admin_call(&["iam", "create-user", "--user-name", user])
            .await?;
        let policy = allow(action);
        self.admin_call(&[
            "iam",
            "put-user-policy",
            "--user-name",
            user,
            "--policy-name",
            "allowed",
            "--policy-document",
            &policy,
        ])
        .await?;
        let v = self
            .admin_call(&["iam", "create-access-key", "--user-name", user])
            .await?;
        let k = &v["AccessKey"];
        match (k["AccessKeyId"].as_str(), k["SecretAccessKey"].as_str()) {
            (Some(id), Some(secret)) => Ok((id.into(), secret.into())),
            _ => Err(fail(format!("moto made no access key for {user}: {v}"))),
        }
    }

    /// Applies the install's Terraform stack in `dir` as the customer's
    /// administrator, entering `secrets` (`NAME`, value) as its variables.
    pub(crate) async fn apply_stack(
        &self,
        dir: &Path,
        secrets: &[(String, String)],
        log: &Path,
    ) -> Result<(), CliError> {
        let image = self
            .admin_call(&["ec2", "describe-images", "--owners", "amazon"])
            .await?;
        let image = image["Images"][0]["ImageId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut vars = vec![
            format!("-var=runner_principals=[\"arn:aws:iam::{ACCOUNT}:user/runner-host\"]"),
            format!("-var=runner_image_id={image}"),
        ];
        vars.extend(
            secrets
                .iter()
                .map(|(name, value)| format!("-var=secret_{name}={value}")),
        );
        for args in [
            vec!["init".to_owned(), "-input=false".into()],
            [
                vec![
                    "apply".to_owned(),
                    "-auto-approve".into(),
                    "-input=false".into(),
                ],
                vars,
            ]
            .concat(),
        ] {
            let out = Command::new("terraform")
                .args(&args)
                .arg("-no-color")
                .current_dir(dir)
                .env_remove("AWS_PROFILE")
                .envs(self.env(&self.admin))
                .env("TF_IN_AUTOMATION", "1")
                .stdout(append(log)?)
                .stderr(append(log)?)
                .status()
                .await
                .map_err(|e| fail(format!("cannot run terraform: {e}")))?;
            if !out.success() {
                return Err(fail(format!(
                    "terraform {} of the install stack failed: see {}",
                    args[0],
                    log.display()
                )));
            }
        }
        // moto authorizes Secrets Manager calls against resource `*` only
        // (it knows the ARNs of IAM, STS and SQS requests alone): the
        // stack's statements scoped to the token's and the secrets' ARNs
        // cannot match there, so its roles get the same read on `*`.
        let roles = self.admin_call(&["iam", "list-roles"]).await?;
        for role in roles["Roles"].as_array().into_iter().flatten() {
            let Some(name) = role["RoleName"].as_str() else {
                continue;
            };
            self.admin_call(&[
                "iam",
                "put-role-policy",
                "--role-name",
                name,
                "--policy-name",
                "moto-secretsmanager-resource",
                "--policy-document",
                &allow("secretsmanager:GetSecretValue"),
            ])
            .await?;
        }
        Ok(())
    }

    /// What the stack's launch template tells the runner (its user data's
    /// `NUON_RUNNER_*` settings) and the one-time token, read from its
    /// secret as the customer.
    pub(crate) async fn runner_settings(&self) -> Result<Vec<(String, String)>, CliError> {
        let templates = self
            .admin_call(&["ec2", "describe-launch-templates"])
            .await?;
        let name = templates["LaunchTemplates"][0]["LaunchTemplateName"]
            .as_str()
            .ok_or_else(|| fail("the install stack made no launch template".into()))?
            .to_owned();
        let versions = self
            .admin_call(&[
                "ec2",
                "describe-launch-template-versions",
                "--launch-template-name",
                &name,
            ])
            .await?;
        use base64::Engine as _;
        let data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .map(|d| String::from_utf8_lossy(&d).into_owned())
            .ok_or_else(|| fail(format!("launch template {name} has no user data")))?;
        let mut settings: Vec<(String, String)> = data
            .lines()
            .filter_map(|l| l.split_once('='))
            .filter(|(k, v)| k.starts_with("NUON_RUNNER_") && !v.starts_with('$'))
            .filter(|(k, _)| *k != "NUON_RUNNER_WORK_DIR")
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect();
        let secret = data
            .split("--secret-id ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .ok_or_else(|| fail("the user data reads no token secret".into()))?;
        let token = self
            .admin_call(&["secretsmanager", "get-secret-value", "--secret-id", secret])
            .await?;
        let token = token["SecretString"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        settings.push(("NUON_RUNNER_INSTALL_TOKEN".into(), token));
        Ok(settings)
    }

    /// The runner's environment: its host user in the fake account.
    pub(crate) fn runner_env(&self) -> Vec<(&'static str, String)> {
        self.env(&self.host)
    }

    /// How to look into the account with the AWS CLI.
    pub(crate) fn how_to_look(&self) -> String {
        format!(
            "The fake AWS account (moto, IAM enforced) is at {url}; look into it as its administrator:\n  \
             export AWS_ENDPOINT_URL={url} AWS_ACCESS_KEY_ID={id} AWS_SECRET_ACCESS_KEY={secret} AWS_DEFAULT_REGION={REGION}\n  \
             aws s3api list-buckets; aws sqs list-queues --endpoint-url {url}; aws iam list-roles; aws secretsmanager list-secrets\n  \
             aws resourcegroupstaggingapi get-resources --tag-filters Key=nuon:install",
            url = self.url,
            id = self.admin.0,
            secret = self.admin.1,
        )
    }
}

/// An IAM policy allowing `action` on everything.
fn allow(action: &str) -> String {
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": action, "Resource": "*"}]
    })
    .to_string()
}

/// The stack's directory of an install.
pub(crate) fn stack_dir(install_dir: &Path) -> PathBuf {
    install_dir.join("stack-terraform")
}

/// `path` opened to append a log to.
fn append(path: &Path) -> Result<std::fs::File, CliError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| fail(format!("cannot open {}: {e}", path.display())))
}
