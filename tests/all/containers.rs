//! Jobs in containers (`nuon-runner run --isolation container`), with real
//! `runc`: each job's processes in their own namespaces, from a tool image
//! of the install's store, with limits, and nothing of the runner in view.
//! Every probe also runs on a runner with `--isolation process`, where it
//! must see what the container hides: the probes can fail.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nuon_core::JobStatus;
use nuon_core::wire::{CreateJob, JobInfo};
use nuon_tests::{
    ControlPlane, Runner, RunnerOpts, all_logs, have_tool, ours, process_alive, rt, wait_for,
    wait_job,
};

/// A control plane with two runners of one store layout: `boxed` runs
/// jobs in containers of a busybox tool image from its install store,
/// `bare` runs them as process groups.
struct Boxes {
    cp: ControlPlane,
    boxed: Runner,
    bare: Runner,
    /// `boxed`'s work directory.
    work: PathBuf,
    /// The image its jobs run in.
    image: String,
    /// `boxed`'s token.
    token: String,
    _tmp: tempfile::TempDir,
}

/// Whether runc can run here: it needs root and `runc` on PATH, and the
/// tool image needs a static busybox.
fn can_run_containers() -> bool {
    if !have_tool("runc", "run jobs in containers") {
        return false;
    }
    if !Path::new("/bin/busybox").exists() && !have_tool("busybox", "build a tool image") {
        return false;
    }
    // SAFETY-free check of the effective user: root owns /proc/self.
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if !root {
        let msg = "runc needs root: cannot run jobs in containers";
        assert!(!nuon_tests::require_all(), "{msg} (NUON_TEST_REQUIRE=all)");
        eprintln!("SKIPPED: {msg}");
    }
    root
}

fn busybox() -> String {
    if Path::new("/bin/busybox").exists() {
        "/bin/busybox".into()
    } else {
        which::which("busybox").unwrap().display().to_string()
    }
}

/// `nuon images tool` into `store`: the image's `REPOSITORY@DIGEST`.
pub(crate) fn tool_image(store: &Path, args: &[&str]) -> String {
    let out = ours("nuon")
        .args(["--json", "images", "tool", "--store"])
        .arg(store)
        .args(["--busybox", &busybox()])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nuon images tool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["image"].as_str().unwrap().to_owned()
}

impl Boxes {
    fn start(extra: &[&str]) -> Boxes {
        let cp = ControlPlane::start("10s").expect("start control plane");
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("boxed");
        std::fs::create_dir_all(&work).unwrap();
        let image = tool_image(&work.join("store"), &["--tag", "1"]);
        let boxed_token = cp.create_runner("boxed").unwrap();
        let boxed = Self::start_boxed(&cp, &boxed_token, &work, &image, extra);
        let token = cp.create_runner("bare").unwrap();
        let bare = Runner::start(
            &cp,
            RunnerOpts {
                token: &token,
                signing_key: &cp.signing_key,
                slots: 4,
                grace: "2s",
                work_dir: Some(&tmp.path().join("bare")),
            },
        )
        .expect("start the bare runner");
        Boxes {
            cp,
            boxed,
            bare,
            work,
            image,
            token: boxed_token,
            _tmp: tmp,
        }
    }

    fn start_boxed(
        cp: &ControlPlane,
        token: &str,
        work: &Path,
        image: &str,
        extra: &[&str],
    ) -> Runner {
        let mut args = vec!["--isolation", "container", "--job-image", image];
        args.extend_from_slice(extra);
        Runner::start_with_args(
            &cp.runner_url,
            RunnerOpts {
                token,
                signing_key: &cp.signing_key,
                slots: 4,
                grace: "2s",
                work_dir: Some(work),
            },
            &args,
        )
        .expect("start the boxed runner")
    }

    /// The pid of the running container's first process, once it runs.
    fn container_pid(&self) -> i32 {
        wait_for("the job's container", Duration::from_secs(30), || {
            let ids = self.containers_left();
            let id = ids.first()?;
            let out = Command::new("runc")
                .arg("--root")
                .arg(self.work.join("containers/state"))
                .args(["state", id])
                .output()
                .ok()?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let pid = v["pid"].as_i64()? as i32;
            (pid > 0 && v["status"] == "running").then_some(pid)
        })
        .unwrap()
    }

    /// Queues `sh -c SCRIPT` on `runner` with `sandbox`.
    fn queue(&self, runner: &str, script: &str, sandbox: serde_json::Value) -> JobInfo {
        rt().block_on(self.cp.client().create_job(&CreateJob {
            runner: runner.into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "sh", "args": ["-c", script]}),
            timeout_secs: Some(120),
            max_attempts: Some(1),
            sandbox: serde_json::from_value(sandbox).unwrap(),
        }))
        .expect("queue job")
    }

    /// Runs `sh -c SCRIPT` on `runner` and waits: the job and its log.
    fn run(&self, runner: &str, script: &str, sandbox: serde_json::Value) -> (JobInfo, String) {
        let job = self.queue(runner, script, sandbox);
        let done = wait_job(&self.cp.client(), &job.id, Duration::from_secs(120)).unwrap();
        let log = all_logs(&self.cp.client(), &job.id)
            .unwrap()
            .iter()
            .map(|l| format!("{:?} {}\n", l.stream, l.text))
            .collect();
        (done, log)
    }

    /// Runs a probe on both runners: it must succeed in the container and
    /// fail (see what it must not) as a process group.
    fn probe(&self, script: &str) {
        let (job, log) = self.run("boxed", script, serde_json::json!({}));
        assert_eq!(
            job.status,
            JobStatus::Succeeded,
            "in a container: {:?}\n{log}\nrunner log:\n{}",
            job.reason,
            self.boxed.log_text()
        );
        let (job, log) = self.run("bare", script, serde_json::json!({}));
        assert_eq!(
            job.status,
            JobStatus::Failed,
            "as a process group the probe must see it (else it proves nothing):\n{log}"
        );
    }

    fn containers_left(&self) -> Vec<String> {
        let out = Command::new("runc")
            .arg("--root")
            .arg(self.work.join("containers/state"))
            .args(["list", "--quiet"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .filter(|l| !l.is_empty())
            .collect()
    }

    fn bundles_left(&self) -> usize {
        std::fs::read_dir(self.work.join("containers/bundles"))
            .map(|d| d.count())
            .unwrap_or(0)
    }
}

#[test]
fn a_job_in_a_container_cannot_read_the_runners_token_or_spool() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    for r in [&b.boxed, &b.bare] {
        std::fs::create_dir_all(&r.work_dir).unwrap();
        let token = r.work_dir.join("token-of-the-runner");
        std::fs::write(&token, "rnr_secret").unwrap();
    }
    // The runners' work directories: the job's is inside, under jobs/.
    let probe = r#"
        w=$(dirname "$(dirname "$PWD")")
        if cat "$w/token-of-the-runner" 2>/dev/null; then echo "READ THE TOKEN"; exit 1; fi
        if ls "$w/spool" >/dev/null 2>&1; then echo "SEES THE SPOOL"; exit 1; fi
        if ls "$w/runner.lock" >/dev/null 2>&1; then echo "SEES THE WORK DIR"; exit 1; fi
        echo hidden
    "#;
    b.probe(probe);
}

#[test]
fn a_job_in_a_container_sees_neither_another_jobs_work_dir_nor_host_processes() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    for runner in ["boxed", "bare"] {
        // A neighbour that keeps its work directory while the probe runs.
        let neighbour = b.queue(
            runner,
            "echo mine > marker; echo ready; sleep 30",
            serde_json::json!({}),
        );
        let client = b.cp.client();
        // Its marker is written once it says so.
        wait_for("the neighbour to run", Duration::from_secs(30), || {
            let logs = all_logs(&client, &neighbour.id).ok()?;
            logs.iter().any(|l| l.text == "ready").then_some(())
        })
        .unwrap();
        let runner_pid = if runner == "boxed" {
            b.boxed.pid()
        } else {
            b.bare.pid()
        };
        let probe = format!(
            r#"
            jobs=$(dirname "$PWD")
            mine=$(basename "$PWD")
            for d in "$jobs"/*; do
              [ "$(basename "$d")" = "$mine" ] && continue
              if [ -e "$d" ]; then echo "SEES $d"; ls "$d"; exit 1; fi
            done
            if [ -e /proc/{runner_pid} ]; then echo "SEES THE RUNNER'S PROCESS"; exit 1; fi
            n=$(ls -d /proc/[0-9]* | wc -l)
            if [ "$n" -gt 5 ]; then echo "SEES $n PROCESSES"; exit 1; fi
            echo alone
        "#
        );
        let (job, log) = b.run(runner, &probe, serde_json::json!({}));
        let want = if runner == "boxed" {
            JobStatus::Succeeded
        } else {
            JobStatus::Failed
        };
        assert_eq!(job.status, want, "{runner}: {:?}\n{log}", job.reason);
        rt().block_on(client.cancel_job(&neighbour.id)).unwrap();
    }
}

#[test]
fn a_job_in_a_container_cannot_write_outside_its_work_dir() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    let outside = b._tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let probe = format!(
        r#"
        echo ok > ./mine || {{ echo "CANNOT WRITE ITS OWN WORK DIR"; exit 2; }}
        # The test's own directory first: as a process group the probe
        # stops there, and writes nothing of the host's.
        for f in {outside}/written /etc/written /written /usr/local/bin/written; do
          if echo x > "$f" 2>/dev/null; then echo "WROTE $f"; exit 1; fi
        done
        if busybox unshare -U true 2>/dev/null; then echo "MADE A USER NAMESPACE"; exit 1; fi
        if busybox unshare -n true 2>/dev/null; then echo "MADE A NETWORK NAMESPACE"; exit 1; fi
        # A link out of the work directory is removed once the process ends.
        ln -s /etc/hostname planted
        echo contained
        "#,
        outside = outside.display()
    );
    let (job, log) = b.run("boxed", &probe, serde_json::json!({}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
    assert!(
        log.contains("removed links the job left that lead out of its work directory or nowhere: planted -> /etc/hostname"),
        "{log}"
    );
    assert!(!outside.join("written").exists());
    let (job, log) = b.run("bare", &probe, serde_json::json!({}));
    assert_eq!(job.status, JobStatus::Failed, "{log}");
    assert!(log.contains("WROTE"), "{log}");
}

#[test]
fn out_of_memory_is_the_reason_and_a_fork_bomb_stops_at_the_pids_limit() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    let (job, log) = b.run(
        "boxed",
        r#"x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}"#,
        serde_json::json!({"memory_bytes": 32 << 20}),
    );
    assert_eq!(job.status, JobStatus::Failed, "{log}");
    let reason = job.reason.unwrap_or_default();
    assert!(
        reason.contains("out of memory") && reason.contains("32 MiB"),
        "{reason}\n{log}"
    );

    let started = Instant::now();
    let (job, log) = b.run(
        "boxed",
        r#"f() { f | f & }; f; sleep 2; exit 3"#,
        serde_json::json!({"pids": 32}),
    );
    assert_eq!(job.status, JobStatus::Failed, "{log}");
    let reason = job.reason.unwrap_or_default();
    assert!(reason.contains("limit of 32 processes"), "{reason}\n{log}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Nothing of the bomb is left, and the runner carries on.
    assert!(b.containers_left().is_empty(), "{:?}", b.containers_left());
    assert_eq!(b.bundles_left(), 0);
    let (job, log) = b.run("boxed", "echo after", serde_json::json!({}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
    assert!(log.contains("after"), "{log}");
}

/// A command asking the control plane's Runner API for anything: its
/// first answer line (`HTTP/1.1 ...`) when it gets through, then `done`.
/// The request's side stays open a while, or the server drops a
/// half-closed connection before it answers.
fn http_probe(cp: &ControlPlane) -> String {
    let addr = cp
        .runner_url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let (host, port) = addr.split_once(':').unwrap();
    format!(
        "(printf 'GET /v1/runner/claim HTTP/1.0\\r\\n\\r\\n'; sleep 2) | nc -w 5 {host} {port} > answer 2>&1; echo nc=$?; head -1 answer; echo done"
    )
}

#[test]
fn a_job_with_the_network_denied_cannot_reach_the_control_plane() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    let probe = http_probe(&b.cp);
    // Allowed: the control plane answers (an HTTP error is an answer).
    let (job, log) = b.run("boxed", &probe, serde_json::json!({"network": true}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
    assert!(
        log.contains("HTTP/1."),
        "with the network on, the control plane answers:\n{log}"
    );
    // Denied: nothing to connect through.
    let (job, log) = b.run("boxed", &probe, serde_json::json!({"network": false}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
    assert!(
        !log.contains("HTTP/1.") && log.contains("done"),
        "with the network off, nothing answers:\n{log}"
    );
    assert!(log.contains("network off"), "{log}");

    // The customer's policy wins: with --exec-network off, a command gets
    // no network even when it asks for it.
    let strict = Boxes::start(&["--exec-network", "off"]);
    let probe = http_probe(&strict.cp);
    let (job, log) = strict.run("boxed", &probe, serde_json::json!({"network": true}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
    assert!(!log.contains("HTTP/1.") && log.contains("done"), "{log}");
    assert!(log.contains("policy denies it"), "{log}");
}

#[test]
fn a_killed_runner_leaves_no_container_and_cancel_and_timeout_end_within_the_grace() {
    if !can_run_containers() {
        return;
    }
    let mut b = Boxes::start(&[]);
    let client = b.cp.client();
    // Cancel: `sleep 600` as the container's first process ignores SIGTERM
    // (it has no handler), so the ladder's SIGKILL after 2 s ends it.
    let job = b.queue("boxed", "exec sleep 600", serde_json::json!({}));
    // Its container runs: the cancel meets the process, not its start.
    b.container_pid();
    let asked = Instant::now();
    rt().block_on(client.cancel_job(&job.id)).unwrap();
    let done = wait_job(&client, &job.id, Duration::from_secs(30)).unwrap();
    let took = asked.elapsed();
    assert_eq!(done.status, JobStatus::Cancelled, "{:?}", done.reason);
    // The grace (2 s) plus the cancel's way to the runner.
    assert!(took < Duration::from_secs(6), "cancel took {took:?}");
    assert!(b.containers_left().is_empty());

    // A timeout takes the same ladder.
    let job = rt()
        .block_on(client.create_job(&CreateJob {
            runner: "boxed".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "sleep", "args": ["600"]}),
            timeout_secs: Some(2),
            max_attempts: Some(1),
            sandbox: None,
        }))
        .unwrap();
    let asked = Instant::now();
    let done = wait_job(&client, &job.id, Duration::from_secs(30)).unwrap();
    assert_eq!(done.status, JobStatus::TimedOut, "{:?}", done.reason);
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    assert!(b.containers_left().is_empty());

    // kill -9 of the runner mid-job: the watchdog removes the container.
    b.queue("boxed", "exec sleep 600", serde_json::json!({}));
    let pid = b.container_pid();
    b.boxed.kill9();
    wait_for(
        "the container's process to die",
        Duration::from_secs(15),
        || (!process_alive(pid)).then_some(()),
    )
    .unwrap();
    wait_for("runc to forget it", Duration::from_secs(15), || {
        b.containers_left().is_empty().then_some(())
    })
    .unwrap();
    // The watchdog unmounts and removes the bundle right after runc's
    // delete: wait for that step too.
    let left = wait_for("the bundle to go", Duration::from_secs(15), || {
        (b.bundles_left() == 0).then_some(0)
    })
    .unwrap_or(b.bundles_left());
    assert_eq!(left, 0, "the watchdog removes the bundle too");
}

#[test]
fn a_restarted_runner_removes_the_containers_it_left() {
    if !can_run_containers() {
        return;
    }
    let mut b = Boxes::start(&[]);
    b.queue("boxed", "exec sleep 600", serde_json::json!({}));
    let pid = b.container_pid();
    // The runner and its watchdog die together (a host losing power would
    // leave the same; here the container outlives them).
    let runner_pid = b.boxed.pid() as i32;
    let watchdogs: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<i32>().ok());
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
            ppid == Some(runner_pid) && cmd.contains("trap '' HUP INT TERM")
        })
        .collect();
    assert_eq!(watchdogs.len(), 1, "the runner's watchdog");
    nuon_tests::signal(watchdogs[0] as u32, 9);
    b.boxed.kill9();
    std::thread::sleep(Duration::from_millis(500));
    assert!(process_alive(pid), "the container outlived its runner");
    assert_eq!(b.containers_left().len(), 1);

    b.boxed = Boxes::start_boxed(&b.cp, &b.token, &b.work, &b.image, &[]);
    wait_for(
        "the restarted runner to remove it",
        Duration::from_secs(30),
        || {
            (!process_alive(pid) && b.containers_left().is_empty() && b.bundles_left() == 0)
                .then_some(())
        },
    )
    .unwrap();
    assert!(
        b.boxed
            .log_text()
            .contains("removing a container a previous run of this runner left"),
        "{}",
        b.boxed.log_text()
    );
    // And it runs jobs again.
    let (job, log) = b.run("boxed", "echo back", serde_json::json!({}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
}

#[test]
fn an_image_whose_layer_does_not_match_its_digest_is_refused_before_anything_runs() {
    if !can_run_containers() {
        return;
    }
    let b = Boxes::start(&[]);
    // Another image in the same store, its layer damaged before any job.
    let image = tool_image(
        &b.work.join("store"),
        &["--tag", "2", "--binary", &format!("probe={}", busybox())],
    );
    assert_ne!(image, b.image);
    let (repo, digest) = image.split_once('@').unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            b.work
                .join("store")
                .join(repo)
                .join("blobs/sha256")
                .join(digest.trim_start_matches("sha256:")),
        )
        .unwrap(),
    )
    .unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    let blob = b
        .work
        .join("store")
        .join(repo)
        .join("blobs/sha256")
        .join(layer.trim_start_matches("sha256:"));
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&blob, bytes).unwrap();

    let marker = b._tmp.path().join("ran");
    let (job, log) = b.run(
        "boxed",
        &format!("echo RAN; touch {}", marker.display()),
        serde_json::json!({"image": {"repository": repo, "digest": digest}}),
    );
    assert_eq!(job.status, JobStatus::Failed, "{log}");
    let reason = job.reason.unwrap_or_default();
    assert!(reason.contains("refused"), "{reason}");
    assert!(
        reason.contains(layer) || reason.contains("layer 1"),
        "{reason}"
    );
    assert!(!log.contains("RAN"), "{log}");
    assert!(!marker.exists());
    assert!(
        !b.work
            .join("containers/images")
            .join(digest.trim_start_matches("sha256:"))
            .exists(),
        "nothing of a refused image is kept"
    );
    // The good image still runs.
    let (job, log) = b.run("boxed", "echo fine", serde_json::json!({}));
    assert_eq!(job.status, JobStatus::Succeeded, "{log}");
}

#[test]
fn nuon_dev_in_containers_provisions_the_example_app_with_terraform_from_the_tool_image() {
    if !can_run_containers() || !have_tool("terraform", "package Terraform into a tool image") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (crate::deploy::free_port(), crate::deploy::free_port());
    let out = crate::deploy::dev(
        &data,
        ports,
        &["--once", "--logs", "--isolation", "container"],
    )
    .output()
    .unwrap();
    let text = crate::deploy::text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("jobs run in containers of nuon-tools/terraform@sha256:"),
        "{text}"
    );
    // Every Terraform job ran in a container of the image: the runner's
    // PATH has no terraform, so as a process group none could have.
    assert!(
        text.contains("in containers of nuon-tools/terraform@sha256:"),
        "{text}"
    );
    assert!(text.contains("using /usr/local/bin/terraform"), "{text}");
    assert!(text.contains("succeeded"), "{text}");
    // Nothing is left running or mounted once it stopped.
    let state = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find_map(|p| {
            let s = p.join("runner/containers/state");
            s.exists().then_some(s)
        });
    if let Some(state) = state {
        let out = Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["list", "--quiet"])
            .output()
            .unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).trim().is_empty());
    }
}

/// `PATH` without any directory that has a Terraform.
fn path_without_terraform() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !d.join("terraform").exists() && !d.join("tofu").exists())
        .collect();
    std::env::join_paths(kept)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_job_image_named_by_the_app_is_built_into_the_vendors_store_and_synced_by_digest() {
    use crate::deploy::{BOX_APP, Manual, run_workflow, step};
    use nuon_core::workflow::WorkflowKind;
    if !can_run_containers() || !have_tool("terraform", "package Terraform into a tool image") {
        return;
    }
    // The tool image in a registry, where a vendor would keep it.
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let terraform = which::which("terraform").unwrap();
    let pushed = tool_image(
        Path::new(&registry.url),
        &[
            "--tag",
            "1",
            "--repository",
            "tools/terraform",
            "--terraform-binary",
            terraform.to_str().unwrap(),
        ],
    );
    let tools = format!(
        "name = \"tools\"\ntype = \"container_image\"\n\n[public]\nimage_url = \"{}/tools/terraform\"\ntag = \"1\"\n",
        registry.host
    );
    let mut m = Manual::start(&[
        BOX_APP[0],
        BOX_APP[1],
        BOX_APP[2],
        ("components/tools.toml", &tools),
        (
            "runner.toml",
            "runner_type = \"local\"\n\n[job_images]\nterraform = \"tools\"\n",
        ),
    ]);
    // The runner: containers, no default image, no terraform on its PATH.
    let path = path_without_terraform();
    m.restart_runner_on(&["--isolation", "container"], Some(&path));
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let build = rt()
        .block_on(c.list_builds("app"))
        .unwrap()
        .builds
        .into_iter()
        .find(|b| b.component == "tools")
        .unwrap();
    let artifact = build.artifact.unwrap();
    assert_eq!(
        artifact.digest.to_string(),
        pushed.split_once('@').unwrap().1,
        "the build copied the image as it is"
    );
    // The plan's job ran in the image, by digest.
    let plan = step(&w, "plan box");
    let job: nuon_core::JobId = plan.job_id.clone().unwrap();
    let log: String = all_logs(&c, &job)
        .unwrap()
        .iter()
        .map(|l| format!("{}\n", l.text))
        .collect();
    assert!(
        log.contains(&format!(
            "in containers of {}@{}",
            artifact.repo, artifact.digest
        )),
        "{log}"
    );
    assert!(log.contains("using /usr/local/bin/terraform"), "{log}");
    // A config naming a component that is not an image is refused.
    let bad = m.dir.path().join("bad");
    std::fs::create_dir_all(bad.join("components")).unwrap();
    std::fs::write(bad.join("metadata.toml"), "version = \"v2\"\n").unwrap();
    std::fs::create_dir_all(bad.join("src/box")).unwrap();
    std::fs::write(bad.join("src/box/main.tf"), BOX_APP[2].1).unwrap();
    std::fs::write(bad.join("components/box.toml"), BOX_APP[1].1).unwrap();
    std::fs::write(
        bad.join("runner.toml"),
        "runner_type = \"local\"\n\n[job_images]\nterraform = \"box\"\nterraform_plan = \"box\"\n",
    )
    .unwrap();
    let out = m.cp.nuon(&["apps", "validate", bad.to_str().unwrap()]);
    let text = crate::deploy::text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("\"box\" is a terraform_module component; a job image is the build of a container_image component"),
        "{text}"
    );
    assert!(
        text.contains("job_images.terraform_plan: not a job kind"),
        "{text}"
    );
}

#[test]
fn a_runner_with_a_relative_work_dir_runs_jobs_in_containers() {
    if !can_run_containers() {
        return;
    }
    let cp = ControlPlane::start("10s").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // As an operator would start it: from its own directory, with the
    // default kind of path.
    let image = tool_image(&tmp.path().join("data/store"), &["--tag", "1"]);
    let token = cp.create_runner("rel").unwrap();
    let log = std::fs::File::create(tmp.path().join("runner.log")).unwrap();
    let child = ours("nuon-runner")
        .current_dir(tmp.path())
        .args(["run", "--api", &cp.runner_url, "--token", &token])
        .args(["--signing-key", &cp.signing_key, "--work-dir", "data"])
        .args(["--isolation", "container", "--job-image", &image])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _runner = Kill(child);
    let job = rt()
        .block_on(cp.client().create_job(&CreateJob {
            runner: "rel".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "sh", "args": ["-c", "echo inside > out; cat out"]}),
            timeout_secs: Some(60),
            max_attempts: Some(1),
            sandbox: None,
        }))
        .unwrap();
    let done = wait_job(&cp.client(), &job.id, Duration::from_secs(60)).unwrap();
    let lines: Vec<String> = all_logs(&cp.client(), &job.id)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert_eq!(
        done.status,
        JobStatus::Succeeded,
        "{lines:?}\n{}",
        std::fs::read_to_string(tmp.path().join("runner.log")).unwrap_or_default()
    );
    assert!(lines.iter().any(|l| l == "inside"), "{lines:?}");
}
