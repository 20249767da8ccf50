//! In-process wake-ups: a runner's long polls wake the moment a job is queued
//! for it or one of its jobs is cancelled; log followers wake on new lines.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

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
