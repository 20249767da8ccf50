//! Install stacks: what the customer applies once in their own account to
//! run an install's runner, in the flavour its runner type asks for. The
//! control plane fills a [`StackSpec`] (the app's `stack.toml`,
//! `runner.toml` and cloud roles with their templates rendered for the
//! install, the Runner API's address, the org's public key and a one-time
//! token) and [`generate`] writes the files; nothing here does I/O.
//!
//! - `vm` ([`vm`]): `install.sh`, a systemd unit and its settings;
//! - `cloudformation` ([`cloudformation`]): one AWS CloudFormation template
//!   (the VPC, optional; the runner on EC2, or on ECS Fargate for
//!   `aws-ecs`; the operation and break-glass roles with their boundaries;
//!   the custom nested stacks; the runner phones home from the instance);
//! - `terraform` ([`terraform`]): the same AWS stack as one Terraform
//!   configuration (`main.tf.json`), for customers who apply with Terraform;
//! - `helm` ([`helm`]): a Helm chart for Kubernetes runner types (its own
//!   namespace, a ServiceAccount, the settings and token in a Secret, a
//!   StatefulSet whose volume keeps the runner's token and spool).

use std::collections::BTreeMap;
use std::fmt;

use crate::app::{Permissions, Role, RunnerSettings, Stack};
use crate::wire::{InstallStack, StackFile};

mod aws;
mod bundle;
pub mod cloudformation;
pub mod contract;
mod hcl;
pub mod helm;
pub mod roles;
pub mod terraform;
pub mod vm;

pub use bundle::shell_bundle;
pub use cloudformation::stack_name as cloudformation_stack_name;

/// What a stack is generated from, its templates rendered for the install.
#[derive(Debug, Clone)]
pub struct StackSpec {
    /// The install's id.
    pub install_id: String,
    /// The install's name.
    pub install_name: String,
    /// The app's name.
    pub app_name: String,
    /// The Runner API's base URL, as runners reach it.
    pub runner_api: String,
    /// The org's job-signing public key (hex).
    pub signing_key: String,
    /// The stack's one-time token (`stk_...`).
    pub install_token: String,
    /// When it stops working, ms since the epoch.
    pub token_expires_at_ms: i64,
    /// How long it works, for people (`24 h`).
    pub token_ttl: String,
    /// The control plane's version: the runner version the stack installs.
    pub version: String,
    /// The runner release the control plane serves, which the stack
    /// downloads (none: the customer says where the binary is).
    pub runner_download: Option<RunnerDownload>,
    /// `runner.toml` (a `local` runner when the app has none).
    pub runner: RunnerSettings,
    /// `stack.toml`.
    pub stack: Option<Stack>,
    /// The cloud roles, names and documents rendered.
    pub permissions: Permissions,
    /// The app's secrets (`secrets.toml`): on AWS each is a Secrets
    /// Manager secret the stack makes in the customer's account, its ARN
    /// reported as `NAME_arn`.
    pub secrets: Vec<crate::app::SecretDecl>,
    /// The org's id (a Nuon VPC template's `NuonOrgID`).
    pub org_id: String,
}

/// A runner release the control plane serves, as a stack downloads it
/// (`GET /v1/runner/releases/{version}/{platform}` on the Runner API, with
/// the stack's one-time token).
#[derive(Debug, Clone)]
pub struct RunnerDownload {
    /// The runner's version.
    pub version: String,
    /// `linux-x86_64`.
    pub platform: String,
    /// Where: the Runner API's download of it.
    pub url: String,
    /// The binary's SHA-256, 64 hex digits.
    pub sha256: String,
}

impl RunnerDownload {
    /// The download of `version` for `platform` from `runner_api`, with
    /// `digest` (`sha256:…`); none for a digest of another kind or a
    /// value a script could not carry as it is.
    pub fn new(runner_api: &str, version: &str, platform: &str, digest: &str) -> Option<Self> {
        let sha256 = digest.strip_prefix("sha256:")?;
        let plain = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'))
        };
        let url_ok = runner_api.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, ':' | '/' | '.' | '-' | '_' | '[' | ']')
        });
        (sha256.len() == 64
            && sha256.chars().all(|c| c.is_ascii_hexdigit())
            && plain(version)
            && plain(platform)
            && url_ok)
            .then(|| RunnerDownload {
                version: version.to_owned(),
                platform: platform.to_owned(),
                url: format!(
                    "{}/v1/runner/releases/{version}/{platform}",
                    runner_api.trim_end_matches('/')
                ),
                sha256: sha256.to_ascii_lowercase(),
            })
    }
}

/// A stack's flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackFormat {
    /// A shell bundle and a systemd unit.
    Vm,
    /// An AWS CloudFormation template.
    CloudFormation,
    /// A Helm chart.
    Helm,
    /// A Terraform configuration (AWS), for customers who apply their
    /// infrastructure with Terraform.
    Terraform,
}

impl StackFormat {
    /// Every flavour, by name.
    pub const NAMES: [&'static str; 4] = ["vm", "cloudformation", "helm", "terraform"];

    /// `vm`, `cloudformation` or `helm`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "vm" => Ok(StackFormat::Vm),
            "cloudformation" => Ok(StackFormat::CloudFormation),
            "helm" => Ok(StackFormat::Helm),
            "terraform" => Ok(StackFormat::Terraform),
            other => Err(format!(
                "stack format {other:?} is not one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }

    /// The flavour a runner type asks for: CloudFormation on AWS, a Helm
    /// chart on Azure and GCP (their Kubernetes), the VM bundle for `local`.
    pub fn for_runner_type(runner_type: &str) -> Self {
        match runner_type {
            "aws" | "aws-ecs" | "aws-eks" => StackFormat::CloudFormation,
            "azure" | "azure-aks" | "azure-acs" | "gcp" => StackFormat::Helm,
            _ => StackFormat::Vm,
        }
    }
}

impl fmt::Display for StackFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StackFormat::Vm => "vm",
            StackFormat::CloudFormation => "cloudformation",
            StackFormat::Helm => "helm",
            StackFormat::Terraform => "terraform",
        })
    }
}

/// The stack of `spec` in `format`; an error names what in the app's config
/// cannot be made into it (a policy that is not a JSON document).
pub fn generate(spec: &StackSpec, format: StackFormat) -> Result<InstallStack, String> {
    let (files, instructions) = match format {
        StackFormat::Vm => vm::files(spec),
        StackFormat::CloudFormation => cloudformation::files(spec)?,
        StackFormat::Helm => helm::files(spec)?,
        StackFormat::Terraform => terraform::files(spec)?,
    };
    Ok(InstallStack {
        install: spec.install_name.clone(),
        format: format.to_string(),
        files,
        instructions,
        token_expires_at_ms: spec.token_expires_at_ms,
    })
}

/// The roles a stack creates: each permission role the config does not
/// keep out of the stack (`enabled_in_stack = false`), and the break-glass
/// roles (created off: the customer turns each on).
pub fn stack_roles(p: &Permissions) -> impl Iterator<Item = (&Role, bool)> {
    p.roles
        .iter()
        .filter(|r| r.enabled_in_stack != Some(false))
        .map(|r| (r, false))
        .chain(p.break_glass.iter().map(|r| (r, true)))
}

/// A stack output's name for a role: `provision_iam_role_arn` for the
/// first role of each operation kind, `iam_role_arn_NAME` for the others.
pub fn role_output_name(role: &Role, first_of_kind: bool) -> String {
    match role.kind.as_deref() {
        Some(k @ ("provision" | "maintenance" | "deprovision")) if first_of_kind => {
            format!("{k}_iam_role_arn")
        }
        _ => format!("iam_role_arn_{}", snake(&role.name)),
    }
}

/// The roles a stack creates ([`stack_roles`]), each with whether it is a
/// break-glass role and the name of the output that reports its ARN
/// (`break_glass_iam_role_arn_NAME` for a break-glass role).
pub fn stack_role_outputs(p: &Permissions) -> Vec<(&Role, bool, String)> {
    let mut first_of_kind = std::collections::BTreeSet::new();
    stack_roles(p)
        .map(|(role, break_glass)| {
            let output = if break_glass {
                format!("break_glass_{}", role_output_name(role, false))
            } else {
                let first = first_of_kind.insert(role.kind.clone().unwrap_or_default());
                role_output_name(role, first)
            };
            (role, break_glass, output)
        })
        .collect()
}

/// `s` as a name of letters, digits and `_`, lowercase, at most 50 long.
pub(crate) fn snake(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(50)
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// One file of a stack.
pub(crate) fn file(path: &str, contents: String, mode: u32) -> StackFile {
    StackFile {
        path: path.into(),
        contents,
        mode,
    }
}

/// The runner's settings every flavour hands it, as `NAME=value` lines of
/// an environment file (and a Secret's data).
pub(crate) fn runner_env(spec: &StackSpec) -> BTreeMap<&'static str, String> {
    BTreeMap::from([
        ("NUON_RUNNER_API_URL", spec.runner_api.clone()),
        ("NUON_RUNNER_SIGNING_KEY", spec.signing_key.clone()),
        ("NUON_RUNNER_INSTALL_TOKEN", spec.install_token.clone()),
    ])
}

/// A role of the tests: `kind`, `name`.
#[cfg(test)]
pub(crate) fn test_role(kind: &str, name: &str) -> Role {
    Role {
        kind: Some(kind.into()),
        name: name.into(),
        description: "d".into(),
        ..Role::default()
    }
}

#[cfg(test)]
pub(crate) fn test_spec() -> StackSpec {
    StackSpec {
        install_id: "inl0123456789abcdef".into(),
        install_name: "acme-prod".into(),
        app_name: "hello".into(),
        runner_api: "https://runners.example.com".into(),
        signing_key: "ab".repeat(32),
        install_token: "stk_secret".into(),
        token_expires_at_ms: 1_800_000_000_000,
        token_ttl: "24 h".into(),
        version: "0.1.0".into(),
        runner_download: RunnerDownload::new(
            "https://runners.example.com/",
            "0.1.0",
            "linux-x86_64",
            &format!("sha256:{}", "c".repeat(64)),
        ),
        runner: RunnerSettings {
            runner_type: "aws".into(),
            helm_driver: None,
            init_script_url: None,
            env_vars: BTreeMap::new(),
            instance_type: None,
            job_images: BTreeMap::new(),
        },
        stack: None,
        permissions: Permissions::default(),
        secrets: Vec::new(),
        org_id: "org0123456789abcdef".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runner_type_has_its_flavour_and_names_parse() {
        assert_eq!(
            StackFormat::for_runner_type("aws-ecs"),
            StackFormat::CloudFormation
        );
        assert_eq!(StackFormat::for_runner_type("azure-aks"), StackFormat::Helm);
        assert_eq!(StackFormat::for_runner_type("local"), StackFormat::Vm);
        for n in StackFormat::NAMES {
            assert_eq!(StackFormat::parse(n).unwrap().to_string(), n);
        }
        assert!(
            StackFormat::parse("pulumi")
                .unwrap_err()
                .contains("vm, cloudformation, helm, terraform")
        );
        assert_eq!(snake("Acme-Prod.provision"), "acme_prod_provision");
        assert_eq!(snake("9x"), "_9x");
    }

    #[test]
    fn a_served_runner_release_is_each_stacks_default_and_checked_by_digest() {
        let spec = test_spec();
        let d = spec.runner_download.clone().expect("a plain release");
        assert_eq!(
            d.url,
            "https://runners.example.com/v1/runner/releases/0.1.0/linux-x86_64"
        );
        // CloudFormation: the URL and digest are the parameters' defaults,
        // and the instance checks the digest before the binary runs.
        let cfn = generate(&spec, StackFormat::CloudFormation).unwrap();
        let t: serde_json::Value = serde_json::from_str(&cfn.files[0].contents).unwrap();
        assert_eq!(t["Parameters"]["RunnerBinaryUrl"]["Default"], d.url);
        assert_eq!(t["Parameters"]["RunnerBinarySha256"]["Default"], d.sha256);
        let text = cfn.files[0].contents.as_str();
        assert!(text.contains("sha256sum $new | cut"), "{text}");
        // The token goes to curl on standard input, not its command line.
        assert!(
            text.contains("Bearer %s") && text.contains("curl -fsSL --retry 5 -H @-"),
            "{text}"
        );
        // Terraform: the same, as variables.
        let tf = generate(&spec, StackFormat::Terraform).unwrap();
        let main = tf.files.iter().find(|f| f.path == "main.tf.json").unwrap();
        let t: serde_json::Value = serde_json::from_str(&main.contents).unwrap();
        assert_eq!(t["variable"]["runner_binary_url"]["default"], d.url);
        assert_eq!(t["variable"]["runner_binary_sha256"]["default"], d.sha256);
        // The VM bundle: a release file its installer reads.
        let vm = generate(&spec, StackFormat::Vm).unwrap();
        let release = vm
            .files
            .iter()
            .find(|f| f.path == "runner-release.env")
            .unwrap();
        assert!(
            release
                .contents
                .contains(&format!("release_sha256={}", d.sha256))
        );
        assert!(vm.instructions.contains("checks its SHA-256"));
        // Nothing served: an empty address (no runner installed), the digest unchecked.
        let none = StackSpec {
            runner_download: None,
            ..spec
        };
        let cfn = generate(&none, StackFormat::CloudFormation).unwrap();
        let t: serde_json::Value = serde_json::from_str(&cfn.files[0].contents).unwrap();
        assert_eq!(t["Parameters"]["RunnerBinaryUrl"]["Default"], "");
        assert_eq!(t["Parameters"]["RunnerBinarySha256"]["Default"], "");
        let vm = generate(&none, StackFormat::Vm).unwrap();
        assert!(!vm.files.iter().any(|f| f.path == "runner-release.env"));
        // Values a script could not carry as they are make no download.
        let sha = format!("sha256:{}", "c".repeat(64));
        assert!(RunnerDownload::new("https://x", "1.0;rm", "linux-x86_64", &sha).is_none());
        assert!(RunnerDownload::new("https://x'y", "1.0", "linux-x86_64", &sha).is_none());
        assert!(RunnerDownload::new("https://x", "1.0", "linux-x86_64", "sha512:ab").is_none());
    }
}
