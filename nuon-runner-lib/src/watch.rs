//! The runner's watch of its install's health between deploys.
//!
//! The control plane names, in the runner's signed settings, the health
//! probes of each deployed component (`[health]`, rendered:
//! [`ProbeWatch`]). Every `interval_ms` the runner runs one round of them,
//! all at once, and keeps what each said in its telemetry, which every
//! claim and heartbeat carries. When a probe passes that failed, or fails
//! that passed, the round is sent at once in a heartbeat of its own; the
//! control plane's view of the install's health takes the newer of it and
//! the component's last deploy.
//!
//! It goes on while the control plane is down: the probes are the last
//! ones the runner was given, and what they say reaches the control plane
//! with the first call that gets through. A runner the customer disabled
//! (`nuon-runner disable`) runs no probe. Under `--isolation container`
//! exec probes are left out: they run in a job's container during a
//! deploy, and nowhere on the host.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use nuon_core::Transport;
use nuon_core::app::ProbeKind;
use nuon_core::wire::{HeartbeatRequest, ProbeSeen, ProbeWatch, RunnerSettingsInfo};
use nuon_plugins::health::{MAX_PROBE_TIME, Prober};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use crate::RunnerStats;

/// The shortest time between two rounds, whatever the settings say.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// What the watch needs of the runner.
pub(crate) struct Watch {
    pub(crate) transport: Arc<dyn Transport>,
    pub(crate) stats: Arc<RunnerStats>,
    pub(crate) settings: watch::Receiver<Option<RunnerSettingsInfo>>,
    /// Whether jobs run in containers (exec probes are then left out).
    pub(crate) confined: bool,
}

impl Watch {
    /// Runs rounds for as long as the runner runs; a change of the
    /// settings starts a round at once.
    pub(crate) async fn run(mut self) {
        let prober = Prober::default();
        let mut before: BTreeMap<(String, String), bool> = BTreeMap::new();
        loop {
            let watch = self
                .settings
                .borrow_and_update()
                .clone()
                .and_then(|s| s.watch);
            let Some(watch) = watch.filter(|w| !w.components.is_empty()) else {
                self.stats.set_probes(Vec::new());
                before.clear();
                if self.settings.changed().await.is_err() {
                    return;
                }
                continue;
            };
            let interval = Duration::from_millis(watch.interval_ms).max(MIN_INTERVAL);
            let next = Instant::now() + interval;
            // A runner the customer disabled runs nothing of the vendor's,
            // probes included.
            let seen = if self.stats.is_disabled() {
                Vec::new()
            } else {
                round(&prober, &watch, interval.min(MAX_PROBE_TIME), self.confined).await
            };
            let now: BTreeMap<(String, String), bool> =
                seen.iter().map(|p| (key(p), p.ok)).collect();
            let changed = now != before;
            for p in seen.iter().filter(|p| before.get(&key(p)) != Some(&p.ok)) {
                let was = if p.ok { "passes" } else { "fails" };
                tracing::info!(component = %p.component, probe = %p.probe, detail = %p.detail, "health probe {was}");
            }
            before = now;
            self.stats.set_probes(seen);
            if changed {
                self.report().await;
            }
            tokio::select! {
                () = sleep_until(next) => {}
                c = self.settings.changed() => if c.is_err() { return },
            }
        }
    }

    /// Sends the telemetry now, in a heartbeat that extends no lease. A
    /// failure is left to the next claim or heartbeat, which carry it too.
    async fn report(&self) {
        let beat = HeartbeatRequest {
            leases: Vec::new(),
            wait_ms: 0,
            telemetry: Some(self.stats.telemetry()),
        };
        if let Err(e) = self.transport.heartbeat(&beat).await {
            tracing::debug!(error = %e, "cannot send the health probes now; the next call carries them");
        }
    }
}

fn key(p: &ProbeSeen) -> (String, String) {
    (p.component.clone(), p.probe.clone())
}

/// One round: every probe at once, each given at most `limit`.
async fn round(
    prober: &Prober,
    watch: &ProbeWatch,
    limit: Duration,
    confined: bool,
) -> Vec<ProbeSeen> {
    let probes = watch.components.iter().flat_map(|c| {
        c.probes
            .iter()
            .filter(|p| !(confined && p.kind == ProbeKind::Exec))
            .map(move |p| (c, p))
    });
    let at_ms = nuon_core::now_ms();
    join_all(probes.map(|(c, p)| async move {
        let answer = prober.probe(p, limit).await;
        ProbeSeen {
            component: c.component.clone(),
            probe: p.name.clone(),
            ok: answer.ok,
            detail: answer.detail,
            at_ms,
        }
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use nuon_core::app::HealthProbe;
    use nuon_core::wire::WatchedComponent;

    fn probe(kind: ProbeKind, name: &str, url: Option<String>, command: &[&str]) -> HealthProbe {
        HealthProbe {
            kind,
            name: name.into(),
            url,
            command: command.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// A round runs each probe once and says what each answered; exec
    /// probes are left out when jobs run in containers.
    #[tokio::test]
    async fn a_round_runs_every_probe_and_leaves_exec_out_when_confined() {
        let open = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let watch = ProbeWatch {
            interval_ms: 1000,
            components: vec![WatchedComponent {
                component: "web".into(),
                probes: vec![
                    probe(
                        ProbeKind::Tcp,
                        "up",
                        Some(open.local_addr().unwrap().to_string()),
                        &[],
                    ),
                    probe(ProbeKind::Tcp, "down", Some(closed.to_string()), &[]),
                    probe(
                        ProbeKind::Exec,
                        "ready",
                        None,
                        &["sh", "-c", "echo not yet; exit 2"],
                    ),
                ],
            }],
        };
        let prober = Prober::default();
        let seen = round(&prober, &watch, Duration::from_secs(2), false).await;
        let by: BTreeMap<&str, &ProbeSeen> = seen.iter().map(|p| (p.probe.as_str(), p)).collect();
        assert!(by["up"].ok, "{seen:?}");
        assert!(!by["down"].ok, "{seen:?}");
        assert!(!by["ready"].ok, "{seen:?}");
        assert!(
            by["ready"].detail.starts_with("exit code 2: not yet"),
            "{seen:?}"
        );
        assert!(seen.iter().all(|p| p.component == "web" && p.at_ms > 0));
        let confined = round(&prober, &watch, Duration::from_secs(2), true).await;
        let names: Vec<&str> = confined.iter().map(|p| p.probe.as_str()).collect();
        assert_eq!(names, ["up", "down"]);
    }

    /// A control plane that records heartbeats, and fails them while down.
    #[derive(Default)]
    struct Beats {
        seen: std::sync::Mutex<Vec<HeartbeatRequest>>,
        down: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl Transport for Beats {
        async fn claim(
            &self,
            _: &nuon_core::wire::ClaimRequest,
        ) -> Result<nuon_core::wire::ClaimResponse, nuon_core::TransportError> {
            Err(nuon_core::TransportError::Unavailable("not here".into()))
        }
        async fn heartbeat(
            &self,
            req: &HeartbeatRequest,
        ) -> Result<nuon_core::wire::HeartbeatResponse, nuon_core::TransportError> {
            if self.down.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(nuon_core::TransportError::Unavailable("down".into()));
            }
            self.seen.lock().unwrap().push(req.clone());
            Ok(nuon_core::wire::HeartbeatResponse {
                leases: Vec::new(),
                lease_ms: 60_000,
                next_heartbeat_ms: 1_000,
                settings_version: None,
            })
        }
        async fn append_logs(
            &self,
            _: &nuon_core::JobId,
            _: &nuon_core::wire::LogBatch,
        ) -> Result<nuon_core::wire::LogAck, nuon_core::TransportError> {
            Err(nuon_core::TransportError::Unavailable("not here".into()))
        }
        async fn complete(
            &self,
            _: &nuon_core::JobId,
            _: &nuon_core::wire::Completion,
        ) -> Result<nuon_core::wire::CompletionAck, nuon_core::TransportError> {
            Err(nuon_core::TransportError::Unavailable("not here".into()))
        }
    }

    async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The watch runs the probes its settings name, round after round: a
    /// change is sent at once, an unchanged round only kept for the next
    /// call; it goes on while the control plane is down, and stops
    /// watching when the settings name no probe.
    #[tokio::test]
    async fn the_watch_reports_changes_at_once_and_goes_on_while_the_control_plane_is_down() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = |watch: Option<ProbeWatch>| RunnerSettingsInfo {
            version: "v".into(),
            watch,
            ..RunnerSettingsInfo::default()
        };
        let watched = ProbeWatch {
            interval_ms: 1000,
            components: vec![WatchedComponent {
                component: "api".into(),
                probes: vec![probe(ProbeKind::Tcp, "port", Some(addr.to_string()), &[])],
            }],
        };
        let (tx, rx) = watch::channel(Some(settings(Some(watched.clone()))));
        let beats = Arc::new(Beats::default());
        let stats = Arc::new(RunnerStats::default());
        let task = tokio::spawn(
            Watch {
                transport: beats.clone(),
                stats: stats.clone(),
                settings: rx,
                confined: false,
            }
            .run(),
        );
        let last = |beats: &Beats| {
            let seen = beats.seen.lock().unwrap();
            let b = seen.last()?;
            assert!(b.leases.is_empty() && b.wait_ms == 0, "{b:?}");
            Some((seen.len(), b.telemetry.clone()?.probes))
        };
        let (n, probes) = until("the first round", || last(&beats)).await;
        assert_eq!(n, 1);
        assert!(probes[0].ok, "{probes:?}");
        assert_eq!(
            (probes[0].component.as_str(), probes[0].probe.as_str()),
            ("api", "port")
        );
        // Rounds that change nothing are kept, not sent.
        let first_at = probes[0].at_ms;
        until("a second round", || {
            (stats.telemetry().probes.first()?.at_ms > first_at).then_some(())
        })
        .await;
        assert_eq!(beats.seen.lock().unwrap().len(), 1);
        // The port closes while the control plane is down: the watch goes
        // on, and keeps what it saw for the first call that gets through.
        beats.down.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(listener);
        let failed = until("the probe to fail", || {
            stats.telemetry().probes.into_iter().find(|p| !p.ok)
        })
        .await;
        assert!(failed.detail.contains("cannot connect"), "{failed:?}");
        assert_eq!(beats.seen.lock().unwrap().len(), 1);
        beats.down.store(false, std::sync::atomic::Ordering::SeqCst);
        // Back up: the next change is sent at once.
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let (_, probes) = until("the probe to pass again", || {
            last(&beats).filter(|(n, p)| *n == 2 && p[0].ok)
        })
        .await;
        assert_eq!(probes.len(), 1);
        // The customer disables the runner: it stops probing, and says so
        // at once; enabled again, it probes again.
        stats.set_disabled(Some("maintenance".into()));
        let (_, probes) = until("the watch to stop on disable", || {
            last(&beats).filter(|(n, p)| *n == 3 && p.is_empty())
        })
        .await;
        assert!(probes.is_empty());
        stats.set_disabled(None);
        until("the watch to probe again", || {
            last(&beats).filter(|(n, _)| *n == 4)
        })
        .await;
        // Settings without probes: nothing is watched or reported.
        tx.send_replace(Some(settings(None)));
        until("the watch to stop", || {
            stats.telemetry().probes.is_empty().then_some(())
        })
        .await;
        drop(tx);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .unwrap()
            .unwrap();
        drop(listener);
    }
}
