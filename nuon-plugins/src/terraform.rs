//! The Terraform plugin's binary: found with `which` (`terraform`, else
//! OpenTofu's `tofu`), its version read from `version -json` and checked
//! against the component's `terraform_version` before anything runs.

use std::ffi::OsString;
use std::path::PathBuf;

use nuon_core::PluginError;
use nuon_core::version::{Constraint, Version};

/// A Terraform (or OpenTofu) binary that satisfies a constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terraform {
    /// The binary.
    pub path: PathBuf,
    /// Its version.
    pub version: Version,
}

/// The binaries tried, in order.
pub const BINARIES: [&str; 2] = ["terraform", "tofu"];

/// Finds a binary on `PATH` that satisfies `constraint`.
pub fn find(constraint: &str) -> Result<Terraform, PluginError> {
    find_in(std::env::var_os("PATH"), constraint)
}

/// [`find`] with another `PATH`.
pub fn find_in(path: Option<OsString>, constraint: &str) -> Result<Terraform, PluginError> {
    let wanted: Constraint = constraint
        .parse()
        .map_err(|e: String| PluginError::Invalid(format!("terraform_version: {e}")))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let found: Vec<PathBuf> = BINARIES
        .iter()
        .filter_map(|b| which::which_in(b, path.clone(), &cwd).ok())
        .collect();
    if found.is_empty() {
        return Err(PluginError::Missing(
            "neither terraform nor tofu is on this runner's PATH: install Terraform \
             (https://developer.hashicorp.com/terraform/install) or OpenTofu \
             (https://opentofu.org/docs/intro/install/)"
                .into(),
        ));
    }
    let mut seen = Vec::new();
    for bin in found {
        let version = version_of(&bin)?;
        if wanted.matches(&version) {
            return Ok(Terraform { path: bin, version });
        }
        seen.push(format!("{} {version}", bin.display()));
    }
    Err(PluginError::Missing(format!(
        "no Terraform on this runner satisfies terraform_version {:?} (found {}): install a matching version, or change terraform_version",
        wanted.to_string(),
        seen.join(", ")
    )))
}

/// The version a binary reports with `version -json`.
fn version_of(bin: &std::path::Path) -> Result<Version, PluginError> {
    let out = std::process::Command::new(bin)
        .args(["version", "-json"])
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| PluginError::Missing(format!("cannot run {}: {e}", bin.display())))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        PluginError::Missing(format!(
            "{} version -json did not answer JSON ({e}): {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })?;
    let text = v["terraform_version"].as_str().ok_or_else(|| {
        PluginError::Missing(format!(
            "{} version -json has no terraform_version",
            bin.display()
        ))
    })?;
    text.parse()
        .map_err(|e: String| PluginError::Missing(format!("{}: {e}", bin.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_mismatched_terraform_says_what_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let e = find_in(Some(empty.path().into()), ">= 1.5")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("neither terraform nor tofu") && e.contains("install"),
            "{e}"
        );
        let e = find_in(Some(empty.path().into()), "latest")
            .unwrap_err()
            .to_string();
        assert!(e.contains("terraform_version"), "{e}");

        if which::which("terraform").is_err() {
            eprintln!("SKIPPED: terraform is not installed: its version check is not run");
            return;
        }
        let t = find(">= 1.0").unwrap();
        assert!(t.path.ends_with("terraform"));
        assert!(t.version.parts[0] >= 1);
        let e = find(">= 99.0").unwrap_err().to_string();
        assert!(e.contains("satisfies terraform_version \">= 99.0\""), "{e}");
        assert!(
            e.contains(&t.version.to_string()),
            "the version found is named: {e}"
        );
    }
}
