//! Hash-chained, append-only audit trails.
//!
//! Both sides keep one: the control plane a chain per org (every
//! state-changing API call and every job), the runner a journal in its work
//! directory (every job it accepted or refused, and how each ended). Each
//! entry carries the hash of the one before it, so a row edited, deleted or
//! moved breaks the chain at that row, and [`Verifier`] names it. As in
//! Certificate Transparency, the newest hash (the chain's head) stands for
//! everything before it: keep it elsewhere, and even a rewrite of the whole
//! tail is caught.
//!
//! ```
//! use nuon_core::audit::{AuditEntry, Chain, Verifier};
//!
//! let mut chain = Chain::default();
//! let a = chain.append(AuditEntry::new(1_000, "tok_1", "deployInstall", "/v1/installs/x/deploy", "127.0.0.1", "201"));
//! let b = chain.append(AuditEntry::new(2_000, "tok_1", "approveWorkflow", "/v1/workflows/y/approve", "127.0.0.1", "200"));
//! let mut v = Verifier::default();
//! v.check(&a)?;
//! v.check(&b)?;
//! assert_eq!(v.head(), b.hash);
//!
//! let mut edited = b.clone();
//! edited.outcome = "403".into();
//! let mut v = Verifier::default();
//! v.check(&a)?;
//! assert_eq!(v.check(&edited).unwrap_err().entry, 2);
//! # Ok::<(), nuon_core::audit::ChainBreak>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The `prev` of the first entry of a chain of no particular scope: 64
/// zeros. The stores and the runner start theirs at [`genesis`] instead.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The `prev` of the first entry of the chain of `scope` (an org id, a
/// runner): SHA-256 of `nuon-audit`, a newline and the scope. It binds a
/// chain to what it is the record of: a chain moved to another org does
/// not verify there.
pub fn genesis(scope: &str) -> String {
    hex::encode(
        Sha256::new()
            .chain_update(b"nuon-audit\n")
            .chain_update(scope.as_bytes())
            .finalize(),
    )
}

/// One entry of an audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuditEntry {
    /// Its place in the chain, from 1, without gaps.
    pub n: u64,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
    /// Who: a person's email address (their token's id in `detail`), a
    /// service account's API token id (`tok_...`), a runner (`runner:rnr_...`), or
    /// `control-plane` for what the platform did on its own.
    pub actor: String,
    /// What: the API operation (`deployInstall`), or an event such as
    /// `job.finished`, `job.accepted`, `job.refused`, `runner.health`.
    pub action: String,
    /// On what: the request path, or the job (`job:job_...`).
    pub target: String,
    /// Where from: the caller's address (empty when not a request).
    #[serde(default)]
    pub source: String,
    /// How it ended: an HTTP status, or a job's outcome.
    pub outcome: String,
    /// More, in words (a job's kind and runner, a refusal's reason).
    #[serde(default)]
    pub detail: String,
    /// The hash of the entry before (hex SHA-256), [`GENESIS`] for the first.
    pub prev: String,
    /// This entry's hash: SHA-256 over `prev` and every field above.
    pub hash: String,
}

impl AuditEntry {
    /// An entry not yet in a chain (`n`, `prev` and `hash` are set by
    /// [`Chain::append`] or the store).
    pub fn new(
        at_ms: i64,
        actor: impl Into<String>,
        action: impl Into<String>,
        target: impl Into<String>,
        source: impl Into<String>,
        outcome: impl Into<String>,
    ) -> Self {
        AuditEntry {
            n: 0,
            at_ms,
            actor: actor.into(),
            action: action.into(),
            target: target.into(),
            source: source.into(),
            outcome: outcome.into(),
            detail: String::new(),
            prev: String::new(),
            hash: String::new(),
        }
    }

    /// With a detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = detail.into();
        self
    }

    /// The hash this entry's content calls for: SHA-256 over `prev`, then
    /// each field as its length and its bytes (so no two different entries
    /// encode alike).
    pub fn content_hash(&self) -> String {
        let mut h = Sha256::new();
        let n = self.n.to_string();
        let at = self.at_ms.to_string();
        for field in [
            self.prev.as_str(),
            &n,
            &at,
            &self.actor,
            &self.action,
            &self.target,
            &self.source,
            &self.outcome,
            &self.detail,
        ] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field.as_bytes());
        }
        hex::encode(h.finalize())
    }

    /// Makes this entry number `n` of a chain whose head is `prev`.
    pub fn link(&mut self, n: u64, prev: &str) {
        self.n = n;
        self.prev = prev.to_owned();
        self.hash = self.content_hash();
    }
}

/// The writing end of a chain: its last number and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The number of the last entry (0: none yet).
    pub n: u64,
    /// The hash of the last entry ([`GENESIS`]: none yet).
    pub head: String,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            n: 0,
            head: GENESIS.to_owned(),
        }
    }
}

impl Chain {
    /// An empty chain of `scope`, starting at [`genesis`].
    pub fn new(scope: &str) -> Self {
        Chain {
            n: 0,
            head: genesis(scope),
        }
    }

    /// Links `entry` after the head and makes it the head.
    pub fn append(&mut self, mut entry: AuditEntry) -> AuditEntry {
        self.n += 1;
        entry.link(self.n, &self.head);
        self.head = entry.hash.clone();
        entry
    }
}

/// Where and why a chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize, JsonSchema)]
#[error("entry {entry}: {why}")]
pub struct ChainBreak {
    /// The first entry that does not chain (its number as it should be).
    pub entry: u64,
    /// What is wrong with it.
    pub why: String,
}

/// Checks a chain entry by entry, in order.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    chain: Chain,
}

impl Verifier {
    /// Checks the chain of `scope` from its first entry.
    pub fn new(scope: &str) -> Self {
        Verifier {
            chain: Chain::new(scope),
        }
    }

    /// Checks entries that continue from a known point (an earlier
    /// verification's count and head).
    pub fn from(n: u64, head: impl Into<String>) -> Self {
        Verifier {
            chain: Chain {
                n,
                head: head.into(),
            },
        }
    }

    /// How many entries were checked (with the starting point's).
    pub fn count(&self) -> u64 {
        self.chain.n
    }

    /// The hash of the last entry checked.
    pub fn head(&self) -> &str {
        &self.chain.head
    }

    /// Checks the next entry.
    pub fn check(&mut self, e: &AuditEntry) -> Result<(), ChainBreak> {
        let expected = self.chain.n + 1;
        let fail = |why: String| {
            Err(ChainBreak {
                entry: expected,
                why,
            })
        };
        if e.n != expected {
            return fail(if e.n > expected {
                format!(
                    "missing: entry {} follows entry {} (deleted rows, or a number edited)",
                    e.n, self.chain.n
                )
            } else {
                format!(
                    "out of order: entry {} comes after entry {} (rows moved, or a number edited)",
                    e.n, self.chain.n
                )
            });
        }
        if e.prev != self.chain.head && self.chain.n == 0 {
            return fail(format!(
                "does not chain: it is the first entry, but names {} as the hash before it, not this chain's start {} (moved from another chain, or changed)",
                short(&e.prev),
                short(&self.chain.head)
            ));
        }
        if e.prev != self.chain.head {
            return fail(format!(
                "does not chain: it names {} as the hash before it, but entry {} hashes to {} (entry {} was changed, replaced or moved)",
                short(&e.prev),
                self.chain.n,
                short(&self.chain.head),
                self.chain.n
            ));
        }
        let content = e.content_hash();
        if content != e.hash {
            return fail(format!(
                "changed: its content hashes to {}, not to the {} it was written with",
                short(&content),
                short(&e.hash)
            ));
        }
        self.chain.n = e.n;
        self.chain.head = e.hash.clone();
        Ok(())
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(k: u64) -> Vec<AuditEntry> {
        let mut c = Chain::default();
        (0..k)
            .map(|i| {
                c.append(AuditEntry::new(
                    i as i64,
                    "tok",
                    "op",
                    format!("/t/{i}"),
                    "",
                    "200",
                ))
            })
            .collect()
    }

    fn verify(entries: &[AuditEntry]) -> Result<u64, ChainBreak> {
        let mut v = Verifier::default();
        for e in entries {
            v.check(e)?;
        }
        Ok(v.count())
    }

    #[test]
    fn an_intact_chain_verifies() {
        assert_eq!(verify(&chain(5)), Ok(5));
    }

    #[test]
    fn an_edited_entry_is_named() {
        let mut c = chain(5);
        c[2].detail = "x".into();
        let e = verify(&c).unwrap_err();
        assert_eq!(e.entry, 3);
        assert!(e.why.starts_with("changed"), "{e}");
    }

    #[test]
    fn an_edited_entry_with_its_hash_rewritten_breaks_the_next() {
        let mut c = chain(5);
        c[2].outcome = "500".into();
        c[2].hash = c[2].content_hash();
        let e = verify(&c).unwrap_err();
        assert_eq!(e.entry, 4);
        assert!(e.why.contains("entry 3 was changed"), "{e}");
    }

    #[test]
    fn a_deleted_entry_is_named() {
        let mut c = chain(5);
        c.remove(1);
        let e = verify(&c).unwrap_err();
        assert_eq!(e.entry, 2);
        assert!(e.why.contains("missing"), "{e}");
    }

    #[test]
    fn swapped_entries_are_caught() {
        let mut c = chain(5);
        c.swap(1, 2);
        assert_eq!(verify(&c).unwrap_err().entry, 2);
        // Renumbered to hide the swap: the hashes no longer follow.
        let mut c = chain(5);
        c.swap(1, 2);
        c[1].n = 2;
        c[2].n = 3;
        assert_eq!(verify(&c).unwrap_err().entry, 2);
    }

    #[test]
    fn a_chain_verifies_only_in_its_own_scope() {
        let mut c = Chain::new("org_a");
        let e = c.append(AuditEntry::new(1, "t", "op", "/x", "", "200"));
        assert!(Verifier::new("org_a").check(&e).is_ok());
        let b = Verifier::new("org_b").check(&e).unwrap_err();
        assert_eq!(b.entry, 1);
        assert!(b.why.contains("first entry"), "{b}");
    }

    #[test]
    fn fields_cannot_trade_bytes() {
        let mut a = AuditEntry::new(1, "ab", "c", "", "", "");
        let mut b = AuditEntry::new(1, "a", "bc", "", "", "");
        a.link(1, GENESIS);
        b.link(1, GENESIS);
        assert_ne!(a.hash, b.hash);
    }
}
