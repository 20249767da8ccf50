//! Install secrets and sensitive inputs, encrypted at rest.
//!
//! XChaCha20-Poly1305 with a random 192-bit nonce per value, and the
//! install and the value's name as associated data, so a sealed value
//! cannot be moved to another install or name. The key is 32 bytes, hex:
//! from `NUON_SECRETS_KEY` when set, otherwise `DATA_DIR/secrets.key`
//! (created with mode 0600 on first start). Losing the key loses the
//! secrets: back it up with the data directory, apart from it.
//!
//! A keyring, for a rotation: several keys, comma-separated in the
//! variable or one per line in the file. The first seals; every one opens.

use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use nuon_core::InstallId;

use crate::error::{Error, Result};

/// The file of the key in the data directory.
pub const SECRETS_KEY_FILE: &str = "secrets.key";
/// The environment variable that gives the key instead.
pub const SECRETS_KEY_ENV: &str = "NUON_SECRETS_KEY";

/// Seals and opens values with the control plane's secrets key.
///
/// A box loaded from `secrets.key` reads the file again when it changes
/// ([`SecretBox::reload_if_changed`], and before a value that does not
/// open is given up on), so a running control plane follows a rotation of
/// the secrets key (`nuon-ctl rotate-secrets-key`).
pub struct SecretBox {
    ring: RwLock<Ring>,
    /// The key file, and its modification time when last read.
    source: Option<(PathBuf, RwLock<Option<SystemTime>>)>,
}

/// The keys.
struct Ring {
    /// What values are sealed with.
    cipher: XChaCha20Poly1305,
    /// Earlier keys values are still opened with, until a rotation is done.
    older: Vec<XChaCha20Poly1305>,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

/// A keyring: keys separated by commas or lines (a line starting with `#`
/// is a comment), the first the one that seals.
fn parse_keys(text: &str, from: &str) -> Result<SecretBox> {
    let bad = |message: String| Error::DataDir {
        path: from.into(),
        message,
    };
    let keys = key_ring(text).map_err(bad)?;
    SecretBox::with_keys(&keys)
        .ok_or_else(|| bad("holds no secrets key: give 64 hex characters".into()))
}

/// The keys of a keyring's text (see [`parse_keys`]).
pub(crate) fn key_ring(text: &str) -> std::result::Result<Vec<[u8; 32]>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(key_hex)
        .collect()
}

/// One key: 64 hex characters.
pub(crate) fn key_hex(text: &str) -> std::result::Result<[u8; 32], String> {
    let raw = hex::decode(text.trim())
        .map_err(|e| format!("the secrets key must be 64 hex characters: {e}"))?;
    raw.try_into().map_err(|b: Vec<u8>| {
        format!(
            "the secrets key must be 32 bytes (64 hex characters), found {}",
            b.len()
        )
    })
}

impl SecretBox {
    /// A box with this key.
    pub fn new(key: [u8; 32]) -> Self {
        Self::from_ring(Self::ring(&[key]).expect("one key"))
    }

    /// A keyring: the first key seals, every one opens; `None` when empty.
    pub fn with_keys(keys: &[[u8; 32]]) -> Option<Self> {
        Self::ring(keys).map(Self::from_ring)
    }

    fn ring(keys: &[[u8; 32]]) -> Option<Ring> {
        let (first, older) = keys.split_first()?;
        Some(Ring {
            cipher: XChaCha20Poly1305::new(&(*first).into()),
            older: older
                .iter()
                .map(|k| XChaCha20Poly1305::new(&(*k).into()))
                .collect(),
        })
    }

    fn from_ring(ring: Ring) -> Self {
        SecretBox {
            ring: RwLock::new(ring),
            source: None,
        }
    }

    /// Reads the key file again when it changed since it was read (a
    /// rotation wrote it); answers whether it did. A box whose key came
    /// from the environment never changes.
    pub fn reload_if_changed(&self) -> Result<bool> {
        let Some((path, read_at)) = &self.source else {
            return Ok(false);
        };
        let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        if modified.is_none() || *read_at.read().expect("key lock") == modified {
            return Ok(false);
        }
        let text = std::fs::read_to_string(path).map_err(|e| Error::DataDir {
            path: path.display().to_string(),
            message: format!("cannot read the secrets key: {e}"),
        })?;
        let fresh = parse_keys(&text, &path.display().to_string())?;
        let ring = fresh.ring.into_inner().expect("fresh lock");
        *self.ring.write().expect("key lock") = ring;
        *read_at.write().expect("key lock") = modified;
        tracing::info!(path = %path.display(), "read the secrets key again (it changed)");
        Ok(true)
    }

    fn with_source(mut self, path: PathBuf) -> Self {
        let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        self.source = Some((path, RwLock::new(modified)));
        self
    }

    /// The key from the environment, or from the data directory (made there
    /// on first use).
    pub fn load_or_create(dir: &Path) -> Result<Self> {
        match Self::load(dir)? {
            Some(b) => Ok(b),
            None => Self::create(dir),
        }
    }

    /// The key from the environment, or from the data directory; `None`
    /// when neither has one.
    pub fn load(dir: &Path) -> Result<Option<Self>> {
        if let Ok(text) = std::env::var(SECRETS_KEY_ENV) {
            return Ok(Some(parse_keys(&text, SECRETS_KEY_ENV)?));
        }
        let path = dir.join(SECRETS_KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(
                parse_keys(&text, &path.display().to_string())?.with_source(path),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::DataDir {
                path: path.display().to_string(),
                message: format!("cannot read the secrets key: {e}"),
            }),
        }
    }

    /// Makes a new key in the data directory.
    pub fn create(dir: &Path) -> Result<Self> {
        let path = dir.join(SECRETS_KEY_FILE);
        let mut key = [0u8; 32];
        nuon_core::random_bytes(&mut key);
        crate::private::write_private(&path, &hex::encode(key))?;
        tracing::info!(path = %path.display(), "created the secrets key; back it up apart from the data");
        Ok(Self::new(key).with_source(path))
    }

    /// Seals `value`, bound to `context` (install id and name).
    pub fn seal(&self, value: &str, context: &str) -> String {
        self.seal_bytes(value.as_bytes(), context)
    }

    /// Seals bytes, bound to `context`: base64 of the nonce and the
    /// ciphertext.
    pub fn seal_bytes(&self, value: &[u8], context: &str) -> String {
        let mut nonce = [0u8; 24];
        nuon_core::random_bytes(&mut nonce);
        let sealed = self
            .ring
            .read()
            .expect("key lock")
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: value,
                    aad: context.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 encryption cannot fail for in-memory values");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        STANDARD.encode(out)
    }

    /// Opens a value sealed with [`SecretBox::seal`] for the same context.
    pub fn open(&self, sealed: &str, context: &str) -> Result<String> {
        String::from_utf8(self.open_bytes(sealed, context)?).map_err(|_| Self::bad("not UTF-8"))
    }

    /// Opens bytes sealed with [`SecretBox::seal_bytes`] for the same context.
    pub fn open_bytes(&self, sealed: &str, context: &str) -> Result<Vec<u8>> {
        self.open_which(sealed, context).map(|(value, _)| value)
    }

    /// Opens a value and says whether it is sealed with the first key of
    /// the ring (`true`), or an older one, so must be sealed again.
    pub fn open_which(&self, sealed: &str, context: &str) -> Result<(Vec<u8>, bool)> {
        match self.open_with_ring(sealed, context) {
            // Sealed under a key this box has not read yet?
            Err(e) if self.reload_if_changed().unwrap_or(false) => {
                self.open_with_ring(sealed, context).map_err(|_| e)
            }
            r => r,
        }
    }

    fn open_with_ring(&self, sealed: &str, context: &str) -> Result<(Vec<u8>, bool)> {
        let raw = STANDARD
            .decode(sealed)
            .map_err(|_| Self::bad("not base64"))?;
        if raw.len() < 24 {
            return Err(Self::bad("too short"));
        }
        let (nonce, ct) = raw.split_at(24);
        let payload = || Payload {
            msg: ct,
            aad: context.as_bytes(),
        };
        let nonce = XNonce::from_slice(nonce);
        let ring = self.ring.read().expect("key lock");
        if let Ok(value) = ring.cipher.decrypt(nonce, payload()) {
            return Ok((value, true));
        }
        ring.older
            .iter()
            .find_map(|c| c.decrypt(nonce, payload()).ok())
            .map(|value| (value, false))
            .ok_or_else(|| Self::bad("authentication failed"))
    }

    fn bad(why: &str) -> Error {
        Error::DataDir {
            path: SECRETS_KEY_FILE.into(),
            message: format!(
                "cannot decrypt a stored secret ({why}): was the secrets key changed?"
            ),
        }
    }
}

/// An install's sensitive inputs and secrets, each sealed (the install's
/// `sealed_json`).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Sealed {
    #[serde(default)]
    pub(crate) inputs: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) secrets: std::collections::BTreeMap<String, String>,
}

/// The sealing context of an install's sensitive input or secret (`kind`
/// is `input` or `secret`).
pub fn seal_context(install: &InstallId, kind: &str, name: &str) -> String {
    format!("{install}/{kind}/{name}")
}

/// The sealing context of a webhook's signing secret.
/// The context an install's stack outputs are sealed under.
pub(crate) fn stack_context(install: &InstallId) -> String {
    format!("install-stack/{install}/outputs")
}

pub(crate) fn webhook_context(hook: &nuon_core::WebhookId) -> String {
    format!("webhook/{hook}")
}

/// The sealing context of a component's Terraform or plugin state.
pub(crate) fn state_context(install: &InstallId, component: &str) -> String {
    format!("{install}/state/{component}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_are_bound_to_their_context() {
        let b = SecretBox::new([7; 32]);
        let s = b.seal("hunter2", "ins_1/db_password");
        assert!(!s.contains("hunter2"));
        assert_ne!(s, b.seal("hunter2", "ins_1/db_password"), "nonces differ");
        assert_eq!(b.open(&s, "ins_1/db_password").unwrap(), "hunter2");
        assert!(b.open(&s, "ins_2/db_password").is_err());
        assert!(
            SecretBox::new([8; 32])
                .open(&s, "ins_1/db_password")
                .is_err()
        );
    }

    #[test]
    fn a_keyring_seals_with_its_first_key_and_opens_with_all() {
        let old = SecretBox::new([1; 32]);
        let by_old = old.seal("v", "c");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(SECRETS_KEY_FILE);
        let (new_hex, old_hex) = (hex::encode([2u8; 32]), hex::encode([1u8; 32]));
        std::fs::write(&file, format!("# rotating\n{new_hex}\n{old_hex}\n")).unwrap();
        let ring = SecretBox::load(dir.path()).unwrap().unwrap();
        assert_eq!(
            ring.open_which(&by_old, "c").unwrap(),
            (b"v".to_vec(), false)
        );
        let by_new = ring.seal("w", "c");
        assert_eq!(
            ring.open_which(&by_new, "c").unwrap(),
            (b"w".to_vec(), true)
        );
        assert!(old.open(&by_new, "c").is_err(), "the new key seals");
        assert!(
            ring.open(&by_old, "d").is_err(),
            "still bound to its context"
        );
        assert!(parse_keys(" , \n", "here").is_err());
        assert!(parse_keys(&format!("{new_hex},{old_hex}"), "env").is_ok());
    }

    #[test]
    fn the_key_file_is_made_once_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = SecretBox::load_or_create(dir.path()).unwrap();
        let sealed = a.seal("x", "c");
        let b = SecretBox::load_or_create(dir.path()).unwrap();
        assert_eq!(b.open(&sealed, "c").unwrap(), "x");
        let mode = std::fs::metadata(dir.path().join(SECRETS_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(dir.path().join(SECRETS_KEY_FILE), "abc").unwrap();
        let e = SecretBox::load_or_create(dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("64 hex characters"), "{e}");
    }
}
