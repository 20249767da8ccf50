//! The `health` job kind: a component's `[health]` probes, run from inside
//! the install after its apply ([`HealthJob`]).
//!
//! Every `interval_ms` a round runs each probe at once: `http` (a GET,
//! redirects not followed: any 2xx or 3xx is healthy), `tcp` (a
//! connection) and `exec` (the command without a shell: exit code 0 is
//! healthy). A probe that has not answered within the interval (at most
//! ten seconds) has failed. Health holds once every probe passed
//! `hold_rounds` rounds in a row; the job ends then, or once the window
//! has passed. Each round is one line of the job's log; the outputs say
//! how each probe did.
//!
//! An exec probe runs on the runner's host, stopped at its deadline; on a
//! runner that runs jobs in containers it runs in the job's container
//! instead, and only the job's timeout stops it.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures_util::future::join_all;
use nuon_core::app::{HealthProbe, ProbeKind, http_url, tcp_address};
use nuon_core::{HealthJob, Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError};
use nuon_core::{ProcessExit, ProcessSpec, StopReason};
use serde_json::{Value, json};

/// The longest a probe may take in a round (of a health job, and of the
/// runner's watch).
pub const MAX_PROBE_TIME: Duration = Duration::from_secs(10);

/// How much of an exec probe's output its result quotes.
const QUOTE: usize = 200;

/// Runs `health` jobs.
#[derive(Default)]
pub struct HealthPlugin {
    prober: Prober,
}

impl HealthPlugin {
    /// The plugin, with an HTTP client that follows no redirect.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Runs one probe at a time, here: what a health job's rounds and the
/// runner's watch between deploys share.
pub struct Prober {
    http: reqwest::Client,
}

impl Default for Prober {
    /// A prober whose HTTP client follows no redirect.
    fn default() -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("nuon-runner-health/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Prober { http }
    }
}

fn decode(spec: &JobSpec) -> Result<HealthJob, PluginError> {
    let job: HealthJob = spec
        .payload_as()
        .map_err(|e| PluginError::Invalid(format!("health: {e}")))?;
    let bad = |what: String| Err(PluginError::Invalid(format!("health: {what}")));
    if job.probes.is_empty() {
        return bad("the job has no probe".into());
    }
    if job.window_ms == 0 || job.interval_ms == 0 || job.hold_rounds == 0 {
        return bad("window_ms, interval_ms and hold_rounds must be above zero".into());
    }
    for p in &job.probes {
        let checked = match p.kind {
            ProbeKind::Http => http_url(p.url.as_deref().unwrap_or_default()),
            ProbeKind::Tcp => tcp_address(p.url.as_deref().unwrap_or_default()).map(drop),
            ProbeKind::Exec if p.command.first().is_none_or(|c| c.trim().is_empty()) => {
                Err("exec probes require a command".into())
            }
            ProbeKind::Exec => Ok(()),
        };
        if let Err(e) = checked {
            return bad(format!("probe {:?}: {e}", p.name));
        }
    }
    Ok(job)
}

/// How one probe did in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether it passed.
    pub ok: bool,
    /// What it answered, and how long it took.
    pub detail: String,
}

/// How one probe did over the job.
#[derive(Default)]
struct Tally {
    passes: u32,
    failures: u32,
    last: Option<Answer>,
}

impl Prober {
    /// Runs an http or tcp probe, or an exec probe on this host (killed
    /// at `limit`), which has failed when it has not answered within
    /// `limit`.
    pub async fn probe(&self, p: &HealthProbe, limit: Duration) -> Answer {
        let started = Instant::now();
        let run = async {
            match p.kind {
                ProbeKind::Http => {
                    let url = p.url.as_deref().unwrap_or_default();
                    match self.http.get(url).send().await {
                        Ok(r) if r.status().is_success() || r.status().is_redirection() => {
                            (true, format!("HTTP {}", r.status().as_u16()))
                        }
                        Ok(r) => (false, format!("HTTP {}", r.status().as_u16())),
                        Err(e) => (false, describe(&e)),
                    }
                }
                ProbeKind::Tcp => {
                    let addr =
                        tcp_address(p.url.as_deref().unwrap_or_default()).unwrap_or_default();
                    match tokio::net::TcpStream::connect(&addr).await {
                        Ok(_) => (true, format!("connected to {addr}")),
                        Err(e) => (false, format!("cannot connect to {addr}: {e}")),
                    }
                }
                ProbeKind::Exec => exec_here(&p.command).await,
            }
        };
        let (ok, detail) = match tokio::time::timeout(limit, run).await {
            Ok(seen) => seen,
            Err(_) => (false, format!("no answer within {}", human(limit))),
        };
        let ms = started.elapsed().as_millis();
        Answer {
            ok,
            detail: format!("{detail} in {ms} ms"),
        }
    }
}

/// The text of an HTTP client error, with its causes.
fn describe(e: &reqwest::Error) -> String {
    let mut text = if e.is_connect() {
        "cannot connect".to_owned()
    } else if e.is_timeout() {
        "timed out".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// Runs an exec probe's command on this host, killed when dropped (at the
/// round's deadline): whether it exited 0, and the end of its output.
async fn exec_here(command: &[String]) -> (bool, String) {
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    match cmd.output().await {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let said = quote(&text);
            let code = match out.status.code() {
                Some(c) => format!("exit code {c}"),
                None => "killed by a signal".into(),
            };
            let detail = if said.is_empty() {
                code
            } else {
                format!("{code}: {said}")
            };
            (out.status.success(), detail)
        }
        Err(e) => (false, format!("cannot run {:?}: {e}", command[0])),
    }
}

/// The last line of `text`, at most [`QUOTE`] characters of it.
fn quote(text: &str) -> String {
    let line = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    let n = line.chars().count();
    line.trim().chars().skip(n.saturating_sub(QUOTE)).collect()
}

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[async_trait]
impl Plugin for HealthPlugin {
    fn kind(&self) -> &'static str {
        HealthJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        decode(spec).map(drop)
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let window = Duration::from_millis(job.window_ms);
        let interval = Duration::from_millis(job.interval_ms);
        let limit = interval.min(MAX_PROBE_TIME);
        let start = Instant::now();
        host.log(&format!(
            "watching the health of {}: {} probe(s) every {}, for up to {}; it holds once every probe passes {} rounds in a row",
            job.component,
            job.probes.len(),
            human(interval),
            human(window),
            job.hold_rounds
        ));
        let mut tallies: Vec<Tally> = job.probes.iter().map(|_| Tally::default()).collect();
        let (mut rounds, mut streak) = (0u32, 0u32);
        let mut held_after = None;
        loop {
            if let Some(reason) = host.stop_requested() {
                return Ok(crate::exec::result_of(ProcessExit::Stopped(reason)));
            }
            let round_start = Instant::now();
            rounds += 1;
            // Exec probes go through the host when it confines the job's
            // processes (one at a time); the others run at once.
            let confined = host.isolated();
            let here = job.probes.iter().map(|p| async move {
                if confined && p.kind == ProbeKind::Exec {
                    None
                } else {
                    Some(self.prober.probe(p, limit).await)
                }
            });
            let mut seen = join_all(here).await;
            for (i, p) in job.probes.iter().enumerate() {
                if seen[i].is_none() {
                    match exec_confined(host, &p.command).await? {
                        Ok(s) => seen[i] = Some(s),
                        Err(reason) => {
                            return Ok(crate::exec::result_of(ProcessExit::Stopped(reason)));
                        }
                    }
                }
            }
            let seen: Vec<Answer> = seen.into_iter().flatten().collect();
            let healthy = seen.iter().all(|s| s.ok);
            let line: Vec<String> = job
                .probes
                .iter()
                .zip(&seen)
                .map(|(p, s)| {
                    let mark = if s.ok { "ok" } else { "FAILED" };
                    format!("{} {mark} ({})", p.name, s.detail)
                })
                .collect();
            host.log(&format!("round {rounds}: {}", line.join("; ")));
            for (t, s) in tallies.iter_mut().zip(seen) {
                if s.ok {
                    t.passes += 1;
                } else {
                    t.failures += 1;
                }
                t.last = Some(s);
            }
            streak = if healthy { streak + 1 } else { 0 };
            if streak >= job.hold_rounds {
                held_after = Some(start.elapsed());
                break;
            }
            let next = round_start + interval;
            if next.duration_since(start) >= window {
                break;
            }
            // Asleep in short naps, so a cancel is seen within a second.
            while Instant::now() < next {
                if let Some(reason) = host.stop_requested() {
                    return Ok(crate::exec::result_of(ProcessExit::Stopped(reason)));
                }
                let nap = next
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_secs(1));
                tokio::time::sleep(nap).await;
            }
        }
        let probes: Vec<Value> = job
            .probes
            .iter()
            .zip(&tallies)
            .map(|(p, t)| {
                let last = t.last.as_ref();
                json!({
                    "name": p.name,
                    "type": p.kind.as_str(),
                    "ok": last.is_some_and(|s| s.ok),
                    "detail": last.map(|s| s.detail.clone()).unwrap_or_default(),
                    "passes": t.passes,
                    "failures": t.failures,
                })
            })
            .collect();
        let healthy = tallies
            .iter()
            .all(|t| t.last.as_ref().is_some_and(|s| s.ok));
        let outputs = json!({
            "component": job.component,
            "held": held_after.is_some(),
            "healthy": healthy,
            "rounds": rounds,
            "held_after_ms": held_after.map(|d| d.as_millis() as u64),
            "window_ms": job.window_ms,
            "block_deploy": job.block_deploy,
            "probes": probes,
        });
        if let Some(after) = held_after {
            host.log(&format!(
                "{} is healthy: every probe passed {} rounds in a row, {} ms after the apply",
                job.component,
                job.hold_rounds,
                after.as_millis()
            ));
            return Ok(JobResult {
                outcome: Outcome::Succeeded,
                exit_code: None,
                reason: None,
                outputs,
            });
        }
        let failing: Vec<String> = job
            .probes
            .iter()
            .zip(&tallies)
            .filter_map(|(p, t)| {
                let last = t.last.as_ref().filter(|s| !s.ok)?;
                Some(format!(
                    "probe {} failed {} of {rounds} rounds, last: {}",
                    p.name, t.failures, last.detail
                ))
            })
            .collect();
        let why = if failing.is_empty() {
            format!(
                "every probe passed the last round, but not {} rounds in a row",
                job.hold_rounds
            )
        } else {
            failing.join("; ")
        };
        let said = format!(
            "the health of {} did not hold within {}: {why}",
            job.component,
            human(window)
        );
        if job.block_deploy {
            host.log(&said);
            return Ok(JobResult {
                outcome: Outcome::Failed,
                exit_code: None,
                reason: Some(format!("{said} (block_deploy fails the deploy)")),
                outputs,
            });
        }
        host.log(&format!(
            "{said}; block_deploy is off, so the deploy goes on and the install's health shows it"
        ));
        Ok(JobResult {
            outcome: Outcome::Succeeded,
            exit_code: None,
            reason: None,
            outputs,
        })
    }
}

/// Runs an exec probe through the host (in the job's container): whether
/// it exited 0 (or why the host stopped it). Its output goes to the job's
/// log.
async fn exec_confined(
    host: &mut dyn JobHost,
    command: &[String],
) -> Result<Result<Answer, StopReason>, PluginError> {
    let started = Instant::now();
    let program = host
        .find_program(&command[0])
        .unwrap_or_else(|| command[0].clone().into());
    let exit = host
        .run_process(ProcessSpec::new(program).args(command[1..].iter().cloned()))
        .await?;
    let ms = started.elapsed().as_millis();
    Ok(Ok(match exit {
        ProcessExit::Exited(0) => Answer {
            ok: true,
            detail: format!("exit code 0 in {ms} ms"),
        },
        ProcessExit::Stopped(reason) => return Ok(Err(reason)),
        other => Answer {
            ok: false,
            detail: format!(
                "{} in {ms} ms",
                crate::exec::result_of(other).reason.unwrap_or_default()
            ),
        },
    }))
}

#[cfg(test)]
mod tests;
