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

/// A map of [`Notify`]s created on demand and dropped when no waiter holds them.
#[derive(Debug)]
pub(crate) struct Hub<K> {
    slots: Mutex<HashMap<K, Arc<Notify>>>,
}

impl<K: Eq + Hash + Clone> Hub<K> {
    pub(crate) fn new() -> Self {
        Hub {
            slots: Mutex::new(HashMap::new()),
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

    /// Wakes every current waiter on `key`.
    pub(crate) fn wake(&self, key: &K) {
        let notify = self.slots.lock().expect("hub lock").get(key).cloned();
        if let Some(n) = notify {
            n.notify_waiters();
        }
    }

    /// Wakes every waiter on every key (shutdown).
    pub(crate) fn wake_all(&self) {
        for n in self.slots.lock().expect("hub lock").values() {
            n.notify_waiters();
        }
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
