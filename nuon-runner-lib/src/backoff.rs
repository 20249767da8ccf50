//! Exponential backoff with full jitter, so many runners coming back after a
//! control-plane restart do not arrive in the same second.

use std::time::Duration;

/// Delays after consecutive failures: a random duration between zero and
/// `min(cap, base * 2^failures)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

impl Backoff {
    /// Delays that start at `base` and double up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap,
            failures: 0,
        }
    }

    /// Forgets past failures (after a success).
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The delay before the next try, counting one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32 << self.failures.min(24))
            .min(self.cap);
        self.failures = self.failures.saturating_add(1);
        nuon_core::random_below(ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_to_the_cap_with_jitter_and_reset() {
        let base = Duration::from_millis(250);
        let cap = Duration::from_secs(30);
        let mut b = Backoff::new(base, cap);
        let mut ceiling = base;
        for _ in 0..12 {
            let d = b.next_delay();
            assert!(d <= ceiling, "{d:?} > {ceiling:?}");
            ceiling = (ceiling * 2).min(cap);
        }
        // At the cap, full jitter spreads delays over [0, cap].
        let many: Vec<_> = (0..50).map(|_| b.next_delay()).collect();
        assert!(many.iter().all(|d| *d <= cap));
        assert!(many.iter().any(|d| *d < cap / 2), "{many:?}");
        assert!(many.iter().any(|d| *d > cap / 2), "{many:?}");
        b.reset();
        assert!(b.next_delay() <= base);
    }
}
