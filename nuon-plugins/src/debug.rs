//! The `debug` job kind: a command the vendor asked an install's runner to
//! run, to read logs (`kubectl logs ...`, `journalctl ...`) or to debug.
//! The runner decides, never the control plane: [`DebugPolicy`] is set by
//! whoever runs the runner (`nuon-runner run --debug-commands`), and is
//! `off` unless they say otherwise.
//!
//! ```
//! use nuon_plugins::debug::DebugPolicy;
//!
//! let p = DebugPolicy::parse_allow_list("# what the vendor may run\njournalctl -u app -n 100\n\"kubectl\" logs deploy/app\n")?;
//! assert!(p.allows(&["journalctl".into(), "-u".into(), "app".into(), "-n".into(), "100".into()]).is_ok());
//! assert!(p.allows(&["journalctl".into(), "-u".into(), "app".into()]).is_err());
//! assert!(DebugPolicy::Off.allows(&["true".into()]).is_err());
//! # Ok::<(), String>(())
//! ```

use std::path::PathBuf;

use async_trait::async_trait;
use nuon_core::{DebugJob, Job, JobHost, JobResult, JobSpec, Plugin, PluginError, ProcessSpec};

/// Which debug commands a runner runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DebugPolicy {
    /// None: only the app's declared actions run (the default).
    #[default]
    Off,
    /// Exactly these commands, each matched on the whole command line.
    AllowList {
        /// Where the list came from, for refusals.
        source: String,
        /// The commands, each as its words.
        commands: Vec<Vec<String>>,
    },
    /// Any command.
    Any,
}

impl DebugPolicy {
    /// Reads an allow-list: one command per line, its words split on
    /// blanks, `'...'` or `"..."` keeping blanks in one word; blank lines
    /// and lines starting with `#` are skipped.
    pub fn parse_allow_list(text: &str) -> Result<DebugPolicy, String> {
        let mut commands = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            commands.push(words(line).map_err(|e| format!("line {}: {e}", i + 1))?);
        }
        Ok(DebugPolicy::AllowList {
            source: "the allow-list".into(),
            commands,
        })
    }

    /// Reads the allow-list file at `path`.
    pub fn allow_list_file(path: &std::path::Path) -> Result<DebugPolicy, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the allow-list {}: {e}", path.display()))?;
        match Self::parse_allow_list(&text).map_err(|e| format!("{}: {e}", path.display()))? {
            DebugPolicy::AllowList { commands, .. } => Ok(DebugPolicy::AllowList {
                source: path.display().to_string(),
                commands,
            }),
            other => Ok(other),
        }
    }

    /// Whether `command` may run here; the refusal says why, and how the
    /// install's operator could allow it.
    pub fn allows(&self, command: &[String]) -> Result<(), String> {
        let shown = shown(command);
        match self {
            DebugPolicy::Any => Ok(()),
            DebugPolicy::Off => Err(format!(
                "this runner refuses debug and log commands (it runs with --debug-commands off, the default): `{shown}` was not run. The install's operator decides: `--debug-commands allow-list FILE` runs the commands listed in FILE, `--debug-commands any` runs all"
            )),
            DebugPolicy::AllowList { source, commands } => {
                if commands.iter().any(|c| c.as_slice() == command) {
                    Ok(())
                } else {
                    Err(format!(
                        "`{shown}` is not on this runner's allow-list ({source}, {} command{}; each is matched on the whole command line): the install's operator can add it as a line of its own",
                        commands.len(),
                        if commands.len() == 1 { "" } else { "s" }
                    ))
                }
            }
        }
    }
}

/// A command as a line, quoting words that need it.
fn shown(command: &[String]) -> String {
    command
        .iter()
        .map(|w| {
            if !w.is_empty() && !w.contains(|c: char| c.is_whitespace() || "'\"\\".contains(c)) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a line into words: blanks separate, quotes group.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(ch) => word.push(ch),
                        None => return Err(format!("the quote {c} is not closed")),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

/// Runs `debug` jobs the runner's [`DebugPolicy`] allows; refuses the rest
/// before they start.
#[derive(Debug, Clone, Default)]
pub struct DebugPlugin {
    policy: DebugPolicy,
}

impl DebugPlugin {
    /// A plugin under `policy`.
    pub fn new(policy: DebugPolicy) -> Self {
        DebugPlugin { policy }
    }
}

fn decode(spec: &JobSpec) -> Result<DebugJob, PluginError> {
    spec.payload_as::<DebugJob>()
        .map_err(|e| PluginError::Invalid(e.to_string()))
}

#[async_trait]
impl Plugin for DebugPlugin {
    fn kind(&self) -> &'static str {
        DebugJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        if job.command.is_empty() {
            return Err(PluginError::Invalid("debug: the command is empty".into()));
        }
        self.policy
            .allows(&job.command)
            .map_err(PluginError::Missing)
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        // Checked again: validation and the run are one decision.
        self.policy
            .allows(&job.command)
            .map_err(PluginError::Missing)?;
        let mut words = job.command.into_iter();
        let program = PathBuf::from(words.next().unwrap_or_default());
        let exit = host
            .run_process(ProcessSpec {
                program,
                args: words.collect(),
                env: Default::default(),
                cwd: None,
                stdout_file: None,
            })
            .await?;
        Ok(crate::exec::result_of(exit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Vec<String> {
        words(s).unwrap()
    }

    #[test]
    fn the_allow_list_matches_whole_commands_only() {
        let p = DebugPolicy::parse_allow_list("kubectl logs deploy/api\n'echo' \"a b\"\n").unwrap();
        assert!(p.allows(&cmd("kubectl logs deploy/api")).is_ok());
        assert!(p.allows(&cmd("echo 'a b'")).is_ok());
        assert!(p.allows(&cmd("echo a b")).is_err());
        assert!(p.allows(&cmd("kubectl logs deploy/api --all")).is_err());
        assert!(p.allows(&cmd("kubectl logs")).is_err());
    }

    #[test]
    fn a_refusal_says_why_and_how_to_allow() {
        let e = DebugPolicy::Off
            .allows(&cmd("cat /etc/passwd"))
            .unwrap_err();
        assert!(e.contains("--debug-commands off"), "{e}");
        assert!(e.contains("`cat /etc/passwd`"), "{e}");
        let p = DebugPolicy::parse_allow_list("true\n").unwrap();
        let e = p.allows(&cmd("false")).unwrap_err();
        assert!(e.contains("not on this runner's allow-list"), "{e}");
    }

    #[test]
    fn an_unclosed_quote_names_its_line() {
        let e = DebugPolicy::parse_allow_list("ok\n\necho 'oops\n").unwrap_err();
        assert!(e.starts_with("line 3"), "{e}");
    }
}
