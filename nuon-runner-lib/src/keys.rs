//! The org signing keys this runner accepts jobs from.
//!
//! The runner starts from the key it is given (`--signing-key`). When the
//! org's key is rotated, the control plane sends the rotation, signed by
//! the key it replaces, with a claim's answer; the runner takes the new
//! key on, keeps accepting the old one until its overlap window closes,
//! and writes what it trusts to `trusted-keys.json` in its work dir, so a
//! restart with the original `--signing-key` still trusts the new key.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nuon_core::{KeyRefused, PublicKey, SignedRotation, TrustedKeys};
use serde::{Deserialize, Serialize};

/// The file in the work dir.
pub(crate) const TRUSTED_KEYS_FILE: &str = "trusted-keys.json";

/// The keys trusted now, shared by the claim loop and the job tasks.
pub(crate) struct Keys {
    path: PathBuf,
    trusted: Mutex<Trust>,
}

/// What is trusted, and the keys rotated out before (to recognise the
/// configured key as one this runner has moved on from).
#[derive(Debug, Clone)]
struct Trust {
    keys: TrustedKeys,
    superseded: Vec<String>,
}

/// `trusted-keys.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    current: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous: Option<String>,
    #[serde(default)]
    previous_until_ms: i64,
    #[serde(default)]
    superseded: Vec<String>,
}

impl Keys {
    /// The keys of the work dir `dir`, starting from `configured`: what
    /// the runner learned before is kept when `configured` is one of the
    /// keys it learned it from; another key starts afresh.
    pub(crate) fn load(dir: &Path, configured: PublicKey) -> Keys {
        let path = dir.join(TRUSTED_KEYS_FILE);
        let fresh = Trust {
            keys: TrustedKeys::new(configured),
            superseded: Vec::new(),
        };
        let trust = match fs::read_to_string(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => fresh,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e,
                    "cannot read the keys learned before; trusting --signing-key alone");
                fresh
            }
            Ok(text) => match parse(&text) {
                Ok(t) if t.knows(&configured) => t,
                Ok(_) => {
                    tracing::info!(file = %path.display(), key = %configured,
                        "--signing-key is not a key this runner learned of before; trusting it alone");
                    fresh
                }
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e,
                        "the keys learned before do not read; trusting --signing-key alone");
                    fresh
                }
            },
        };
        Keys {
            path,
            trusted: Mutex::new(trust),
        }
    }

    /// The key trusted as the org's current one.
    pub(crate) fn current(&self) -> PublicKey {
        self.lock().keys.current
    }

    /// Checks a job's signature over its exact bytes.
    pub(crate) fn verify(&self, bytes: &[u8], signature: &str) -> Result<(), KeyRefused> {
        self.verify_signer(bytes, signature).map(|_| ())
    }

    /// [`Keys::verify`], answering which trusted key signed (one look at
    /// the keys, so a rotation learned meanwhile cannot name another).
    pub(crate) fn verify_signer(
        &self,
        bytes: &[u8],
        signature: &str,
    ) -> Result<PublicKey, KeyRefused> {
        let keys = self.lock().keys.clone();
        keys.verify_signer(bytes, signature, nuon_core::now_ms())
    }

    /// Takes on the rotations a claim's answer carried, and writes what is
    /// trusted when it changed.
    pub(crate) fn learn(&self, chain: &[SignedRotation]) {
        if chain.is_empty() {
            return;
        }
        let mut trust = self.lock();
        let before = trust.keys.current;
        let learned = trust.keys.learn(chain);
        for why in &learned.refused {
            tracing::error!(%why, "refused a signing-key rotation");
        }
        if learned.adopted.is_empty() {
            return;
        }
        let mut replaced = before;
        for key in &learned.adopted {
            tracing::info!(previous = %replaced, key = %key,
                "the org's signing key was rotated: trusting the new key (the previous one until its window closes)");
            let old = replaced.to_string();
            if !trust.superseded.contains(&old) {
                trust.superseded.push(old);
            }
            replaced = *key;
        }
        let stored = trust.stored();
        drop(trust);
        if let Err(e) = crate::sys::write_private(&self.path, &stored) {
            tracing::warn!(file = %self.path.display(), error = %e,
                "cannot keep the new signing key in the work dir; after a restart give it with --signing-key");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Trust> {
        self.trusted.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Trust {
    fn knows(&self, key: &PublicKey) -> bool {
        let text = key.to_string();
        self.keys.current == *key
            || self.keys.previous.is_some_and(|(p, _)| p == *key)
            || self.superseded.contains(&text)
    }

    fn stored(&self) -> String {
        let stored = Stored {
            current: self.keys.current.to_string(),
            previous: self.keys.previous.map(|(p, _)| p.to_string()),
            previous_until_ms: self.keys.previous.map_or(0, |(_, u)| u),
            superseded: self.superseded.clone(),
        };
        serde_json::to_string_pretty(&stored).unwrap_or_default()
    }
}

fn parse(text: &str) -> Result<Trust, String> {
    let stored: Stored = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let key = |k: &str| k.parse::<PublicKey>().map_err(|e| e.to_string());
    let previous = match &stored.previous {
        Some(p) => Some((key(p)?, stored.previous_until_ms)),
        None => None,
    };
    Ok(Trust {
        keys: TrustedKeys {
            current: key(&stored.current)?,
            previous,
        },
        superseded: stored.superseded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nuon_core::OrgSigningKey;

    #[tokio::test]
    async fn learned_keys_survive_a_restart_with_the_original_key() {
        let dir = tempfile::tempdir().unwrap();
        let a = OrgSigningKey::generate();
        let b = OrgSigningKey::generate();
        let keys = Keys::load(dir.path(), a.public_key());
        let ab = SignedRotation::sign(&a, b.public_key(), i64::MAX)
            .await
            .unwrap();
        keys.learn(&[ab]);
        assert_eq!(keys.current(), b.public_key());
        let file = dir.path().join(TRUSTED_KEYS_FILE);
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        // Restarted with the key it was first given: it still trusts b.
        let again = Keys::load(dir.path(), a.public_key());
        assert_eq!(again.current(), b.public_key());
        assert!(again.verify(b"x", &a.sign_now(b"x")).is_ok());
        // Given another key by hand: that one alone.
        let c = OrgSigningKey::generate();
        let other = Keys::load(dir.path(), c.public_key());
        assert_eq!(other.current(), c.public_key());
        assert!(other.verify(b"x", &b.sign_now(b"x")).is_err());
    }
}
