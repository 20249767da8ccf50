//! Signed jobs: every job spec is signed with its org's Ed25519 key, and a
//! runner verifies the exact signed bytes before it parses them.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier, VerifyingKey};

const PREFIX: &str = "ed25519:";

/// Why a signature or a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The public key text is not `ed25519:` followed by 32 bytes of base64.
    #[error(
        "invalid signing public key {0:?}: expected \"ed25519:\" followed by 44 characters of base64 (see the control plane's org-signing-key.pub)"
    )]
    BadKey(String),
    /// The job carries no signature.
    #[error("job spec is not signed")]
    Missing,
    /// The signature is not 64 bytes of base64.
    #[error("job signature is malformed")]
    Malformed,
    /// The signature does not match the bytes and the key.
    #[error(
        "job signature does not match the org's signing key: the spec was altered or signed by another key"
    )]
    Mismatch,
}

/// Why a [`Signer`] could not sign.
#[derive(Debug, thiserror::Error)]
#[error("cannot sign the job: {0}")]
pub struct SignerError(pub Box<dyn std::error::Error + Send + Sync>);

/// What signs an org's jobs: the private half of the key runners verify
/// every job with.
///
/// The control plane's own implementation is [`OrgSigningKey`], kept sealed
/// in its store. A vendor who keeps the key in a KMS or an HSM implements
/// this trait over it, and the private key never reaches the control
/// plane: the signature must be Ed25519 over exactly `message`, base64.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use nuon_core::{OrgSigningKey, PublicKey, Signer, SignerError};
///
/// /// Stands in for a remote key: here a local key and a counter; a real
/// /// one would send `message` to the HSM and return its signature.
/// struct Hsm {
///     key: OrgSigningKey,
///     signed: AtomicU64,
/// }
///
/// #[async_trait::async_trait]
/// impl Signer for Hsm {
///     fn public_key(&self) -> PublicKey {
///         self.key.public_key()
///     }
///     async fn sign(&self, message: &[u8]) -> Result<String, SignerError> {
///         self.signed.fetch_add(1, Ordering::Relaxed);
///         self.key.sign(message).await
///     }
/// }
///
/// # futures_lite_block_on(async {
/// let hsm = Hsm { key: OrgSigningKey::generate(), signed: AtomicU64::new(0) };
/// let signature = hsm.sign(b"{\"job\":1}").await.unwrap();
/// hsm.public_key().verify(b"{\"job\":1}", &signature).unwrap();
/// assert_eq!(hsm.signed.load(Ordering::Relaxed), 1);
/// # });
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop {
/// #         if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
/// #     }
/// # }
/// ```
#[async_trait::async_trait]
pub trait Signer: Send + Sync {
    /// The public key runners verify the signatures with.
    fn public_key(&self) -> PublicKey;

    /// The base64 Ed25519 signature of exactly `message`.
    async fn sign(&self, message: &[u8]) -> Result<String, SignerError>;
}

/// An org's private job-signing key.
#[derive(Clone)]
pub struct OrgSigningKey(SigningKey);

impl OrgSigningKey {
    /// A new random key.
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        crate::id::random_bytes(&mut seed);
        Self(SigningKey::from_bytes(&seed))
    }

    /// The key from its 32 secret bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SignatureError> {
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| SignatureError::BadKey("<stored secret key>".into()))?;
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    /// The 32 secret bytes, for storage.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// The matching public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.verifying_key())
    }

    /// Signs `bytes`, returning the base64 signature.
    pub fn sign_now(&self, bytes: &[u8]) -> String {
        B64.encode(self.0.sign(bytes).to_bytes())
    }
}

#[async_trait::async_trait]
impl Signer for OrgSigningKey {
    fn public_key(&self) -> PublicKey {
        OrgSigningKey::public_key(self)
    }

    async fn sign(&self, message: &[u8]) -> Result<String, SignerError> {
        Ok(self.sign_now(message))
    }
}

impl fmt::Debug for OrgSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OrgSigningKey")
            .field(&self.public_key())
            .finish()
    }
}

/// An org's public job-signing key, written `ed25519:BASE64`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl PublicKey {
    /// Checks that `signature` (base64) signs exactly `bytes`.
    pub fn verify(&self, bytes: &[u8], signature: &str) -> Result<(), SignatureError> {
        if signature.is_empty() {
            return Err(SignatureError::Missing);
        }
        let raw = B64
            .decode(signature)
            .map_err(|_| SignatureError::Malformed)?;
        let sig = Signature::from_slice(&raw).map_err(|_| SignatureError::Malformed)?;
        self.0
            .verify(bytes, &sig)
            .map_err(|_| SignatureError::Mismatch)
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", B64.encode(self.0.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for PublicKey {
    type Err = SignatureError;
    fn from_str(s: &str) -> Result<Self, SignatureError> {
        let bad = || SignatureError::BadKey(s.chars().take(80).collect());
        let b64 = s.trim().strip_prefix(PREFIX).ok_or_else(bad)?;
        let raw = B64.decode(b64).map_err(|_| bad())?;
        let bytes: [u8; 32] = raw.as_slice().try_into().map_err(|_| bad())?;
        VerifyingKey::from_bytes(&bytes)
            .map(PublicKey)
            .map_err(|_| bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_and_tamper() {
        let key = OrgSigningKey::generate();
        let public: PublicKey = key.public_key().to_string().parse().unwrap();
        let sig = key.sign_now(b"{\"a\":1}");
        public.verify(b"{\"a\":1}", &sig).unwrap();
        assert_eq!(
            public.verify(b"{\"a\":2}", &sig),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(public.verify(b"x", ""), Err(SignatureError::Missing));
        assert_eq!(public.verify(b"x", "!!"), Err(SignatureError::Malformed));
        let other = OrgSigningKey::generate().public_key();
        assert_eq!(
            other.verify(b"{\"a\":1}", &sig),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn bad_public_keys_are_refused() {
        for bad in ["", "ed25519:", "ed25519:abc", "rsa:AAAA", "ed25519:!!!!"] {
            let err = bad.parse::<PublicKey>().unwrap_err();
            assert!(err.to_string().contains("invalid signing public key"));
        }
    }
}
