//! The runner's Terraform provider cache: `terraform init` of a module
//! using the real `hashicorp/aws` provider (about 700 MB, from the
//! machine's filesystem mirror), the way a job runs it:
//!
//! - `no cache`: every job installs the provider into its own work
//!   directory (what a runner did before the cache);
//! - `first job`: the cache is empty: installed, and kept for the next;
//! - `next job`: the cache holds it and the module's lock file is kept:
//!   its versions go in, Terraform links the cached provider and hashes
//!   it into its lock, which is checked against the kept one (the
//!   plugin's `lockfile`);
//! - `next job, hashes given to Terraform`: what the runner did before:
//!   the kept lock copied in whole, Terraform checks the cached package
//!   against it (hashing it three times).
//!
//! From two sources: the machine's unpacked filesystem mirror (Terraform
//! links the provider from it, so there is nothing to install), and a
//! packed mirror made from it here (`terraform-provider-aws_…zip`, 148 MB,
//! what a registry or a network mirror serves, unzipped by each install;
//! the download itself is not part of it: no network here).
//!
//! ```text
//! cargo bench -p nuon-benches --bench providers -- [--runs N]
//! ```
#![allow(missing_docs)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

const MODULE: &str = r#"terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}
"#;

/// How the kept lock file goes in.
#[derive(Clone, Copy, PartialEq)]
enum Kept {
    /// Its versions; the checksums are checked after (the runner's way).
    Versions,
    /// Whole: Terraform checks the checksums.
    Whole,
}

/// `terraform init` in a fresh copy of the module, with `cache` as the
/// plugin cache and `lock` as the kept lock file (in before, kept after),
/// as the runner's Terraform plugin does.
fn init(rc: &Path, cache: Option<(&Path, &Path)>, how: Kept) -> Result<Duration> {
    use nuon_plugins::terraform::lockfile;
    let work = tempfile::tempdir()?;
    std::fs::write(work.path().join("main.tf"), MODULE)?;
    let mut cmd = Command::new("terraform");
    cmd.args(["init", "-no-color", "-input=false"])
        .current_dir(work.path())
        .env("TF_CLI_CONFIG_FILE", rc)
        .env("CHECKPOINT_DISABLE", "1")
        .env_remove("TF_PLUGIN_CACHE_DIR");
    let lock = work.path().join(".terraform.lock.hcl");
    let start = Instant::now();
    let mut kept_text = None;
    if let Some((dir, kept)) = cache {
        cmd.env("TF_PLUGIN_CACHE_DIR", dir);
        if let Ok(text) = std::fs::read_to_string(kept) {
            if how == Kept::Versions {
                std::fs::write(&lock, lockfile::without_hashes(&text))?;
                cmd.env("TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE", "true");
            } else {
                std::fs::write(&lock, &text)?;
            }
            kept_text = Some(text);
        }
    }
    let out = cmd.output().context("terraform")?;
    if !out.status.success() {
        bail!("terraform init: {}", String::from_utf8_lossy(&out.stderr));
    }
    let now = std::fs::read_to_string(&lock)?;
    if let (Some(kept), Kept::Versions) = (&kept_text, how) {
        lockfile::check(kept, &now).map_err(anyhow::Error::msg)?;
    }
    let took = start.elapsed();
    if let (Some((_, kept)), None) = (cache, &kept_text) {
        std::fs::write(kept, now)?;
    }
    Ok(took)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(5);
    let Some(mirror) = nuon_test_fixtures::aws_provider_mirror("measure the provider cache") else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    // The packed mirror: the provider zipped as a registry serves it.
    let packed = dir.path().join("packed");
    let zips = packed.join("registry.terraform.io/hashicorp/aws");
    std::fs::create_dir_all(&zips)?;
    let bin_dir = mirror.join("registry.terraform.io/hashicorp/aws/5.100.0/linux_amd64");
    let zipped = Command::new("python3")
        .args(["-m", "zipfile", "-c"])
        .arg(zips.join("terraform-provider-aws_5.100.0_linux_amd64.zip"))
        .arg("terraform-provider-aws_v5.100.0_x5")
        .current_dir(&bin_dir)
        .status()
        .context("python3 -m zipfile")?;
    if !zipped.success() {
        bail!("cannot zip the provider of {}", bin_dir.display());
    }
    for (source, root) in [
        ("unpacked mirror", mirror.as_path()),
        ("packed mirror", packed.as_path()),
    ] {
        let rc = nuon_test_fixtures::provider_mirror_config(root, dir.path())?;
        let mut none = Vec::new();
        let mut first = Vec::new();
        let mut next = Vec::new();
        let mut whole = Vec::new();
        for _ in 0..runs {
            none.push(init(&rc, None, Kept::Versions)?);
            let cache = tempfile::tempdir()?;
            let plugins = cache.path().join("plugins");
            std::fs::create_dir_all(&plugins)?;
            let kept = cache.path().join("kept.lock.hcl");
            let c = Some((plugins.as_path(), kept.as_path()));
            first.push(init(&rc, c, Kept::Versions)?);
            next.push(init(&rc, c, Kept::Versions)?);
            whole.push(init(&rc, c, Kept::Whole)?);
        }
        println!(
            "terraform init of a module using hashicorp/aws 5.100.0 from the {source}, median of {runs}:"
        );
        println!("  no cache   {:>8.2?}", median(none));
        println!("  first job  {:>8.2?}", median(first));
        println!("  next job   {:>8.2?}", median(next));
        println!(
            "  next job, hashes given to Terraform {:>8.2?}",
            median(whole)
        );
    }
    Ok(())
}
