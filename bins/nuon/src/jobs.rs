//! `nuon jobs`: run a command on a runner, follow, list and cancel jobs.

use clap::Subcommand;
use nuon_client::ControlClient;
use nuon_core::JobId;
use nuon_core::wire::JobList;

use crate::output::{Render, emit, emit_item, emit_with, for_machines, for_people};
use crate::*;

#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Run a command on a runner.
    Exec {
        /// The runner, by name or id.
        #[arg(long)]
        runner: String,
        /// Timeout of one attempt (e.g. 30s, 10m, 2h).
        #[arg(long, default_value = "1h", value_parser = nuon_core::parse_duration)]
        timeout: Duration,
        /// Attempts in all when an attempt is lost with its runner.
        #[arg(long, default_value_t = 1)]
        max_attempts: u32,
        /// Environment for the command (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// Working directory inside the job's work directory.
        #[arg(long)]
        dir: Option<String>,
        /// Stream the log live and exit with the job's exit code.
        #[arg(long)]
        wait: bool,
        /// On a runner that runs jobs in containers: the image to run the
        /// command in, from the install's store (REPOSITORY@sha256:HEX).
        #[arg(long)]
        image: Option<nuon_core::ImageRef>,
        /// Its container's memory limit (e.g. 64MiB).
        #[arg(long, value_parser = nuon_core::wasm::parse_size)]
        memory: Option<u64>,
        /// Its container's CPU limit in thousandths of a CPU (e.g. 500).
        #[arg(long)]
        millicpus: Option<u64>,
        /// Its container's limit on processes and threads.
        #[arg(long)]
        pids: Option<u64>,
        /// Whether it may use the network: on or off (default: the runner's
        /// policy for commands).
        #[arg(long, value_parser = ["on", "off"])]
        network: Option<String>,
        /// The command and its arguments.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Show one job.
    Get {
        /// The job id.
        id: String,
    },
    /// Print a job's log.
    Logs {
        /// The job id.
        id: String,
        /// Keep printing new lines until the job finishes.
        #[arg(long, short)]
        follow: bool,
        /// Print the job's output as it is, terminal control sequences
        /// and all (they are taken out unless this is given).
        #[arg(long)]
        raw: bool,
    },
    /// Cancel a job.
    Cancel {
        /// The job id.
        id: String,
    },
    /// List the org's newest jobs.
    List {
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

fn job_id(raw: &str) -> Result<JobId, CliError> {
    raw.parse()
        .map_err(|e: nuon_core::IdError| CliError::usage(e.to_string()))
}

/// Follows a job's log to its end, showing it to people as it comes.
async fn follow_to_end(g: &Global, client: &ControlClient, id: &JobId) -> Result<(), CliError> {
    let mut follower = client.follow_logs(id, 0);
    while let Some(line) = follower.next().await? {
        for_people(g, || print_log_line(&line, false));
    }
    Ok(())
}

pub(crate) async fn jobs(g: &Global, command: &JobsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        JobsCommand::Exec {
            runner,
            timeout,
            max_attempts,
            env,
            dir,
            wait,
            image,
            memory,
            millicpus,
            pids,
            network,
            command,
        } => {
            let sandbox = nuon_core::JobSandbox {
                image: image.clone(),
                memory_bytes: *memory,
                millicpus: *millicpus,
                pids: *pids,
                network: network.as_deref().map(|n| n == "on"),
            };
            let (program, args) = command
                .split_first()
                .ok_or_else(|| CliError::usage("missing command after --"))?;
            let payload = ExecJob {
                command: program.clone(),
                args: args.to_vec(),
                env: env.iter().cloned().collect::<BTreeMap<_, _>>(),
                dir: dir.clone(),
                outputs_file: false,
            };
            let job = client
                .create_job(&CreateJob {
                    runner: runner.clone(),
                    kind: ExecJob::KIND.into(),
                    payload: serde_json::to_value(&payload).map_err(|e| CliError {
                        message: e.to_string(),
                        code: 1,
                        api_code: None,
                    })?,
                    timeout_secs: Some(timeout.as_secs().max(1)),
                    max_attempts: Some(*max_attempts),
                    sandbox: (!sandbox.is_unset()).then_some(sandbox),
                })
                .await?;
            if !wait {
                emit_with(g, &job, |job| {
                    outln!("{}", job.id);
                    eprintln!(
                        "queued on runner {runner}; follow with: nuon jobs logs {} --follow",
                        job.id
                    );
                })?;
                return Ok(0);
            }
            see_job_through(g, &client, &job.id).await
        }
        JobsCommand::Get { id } => {
            emit(g, &client.get_job(&job_id(id)?).await?)?;
            Ok(0)
        }
        JobsCommand::Logs { id, follow, raw } => {
            let id = job_id(id)?;
            if *follow {
                let mut follower = client.follow_logs(&id, 0);
                while let Some(line) = follower.next().await? {
                    emit_item(g, &line, |l| print_log_line(l, *raw));
                }
                return Ok(0);
            }
            let mut cursor = 0;
            let mut all = Vec::new();
            loop {
                let page = client.job_logs(&id, cursor).await?;
                let empty = page.lines.is_empty();
                cursor = page.next;
                for_people(g, || {
                    page.lines.iter().for_each(|l| print_log_line(l, *raw))
                });
                all.extend(page.lines);
                if empty {
                    break;
                }
            }
            for_machines(g, &all)?;
            Ok(0)
        }
        JobsCommand::Cancel { id } => {
            let job = client.cancel_job(&job_id(id)?).await?;
            emit_with(g, &job, |job| {
                if job.status.is_terminal() {
                    outln!("job {} is {}", job.id, job.status);
                } else {
                    outln!(
                        "cancel requested for job {}; its runner stops it now",
                        job.id
                    );
                }
            })?;
            Ok(0)
        }
        JobsCommand::List { limit } => {
            let mut list = client.list_jobs().await?;
            list.jobs.truncate(*limit as usize);
            emit(g, &list)?;
            Ok(0)
        }
    }
}

impl Render for JobInfo {
    fn render(&self) {
        let job = self;
        outln!("id:        {}", job.id);
        outln!("runner:    {}", job.runner_id);
        outln!("kind:      {}", job.kind);
        outln!("status:    {}", job.status);
        outln!("attempts:  {}/{}", job.attempts, job.max_attempts);
        outln!(
            "exit code: {}",
            job.exit_code.map(|c| c.to_string()).unwrap_or("-".into())
        );
        if let Some(reason) = &job.reason {
            outln!("reason:    {reason}");
        }
        outln!("created:   {}", fmt_time(Some(job.created_at_ms)));
        outln!("finished:  {}", fmt_time(job.finished_at_ms));
    }
}

impl Render for JobList {
    fn render(&self) {
        table(
            &["ID", "KIND", "STATUS", "EXIT", "CREATED", "RUNNER"],
            self.jobs
                .iter()
                .map(|j| {
                    vec![
                        j.id.to_string(),
                        j.kind.clone(),
                        j.status.to_string(),
                        j.exit_code.map(|c| c.to_string()).unwrap_or("-".into()),
                        fmt_time(Some(j.created_at_ms)),
                        j.runner_id.to_string(),
                    ]
                })
                .collect(),
        );
    }
}

/// Shows a job's log as it comes (not under --json), then how it ended;
/// answers its exit code.
pub(crate) async fn see_job_through(
    g: &Global,
    client: &ControlClient,
    id: &JobId,
) -> Result<u8, CliError> {
    follow_to_end(g, client, id).await?;
    let done = wait_finished(client, id).await?;
    emit_with(g, &done, |done| {
        if done.status != JobStatus::Succeeded {
            eprintln!(
                "job {} {}{}",
                done.id,
                done.status,
                done.reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            );
        }
    })?;
    Ok(job_exit_code(&done))
}

/// Waits until the job is terminal. The log stream ending means it is, but a
/// stream can also end with a connection, so check and wait a little if not.
async fn wait_finished(client: &ControlClient, id: &JobId) -> Result<JobInfo, CliError> {
    let mut delay = Duration::from_millis(20);
    loop {
        let job = client.get_job(id).await?;
        if job.status.is_terminal() {
            return Ok(job);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}
