//! The on-disk cache of compiled components.
//!
//! A compiled component is native code: deserializing a file someone else
//! wrote would run their code. So the cache only ever deserializes files
//! it wrote itself:
//!
//! - the directory and its files belong to the host's user and are not
//!   writable by others (0700 and 0600, checked on every read);
//! - each file ends with an HMAC-SHA256 of its contents under a key kept
//!   in the directory (0600) that only the host reads; a file whose MAC
//!   does not match is removed and compiled again.
//!
//! Files are named by the component's SHA-256 and a hash of the engine's
//! version and settings, so an upgraded runner never reads code compiled
//! by another engine.

use std::hash::{Hash, Hasher};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

use super::WasmError;

const MAC_LEN: usize = 32;

/// The compile cache of one directory.
#[derive(Debug)]
pub struct CompileCache {
    dir: PathBuf,
    key: [u8; 32],
    engine_tag: String,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> WasmError {
    move |e| WasmError::Host(format!("compile cache: {what}: {e}"))
}

/// Whether `meta` belongs to this process's user and no one else may write
/// it.
fn private(meta: &std::fs::Metadata) -> bool {
    meta.uid() == euid() && meta.permissions().mode() & 0o022 == 0
}

/// This process's effective uid: the owner of its `/proc/self` (Linux);
/// elsewhere no file is trusted and the cache only ever misses.
fn euid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX)
}

fn hmac(key: &[u8; 32], data: &[u8]) -> [u8; 32] {
    nuon_core::hmac_sha256(key, data)
}

impl CompileCache {
    /// Opens (or makes) the cache in `dir` for `engine`.
    pub fn open(dir: &Path, engine: &Engine) -> Result<CompileCache, WasmError> {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io(format!("cannot restrict {}", dir.display())))?;
        let meta = std::fs::metadata(dir).map_err(io(format!("cannot stat {}", dir.display())))?;
        if !private(&meta) {
            return Err(WasmError::Host(format!(
                "compile cache {} must belong to this user and be writable only by it",
                dir.display()
            )));
        }
        let key_path = dir.join("key");
        let key = match std::fs::read(&key_path) {
            Ok(k) if k.len() == 32 => {
                let meta = std::fs::metadata(&key_path)
                    .map_err(io(format!("cannot stat {}", key_path.display())))?;
                if !private(&meta) || meta.permissions().mode() & 0o077 != 0 {
                    return Err(WasmError::Host(format!(
                        "{} must be readable only by this user (0600)",
                        key_path.display()
                    )));
                }
                let mut key = [0u8; 32];
                key.copy_from_slice(&k);
                key
            }
            _ => {
                let mut key = [0u8; 32];
                getrandom::fill(&mut key)
                    .map_err(|e| WasmError::Host(format!("compile cache: no randomness: {e}")))?;
                keep(&key_path, &[&key])?;
                // Files made under an older key cannot be trusted now.
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    if e.path().extension().is_some_and(|x| x == "cwasm") {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
                key
            }
        };
        let mut h = std::hash::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        Ok(CompileCache {
            dir: dir.to_owned(),
            key,
            engine_tag: format!("{:016x}", h.finish()),
        })
    }

    fn path(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_tag))
    }

    /// The compiled component for `sha256`, if the cache holds a file it
    /// wrote itself.
    pub fn get(&self, engine: &Engine, sha256: &str) -> Result<Option<Component>, WasmError> {
        let path = self.path(sha256);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(_) => return Ok(None),
        };
        if !meta.is_file() || !private(&meta) {
            tracing::warn!(path = %path.display(), "compile cache: ignoring a file this host did not write");
            return Ok(None);
        }
        let mut bytes =
            std::fs::read(&path).map_err(io(format!("cannot read {}", path.display())))?;
        if bytes.len() < MAC_LEN {
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        let mac = bytes.split_off(bytes.len() - MAC_LEN);
        let want = hmac(&self.key, &bytes);
        // Constant time, though the attacker would need the key anyway.
        if mac
            .iter()
            .zip(want.iter())
            .fold(0u8, |a, (x, y)| a | (x ^ y))
            != 0
        {
            tracing::warn!(path = %path.display(), "compile cache: a file's MAC does not match; compiling again");
            let _ = std::fs::remove_file(&path);
            return Ok(None);
        }
        deserialize_own(engine, &bytes).map(Some)
    }

    /// Stores compiled `bytes` for `sha256` (atomically: a reader sees the
    /// whole file or none).
    pub fn put(&self, sha256: &str, bytes: &[u8]) -> Result<(), WasmError> {
        let mac = hmac(&self.key, bytes);
        keep(&self.path(sha256), &[bytes, &mac])
    }
}

/// Writes `parts` to `path` whole (see [`crate::private::write_private`]).
fn keep(path: &Path, parts: &[&[u8]]) -> Result<(), WasmError> {
    crate::private::write_private(path, parts)
        .map_err(io(format!("cannot write {}", path.display())))
}

/// Deserializes compiled code this host produced (from
/// `Engine::precompile_component`, now or through a MAC-checked cache file).
pub(super) fn deserialize_own(engine: &Engine, bytes: &[u8]) -> Result<Component, WasmError> {
    // SAFETY: `bytes` come from this engine's own `precompile_component`,
    // in memory or from a cache file whose MAC under the host's private key
    // matched, so they are code this host compiled, never input from
    // elsewhere.
    #[allow(unsafe_code)]
    let c = unsafe { Component::deserialize(engine, bytes) };
    c.map_err(|e| WasmError::Host(format!("cannot load compiled code: {e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_vector() {
        // RFC 4231 test case 1: a 20-byte key of 0x0b. HMAC pads keys with
        // zeros to the block size, so the same key zero-padded to 32 bytes
        // gives the same MAC.
        let mut rfc_key = [0u8; 32];
        rfc_key[..20].fill(0x0b);
        assert_eq!(
            hex::encode(hmac(&rfc_key, b"Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
        let key = [0x0bu8; 32];
        let a = hmac(&key, b"Hi There");
        let b = hmac(&key, b"Hi There");
        assert_eq!(a, b);
        assert_ne!(a, hmac(&key, b"Hi there"));
        let mut other = key;
        other[0] ^= 1;
        assert_ne!(a, hmac(&other, b"Hi There"));
    }
}
