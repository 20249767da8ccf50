//! Install secrets and sensitive inputs, encrypted at rest.
//!
//! XChaCha20-Poly1305 with a random 192-bit nonce per value, and the
//! install and the value's name as associated data, so a sealed value
//! cannot be moved to another install or name. The key is 32 bytes, hex:
//! from `NUON_SECRETS_KEY` when set, otherwise `DATA_DIR/secrets.key`
//! (created with mode 0600 on first start). Losing the key loses the
//! secrets: back it up with the data directory, apart from it.

use std::path::Path;

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
pub struct SecretBox {
    cipher: XChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

fn parse_key(text: &str, from: &str) -> Result<[u8; 32]> {
    let bytes = hex::decode(text.trim()).map_err(|e| Error::DataDir {
        path: from.into(),
        message: format!("the secrets key must be 64 hex characters: {e}"),
    })?;
    bytes.try_into().map_err(|b: Vec<u8>| Error::DataDir {
        path: from.into(),
        message: format!(
            "the secrets key must be 32 bytes (64 hex characters), found {}",
            b.len()
        ),
    })
}

impl SecretBox {
    /// A box with this key.
    pub fn new(key: [u8; 32]) -> Self {
        SecretBox {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
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
            return Ok(Some(Self::new(parse_key(&text, SECRETS_KEY_ENV)?)));
        }
        let path = dir.join(SECRETS_KEY_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(Self::new(parse_key(
                &text,
                &path.display().to_string(),
            )?))),
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
        crate::server::write_private(&path, &hex::encode(key))?;
        tracing::info!(path = %path.display(), "created the secrets key; back it up apart from the data");
        Ok(Self::new(key))
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
        let raw = STANDARD
            .decode(sealed)
            .map_err(|_| Self::bad("not base64"))?;
        if raw.len() < 24 {
            return Err(Self::bad("too short"));
        }
        let (nonce, ct) = raw.split_at(24);
        self.cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ct,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| Self::bad("authentication failed"))
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
