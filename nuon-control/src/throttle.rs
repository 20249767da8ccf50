//! How often a caller may fail to sign in: failed token checks and sign-ins
//! are counted per address and per account (the id before a token's `.`,
//! or the person a sign-in code names), and past the limit further tries
//! are answered `429` with `Retry-After` before any check is made, so a
//! guesser learns nothing more.
//!
//! Each key has a bucket of [`ThrottleConfig::burst`] tries that refills at
//! [`ThrottleConfig::per_minute`]; a failure takes one. A token that checked
//! out recently is still let through from a throttled address: a fleet
//! behind one NAT address keeps working while a broken neighbour (or an
//! attacker) is held back, and an attacker gains nothing from it, since
//! only tokens already shown good pass (and are still checked: a revoked
//! one is refused as before).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The limits on failed sign-ins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThrottleConfig {
    /// Failures allowed at once from one address (or on one account).
    pub burst: u32,
    /// Failures allowed per minute after the burst, per address; an
    /// account gets half.
    pub per_minute: u32,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            burst: 20,
            per_minute: 30,
        }
    }
}

/// A refused try: how long until the next is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Throttled {
    pub(crate) retry_after: Duration,
    /// What was throttled: `"address"` or `"account"`.
    pub(crate) by: &'static str,
}

impl Throttled {
    /// Whole seconds, rounded up, for a `Retry-After` header.
    pub(crate) fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_millis().div_ceil(1000).max(1) as u64
    }

    pub(crate) fn message(&self) -> String {
        format!(
            "too many failed sign-ins or token checks from this {}: try again in {} s (a token that worked recently is still accepted)",
            self.by,
            self.retry_after_secs()
        )
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Most keys remembered per kind; past it the fullest buckets (those that
/// would be full again by now) are forgotten first.
const MAX_KEYS: usize = 100_000;
/// How long a good token is remembered as good.
const GOOD_FOR: Duration = Duration::from_secs(3600);

#[derive(Default)]
struct Buckets(HashMap<String, Bucket>);

impl Buckets {
    fn level(&self, key: &str, burst: f64, rate: f64, now: Instant) -> f64 {
        self.0.get(key).map_or(burst, |b| {
            (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(burst)
        })
    }

    fn take(&mut self, key: &str, burst: f64, rate: f64, now: Instant) {
        let tokens = self.level(key, burst, rate, now) - 1.0;
        if self.0.len() >= MAX_KEYS && !self.0.contains_key(key) {
            // Forget every key whose bucket is full again.
            self.0
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
        }
        if self.0.len() < MAX_KEYS || self.0.contains_key(key) {
            self.0.insert(
                key.to_owned(),
                Bucket {
                    tokens: tokens.max(-1.0),
                    at: now,
                },
            );
        }
    }
}

/// Failure counts and recently good tokens.
pub(crate) struct Throttle {
    config: ThrottleConfig,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    addresses: Buckets,
    accounts: Buckets,
    good: HashMap<String, Instant>,
}

impl Throttle {
    pub(crate) fn new(config: ThrottleConfig) -> Self {
        Throttle {
            config,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn rates(&self) -> (f64, f64, f64) {
        let burst = f64::from(self.config.burst.max(1));
        let per_address = f64::from(self.config.per_minute.max(1)) / 60.0;
        (burst, per_address, per_address / 2.0)
    }

    /// Whether a try with the token hashed `hash` (on `account`, from
    /// `address`) may be checked now.
    pub(crate) fn check(
        &self,
        address: &str,
        account: Option<&str>,
        hash: &str,
    ) -> Result<(), Throttled> {
        let now = Instant::now();
        let (burst, per_address, per_account) = self.rates();
        let inner = self.inner.lock().expect("throttle lock");
        if inner
            .good
            .get(hash)
            .is_some_and(|at| now.duration_since(*at) < GOOD_FOR)
        {
            return Ok(());
        }
        let wait = |level: f64, rate: f64| {
            (level < 1.0).then(|| Duration::from_secs_f64((1.0 - level) / rate))
        };
        if let Some(retry_after) = wait(
            inner.addresses.level(address, burst, per_address, now),
            per_address,
        ) {
            return Err(Throttled {
                retry_after,
                by: "address",
            });
        }
        if let Some(account) = account {
            let level = inner.accounts.level(account, burst / 2.0, per_account, now);
            if let Some(retry_after) = wait(level, per_account) {
                return Err(Throttled {
                    retry_after,
                    by: "account",
                });
            }
        }
        Ok(())
    }

    /// Counts a failed try.
    pub(crate) fn failed(&self, address: &str, account: Option<&str>) {
        let now = Instant::now();
        let (burst, per_address, per_account) = self.rates();
        let mut inner = self.inner.lock().expect("throttle lock");
        inner.addresses.take(address, burst, per_address, now);
        if let Some(account) = account {
            inner.accounts.take(account, burst / 2.0, per_account, now);
        }
    }

    /// Remembers a token that checked out.
    pub(crate) fn good(&self, hash: &str) {
        let now = Instant::now();
        let mut inner = self.inner.lock().expect("throttle lock");
        if inner.good.len() >= MAX_KEYS && !inner.good.contains_key(hash) {
            inner
                .good
                .retain(|_, at| now.duration_since(*at) < GOOD_FOR);
            if inner.good.len() >= MAX_KEYS {
                inner.good.clear();
            }
        }
        inner.good.insert(hash.to_owned(), now);
    }
}

/// A rate per key: a burst, refilled at a steady rate. What a runner's
/// telemetry may set off (audit entries, workflows, webhook events) goes
/// through one, keyed by the runner.
pub(crate) struct Rate {
    burst: f64,
    per_second: f64,
    buckets: Mutex<Buckets>,
}

impl Rate {
    pub(crate) fn new(burst: u32, per_minute: u32) -> Self {
        Rate {
            burst: f64::from(burst.max(1)),
            per_second: f64::from(per_minute.max(1)) / 60.0,
            buckets: Mutex::new(Buckets::default()),
        }
    }

    /// Takes one from `key`'s bucket, or says how long until one is there.
    pub(crate) fn take(&self, key: &str) -> Result<(), Duration> {
        let now = Instant::now();
        let mut b = self.buckets.lock().expect("rate lock");
        let level = b.level(key, self.burst, self.per_second, now);
        if level < 1.0 {
            return Err(Duration::from_secs_f64((1.0 - level) / self.per_second));
        }
        b.take(key, self.burst, self.per_second, now);
        Ok(())
    }
}

/// The account a token names: the id before its `.` (an API token's id, a
/// runner's id), when it has one of a sane length.
pub(crate) fn account_of(token: &str) -> Option<&str> {
    token
        .split_once('.')
        .map(|(id, _)| id)
        .filter(|id| !id.is_empty() && id.len() <= 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn throttle() -> Throttle {
        Throttle::new(ThrottleConfig {
            burst: 4,
            per_minute: 60,
        })
    }

    #[test]
    fn an_address_is_held_back_after_its_burst_and_told_when_to_retry() {
        let t = throttle();
        for _ in 0..4 {
            t.check("10.0.0.1", None, "h").unwrap();
            t.failed("10.0.0.1", None);
        }
        let refused = t.check("10.0.0.1", None, "h").unwrap_err();
        assert_eq!(refused.by, "address");
        assert!(refused.retry_after <= Duration::from_secs(1));
        assert_eq!(refused.retry_after_secs(), 1);
        // Another address is not held back.
        t.check("10.0.0.2", None, "h").unwrap();
        // After the refill, one more try.
        std::thread::sleep(refused.retry_after + Duration::from_millis(20));
        t.check("10.0.0.1", None, "h").unwrap();
    }

    #[test]
    fn an_account_is_held_back_across_addresses() {
        let t = throttle();
        // An account gets half the burst: two failures, from two addresses.
        t.failed("10.0.0.1", Some("tok_a"));
        t.failed("10.0.0.2", Some("tok_a"));
        let refused = t.check("10.0.0.3", Some("tok_a"), "h").unwrap_err();
        assert_eq!(refused.by, "account");
        assert!(refused.message().contains("account"));
        t.check("10.0.0.3", Some("tok_b"), "h").unwrap();
    }

    #[test]
    fn a_token_shown_good_passes_a_throttled_address() {
        let t = throttle();
        t.good("good");
        for _ in 0..10 {
            t.failed("10.0.0.1", None);
        }
        t.check("10.0.0.1", None, "good").unwrap();
        assert!(t.check("10.0.0.1", None, "unknown").is_err());
    }

    #[test]
    fn a_rate_allows_its_burst_then_one_per_refill() {
        let r = Rate::new(3, 600);
        for _ in 0..3 {
            r.take("runner").unwrap();
        }
        let wait = r.take("runner").unwrap_err();
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        r.take("another").unwrap();
        std::thread::sleep(wait + Duration::from_millis(10));
        r.take("runner").unwrap();
        assert!(r.take("runner").is_err());
    }

    #[test]
    fn accounts_are_the_id_before_the_dot() {
        assert_eq!(account_of("tok_1.secret"), Some("tok_1"));
        assert_eq!(account_of("nodot"), None);
        assert_eq!(account_of(".x"), None);
    }
}
