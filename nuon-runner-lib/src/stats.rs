//! What the runner counts of itself: sent to the control plane with its
//! claims and heartbeats (so the vendor sees it without reaching into the
//! install), and shown at `--metrics-listen` in Prometheus' text format.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use nuon_core::metrics::{Exposition, Histogram, LATENCY_BUCKETS};
use nuon_core::wire::RunnerTelemetry;

/// The runner's key figures.
#[derive(Debug)]
pub struct RunnerStats {
    slots: AtomicU32,
    running: AtomicU32,
    backlog: AtomicU32,
    jobs: Mutex<BTreeMap<String, u64>>,
    heartbeat_rtt: Histogram,
    last_rtt_ms: AtomicU64,
    last_error: Mutex<Option<String>>,
    disabled: Mutex<Option<String>>,
    break_glass: Mutex<Vec<String>>,
    pinned: Mutex<Option<String>>,
    update_failed: Mutex<Option<nuon_core::wire::RunnerUpdateFailure>>,
    probes: Mutex<Vec<nuon_core::wire::ProbeSeen>>,
    tools: Mutex<Vec<nuon_core::wire::ToolHeld>>,
}

impl Default for RunnerStats {
    fn default() -> Self {
        RunnerStats {
            slots: AtomicU32::new(0),
            running: AtomicU32::new(0),
            backlog: AtomicU32::new(0),
            jobs: Mutex::default(),
            heartbeat_rtt: Histogram::new(LATENCY_BUCKETS),
            last_rtt_ms: AtomicU64::new(u64::MAX),
            last_error: Mutex::default(),
            disabled: Mutex::default(),
            break_glass: Mutex::default(),
            pinned: Mutex::default(),
            update_failed: Mutex::default(),
            probes: Mutex::default(),
            tools: Mutex::default(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunnerStats {
    pub(crate) fn set_slots(&self, slots: usize) {
        self.slots.store(slots as u32, Ordering::Relaxed);
    }

    pub(crate) fn set_running(&self, n: usize) {
        self.running.store(n as u32, Ordering::Relaxed);
    }

    pub(crate) fn set_backlog(&self, n: usize) {
        self.backlog.store(n as u32, Ordering::Relaxed);
    }

    /// A job ended here with `outcome` (`succeeded`, `failed`, `cancelled`,
    /// `refused`).
    pub(crate) fn job_ended(&self, outcome: &str) {
        *lock(&self.jobs).entry(outcome.to_owned()).or_default() += 1;
    }

    pub(crate) fn heartbeat(&self, rtt: Duration) {
        self.heartbeat_rtt.observe(rtt.as_secs_f64());
        self.last_rtt_ms
            .store(rtt.as_millis() as u64, Ordering::Relaxed);
    }

    /// Whether (and why) the customer disabled the runner.
    pub(crate) fn set_disabled(&self, reason: Option<String>) {
        *lock(&self.disabled) = reason;
    }

    /// Whether the customer disabled the runner.
    pub(crate) fn is_disabled(&self) -> bool {
        lock(&self.disabled).is_some()
    }

    /// The break-glass roles the customer turned on.
    pub(crate) fn set_break_glass(&self, roles: Vec<String>) {
        *lock(&self.break_glass) = roles;
    }

    /// What the health probes said in the watch's last round.
    pub(crate) fn set_probes(&self, probes: Vec<nuon_core::wire::ProbeSeen>) {
        *lock(&self.probes) = probes;
    }

    /// The tool versions the plugins hold.
    pub(crate) fn set_tools(&self, tools: Vec<nuon_core::wire::ToolHeld>) {
        *lock(&self.tools) = tools;
    }

    pub(crate) fn error(&self, e: impl std::fmt::Display) {
        let text: String = e.to_string().chars().take(500).collect();
        *lock(&self.last_error) = Some(text);
    }

    /// The figures sent with claims and heartbeats.
    pub fn telemetry(&self) -> RunnerTelemetry {
        let rtt = self.last_rtt_ms.load(Ordering::Relaxed);
        RunnerTelemetry {
            slots: self.slots.load(Ordering::Relaxed),
            busy: self.running.load(Ordering::Relaxed),
            spool_backlog: self.backlog.load(Ordering::Relaxed),
            jobs: lock(&self.jobs).clone(),
            heartbeat_rtt_ms: (rtt != u64::MAX).then_some(rtt),
            last_error: lock(&self.last_error).clone(),
            disabled: lock(&self.disabled).clone(),
            break_glass: lock(&self.break_glass).clone(),
            pinned: lock(&self.pinned).clone(),
            update_failed: lock(&self.update_failed).clone(),
            probes: lock(&self.probes).clone(),
            tools: lock(&self.tools).clone(),
        }
    }

    /// The version the customer pinned the runner to.
    #[cfg(feature = "cmd")]
    pub(crate) fn set_pinned(&self, pin: Option<String>) {
        *lock(&self.pinned) = pin;
    }

    /// The last update the runner did not take, and why (none once an
    /// update is confirmed).
    #[cfg(feature = "cmd")]
    pub(crate) fn set_update_failed(&self, f: Option<nuon_core::wire::RunnerUpdateFailure>) {
        *lock(&self.update_failed) = f;
    }

    /// The Prometheus text of the figures.
    pub fn render(&self) -> String {
        let t = self.telemetry();
        let mut out = Exposition::default();
        out.family(
            "nuon_runner_jobs_total",
            "counter",
            "Jobs this runner process ended, by outcome.",
        );
        for outcome in ["succeeded", "failed", "cancelled", "timed_out", "refused"] {
            let n = t.jobs.get(outcome).copied().unwrap_or(0);
            out.sample("nuon_runner_jobs_total", &[("outcome", outcome)], n as f64);
        }
        out.single(
            "nuon_runner_jobs_running",
            "gauge",
            "Jobs running now.",
            f64::from(t.busy),
        );
        out.single(
            "nuon_runner_slots",
            "gauge",
            "Jobs the runner runs at once.",
            f64::from(t.slots),
        );
        out.single(
            "nuon_runner_spool_backlog",
            "gauge",
            "Attempts whose logs or results are not yet all delivered.",
            f64::from(t.spool_backlog),
        );
        if !t.probes.is_empty() {
            out.family(
                "nuon_runner_probe_up",
                "gauge",
                "Whether each health probe the runner watches passed its last round (1) or failed (0).",
            );
            for p in &t.probes {
                let labels = [
                    ("component", p.component.as_str()),
                    ("probe", p.probe.as_str()),
                ];
                out.sample("nuon_runner_probe_up", &labels, f64::from(u8::from(p.ok)));
            }
        }
        self.heartbeat_rtt.write(
            &mut out,
            "nuon_runner_heartbeat_rtt_seconds",
            "Round trip of the runner's heartbeats to the control plane.",
            &[],
        );
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probes the watch saw go with the telemetry and on the metrics
    /// page, one gauge each.
    #[test]
    fn watched_probes_are_in_the_telemetry_and_the_metrics() {
        let stats = RunnerStats::default();
        assert!(!stats.render().contains("nuon_runner_probe_up"));
        let seen = |probe: &str, ok: bool| nuon_core::wire::ProbeSeen {
            component: "web".into(),
            probe: probe.into(),
            ok,
            detail: "HTTP 200 in 1 ms".into(),
            at_ms: 1,
        };
        stats.set_probes(vec![seen("healthz", false), seen("port \"80\"", true)]);
        assert_eq!(stats.telemetry().probes.len(), 2);
        let page = stats.render();
        assert!(
            page.contains("# TYPE nuon_runner_probe_up gauge\n")
                && page.contains("nuon_runner_probe_up{component=\"web\",probe=\"healthz\"} 0\n")
                && page.contains(
                    "nuon_runner_probe_up{component=\"web\",probe=\"port \\\"80\\\"\"} 1\n"
                ),
            "{page}"
        );
    }
}
