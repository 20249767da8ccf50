//! How long the link to the control plane lets a request be held.
//!
//! A claim and a heartbeat are long polls: the control plane holds them
//! open until there is something to say (a job, a cancel) or the wait ends.
//! A NAT, an HTTP proxy or a load balancer on the way may cut any request
//! held longer than its own timeout (10 s is not rare), whatever the wait
//! asked for. Held to the full wait, every claim is then cut, the runner
//! backs off as if the control plane were down, and a job handed over on a
//! claim cut on its way back waits for its lease to lapse before it is
//! handed over again.
//!
//! So the runner learns the cut from the requests it loses: a held request
//! whose connection breaks after it was sent ([`nuon_core::TransportError::Cut`]: not
//! a refused connection, not a timeout of a silent link), [`MIN_CUT`] or
//! more after, was cut by something on the way, and from then on claims and heartbeats ask to be held at most three quarters of
//! the time that one lasted (never under [`MIN_HOLD`]). Another cut
//! shortens it again; after [`FORGET_AFTER`] without a cut the runner
//! tries the full wait again, since the link may have changed. A cut is
//! not a failure of the control plane: the request is sent again at once,
//! without backing off.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The shortest hold that failing counts as a cut by the link.
pub(super) const MIN_CUT: Duration = Duration::from_secs(2);
/// The shortest hold the runner asks for after cuts.
pub(super) const MIN_HOLD: Duration = Duration::from_secs(1);
/// How long a learned limit lasts without another cut.
pub(super) const FORGET_AFTER: Duration = Duration::from_secs(30 * 60);

/// The longest hold the link allows, as learned from cut requests.
#[derive(Debug, Default)]
pub(super) struct HoldLimit {
    learned: Mutex<Option<Learned>>,
}

#[derive(Debug, Clone, Copy)]
struct Learned {
    limit: Duration,
    at: Instant,
}

impl HoldLimit {
    /// The wait to ask for instead of `asked`.
    pub(super) fn wait(&self, asked: Duration) -> Duration {
        self.wait_at(asked, Instant::now())
    }

    fn wait_at(&self, asked: Duration, now: Instant) -> Duration {
        let mut learned = super::lock(&self.learned);
        match *learned {
            Some(l) if now.duration_since(l.at) >= FORGET_AFTER => {
                tracing::info!(
                    limit_ms = l.limit.as_millis() as u64,
                    "no held request was cut for a while: asking for the full wait again"
                );
                *learned = None;
                asked
            }
            Some(l) => asked.min(l.limit),
            None => asked,
        }
    }

    /// A request asking to be held `asked` failed after `held`: whether it
    /// was cut on the way (then it is sent again at once, and later ones
    /// are held shorter).
    pub(super) fn cut(&self, what: &str, asked: Duration, held: Duration) -> bool {
        self.cut_at(what, asked, held, Instant::now())
    }

    fn cut_at(&self, what: &str, asked: Duration, held: Duration, now: Instant) -> bool {
        if held < MIN_CUT || asked < MIN_CUT {
            return false;
        }
        let mut learned = super::lock(&self.learned);
        let before = learned.map_or(asked, |l| l.limit.min(asked));
        let limit = (before.min(held) * 3 / 4).max(MIN_HOLD);
        *learned = Some(Learned { limit, at: now });
        if limit < before {
            tracing::warn!(
                held_ms = held.as_millis() as u64,
                limit_ms = limit.as_millis() as u64,
                "a held {what} was cut after {:.1} s (a NAT, proxy or load balancer on the way closes requests held that long?): claims and heartbeats are held at most {:.1} s from now",
                held.as_secs_f64(),
                limit.as_secs_f64(),
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_cut_shortens_every_later_hold_and_is_forgotten_after_a_while() {
        let h = HoldLimit::default();
        let t0 = Instant::now();
        assert_eq!(h.wait_at(S(50), t0), S(50));
        // A refused connection or an error answer is not a cut.
        assert!(!h.cut_at("claim", S(50), Duration::from_millis(300), t0));
        assert_eq!(h.wait_at(S(50), t0), S(50));
        // Cut after 10 s: held 7.5 s from now on, heartbeats too.
        assert!(h.cut_at("claim", S(50), S(10), t0));
        assert_eq!(h.wait_at(S(50), t0), Duration::from_millis(7_500));
        assert_eq!(h.wait_at(S(5), t0), S(5));
        // Cut again before that (a shorter timeout on the way): shorter.
        assert!(h.cut_at("heartbeat", S(7), S(4), t0 + S(60)));
        assert_eq!(h.wait_at(S(50), t0 + S(60)), S(3));
        // Never under MIN_HOLD.
        assert!(h.cut_at("claim", S(3), Duration::from_millis(2_100), t0 + S(61)));
        assert_eq!(h.wait_at(S(50), t0 + S(61)), Duration::from_millis(1_575));
        assert!(h.cut_at("claim", S(3), MIN_CUT, t0 + S(62)));
        assert!(h.cut_at("claim", S(3), MIN_CUT, t0 + S(62)));
        assert_eq!(h.wait_at(S(50), t0 + S(62)), MIN_HOLD);
        // Forgotten after a while without a cut: the full wait again.
        assert_eq!(
            h.wait_at(S(50), t0 + S(62) + FORGET_AFTER),
            S(50),
            "the link may have changed"
        );
        assert_eq!(h.wait_at(S(50), t0 + S(62) + FORGET_AFTER), S(50));
    }

    #[test]
    fn a_zero_wait_is_never_a_cut() {
        let h = HoldLimit::default();
        assert!(!h.cut_at("heartbeat", Duration::ZERO, S(5), Instant::now()));
        assert_eq!(h.wait(S(10)), S(10));
    }
}
