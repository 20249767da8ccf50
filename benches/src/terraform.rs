//! What the benchmarks share: one Terraform step by hand and as a job.

use std::time::{Duration, Instant};

use anyhow::Result;
use nuon_core::wire::CreateJob;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, rt, wait_job};

/// The median of `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `terraform ARGS` in `dir` with `env`: its wall time in seconds.
pub fn sh_time(dir: &std::path::Path, args: &[&str], env: &[(String, String)]) -> Result<f64> {
    let start = Instant::now();
    let out = std::process::Command::new("terraform")
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("TF_IN_AUTOMATION", "1")
        .env("CHECKPOINT_DISABLE", "1")
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "terraform {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(start.elapsed().as_secs_f64())
}

/// The issue's own comparison for an applying step: `terraform init &&
/// terraform apply -auto-approve` by hand, in the same directory every run
/// (initialised once before, as a user's checkout is), each run making
/// its resources anew (the state of the last one set aside, untimed).
/// The median of `runs`, in seconds.
pub fn bare_init_apply(runs: usize, module: &str, env: &[(String, String)]) -> Result<f64> {
    let dir = tempfile::tempdir()?;
    std::fs::write(dir.path().join("main.tf"), module)?;
    sh_time(dir.path(), &["init", "-input=false"], env)?;
    let mut took = vec![];
    for i in 0..runs {
        let _ = std::fs::remove_file(dir.path().join("terraform.tfstate"));
        let var = format!("-var=name=hand{i}");
        let init = sh_time(dir.path(), &["init", "-input=false"], env)?;
        let apply = ["apply", "-input=false", "-auto-approve", &var];
        took.push(init + sh_time(dir.path(), &apply, env)?);
    }
    Ok(median(took))
}

/// One Terraform component step through the platform (a `terraform` job:
/// claim, signature, unpack by digest, init, plan or apply, log shipping,
/// completion) against the same commands by hand. Medians of `runs`.
pub fn terraform_step(
    runs: usize,
    module: &str,
    env: &[(String, String)],
) -> Result<(f64, f64, f64, f64)> {
    use nuon_plugins::oci::LayoutStore;
    use nuon_plugins::oci::modulepkg::push_module;

    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let token = cp.create_runner("r")?;
    let work = tempfile::tempdir()?;
    let src = tempfile::tempdir()?;
    std::fs::write(src.path().join("main.tf"), module)?;
    let store = LayoutStore::open(work.path().join("store"))?;
    let digest = rt().block_on(push_module(&store, "bench/db", src.path(), None))?;
    let _r = Runner::start_with_env(
        &cp.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "5s",
            work_dir: Some(work.path()),
        },
        &[],
        env,
    )?;
    let (mut bare_plan, mut bare_apply, mut plan, mut apply) = (vec![], vec![], vec![], vec![]);
    for i in 0..runs {
        // By hand: a fresh directory, init, plan to a file, apply that plan.
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("main.tf"), module)?;
        let var = format!("-var=name=run{i}");
        let init = sh_time(dir.path(), &["init", "-input=false"], env)?;
        bare_plan.push(
            init + sh_time(
                dir.path(),
                &["plan", "-input=false", &var, "-out=p.tfplan"],
                env,
            )?,
        );
        let init2 = sh_time(dir.path(), &["init", "-input=false"], env)?;
        bare_apply.push(init2 + sh_time(dir.path(), &["apply", "-input=false", "p.tfplan"], env)?);

        // Through the platform: a plan job, then an apply job of its plan.
        let job = |action: &str, plan: Option<serde_json::Value>| {
            let mut payload = serde_json::json!({
                "action": action,
                "module": {"repo": "bench/db", "digest": digest},
                "terraform_version": ">= 1.4",
                "vars": {"name": format!("job{i}")},
            });
            // The AWS keys the job acts with (its role's, on a runner
            // with `--credentials aws`); the runner passes on the rest.
            let keys: serde_json::Map<String, serde_json::Value> = (env.iter())
                .filter(|(k, _)| k.starts_with("AWS_"))
                .map(|(k, v)| (k.clone(), v.clone().into()))
                .collect();
            if !keys.is_empty() {
                payload["env"] = keys.into();
            }
            if let Some(p) = plan {
                payload["plan"] = p;
            }
            CreateJob {
                runner: "r".into(),
                kind: "terraform".into(),
                payload,
                timeout_secs: Some(600),
                max_attempts: Some(1),
                sandbox: None,
            }
        };
        let start = Instant::now();
        let created = rt().block_on(client.create_job(&job("plan", None)))?;
        let done = wait_job(&client, &created.id, Duration::from_secs(120))?;
        plan.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(done.status == nuon_core::JobStatus::Succeeded, "{done:?}");
        let p = done.outputs["plan"].clone();
        let start = Instant::now();
        let created = rt().block_on(client.create_job(&job("apply", Some(p))))?;
        let done = wait_job(&client, &created.id, Duration::from_secs(120))?;
        apply.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(done.status == nuon_core::JobStatus::Succeeded, "{done:?}");
    }
    Ok((
        median(bare_plan),
        median(plan),
        median(bare_apply),
        median(apply),
    ))
}
