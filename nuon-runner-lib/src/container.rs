//! Jobs in containers (`nuon-runner run --isolation container`).
//!
//! Every process a job starts runs in a container of its own, started with
//! `runc run` from an OCI runtime bundle the runner writes under
//! `WORK_DIR/containers/bundles/ID`: the root filesystem is an overlay
//! whose lower layer is the job's tool image (unpacked once per digest by
//! an [`ImageRoots`]) and whose upper layer only ever gets the mount points
//! runc creates, mounted read-only; the job's work directory is bound at
//! the same path, read-write, and nothing else of the host is. Its own PID,
//! mount, IPC and UTS namespaces, a network namespace with nothing in it
//! unless the job may use the network, cgroup limits on memory, CPU and
//! processes, no capabilities and no new privileges.
//!
//! `runc` keeps its state under `WORK_DIR/containers/state` (`--root`), so
//! a restarted runner finds and removes what it left ([`ContainerRuntime::
//! clean_leftovers`]); the orphan guard removes a dead runner's containers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use nuon_core::{ImageRef, ImageRoots, JobSandbox, LimitHit, PreparedRoot};
use serde_json::{Value, json};

use crate::sys;

/// How jobs are isolated from the runner and from each other.
#[derive(Clone, Default)]
pub enum Isolation {
    /// Each job is a process group on the runner's host (the default).
    #[default]
    Process,
    /// Each job's processes run in containers.
    Container(ContainerOptions),
}

/// What `--isolation container` needs.
#[derive(Clone)]
pub struct ContainerOptions {
    /// The `runc` binary.
    pub runc: PathBuf,
    /// Where the root filesystems of tool images come from.
    pub images: Arc<dyn ImageRoots>,
    /// The image of jobs that name none (`--job-image`).
    pub default_image: Option<ImageRef>,
    /// Limits of jobs that set none.
    pub limits: Limits,
    /// Whether `exec` jobs (actions, commands) may use the network at all
    /// (`--exec-network`).
    pub exec_network: bool,
}

/// A job's cgroup limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// CPU, in thousandths of a CPU.
    pub millicpus: u64,
    /// Processes and threads.
    pub pids: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 2 << 30,
            millicpus: 2000,
            pids: 1024,
        }
    }
}

impl Limits {
    /// The job's own limits over these defaults.
    pub fn for_job(&self, sandbox: &JobSandbox) -> Limits {
        Limits {
            memory_bytes: sandbox.memory_bytes.unwrap_or(self.memory_bytes),
            millicpus: sandbox.millicpus.unwrap_or(self.millicpus),
            pids: sandbox.pids.unwrap_or(self.pids),
        }
    }
}

/// The runner's container runtime: `runc` and its directories.
pub(crate) struct ContainerRuntime {
    pub(crate) options: ContainerOptions,
    /// `runc --root`.
    pub(crate) state_dir: PathBuf,
    /// One bundle directory per container.
    pub(crate) bundles_dir: PathBuf,
    cgroup_v2: bool,
    /// Whether the kernel accounts swap per cgroup, so that a job's memory
    /// limit can hold swap too (none is then used).
    swap_limit: bool,
    seq: AtomicU64,
}

/// Everything one job's containers share.
pub(crate) struct JobContainers {
    pub(crate) runtime: Arc<ContainerRuntime>,
    pub(crate) image: ImageRef,
    pub(crate) root: PreparedRoot,
    pub(crate) limits: Limits,
    pub(crate) network: bool,
    /// The job id, in container names.
    pub(crate) name: String,
}

/// The cgroup parent of every job container.
const CGROUP_PARENT: &str = "/nuon-runner";

impl ContainerRuntime {
    /// Checks that `runc` runs and makes the directories under `work_dir`.
    pub(crate) fn new(options: ContainerOptions, work_dir: &Path) -> Result<Self, String> {
        let out = std::process::Command::new(&options.runc)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                format!(
                    "--isolation container needs runc, and {} cannot be run: {e}; install runc (Debian: apt-get install runc) or use --isolation process",
                    options.runc.display()
                )
            })?;
        if !out.status.success() {
            return Err(format!(
                "{} --version failed: {}",
                options.runc.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        // Absolute: runc, overlayfs and the watchdog take these paths
        // whatever their working directory.
        let work_dir = std::path::absolute(work_dir)
            .map_err(|e| format!("cannot resolve {}: {e}", work_dir.display()))?;
        let base = work_dir.join("containers");
        let state_dir = base.join("state");
        let bundles_dir = base.join("bundles");
        for d in [&base, &state_dir, &bundles_dir] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("cannot make {} private: {e}", d.display()))?;
        }
        let cgroup_v2 = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
        let swap_limit = if cgroup_v2 {
            Path::new("/sys/fs/cgroup/memory.swap.max").exists()
                || std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control")
                    .is_ok_and(|c| c.contains("memory"))
        } else {
            Path::new("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes").exists()
        };
        Ok(ContainerRuntime {
            options,
            state_dir,
            bundles_dir,
            cgroup_v2,
            swap_limit,
            seq: AtomicU64::new(0),
        })
    }

    fn runc(&self) -> std::process::Command {
        let mut c = std::process::Command::new(&self.options.runc);
        c.arg("--root")
            .arg(&self.state_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// Removes the containers, mounts and bundles a runner that died left
    /// behind: everything `runc list` knows under this runner's root.
    pub(crate) fn clean_leftovers(&self) {
        let listed = self
            .runc()
            .args(["list", "--quiet"])
            .stdout(Stdio::piped())
            .output();
        if let Ok(out) = listed {
            for id in String::from_utf8_lossy(&out.stdout).lines() {
                let id = id.trim();
                if id.is_empty() {
                    continue;
                }
                tracing::warn!(
                    container = id,
                    "removing a container a previous run of this runner left"
                );
                self.delete(id);
            }
        }
        if let Ok(rd) = std::fs::read_dir(&self.bundles_dir) {
            for e in rd.flatten() {
                self.remove_bundle(&e.path());
            }
        }
    }

    /// `runc delete --force`: kills what is left of the container and
    /// removes its state and cgroup.
    pub(crate) fn delete(&self, id: &str) {
        match self.runc().args(["delete", "--force", id]).output() {
            Ok(out) if !out.status.success() => {
                let err = String::from_utf8_lossy(&out.stderr);
                if !err.contains("does not exist") {
                    tracing::warn!(container = id, error = %err.trim(), "runc delete failed");
                }
            }
            Err(e) => tracing::warn!(container = id, error = %e, "cannot run runc delete"),
            Ok(_) => {}
        }
    }

    /// Unmounts a bundle's root filesystem and removes the bundle.
    fn remove_bundle(&self, bundle: &Path) {
        let rootfs = bundle.join("rootfs");
        if let Err(e) = sys::unmount(&rootfs) {
            tracing::warn!(path = %rootfs.display(), error = %e, "cannot unmount a container's root filesystem");
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(bundle)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %bundle.display(), error = %e, "cannot remove a container bundle");
        }
    }

    /// `runc kill --all ID SIGNAL`: whether runc signalled the container
    /// (not when it is not created yet, or gone).
    pub(crate) async fn signal(&self, id: &str, signal: &str) -> bool {
        let mut c = tokio::process::Command::from(self.runc());
        c.args(["kill", "--all", id, signal]);
        match c.output().await {
            Ok(out) if !out.status.success() => {
                let err = String::from_utf8_lossy(&out.stderr);
                tracing::debug!(container = id, signal, error = %err.trim(), "runc kill failed");
                false
            }
            Err(e) => {
                tracing::warn!(container = id, error = %e, "cannot run runc kill");
                false
            }
            Ok(_) => true,
        }
    }

    /// How many times the kernel stopped the container at a limit:
    /// `(OOM kills, refused forks)`, read from its cgroup (still there: the
    /// container is run with `--keep`).
    fn limit_events(&self, id: &str) -> (u64, u64) {
        let cg = format!("{CGROUP_PARENT}/{id}");
        let (mem, pids) = if self.cgroup_v2 {
            (
                format!("/sys/fs/cgroup{cg}/memory.events"),
                format!("/sys/fs/cgroup{cg}/pids.events"),
            )
        } else {
            (
                format!("/sys/fs/cgroup/memory{cg}/memory.oom_control"),
                format!("/sys/fs/cgroup/pids{cg}/pids.events"),
            )
        };
        let count = |file: &str, key: &str| -> u64 {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|t| {
                    t.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == key).then(|| v.trim().parse().ok()).flatten()
                    })
                })
                .unwrap_or(0)
        };
        (count(&mem, "oom_kill"), count(&pids, "max"))
    }
}

/// One container of a job, from its bundle to its removal.
pub(crate) struct Container {
    runtime: Arc<ContainerRuntime>,
    pub(crate) id: String,
    bundle: PathBuf,
    limits: Limits,
    removed: bool,
}

/// The limits the kernel enforced on a container.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct LimitsHit {
    /// It killed a process at the memory limit.
    pub(crate) memory: Option<LimitHit>,
    /// It refused a `fork` at the limit on processes.
    pub(crate) pids: Option<LimitHit>,
}

/// A process to start in a container.
pub(crate) struct ContainerProcess<'a> {
    pub(crate) program: &'a Path,
    pub(crate) args: &'a [String],
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) cwd: &'a Path,
    pub(crate) work_dir: &'a Path,
}

impl JobContainers {
    /// Writes the bundle of a container for `process` and the `runc run`
    /// command that starts it (stdio still to be set).
    pub(crate) fn prepare(
        &self,
        process: ContainerProcess<'_>,
    ) -> Result<(Container, tokio::process::Command), String> {
        let rt = &self.runtime;
        let n = rt.seq.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}-{n}", self.name);
        let bundle = rt.bundles_dir.join(&id);
        let rootfs = bundle.join("rootfs");
        let upper = bundle.join("upper");
        let scratch = bundle.join("scratch");
        // Made first: whatever fails below, dropping it removes the bundle.
        let container = Container {
            runtime: rt.clone(),
            id: id.clone(),
            bundle: bundle.clone(),
            limits: self.limits,
            removed: false,
        };
        for d in [&rootfs, &upper, &scratch] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        sys::mount_overlay(&self.root.rootfs, &upper, &scratch, &rootfs).map_err(|e| {
            format!(
                "cannot mount the root filesystem of {} for the job's container: {e}",
                self.image
            )
        })?;
        let spec = runtime_spec(&SpecInput {
            args: std::iter::once(process.program.to_string_lossy().into_owned())
                .chain(process.args.iter().cloned())
                .collect(),
            env: container_env(&self.root.env, process.env),
            cwd: process.cwd,
            work_dir: process.work_dir,
            limits: self.limits,
            network: self.network,
            cgroup: format!("{CGROUP_PARENT}/{id}"),
            hostname: "nuon-job",
            swap_limit: rt.swap_limit,
        });
        let text = serde_json::to_vec_pretty(&spec).map_err(|e| e.to_string())?;
        {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(bundle.join("config.json"))
                .map_err(|e| format!("cannot write the container's config: {e}"))?;
            f.write_all(&text)
                .map_err(|e| format!("cannot write the container's config: {e}"))?;
        }
        let mut cmd = tokio::process::Command::new(&rt.options.runc);
        cmd.arg("--root")
            .arg(&rt.state_dir)
            .args(["run", "--keep", "--bundle"])
            .arg(&bundle)
            .arg(&id)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            );
        Ok((container, cmd))
    }
}

impl Container {
    /// After the container's process ended: the limits the kernel
    /// enforced on it, if any; then the container and its bundle go.
    pub(crate) fn finish(mut self) -> LimitsHit {
        let (ooms, refused_forks) = self.runtime.limit_events(&self.id);
        self.remove();
        LimitsHit {
            memory: (ooms > 0).then_some(LimitHit::Memory {
                limit_bytes: self.limits.memory_bytes,
            }),
            pids: (refused_forks > 0).then_some(LimitHit::Pids {
                limit: self.limits.pids,
            }),
        }
    }

    fn remove(&mut self) {
        if !self.removed {
            self.removed = true;
            self.runtime.delete(&self.id);
            self.runtime.remove_bundle(&self.bundle);
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.remove();
    }
}

/// The container's environment: the image's, then the job's, except
/// that `PATH` is the image's (the host's means nothing inside) and the
/// home and temporary directories are the container's `/tmp`.
fn container_env(image_env: &[String], job: BTreeMap<String, String>) -> Vec<String> {
    let mut env: BTreeMap<String, String> = image_env
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let path = env
        .get("PATH")
        .cloned()
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    env.extend(job);
    env.insert("PATH".into(), path);
    env.insert("HOME".into(), "/tmp".into());
    env.insert("TMPDIR".into(), "/tmp".into());
    env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// What a container's runtime spec is made of.
pub(crate) struct SpecInput<'a> {
    pub(crate) args: Vec<String>,
    pub(crate) env: Vec<String>,
    pub(crate) cwd: &'a Path,
    pub(crate) work_dir: &'a Path,
    pub(crate) limits: Limits,
    pub(crate) network: bool,
    pub(crate) cgroup: String,
    pub(crate) hostname: &'a str,
    /// Limit swap too (memory + swap = the memory limit: no swap).
    pub(crate) swap_limit: bool,
}

/// The OCI runtime spec (`config.json`) of a job's container.
pub(crate) fn runtime_spec(s: &SpecInput<'_>) -> Value {
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if !s.network {
        // A namespace of its own with nothing in it, not even `lo` up.
        namespaces.push(json!({"type": "network"}));
    }
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
               "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
               "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
               "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
               "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "nodev", "mode=1777", "size=262144k"]}),
        json!({"destination": s.work_dir, "type": "bind", "source": s.work_dir,
               "options": ["rbind", "rw", "nosuid", "nodev"]}),
    ];
    if s.network {
        // Name resolution as the host has it.
        for f in ["/etc/resolv.conf", "/etc/hosts"] {
            if Path::new(f).is_file() {
                mounts.push(json!({"destination": f, "type": "bind", "source": f,
                                   "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]}));
            }
        }
    }
    let period: u64 = 100_000;
    let mut memory = json!({"limit": s.limits.memory_bytes});
    if s.swap_limit {
        memory["swap"] = json!(s.limits.memory_bytes);
    }
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": s.args,
            "env": s.env,
            "cwd": s.cwd,
            // No capability at all: the tools a job runs need none.
            "capabilities": {"bounding": [], "effective": [], "permitted": [], "inheritable": [], "ambient": []},
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs", "readonly": true},
        "hostname": s.hostname,
        "mounts": mounts,
        "linux": {
            "resources": {
                "devices": [{"allow": false, "access": "rwm"}],
                "memory": memory,
                "cpu": {"quota": s.limits.millicpus * period / 1000, "period": period},
                "pids": {"limit": s.limits.pids}
            },
            "cgroupsPath": s.cgroup,
            "namespaces": namespaces,
            "seccomp": seccomp(),
            "maskedPaths": [
                "/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
                "/proc/scsi", "/sys/devices/virtual/powercap"
            ],
            "readonlyPaths": [
                "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"
            ]
        }
    })
}

/// The system calls a job never needs and that widen what it can reach
/// of the kernel (keyrings shared with the host's root, new user or other
/// namespaces, mounts, modules, BPF, perf, handles to host files): denied
/// with EPERM, everything else allowed. `clone3` answers ENOSYS so that
/// libc falls back to `clone`, whose flags can be checked.
fn seccomp() -> Value {
    const DENIED: &[&str] = &[
        "keyctl",
        "add_key",
        "request_key",
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "open_by_handle_at",
        "name_to_handle_at",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "reboot",
        "swapon",
        "swapoff",
        "syslog",
        "acct",
        "quotactl",
        "lookup_dcookie",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "fsopen",
        "fsmount",
        "fsconfig",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "iopl",
        "ioperm",
        "vhangup",
        "nfsservctl",
        "uselib",
        "ustat",
        "sysfs",
    ];
    // The namespace flags of clone(2): a new user namespace needs no
    // capability; the others are denied with it.
    const CLONE_NEW: [u64; 7] = [
        0x0002_0000, // NEWNS
        0x0200_0000, // NEWCGROUP
        0x0400_0000, // NEWUTS
        0x0800_0000, // NEWIPC
        0x1000_0000, // NEWUSER
        0x2000_0000, // NEWPID
        0x4000_0000, // NEWNET
    ];
    let arch = match std::env::consts::ARCH {
        "aarch64" => vec!["SCMP_ARCH_AARCH64"],
        _ => vec!["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    };
    let mut syscalls = vec![
        json!({"names": DENIED, "action": "SCMP_ACT_ERRNO", "errnoRet": 1}),
        json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}),
    ];
    // One rule per flag: (flags & FLAG) == FLAG.
    for flag in CLONE_NEW {
        syscalls.push(
            json!({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
            "args": [{"index": 0, "value": flag, "valueTwo": flag, "op": "SCMP_CMP_MASKED_EQ"}]}),
        );
    }
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": arch,
        "syscalls": syscalls
    })
}

/// Removes every symbolic link under `work_dir` that leads outside it or
/// nowhere: after a container's processes ended, before the runner (root)
/// reads or writes anything there, so that no link a job planted makes it
/// open a host file. The names removed, for the job's log.
pub(crate) fn remove_escaping_links(work_dir: &Path) -> Vec<String> {
    let Ok(root) = std::fs::canonicalize(work_dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    let mut stack = vec![work_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_symlink() {
                let inside =
                    std::fs::canonicalize(&p).is_ok_and(|target| target.starts_with(&root));
                if !inside {
                    let target = std::fs::read_link(&p).unwrap_or_default();
                    if std::fs::remove_file(&p).is_ok() {
                        removed.push(format!(
                            "{} -> {}",
                            p.strip_prefix(work_dir).unwrap_or(&p).display(),
                            target.display()
                        ));
                    }
                }
            }
        }
    }
    removed
}

/// The `runc` on `PATH`, for `--isolation container` without `--runc`.
pub fn find_runc() -> Result<PathBuf, String> {
    which::which("runc").map_err(|_| {
        "--isolation container needs runc on PATH (Debian: apt-get install runc), or its path in --runc"
            .to_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_leading_out_of_the_work_dir_or_nowhere_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().join("work");
        std::fs::create_dir_all(w.join("sub")).unwrap();
        std::fs::write(w.join("file"), "x").unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, w.join(name)).unwrap();
        link("ok", "file");
        link("sub/up", "../file");
        link("abs", "/etc/hostname");
        link("dots", "sub/../../outside");
        link("dangling", "/nonexistent/plan.json");
        link("selfdir", ".");
        link("via", "selfdir/../x");
        let mut removed = remove_escaping_links(&w);
        removed.sort();
        assert_eq!(
            removed,
            [
                "abs -> /etc/hostname",
                "dangling -> /nonexistent/plan.json",
                "dots -> sub/../../outside",
                "via -> selfdir/../x",
            ]
        );
        assert!(w.join("ok").exists() && w.join("sub/up").exists() && w.join("selfdir").exists());
    }

    #[test]
    fn the_spec_isolates_and_limits() {
        let spec = runtime_spec(&SpecInput {
            args: vec!["terraform".into(), "plan".into()],
            env: vec!["PATH=/bin".into()],
            cwd: Path::new("/w/jobs/j1/module"),
            work_dir: Path::new("/w/jobs/j1"),
            limits: Limits {
                memory_bytes: 64 << 20,
                millicpus: 500,
                pids: 64,
            },
            network: false,
            cgroup: "/nuon-runner/j1-0".into(),
            hostname: "nuon-job",
            swap_limit: true,
        });
        let ns: Vec<&str> = spec["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert_eq!(ns, ["pid", "ipc", "uts", "mount", "network"]);
        assert_eq!(spec["root"]["readonly"], true);
        assert_eq!(spec["process"]["noNewPrivileges"], true);
        assert_eq!(spec["process"]["capabilities"]["bounding"], json!([]));
        assert_eq!(spec["linux"]["resources"]["memory"]["limit"], 64 << 20);
        assert_eq!(spec["linux"]["resources"]["memory"]["swap"], 64 << 20);
        assert_eq!(spec["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ALLOW");
        assert_eq!(spec["linux"]["resources"]["cpu"]["quota"], 50_000);
        assert_eq!(spec["linux"]["resources"]["pids"]["limit"], 64);
        let binds: Vec<&Value> = spec["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["type"] == "bind")
            .collect();
        assert_eq!(binds.len(), 1, "only the work directory: {binds:?}");
        assert_eq!(binds[0]["source"], "/w/jobs/j1");

        let env = container_env(
            &["PATH=/usr/local/bin:/bin".into(), "LANG=C".into()],
            BTreeMap::from([
                ("PATH".into(), "/host/bin".into()),
                ("A".into(), "1".into()),
            ]),
        );
        assert!(
            env.contains(&"PATH=/usr/local/bin:/bin".to_string()),
            "{env:?}"
        );
        assert!(env.contains(&"A=1".to_string()));
        assert!(env.contains(&"HOME=/tmp".to_string()));
    }
}
