//! Credentials providers: how a job gets the cloud identity its signed
//! spec names (the role of its operation). The runner checks the role
//! against what the install's stack created (its outputs name each role's
//! ARN) and, for a break-glass role, that the customer turned it on
//! (`nuon-runner break-glass enable ROLE`); then the provider hands the
//! job that identity through its environment.
//!
//! - `none` (the default): the job runs with the runner's own identity;
//!   the role is only named in the job's log.
//! - `env`: `NUON_JOB_ROLE`, `NUON_JOB_ROLE_KIND` and `NUON_JOB_ROLE_ARN`
//!   in the job's environment (for tools that assume the role themselves,
//!   and for tests).
//! - `aws`: AssumeRole of the role's ARN with the AWS CLI (`aws sts
//!   assume-role`, session `nuon-JOB`), served to the job's tools from a
//!   loopback endpoint of the runner and renewed while the job runs
//!   ([`crate::aws_session`]): the keys are never in the job's
//!   environment nor on a disk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::{JobId, JobRole};

use crate::aws_session::{Assume, Assumed, Lifetime, Note, Sessions};

/// Hands a job its role's identity.
#[async_trait]
pub trait CredentialsProvider: Send + Sync {
    /// What gives the job `role`, or why it is refused. `note` is told of
    /// each session made for the job (the runner's audit journal).
    async fn credentials(&self, role: &JobRole, job: &JobId, note: Note) -> Result<Handed, String>;

    /// Whether jobs get their role at all (`none`: the runner's identity).
    fn hands_roles(&self) -> bool {
        true
    }
}

/// What a provider hands one job.
#[derive(Default)]
pub struct Handed {
    /// Variables of its environment.
    pub env: BTreeMap<String, String>,
    /// Values among them never shown in its log.
    pub secrets: Vec<String>,
    /// Held while the job runs: what was handed ends when it is dropped.
    pub lease: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// The variables by which a process would take the runner's own identity
/// before a served session: removed from what runs as a job's role.
pub const RUNNER_IDENTITY_VARS: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
];

/// The roles the install's stack created, from its outputs: every
/// `*_iam_role_arn` and `iam_role_arn_*` (the role's name is what follows
/// `:role/`), the `break_glass_*` ones apart (`none` when the stack left
/// one out).
#[derive(Debug, Clone, Default)]
pub struct StackRoles {
    /// Each role's name and the ARN the stack reported for it.
    roles: BTreeMap<String, String>,
    break_glass: BTreeMap<String, String>,
    work_dir: PathBuf,
    /// The stack's `region`: where a job's AWS calls go.
    region: Option<String>,
}

impl StackRoles {
    /// The roles of a stack's outputs; break-glass ones are turned on in
    /// `work_dir`.
    pub fn from_outputs(outputs: &BTreeMap<String, String>, work_dir: &Path) -> Self {
        let mut out = StackRoles {
            work_dir: work_dir.to_path_buf(),
            region: outputs.get("region").filter(|r| !r.is_empty()).cloned(),
            ..StackRoles::default()
        };
        for (k, v) in outputs {
            let is_role = k.ends_with("_iam_role_arn") || k.contains("iam_role_arn_");
            let Some(name) = v.rsplit_once(":role/").map(|(_, n)| n) else {
                continue;
            };
            if !is_role || name.is_empty() {
                continue;
            }
            // A path in the ARN (`role/team/name`): the name is its last part.
            let name = name.rsplit('/').next().unwrap_or(name).to_owned();
            if k.starts_with("break_glass_") {
                out.break_glass.insert(name, v.clone());
            } else {
                out.roles.insert(name, v.clone());
            }
        }
        out
    }

    /// Whether a job may have `role`: the ARN the stack reported for it
    /// (the spec's own ARN is not trusted for what is assumed).
    pub fn check(&self, role: &JobRole) -> Result<String, String> {
        if role.kind == "break_glass" || self.break_glass.contains_key(&role.name) {
            let Some(arn) = self.break_glass.get(&role.name) else {
                return Err(format!(
                    "break-glass role {} was not created by this install's stack",
                    role.name
                ));
            };
            if !crate::switch::break_glass_enabled(&self.work_dir, &role.name) {
                return Err(format!(
                    "break-glass role {} is off: the customer turns it on with `nuon-runner break-glass enable {}` (and off again with `disable`)",
                    role.name, role.name
                ));
            }
            return Ok(arn.clone());
        }
        if let Some(arn) = self.roles.get(&role.name) {
            return Ok(arn.clone());
        }
        let known: Vec<&str> = self.roles.keys().map(String::as_str).collect();
        Err(format!(
            "role {} ({}) was not created by this install's stack (it created: {}): the job is refused; apply the app's current stack (`nuon installs stack`)",
            role.name,
            role.because,
            if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            }
        ))
    }
}

/// The job runs with the runner's own identity.
pub struct NoCredentials;

#[async_trait]
impl CredentialsProvider for NoCredentials {
    async fn credentials(&self, _: &JobRole, _: &JobId, _: Note) -> Result<Handed, String> {
        Ok(Handed::default())
    }

    fn hands_roles(&self) -> bool {
        false
    }
}

/// The role in the job's environment.
pub struct EnvCredentials(pub StackRoles);

#[async_trait]
impl CredentialsProvider for EnvCredentials {
    async fn credentials(&self, role: &JobRole, _: &JobId, _: Note) -> Result<Handed, String> {
        let arn = self.0.check(role)?;
        Ok(Handed {
            env: BTreeMap::from([
                ("NUON_JOB_ROLE".to_owned(), role.name.clone()),
                ("NUON_JOB_ROLE_KIND".to_owned(), role.kind.clone()),
                ("NUON_JOB_ROLE_ARN".to_owned(), arn),
            ]),
            ..Handed::default()
        })
    }
}

/// AssumeRole with the AWS CLI, from the runner's own identity (its
/// instance profile or task role), each job's session served and renewed
/// by the runner.
pub struct AwsCliCredentials {
    /// What the stack created.
    pub roles: StackRoles,
    sessions: Sessions,
}

impl AwsCliCredentials {
    /// Roles of `roles` assumed with the `aws` program.
    pub fn new(roles: StackRoles, aws: PathBuf, lifetime: Lifetime) -> Self {
        AwsCliCredentials {
            roles,
            sessions: Sessions::new(Arc::new(AwsCli(aws)), lifetime),
        }
    }
}

#[async_trait]
impl CredentialsProvider for AwsCliCredentials {
    async fn credentials(&self, role: &JobRole, job: &JobId, note: Note) -> Result<Handed, String> {
        let arn = self.roles.check(role)?;
        let session: String = format!("nuon-{job}").chars().take(64).collect();
        let (served, lease) = self.sessions.open(&arn, &session, note).await?;
        let mut env = BTreeMap::new();
        // The stack's region, unless the runner's environment names one.
        if let Some(region) = &self.roles.region
            && std::env::var_os("AWS_REGION").is_none()
        {
            env.insert("AWS_REGION".to_owned(), region.clone());
            env.insert("AWS_DEFAULT_REGION".to_owned(), region.clone());
        }
        let secrets = served
            .iter()
            .filter(|(k, _)| k.ends_with("_TOKEN"))
            .map(|(_, v)| v.clone())
            .collect();
        env.extend(served);
        // No profile of the host's user comes before the served session.
        for file in ["AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"] {
            env.insert(file.to_owned(), "/dev/null".to_owned());
        }
        env.insert("NUON_JOB_ROLE".to_owned(), role.name.clone());
        env.insert("NUON_JOB_ROLE_ARN".to_owned(), arn);
        Ok(Handed {
            env,
            secrets,
            lease: Some(Box::new(lease)),
        })
    }
}

/// `aws sts assume-role`.
struct AwsCli(PathBuf);

#[async_trait]
impl Assume for AwsCli {
    async fn assume(
        &self,
        arn: &str,
        session: &str,
        duration: Duration,
    ) -> Result<Assumed, String> {
        let call = tokio::process::Command::new(&self.0)
            .args(["sts", "assume-role", "--role-arn", arn])
            .args(["--role-session-name", session, "--output", "json"])
            .args(["--duration-seconds", &duration.as_secs().to_string()])
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .map_err(|_| format!("AssumeRole of {arn}: no answer within 60 s"))?
            .map_err(|e| format!("cannot run {}: {e}", self.0.display()))?;
        if !out.status.success() {
            return Err(format!(
                "AssumeRole of {arn} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("AssumeRole of {arn}: not JSON: {e}"))?;
        let c = &v["Credentials"];
        let field = |k: &str| {
            c[k].as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("AssumeRole of {arn}: no {k} in the answer"))
        };
        Ok(Assumed {
            access_key_id: field("AccessKeyId")?,
            secret_access_key: field("SecretAccessKey")?,
            session_token: field("SessionToken")?,
            expiration: field("Expiration")?,
        })
    }
}

/// The provider `--credentials NAME` names.
pub fn provider(
    name: &str,
    roles: StackRoles,
    lifetime: Lifetime,
) -> Result<Arc<dyn CredentialsProvider>, String> {
    match name {
        "none" => Ok(Arc::new(NoCredentials)),
        "env" => Ok(Arc::new(EnvCredentials(roles))),
        "aws" => {
            let aws = which::which("aws")
                .map_err(|_| "--credentials aws needs the AWS CLI (`aws`) on PATH".to_owned())?;
            Ok(Arc::new(AwsCliCredentials::new(roles, aws, lifetime)))
        }
        other => Err(format!(
            "--credentials {other:?} is not one of none, env, aws"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, kind: &str) -> JobRole {
        JobRole {
            name: name.into(),
            kind: kind.into(),
            arn: None,
            because: "test".into(),
        }
    }

    #[test]
    fn only_what_the_stack_created_and_break_glass_once_enabled() {
        let dir = tempfile::tempdir().unwrap();
        let outputs = BTreeMap::from([
            (
                "provision_iam_role_arn".to_owned(),
                "arn:aws:iam::1:role/acme-provision".to_owned(),
            ),
            (
                "iam_role_arn_dns".to_owned(),
                "arn:aws:iam::1:role/team/acme-dns".to_owned(),
            ),
            (
                "break_glass_iam_role_arn_bg".to_owned(),
                "arn:aws:iam::1:role/acme-bg".to_owned(),
            ),
            ("break_glass_iam_role_arn_off".to_owned(), "none".to_owned()),
            ("region".to_owned(), "eu-west-1".to_owned()),
        ]);
        let roles = StackRoles::from_outputs(&outputs, dir.path());
        assert_eq!(
            roles.check(&role("acme-provision", "provision")).unwrap(),
            "arn:aws:iam::1:role/acme-provision"
        );
        assert!(roles.check(&role("acme-dns", "custom")).is_ok());
        let e = roles.check(&role("acme-admin", "custom")).unwrap_err();
        assert!(
            e.contains(
                "not created by this install's stack (it created: acme-dns, acme-provision)"
            ),
            "{e}"
        );
        let e = roles.check(&role("acme-bg", "break_glass")).unwrap_err();
        assert!(e.contains("nuon-runner break-glass enable acme-bg"), "{e}");
        crate::switch::set_break_glass(dir.path(), "acme-bg", true).unwrap();
        assert!(roles.check(&role("acme-bg", "break_glass")).is_ok());
        assert!(roles.check(&role("off", "break_glass")).is_err());
    }
}
