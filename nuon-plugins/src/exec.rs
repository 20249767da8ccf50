//! The `exec` job kind: run one command in the job's work directory.
//!
//! The payload is a [`nuon_core::ExecJob`]. The job succeeds when the
//! command exits with code 0; any other end fails it (or cancels it, or
//! times it out) with the exit code or the signal in the reason.

use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use nuon_core::{
    ExecJob, Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError, ProcessExit,
    ProcessSpec, StopReason,
};

/// Runs [`ExecJob`]s: the command with its arguments and environment, in
/// `dir` (relative to the job's work directory) when given.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExecPlugin {
    /// Commands come from the job's container image, not this host.
    containers: bool,
}

impl ExecPlugin {
    /// The plugin, running commands of the runner's host.
    pub fn new() -> Self {
        ExecPlugin::default()
    }

    /// The plugin of a runner that runs jobs in containers: commands are
    /// the job image's, so none is looked up on the host before the job.
    pub fn in_containers() -> Self {
        ExecPlugin { containers: true }
    }
}

/// The tool `name` a job runs: in the job's image when its processes run
/// in containers, else on the runner's `PATH`; `missing` says how to get it.
#[cfg(any(feature = "helm", feature = "pulumi"))]
pub(crate) fn find_tool(
    host: &dyn JobHost,
    name: &str,
    missing: impl FnOnce() -> PluginError,
) -> Result<std::path::PathBuf, PluginError> {
    let found = if host.isolated() {
        host.find_program(name)
    } else {
        which::which(name).ok()
    };
    found.ok_or_else(|| {
        if host.isolated() {
            PluginError::Missing(format!(
                "`{name}` is not in the job's container image (on the image's PATH): use a tool image that has it"
            ))
        } else {
            missing()
        }
    })
}

/// Checks the payload's shape and decodes it.
fn decode(spec: &JobSpec) -> Result<ExecJob, PluginError> {
    let job: ExecJob = spec
        .payload_as()
        .map_err(|e| PluginError::Invalid(format!("exec: {e}")))?;
    if job.command.trim().is_empty() {
        return Err(PluginError::Invalid(
            "exec: \"command\" is empty; name the program to run".into(),
        ));
    }
    if job.command.contains('\0') || job.args.iter().any(|a| a.contains('\0')) {
        return Err(PluginError::Invalid(
            "exec: the command and its arguments must not contain NUL bytes".into(),
        ));
    }
    for (key, value) in &job.env {
        if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
            return Err(PluginError::Invalid(format!(
                "exec: environment variable {key:?} is not valid: names must be non-empty \
                 without '=' or NUL, values without NUL"
            )));
        }
    }
    if let Some(dir) = &job.dir {
        check_dir(dir)?;
    }
    Ok(job)
}

/// `dir` must stay inside the job's work directory.
fn check_dir(dir: &str) -> Result<(), PluginError> {
    let escapes = Path::new(dir)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes || dir.contains('\0') {
        return Err(PluginError::Invalid(format!(
            "exec: dir {dir:?} must be a relative path inside the job's work directory \
             (no leading '/', no '..')"
        )));
    }
    Ok(())
}

/// The result a process end maps to.
/// Runs a tool of a job (logged as `$ NAME ARGS`), with `env` and its
/// stdout to `stdout_file` when given: how it ended.
#[cfg(any(feature = "helm", feature = "pulumi"))]
pub(crate) async fn run_tool(
    host: &mut dyn JobHost,
    bin: &std::path::Path,
    env: &[(String, String)],
    args: &[String],
    stdout_file: Option<&str>,
) -> Result<ProcessExit, PluginError> {
    let name = bin
        .file_name()
        .map_or("tool".into(), |n| n.to_string_lossy().into_owned());
    host.log(&format!("$ {name} {}", args.join(" ")));
    let mut p = ProcessSpec::new(bin);
    p.args = args.to_vec();
    p.env = env.iter().cloned().collect();
    p.stdout_file = stdout_file.map(Into::into);
    Ok(host.run_process(p).await?)
}

/// The result of a tool that did not succeed: `what failed: why`.
#[cfg(any(feature = "helm", feature = "pulumi"))]
pub(crate) fn tool_failed(what: &str, exit: ProcessExit) -> JobResult {
    let mut r = result_of(exit);
    r.reason = Some(format!(
        "{what} failed: {}; see the job's log",
        r.reason.unwrap_or_default()
    ));
    r
}

/// Writes `text` to `name` in the work directory, readable by the job's
/// user alone (values, manifests and kubeconfigs can hold secrets); the
/// file's path.
#[cfg(any(feature = "helm", feature = "pulumi"))]
pub(crate) fn write_work_file(
    work: &std::path::Path,
    name: &str,
    text: &str,
    kind: &str,
) -> Result<String, PluginError> {
    let p = work.join(name);
    crate::private::write_private(&p, &[text.as_bytes()])
        .map_err(|e| PluginError::Missing(format!("{kind}: cannot write {name}: {e}")))?;
    Ok(p.to_string_lossy().into_owned())
}

pub(crate) fn result_of(exit: ProcessExit) -> JobResult {
    let (outcome, exit_code, reason) = match exit {
        ProcessExit::Exited(0) => (Outcome::Succeeded, Some(0), None),
        ProcessExit::Exited(n) => (Outcome::Failed, Some(n), Some(format!("exit code {n}"))),
        ProcessExit::Signaled(s) => (Outcome::Failed, None, Some(format!("killed by signal {s}"))),
        ProcessExit::Limited(hit) => (Outcome::Failed, None, Some(hit.to_string())),
        ProcessExit::Stopped(StopReason::Cancelled) => (
            Outcome::Cancelled,
            None,
            Some("cancelled: the job was cancelled through the API".into()),
        ),
        ProcessExit::Stopped(StopReason::TimedOut) => (
            Outcome::TimedOut,
            None,
            Some("timed out: the job ran past its timeout".into()),
        ),
        ProcessExit::Stopped(StopReason::Stale) => (
            Outcome::Failed,
            None,
            Some("stopped: the runner lost the attempt's lease".into()),
        ),
        ProcessExit::Stopped(StopReason::Shutdown) => (
            Outcome::Failed,
            None,
            Some("stopped: the runner shut down before the job finished".into()),
        ),
    };
    JobResult {
        outcome,
        exit_code,
        reason,
        outputs: serde_json::Value::Null,
    }
}

#[async_trait]
impl Plugin for ExecPlugin {
    fn kind(&self) -> &'static str {
        ExecJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        let command = job.command.as_str();
        if self.containers {
            // The image has it, or the container says it has not.
        } else if !command.contains('/') {
            if which::which(command).is_err() {
                let path = std::env::var("PATH").unwrap_or_default();
                return Err(PluginError::Missing(format!(
                    "exec: command {command:?} not found on the runner's PATH ({path}); \
                     install it on the runner or give its full path"
                )));
            }
        } else if Path::new(command).is_absolute() && !Path::new(command).exists() {
            return Err(PluginError::Missing(format!(
                "exec: command {command:?} does not exist on the runner"
            )));
        }
        Ok(())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let dir = job.dir.as_deref().map(PathBuf::from);
        if let Some(dir) = &dir {
            let full = host.work_dir().join(dir);
            std::fs::create_dir_all(&full).map_err(|e| {
                PluginError::Missing(format!(
                    "exec: cannot create the working directory {}: {e}",
                    dir.display()
                ))
            })?;
        }
        // A relative path with a slash means a file inside the working
        // directory; resolve it here so it does not depend on the platform.
        let program = if job.command.contains('/') && !Path::new(&job.command).is_absolute() {
            let base = match &dir {
                Some(d) => host.work_dir().join(d),
                None => host.work_dir().to_path_buf(),
            };
            base.join(&job.command)
        } else {
            PathBuf::from(&job.command)
        };
        let mut env = job.env;
        let outputs = host.work_dir().join("action-outputs");
        if job.outputs_file {
            env.insert(
                nuon_core::ACTION_OUTPUTS_VAR.to_owned(),
                outputs.to_string_lossy().into_owned(),
            );
        }
        let process = ProcessSpec {
            program,
            args: job.args,
            env,
            cwd: dir,
            stdout_file: None,
        };
        let exit = host.run_process(process).await?;
        let mut result = result_of(exit);
        if job.outputs_file && result.outcome == Outcome::Succeeded {
            let text = std::fs::read_to_string(&outputs).unwrap_or_default();
            match nuon_core::parse_action_outputs(&text) {
                Ok(m) => result.outputs = serde_json::json!({ "outputs": m }),
                Err(e) => {
                    result = JobResult::failed(format!("{e} (${})", nuon_core::ACTION_OUTPUTS_VAR))
                }
            }
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use nuon_core::{HostError, JobId, OrgId, RunnerId};
    use serde_json::json;

    use super::*;

    fn spec(kind: &str, payload: serde_json::Value) -> JobSpec {
        JobSpec {
            job_id: JobId::generate(),
            org_id: OrgId::generate(),
            runner_id: RunnerId::generate(),
            kind: kind.into(),
            payload,
            timeout_secs: 10,
            retry: Default::default(),
            created_at_ms: 0,
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        }
    }

    /// Validates a payload and compares the error text (or its absence).
    fn check(kind: &str, payload: serde_json::Value, expected: Result<(), &str>) {
        let got = ExecPlugin::new().validate(&spec(kind, payload.clone()));
        match (got, expected) {
            (Ok(()), Ok(())) => {}
            (Err(e), Err(want)) => {
                assert!(
                    e.to_string().contains(want),
                    "{payload}: {e:?} lacks {want:?}"
                )
            }
            (got, want) => panic!("{payload}: got {got:?}, expected {want:?}"),
        }
    }

    #[test]
    fn validation() {
        check("exec", json!({"command": "sh"}), Ok(()));
        check(
            "exec",
            json!({"command": "sh", "args": ["-c", "true"], "env": {"A": "1"}, "dir": "a/./b"}),
            Ok(()),
        );
        check(
            "exec",
            json!({"command": "./build.sh", "dir": "src"}),
            Ok(()),
        );
        check("shell", json!({"command": "sh"}), Err("expected \"exec\""));
        check(
            "exec",
            json!({"args": []}),
            Err("invalid job: exec: invalid exec payload"),
        );
        check(
            "exec",
            json!({"command": "sh", "bogus": 1}),
            Err("unknown field `bogus`"),
        );
        check(
            "exec",
            json!({"command": "  "}),
            Err("\"command\" is empty"),
        );
        check(
            "exec",
            json!({"command": "sh", "dir": "../x"}),
            Err("must be a relative path"),
        );
        check(
            "exec",
            json!({"command": "sh", "dir": "a/../../x"}),
            Err("no '..'"),
        );
        check(
            "exec",
            json!({"command": "sh", "dir": "/etc"}),
            Err("no leading '/'"),
        );
        check(
            "exec",
            json!({"command": "sh", "env": {"A=B": "1"}}),
            Err("environment variable"),
        );
        check(
            "exec",
            json!({"command": "sh", "args": ["a\u{0}b"]}),
            Err("NUL"),
        );
        check(
            "exec",
            json!({"command": "no-such-command-nuon-test"}),
            Err("exec: command \"no-such-command-nuon-test\" not found on the runner's PATH ("),
        );
        check(
            "exec",
            json!({"command": "/no/such/nuon-binary"}),
            Err("does not exist"),
        );
    }

    #[test]
    fn missing_command_is_a_missing_error() {
        let err = ExecPlugin::new()
            .validate(&spec(
                "exec",
                json!({"command": "no-such-command-nuon-test"}),
            ))
            .unwrap_err();
        assert!(matches!(err, PluginError::Missing(_)), "{err:?}");
    }

    /// A host that records the process it was asked for and answers `exit`.
    struct FakeHost {
        dir: PathBuf,
        exit: ProcessExit,
        seen: Option<ProcessSpec>,
    }

    #[async_trait]
    impl JobHost for FakeHost {
        fn work_dir(&self) -> &Path {
            &self.dir
        }
        fn log(&mut self, _text: &str) {}
        async fn run_process(&mut self, process: ProcessSpec) -> Result<ProcessExit, HostError> {
            self.seen = Some(process);
            Ok(self.exit)
        }
    }

    #[tokio::test]
    async fn exits_map_to_results() {
        let table = [
            (ProcessExit::Exited(0), Outcome::Succeeded, Some(0), None),
            (
                ProcessExit::Exited(3),
                Outcome::Failed,
                Some(3),
                Some("exit code 3"),
            ),
            (
                ProcessExit::Signaled(9),
                Outcome::Failed,
                None,
                Some("killed by signal 9"),
            ),
            (
                ProcessExit::Stopped(StopReason::Cancelled),
                Outcome::Cancelled,
                None,
                Some("cancelled"),
            ),
            (
                ProcessExit::Stopped(StopReason::TimedOut),
                Outcome::TimedOut,
                None,
                Some("timed out"),
            ),
            (
                ProcessExit::Stopped(StopReason::Stale),
                Outcome::Failed,
                None,
                Some("lease"),
            ),
            (
                ProcessExit::Stopped(StopReason::Shutdown),
                Outcome::Failed,
                None,
                Some("shut down"),
            ),
        ];
        let tmp = std::env::temp_dir().join(format!("nuon-plugins-test-{}", std::process::id()));
        for (exit, outcome, code, reason) in table {
            let mut host = FakeHost {
                dir: tmp.clone(),
                exit,
                seen: None,
            };
            let payload =
                json!({"command": "sh", "args": ["-c", "x"], "env": {"K": "V"}, "dir": "sub"});
            let result = ExecPlugin::new()
                .run(&spec("exec", payload), &mut host)
                .await
                .unwrap();
            assert_eq!(result.outcome, outcome, "{exit:?}");
            assert_eq!(result.exit_code, code, "{exit:?}");
            match reason {
                None => assert_eq!(result.reason, None),
                Some(r) => assert!(result.reason.as_deref().unwrap().contains(r), "{result:?}"),
            }
            let seen = host.seen.unwrap();
            assert_eq!(seen.program, PathBuf::from("sh"));
            assert_eq!(seen.args, ["-c", "x"]);
            assert_eq!(seen.env, BTreeMap::from([("K".into(), "V".into())]));
            assert_eq!(seen.cwd, Some(PathBuf::from("sub")));
            assert!(tmp.join("sub").is_dir());
        }
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
