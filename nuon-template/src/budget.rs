//! How much work a render may do: steps and time, shared by every render
//! that holds the same budget (one job's values, one config's check).
//!
//! Go's `text/template` has no such bound, which is how a chart or a
//! config stalls Helm and Nuon: `{{ range until 1000000 }}{{ range until
//! 1000000 }}{{ end }}{{ end }}` prints nothing and never ends. Here every
//! action, range iteration and function call is a step, a function's
//! result counts by its size as well, and the time spent executing is
//! added up across the renders that share the budget (time spent between
//! renders does not count).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A render's allowance of steps and time; clones share it.
#[derive(Debug, Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    steps: u64,
    time: Duration,
    used: AtomicU64,
    spent_nanos: AtomicU64,
}

impl Budget {
    /// Steps a budget allows unless told otherwise: about a tenth of a
    /// second of plain work, a thousand times what a config's values take.
    pub const DEFAULT_STEPS: u64 = 1_000_000;
    /// Executing time a budget allows unless told otherwise (it bounds
    /// functions that are slow for their size, like `htpasswd`'s bcrypt).
    pub const DEFAULT_TIME: Duration = Duration::from_secs(1);

    /// A budget of `steps` and `time` spent executing.
    pub fn new(steps: u64, time: Duration) -> Self {
        Budget {
            inner: Arc::new(Inner {
                steps,
                time,
                used: AtomicU64::new(0),
                spent_nanos: AtomicU64::new(0),
            }),
        }
    }

    /// The steps it allows.
    pub fn steps(&self) -> u64 {
        self.inner.steps
    }

    /// The executing time it allows.
    pub fn time(&self) -> Duration {
        self.inner.time
    }

    /// Steps used so far.
    pub fn used(&self) -> u64 {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Time spent executing so far.
    pub fn spent(&self) -> Duration {
        Duration::from_nanos(self.inner.spent_nanos.load(Ordering::Relaxed))
    }

    /// Whether its steps or its time are used up.
    pub fn is_spent(&self) -> bool {
        self.used() > self.steps() || self.spent() > self.time()
    }

    /// Starts one render's clock.
    pub(crate) fn start(&self) -> Meter<'_> {
        Meter {
            budget: Some(self),
            steps: self.inner.steps,
            time: self.inner.time,
            started: Instant::now(),
            before: self.spent(),
            ticks: 0,
            shared: self.used(),
            mine: 0,
        }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(Self::DEFAULT_STEPS, Self::DEFAULT_TIME)
    }
}

/// One render's use of a budget: steps as they are taken, and its time,
/// added to the budget when it is dropped.
///
/// Steps are counted here and added to the shared count after every
/// function call, every 256th step and at the end (an atomic add on every
/// step cost a tenth of a small render): a render sees its own steps at
/// once and those of renders beside it on the same budget at those points.
/// The clock is read at the same points.
pub(crate) struct Meter<'b> {
    /// The shared budget; none for a render with a default budget of its
    /// own (no allocation, nothing to add up at the end).
    budget: Option<&'b Budget>,
    steps: u64,
    time: Duration,
    started: Instant,
    before: Duration,
    ticks: u32,
    /// The shared count when last read.
    shared: u64,
    /// Steps taken since, not yet added to it.
    mine: u64,
}

impl Meter<'static> {
    /// A render's own [`Budget::default`].
    pub(crate) fn own() -> Self {
        Meter {
            budget: None,
            steps: Budget::DEFAULT_STEPS,
            time: Budget::DEFAULT_TIME,
            started: Instant::now(),
            before: Duration::ZERO,
            ticks: 0,
            shared: 0,
            mine: 0,
        }
    }
}

impl Meter<'_> {
    /// Adds this render's steps to the shared count; the count now.
    fn settle(&mut self) -> u64 {
        let mine = std::mem::take(&mut self.mine);
        self.shared = match self.budget {
            Some(b) => b
                .inner
                .used
                .fetch_add(mine, Ordering::Relaxed)
                .saturating_add(mine),
            None => self.shared.saturating_add(mine),
        };
        self.shared
    }

    /// Takes `n` steps; an error (the budget's words) when they are over
    /// the budget's steps, or, at every 256th, when the render's time is
    /// over its time. Within the budget this is a few instructions,
    /// inlined into the engine's loop; the rest is out of line.
    #[inline]
    pub fn take(&mut self, n: u64) -> Result<(), String> {
        self.mine = self.mine.saturating_add(n);
        self.ticks = self.ticks.wrapping_add(1);
        if !self.ticks.is_multiple_of(256) && self.shared.saturating_add(self.mine) <= self.steps {
            return Ok(());
        }
        self.checkpoint()
    }

    /// Takes the `n` steps of a function's result, just after the call: the
    /// clock is read then (a call is where time goes that the steps do
    /// not show).
    pub fn after_call(&mut self, n: u64) -> Result<(), String> {
        self.mine = self.mine.saturating_add(n);
        self.checkpoint()
    }

    /// Adds this render's steps to the shared count and reads the clock.
    #[cold]
    #[inline(never)]
    fn checkpoint(&mut self) -> Result<(), String> {
        if self.settle() > self.steps {
            return Err(format!(
                "template work budget exhausted: over {} steps (each action, range iteration and function call is a step, and a function's result counts by its size); a template renders config values, not loops",
                self.steps
            ));
        }
        if self.before + self.started.elapsed() > self.time {
            return Err(format!(
                "template time budget exhausted: over {} ms spent rendering; a template renders config values, not loops",
                self.time.as_millis()
            ));
        }
        Ok(())
    }
}

impl Drop for Meter<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.budget {
            self.settle();
            let nanos = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            b.inner.spent_nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }
}
