//! End-to-end tests of the job loop: the real `nuon-ctl`, `nuon-runner` and
//! `nuon` binaries over loopback sockets.
#![allow(missing_docs)]

mod approvals;
mod apps;
mod at_rest;
mod aws;
mod backup;
mod config_effects;
mod containers;
mod daily;
mod dashboard;
mod deploy;
mod faults;
mod floods;
mod groups;
mod hostile;
mod installer;
mod installs;
mod job_loop;
mod lifecycle;
mod networks;
mod openapi;
mod ops;
mod people;
mod platform;
mod plugins;
mod pulumi;
mod reference;
mod registry;
mod replicas;
mod rollouts;
mod rotation;
mod runner_update;
mod security;
mod stack;
mod state;
mod templates;
mod tidy;
mod tls;
mod upgrades;

use std::time::Duration;

use nuon_client::ControlClient;
use nuon_core::wire::{CreateJob, JobInfo};
use nuon_tests::{ControlPlane, Runner, RunnerOpts, rt};

pub(crate) const LONG: Duration = Duration::from_secs(60);

/// A control plane with one registered runner process named `name`.
pub(crate) struct Setup {
    pub cp: ControlPlane,
    pub runner: Runner,
    pub token: String,
}

pub(crate) fn setup(lease: &str, name: &str, slots: u32, grace: &str) -> Setup {
    let cp = ControlPlane::start(lease).expect("start control plane");
    let token = cp.create_runner(name).expect("create runner");
    let runner = Runner::start(
        &cp,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots,
            grace,
            work_dir: None,
        },
    )
    .expect("start runner");
    Setup { cp, runner, token }
}

/// Queues `sh -c SCRIPT` on `runner`.
pub(crate) fn queue_sh(
    client: &ControlClient,
    runner: &str,
    script: &str,
    max_attempts: u32,
) -> JobInfo {
    rt().block_on(client.create_job(&CreateJob {
        runner: runner.into(),
        kind: "exec".into(),
        payload: serde_json::json!({"command": "sh", "args": ["-c", script]}),
        timeout_secs: Some(600),
        max_attempts: Some(max_attempts),
        sandbox: None,
    }))
    .expect("queue job")
}
