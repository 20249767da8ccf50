//! One S3 bucket in the customer's (fake) AWS account, and a newcomer's
//! `nuon dev --cloud aws-fake`, against moto with IAM enforced and the
//! real `hashicorp/aws` provider. See BENCHMARKS.md.
//!
//! ```text
//! cargo bench -p nuon-benches --bench aws
//! ```
#![allow(missing_docs)]

use anyhow::{Context, Result};
use nuon_benches::terraform::{bare_init_apply, median, sh_time, terraform_step};

/// A module making one S3 bucket with the real AWS provider.
const TF_MODULE_BUCKET: &str = r#"
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = "5.100.0" }
  }
}

provider "aws" {
  s3_use_path_style = true
}

variable "name" {
  type = string
}

resource "aws_s3_bucket" "b" {
  bucket = "bench-${var.name}"
}

output "bucket" {
  value = aws_s3_bucket.b.arn
}
"#;

/// One S3 bucket, in moto's AWS account with IAM enforced and the real
/// provider: a plan step and an apply step as jobs (the runner's provider
/// cache warm after the first) against `terraform init && plan/apply` by
/// hand with a warm plugin cache; and `nuon dev --cloud aws-fake --once`
/// (the example app: the Terraform stack applied to the fake account, the
/// runner it configured, the provision).
fn aws_bench() -> Result<()> {
    let Some(mirror) = nuon_test_fixtures::aws_provider_mirror("measure AWS steps") else {
        return Ok(());
    };
    let Some(moto) = nuon_test_fixtures::moto::Moto::start()? else {
        return Ok(());
    };
    let dir = tempfile::tempdir()?;
    let rc = nuon_test_fixtures::provider_mirror_config(&mirror, dir.path())?;
    let cache = dir.path().join("plugin-cache");
    std::fs::create_dir_all(&cache)?;
    let mut env = moto.env(&moto.admin);
    env.push((
        "TF_CLI_CONFIG_FILE".into(),
        rc.to_string_lossy().into_owned(),
    ));
    // The runner keeps its own cache; by hand, the same warm cache.
    let mut by_hand = env.clone();
    by_hand.push((
        "TF_PLUGIN_CACHE_DIR".into(),
        cache.to_string_lossy().into_owned(),
    ));
    let warm = tempfile::tempdir()?;
    std::fs::write(warm.path().join("main.tf"), TF_MODULE_BUCKET)?;
    sh_time(warm.path(), &["init", "-input=false"], &by_hand)?;
    let (bare_plan, plan, bare_apply, apply) = terraform_step(5, TF_MODULE_BUCKET, &by_hand)?;
    println!(
        "| one S3 bucket (moto, real provider, warm cache), plan step: by hand / as a job | {:.0} ms / {:.0} ms ({:.2}×, +{:.0} ms) |",
        bare_plan * 1e3,
        plan * 1e3,
        plan / bare_plan,
        (plan - bare_plan) * 1e3
    );
    println!(
        "| one S3 bucket, apply step: by hand / as a job | {:.0} ms / {:.0} ms ({:.2}×, +{:.0} ms) |",
        bare_apply * 1e3,
        apply * 1e3,
        apply / bare_apply,
        (apply - bare_apply) * 1e3
    );
    let bare = bare_init_apply(5, TF_MODULE_BUCKET, &by_hand)?;
    println!(
        "| one S3 bucket, apply step against `terraform init && terraform apply` by hand in the same directory | {:.0} ms / {:.0} ms ({:.2}×) |",
        bare * 1e3,
        apply * 1e3,
        apply / bare
    );
    // The newcomer's run, end to end.
    let mut phases: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for _ in 0..3 {
        let data = tempfile::tempdir()?;
        let out = std::process::Command::new(nuon_tests::bin("nuon"))
            .args(["dev", "--cloud", "aws-fake", "--once", "--data-dir"])
            .arg(data.path())
            .args(["--app-dir"])
            .arg(nuon_tests::manifest_dir().join("../examples/apps/aws"))
            .args(["--listen", "127.0.0.1:0", "--runner-listen", "127.0.0.1:0"])
            .env("TF_CLI_CONFIG_FILE", &rc)
            .output()?;
        let text = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(out.status.success(), "nuon dev --cloud aws-fake: {text}");
        let healthy = text.lines().find_map(|l| {
            let l = l.strip_prefix("==> the install's runner was healthy ")?;
            l.split_once("s after")?.0.parse::<f64>().ok()
        });
        let healthy = healthy.context("no runner-healthy line")?;
        phases
            .entry("stack apply to the runner healthy".into())
            .or_default()
            .push(healthy);
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("==> phases: "))
            .context("no phases line")?;
        for part in line.split(", ") {
            let part = part.split(" (total").next().unwrap_or(part);
            if let Some((name, secs)) = part.rsplit_once(' ')
                && let Ok(s) = secs.trim_end_matches('s').parse::<f64>()
            {
                phases.entry(name.to_owned()).or_default().push(s);
            }
        }
    }
    for (name, v) in phases {
        println!(
            "| `nuon dev --cloud aws-fake --once` (examples/apps/aws), median of 3: {name} | {:.2} s |",
            median(v)
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    println!("| benchmark | result |\n|---|---|");
    aws_bench()
}
