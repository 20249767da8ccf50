//! Prometheus' text exposition format (version 0.0.4), written by hand:
//! families with `# HELP` and `# TYPE`, labelled samples, and histograms
//! that many threads observe into without a lock.
//!
//! ```
//! use nuon_core::metrics::{Exposition, Histogram};
//!
//! let latency = Histogram::new(&[0.01, 0.1, 1.0]);
//! latency.observe(0.05);
//! let mut out = Exposition::default();
//! out.family("nuon_jobs_running", "gauge", "Jobs running now.");
//! out.sample("nuon_jobs_running", &[("kind", "exec")], 3.0);
//! latency.write(&mut out, "nuon_dispatch_seconds", "Time from queued to claimed.", &[]);
//! let text = out.finish();
//! assert!(text.contains("nuon_jobs_running{kind=\"exec\"} 3\n"));
//! assert!(text.contains("nuon_dispatch_seconds_bucket{le=\"0.1\"} 1\n"));
//! ```

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A page of metrics being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts a family: its help line and type (`counter`, `gauge`,
    /// `histogram`).
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the current family.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let v = v
                    .replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n");
                let _ = write!(self.out, "{k}=\"{v}\"");
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_value(&mut self.out, value);
        self.out.push('\n');
    }

    /// A family of one sample.
    pub fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// The page.
    pub fn finish(self) -> String {
        self.out
    }
}

fn push_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        let _ = write!(out, "{}", v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// A histogram: cumulative buckets, a sum and a count, all atomic.
#[derive(Debug)]
pub struct Histogram {
    bounds: Vec<f64>,
    /// One counter per bound, then one for what is above every bound.
    counts: Vec<AtomicU64>,
    /// The sum, as the bits of an `f64`.
    sum: AtomicU64,
    count: AtomicU64,
}

/// Buckets for durations of a millisecond to a minute, in seconds.
pub const LATENCY_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Buckets for durations of a second to an hour, in seconds.
pub const STEP_BUCKETS: &[f64] = &[
    1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

impl Histogram {
    /// A histogram with these upper bounds (ascending; `+Inf` is added).
    pub fn new(bounds: &[f64]) -> Self {
        Histogram {
            bounds: bounds.to_vec(),
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    /// Counts one observation.
    pub fn observe(&self, v: f64) {
        let i = self
            .bounds
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let _ = self
            .sum
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    /// How many observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Writes the family `name` (`_bucket`, `_sum`, `_count`), with `labels`
    /// on every sample.
    pub fn write(&self, out: &mut Exposition, name: &str, help: &str, labels: &[(&str, &str)]) {
        out.family(name, "histogram", help);
        self.samples(out, name, labels);
    }

    /// Writes the samples only, to add a labelled series to a family
    /// already started.
    pub fn samples(&self, out: &mut Exposition, name: &str, labels: &[(&str, &str)]) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0;
        let with_le = |le: &str, out: &mut Exposition, v: u64| {
            let mut l = labels.to_vec();
            l.push(("le", le));
            out.sample(&bucket, &l, v as f64);
        };
        // The count is the buckets' own sum, read once: a scrape never
        // shows a bucket above `+Inf`, whatever runs meanwhile.
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            with_le(&format_bound(*b), out, cumulative);
        }
        let count = cumulative + self.counts[self.bounds.len()].load(Ordering::Relaxed);
        with_le("+Inf", out, count);
        out.sample(
            &format!("{name}_sum"),
            labels,
            f64::from_bits(self.sum.load(Ordering::Relaxed)),
        );
        out.sample(&format!("{name}_count"), labels, count as f64);
    }
}

fn format_bound(b: f64) -> String {
    let mut s = String::new();
    push_value(&mut s, b);
    if !s.contains('.') && !s.contains('I') {
        s.push_str(".0");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_end_in_inf() {
        let h = Histogram::new(&[1.0, 2.0]);
        for v in [0.5, 1.5, 1.7, 9.0] {
            h.observe(v);
        }
        let mut e = Exposition::default();
        h.write(&mut e, "x_seconds", "X.", &[("k", "a\"b")]);
        let t = e.finish();
        assert!(
            t.contains("x_seconds_bucket{k=\"a\\\"b\",le=\"1.0\"} 1\n"),
            "{t}"
        );
        assert!(
            t.contains("x_seconds_bucket{k=\"a\\\"b\",le=\"2.0\"} 3\n"),
            "{t}"
        );
        assert!(
            t.contains("x_seconds_bucket{k=\"a\\\"b\",le=\"+Inf\"} 4\n"),
            "{t}"
        );
        assert!(t.contains("x_seconds_sum{k=\"a\\\"b\"} 12.7\n"), "{t}");
        assert!(t.contains("x_seconds_count{k=\"a\\\"b\"} 4\n"), "{t}");
    }
}
