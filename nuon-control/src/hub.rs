//! Wake-ups: a runner's long polls wake the moment a job is queued for it
//! or one of its jobs is cancelled; log followers wake on new lines. Each
//! wakes the waiters in this process and, through the store, on the other
//! replicas.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use nuon_core::{JobId, OrgId, RunnerId};
use tokio::sync::Notify;

use crate::engine::Notifier;
use crate::store::{Store, Wake};

/// Who waits for what: runners' long polls, claims an org's limit held
/// back, log followers.
pub(crate) struct Wakes {
    /// A runner's parked claims and heartbeats.
    pub(crate) runners: Hub<RunnerId>,
    /// Claims that an org's limit on running jobs held back, woken when a
    /// job of the org ends.
    pub(crate) orgs: Hub<OrgId>,
    /// The followers of a job's log.
    pub(crate) logs: Hub<JobId>,
    store: Arc<dyn Store>,
}

impl Wakes {
    pub(crate) fn new(store: Arc<dyn Store>) -> Self {
        Wakes {
            runners: Hub::new(),
            orgs: Hub::new(),
            logs: Hub::new(),
            store,
        }
    }

    /// Wakes the runner's parked claims and heartbeats, here and on the
    /// other replicas.
    pub(crate) fn runner(&self, runner: &RunnerId) {
        self.runners.wake(runner);
        self.store.announce(Wake::Runner(runner.clone()));
    }

    /// Wakes the claims the org's limit on running jobs held back, here
    /// and on the other replicas: one of its running jobs ended.
    pub(crate) fn org(&self, org: &OrgId) {
        self.orgs.wake(org);
        self.store.announce(Wake::Org(org.clone()));
    }

    /// Wakes the followers of a job's log, here and on the other replicas.
    pub(crate) fn logs(&self, job: &JobId) {
        self.logs.wake(job);
        self.store.announce(Wake::Logs(job.clone()));
    }
}

impl Notifier for Wakes {
    fn job_queued(&self, runner: &RunnerId) {
        self.runner(runner);
    }

    fn cancel_requested(&self, job: &JobId) {
        self.logs(job);
    }
}

/// A map of [`Notify`]s created on demand and dropped when no waiter holds
/// them; and the keys known to have nothing to wake for ([`Hub::quiet`]):
/// a runner whose last look found nothing queued, and no wake since, need
/// not look again before it waits.
#[derive(Debug)]
pub(crate) struct Hub<K> {
    slots: Mutex<HashMap<K, Arc<Notify>>>,
    marks: Mutex<Marks<K>>,
}

/// What [`Hub::looking`] and [`Hub::looked`] know of each key.
#[derive(Debug)]
struct Marks<K> {
    of: HashMap<K, Mark>,
    /// The number the next look is given.
    next: u64,
    /// How many keys the marks may hold before the stale ones are dropped:
    /// twice what was left the last time, so the drop is paid for once per
    /// as many marks as it kept (not at each mark, with a fleet parked).
    prune_past: usize,
}

#[derive(Debug, Clone, Copy)]
enum Mark {
    /// A look (numbered) began then, and no wake came since.
    Looking(u64, std::time::Instant),
    /// A look found nothing left, and no wake came since.
    Quiet(std::time::Instant),
}

/// How many keys the marks hold, at least, before the stale ones are
/// dropped.
const MARKS_PRUNED_PAST: usize = 4096;

/// How long a mark is kept unless woken or looked again: past any claim's
/// wait, and so past any use of it.
const MARKS_KEPT: std::time::Duration = std::time::Duration::from_secs(600);

impl<K: Eq + Hash + Clone> Hub<K> {
    pub(crate) fn new() -> Self {
        Hub {
            slots: Mutex::new(HashMap::new()),
            marks: Mutex::new(Marks {
                of: HashMap::new(),
                next: 0,
                prune_past: MARKS_PRUNED_PAST,
            }),
        }
    }

    /// The notifier for `key`, for a waiter to hold while it waits.
    pub(crate) fn subscribe(&self, key: &K) -> Subscription<'_, K> {
        let notify = self
            .slots
            .lock()
            .expect("hub lock")
            .entry(key.clone())
            .or_insert_with(|| Arc::new(Notify::new()))
            .clone();
        Subscription {
            hub: self,
            key: key.clone(),
            notify,
        }
    }

    /// Wakes every current waiter on `key`; the next look at it looks.
    pub(crate) fn wake(&self, key: &K) {
        self.marks().of.remove(key);
        let notify = self.slots.lock().expect("hub lock").get(key).cloned();
        if let Some(n) = notify {
            n.notify_waiters();
        }
    }

    /// Wakes every waiter on every key (shutdown, wake-ups lost between
    /// replicas); every next look looks.
    pub(crate) fn wake_all(&self) {
        self.marks().of.clear();
        for n in self.slots.lock().expect("hub lock").values() {
            n.notify_waiters();
        }
    }

    fn marks(&self) -> std::sync::MutexGuard<'_, Marks<K>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A look at `key`'s work begins (a claim's statement is about to be
    /// sent): the number to hand [`Hub::looked`] with what it found.
    pub(crate) fn looking(&self, key: &K) -> u64 {
        let mut m = self.marks();
        m.next += 1;
        let n = m.next;
        m.of.insert(key.clone(), Mark::Looking(n, std::time::Instant::now()));
        if m.of.len() > m.prune_past {
            m.of.retain(|_, mark| match mark {
                Mark::Looking(_, at) | Mark::Quiet(at) => at.elapsed() < MARKS_KEPT,
            });
            m.prune_past = MARKS_PRUNED_PAST.max(2 * m.of.len());
        }
        n
    }

    /// Look `n` at `key` ended; `nothing_left` when it saw no work left for
    /// it. Quiet from now only when no wake (nor a later look) came since
    /// the look began: work added after the look's snapshot is always
    /// followed by a wake, which a quiet mark would otherwise hide.
    pub(crate) fn looked(&self, key: &K, n: u64, nothing_left: bool) {
        let mut m = self.marks();
        let ours = matches!(m.of.get(key), Some(Mark::Looking(at, _)) if *at == n);
        if !ours {
            return;
        }
        if !nothing_left {
            m.of.remove(key);
            return;
        }
        m.of.insert(key.clone(), Mark::Quiet(std::time::Instant::now()));
    }

    /// Whether `key`'s last look found nothing left, less than `within`
    /// ago, with no wake since.
    pub(crate) fn quiet(&self, key: &K, within: std::time::Duration) -> bool {
        matches!(self.marks().of.get(key), Some(Mark::Quiet(at)) if at.elapsed() < within)
    }
}

/// A waiter's hold on one key's notifier.
pub(crate) struct Subscription<'a, K: Eq + Hash + Clone> {
    hub: &'a Hub<K>,
    key: K,
    notify: Arc<Notify>,
}

impl<K: Eq + Hash + Clone> Subscription<'_, K> {
    pub(crate) fn notify(&self) -> &Notify {
        &self.notify
    }
}

impl<K: Eq + Hash + Clone> Drop for Subscription<'_, K> {
    fn drop(&mut self) {
        let mut slots = self.hub.slots.lock().expect("hub lock");
        // The map's copy and ours: nobody else waits, so forget the key.
        if Arc::strong_count(&self.notify) == 2 {
            slots.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Hub;

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn a_look_that_found_nothing_left_is_quiet_until_a_wake() {
        let hub: Hub<&str> = Hub::new();
        assert!(!hub.quiet(&"r", LONG), "never looked: not quiet");
        let n = hub.looking(&"r");
        assert!(!hub.quiet(&"r", LONG), "a look under way is not quiet");
        hub.looked(&"r", n, true);
        assert!(hub.quiet(&"r", LONG));
        assert!(!hub.quiet(&"r", Duration::ZERO), "quiet only for so long");
        assert!(!hub.quiet(&"other", LONG));
        hub.wake(&"r");
        assert!(!hub.quiet(&"r", LONG), "woken: the next claim looks");
        // A look that left work behind is not quiet.
        let n = hub.looking(&"r");
        hub.looked(&"r", n, false);
        assert!(!hub.quiet(&"r", LONG));
    }

    #[test]
    fn a_wake_during_a_look_keeps_it_from_being_quiet() {
        // The job queued after the look's snapshot wakes the runner while
        // the look is under way: what the look says must not hide it.
        let hub: Hub<&str> = Hub::new();
        let n = hub.looking(&"r");
        hub.wake(&"r");
        hub.looked(&"r", n, true);
        assert!(!hub.quiet(&"r", LONG));
        // Across replicas, every runner's wake may be lost: all look.
        let n = hub.looking(&"r");
        hub.looked(&"r", n, true);
        hub.wake_all();
        assert!(!hub.quiet(&"r", LONG));
    }

    #[test]
    fn only_the_newest_look_says_whether_it_is_quiet() {
        let hub: Hub<&str> = Hub::new();
        let older = hub.looking(&"r");
        let newer = hub.looking(&"r");
        hub.looked(&"r", older, true);
        assert!(!hub.quiet(&"r", LONG), "a newer look is under way");
        hub.looked(&"r", newer, true);
        assert!(hub.quiet(&"r", LONG));
        // An older look ending late changes nothing.
        hub.looked(&"r", older, false);
        assert!(hub.quiet(&"r", LONG));
    }

    #[test]
    fn marks_of_runners_gone_quiet_long_ago_are_dropped() {
        let hub: Hub<String> = Hub::new();
        for i in 0..=super::MARKS_PRUNED_PAST + 1 {
            let key = format!("r{i}");
            let n = hub.looking(&key);
            hub.looked(&key, n, true);
        }
        // Fresh, they are kept, and the next drop waits for twice as many.
        let kept = hub.marks().of.len();
        let next_drop = hub.marks().prune_past;
        assert!(kept > super::MARKS_PRUNED_PAST && next_drop >= 2 * super::MARKS_PRUNED_PAST);
        // Made old (an hour, when the clock goes back that far): the next
        // drop takes them.
        let Some(old) = std::time::Instant::now().checked_sub(Duration::from_secs(3600)) else {
            return;
        };
        for mark in hub.marks().of.values_mut() {
            *mark = super::Mark::Quiet(old);
        }
        for i in 0..next_drop {
            let key = format!("new{i}");
            let n = hub.looking(&key);
            hub.looked(&key, n, true);
        }
        assert!(hub.marks().of.keys().all(|k| k.starts_with("new")));
        assert!(hub.quiet(&format!("new{}", next_drop - 1), LONG));
    }
}
