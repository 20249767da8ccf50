//! Signed jobs: every job spec is signed with its org's Ed25519 key, and a
//! runner verifies the exact signed bytes before it parses them.

use std::fmt;
use std::str::FromStr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::{Signature, Signer as _, SigningKey, Verifier, VerifyingKey};
use sha2::{Digest as _, Sha256};

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

/// An org's new signing key, announced by the key it replaces.
///
/// The control plane signs the announcement with the previous key, so a
/// runner that trusts the previous key can trust the new one without anyone
/// pasting keys again (The Update Framework's root rotation). Jobs signed by
/// the previous key are accepted until `previous_until_ms`, so jobs queued
/// before the rotation still run.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct KeyRotation {
    /// The key being replaced; it signs this announcement.
    pub previous: String,
    /// The new key, `ed25519:BASE64`.
    pub key: String,
    /// Until when (milliseconds since the Unix epoch) jobs signed by the
    /// previous key are accepted.
    pub previous_until_ms: i64,
}

/// A [`KeyRotation`] as sent to runners: its exact JSON text and the
/// previous key's signature of it.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct SignedRotation {
    /// The [`KeyRotation`], as JSON text (the signed bytes).
    pub rotation: String,
    /// Base64 Ed25519 signature of `rotation` by the previous key.
    pub signature: String,
}

impl SignedRotation {
    /// Announces `next` as the successor of `previous` (which signs it).
    pub async fn sign(
        previous: &dyn Signer,
        next: PublicKey,
        previous_until_ms: i64,
    ) -> Result<Self, SignerError> {
        let rotation = KeyRotation {
            previous: previous.public_key().to_string(),
            key: next.to_string(),
            previous_until_ms,
        };
        let rotation = serde_json::to_string(&rotation).map_err(|e| SignerError(Box::new(e)))?;
        let signature = previous.sign(rotation.as_bytes()).await?;
        Ok(SignedRotation {
            rotation,
            signature,
        })
    }

    /// The announcement, once `by` is shown to have signed it.
    pub fn verified(&self, by: &PublicKey) -> Result<KeyRotation, SignatureError> {
        by.verify(self.rotation.as_bytes(), &self.signature)?;
        serde_json::from_str(&self.rotation).map_err(|_| SignatureError::Malformed)
    }
}

/// A thing signed with an org's key beside the job specs and key rotations
/// (which are signed as their own JSON text, so start with `{`). What a
/// signature covers is made here, one way for every such thing: a first
/// line, its domain, that no other signed thing starts with (so that a
/// signature of one is never the other's), then its body. A domain names
/// what is signed and its version of the format; the body's fields are
/// fixed, so that a field added later to the type does not change what a
/// runner of today checks.
pub trait Signed {
    /// The first line of the signed bytes (`nuon-grant/1`); a test holds
    /// that no two types share one.
    const DOMAIN: &'static str;

    /// What follows the domain's line.
    fn signed_body(&self) -> Vec<u8>;

    /// The bytes signed: the domain, a newline, the body.
    fn signed_bytes(&self) -> Vec<u8> {
        let body = self.signed_body();
        let mut out = Vec::with_capacity(Self::DOMAIN.len() + 1 + body.len());
        out.extend_from_slice(Self::DOMAIN.as_bytes());
        out.push(b'\n');
        out.extend(body);
        out
    }
}

/// A signed body of fixed fields, as JSON.
pub(crate) fn json_body(fields: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(fields).unwrap_or_default()
}

/// What the control plane signs, with the org's key, each time it hands a
/// claimed job to a runner: this job, this attempt, for this runner, to be
/// started no later than `not_after_ms`, with this exact spec. The spec's
/// own signature says what to run; the grant says it may run once, now.
/// A runner refuses a claim whose grant does not verify, has passed its
/// time, or names an attempt it accepted already (its journal is the
/// durable record), so a claim answer saved and served again runs nothing
/// (Buildkite's signed steps with an expiry; TUF's rule against replays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant<'a> {
    /// The job.
    pub job_id: &'a crate::JobId,
    /// The attempt.
    pub attempt: u32,
    /// The runner it is granted to.
    pub runner_id: &'a crate::RunnerId,
    /// Until when the runner may start it (ms since the epoch).
    pub not_after_ms: i64,
    /// The exact bytes of the signed spec.
    pub spec: &'a [u8],
}

impl Grant<'_> {
    /// How long a grant lasts past its lease's end: leeway for the
    /// runner's clock. A grant never lasts longer than
    /// [`Grant::MAX_LEASE_MS`] plus this.
    pub const LEEWAY_MS: i64 = 120_000;

    /// The longest lease a grant's time follows.
    pub const MAX_LEASE_MS: i64 = 3_600_000;

    /// The grant's end for a claim made at `now_ms` with a lease of
    /// `lease_ms`.
    pub fn not_after(now_ms: i64, lease_ms: u64) -> i64 {
        now_ms + (lease_ms as i64).min(Self::MAX_LEASE_MS) + Self::LEEWAY_MS
    }
}

impl Signed for Grant<'_> {
    const DOMAIN: &'static str = "nuon-grant/1";

    /// One field a line, the spec by its SHA-256.
    fn signed_body(&self) -> Vec<u8> {
        format!(
            "job {}\nattempt {}\nrunner {}\nnot-after {}\nspec sha256:{}\n",
            self.job_id,
            self.attempt,
            self.runner_id,
            self.not_after_ms,
            hex::encode(Sha256::digest(self.spec)),
        )
        .into_bytes()
    }
}

/// The keys a runner accepts jobs from: the org's current key, and the one
/// before it until its overlap window closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKeys {
    /// The org's current key.
    pub current: PublicKey,
    /// The key it replaced, and until when (ms since the epoch) its
    /// signatures are accepted.
    pub previous: Option<(PublicKey, i64)>,
}

/// What [`TrustedKeys::learn`] made of a chain of rotations.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Learned {
    /// The new keys taken on, in order.
    pub adopted: Vec<PublicKey>,
    /// Announcements refused, each with why (forged, or not for this org's
    /// chain).
    pub refused: Vec<String>,
}

impl TrustedKeys {
    /// Trusts `current` alone.
    pub fn new(current: PublicKey) -> Self {
        TrustedKeys {
            current,
            previous: None,
        }
    }

    /// Checks `signature` over `bytes`: by the current key, or by the
    /// previous one while its window is open at `now_ms`.
    pub fn verify(&self, bytes: &[u8], signature: &str, now_ms: i64) -> Result<(), KeyRefused> {
        self.verify_signer(bytes, signature, now_ms).map(|_| ())
    }

    /// [`Self::verify`], answering which key signed: the current one, or
    /// the previous one within its overlap.
    pub fn verify_signer(
        &self,
        bytes: &[u8],
        signature: &str,
        now_ms: i64,
    ) -> Result<PublicKey, KeyRefused> {
        let err = match self.current.verify(bytes, signature) {
            Ok(()) => return Ok(self.current),
            Err(e) => e,
        };
        if let (SignatureError::Mismatch, Some((previous, until))) = (&err, &self.previous)
            && previous.verify(bytes, signature).is_ok()
        {
            if now_ms < *until {
                return Ok(*previous);
            }
            return Err(KeyRefused::Retired {
                key: previous.to_string(),
                until_ms: *until,
            });
        }
        Err(KeyRefused::Signature(err))
    }

    /// Takes on each rotation of `chain` (oldest first) that the current
    /// key signed; answers what changed. A rotation to a key already
    /// trusted as current is skipped quietly.
    pub fn learn(&mut self, chain: &[SignedRotation]) -> Learned {
        let mut learned = Learned::default();
        for signed in chain {
            let Ok(rotation) = serde_json::from_str::<KeyRotation>(&signed.rotation) else {
                learned
                    .refused
                    .push("a key rotation that is not valid JSON".into());
                continue;
            };
            let Ok(next) = rotation.key.parse::<PublicKey>() else {
                learned.refused.push(format!(
                    "a key rotation to an invalid key {:?}",
                    rotation.key
                ));
                continue;
            };
            if next == self.current || self.previous.is_some_and(|(p, _)| p == next) {
                continue;
            }
            if rotation.previous != self.current.to_string() {
                // A link of the chain before the key this runner already
                // trusts, or one it cannot reach: not news.
                continue;
            }
            match signed.verified(&self.current) {
                Ok(_) => {
                    self.previous = Some((self.current, rotation.previous_until_ms));
                    self.current = next;
                    learned.adopted.push(next);
                }
                Err(e) => learned.refused.push(format!(
                    "a rotation from {} to {next} whose signature does not check ({e}); kept {}",
                    rotation.previous, self.current
                )),
            }
        }
        learned
    }
}

/// Why [`TrustedKeys`] refused a signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefused {
    /// Signed by no trusted key, or not a signature at all.
    #[error(transparent)]
    Signature(SignatureError),
    /// Signed by the org's previous key after its overlap window closed.
    #[error(
        "job is signed by the org's previous signing key {key}, retired at {until_ms} ms since the epoch: the key was rotated (nuon-ctl orgs rotate-signing-key) and its overlap window has closed"
    )]
    Retired {
        /// The retired key, `ed25519:BASE64`.
        key: String,
        /// When its window closed.
        until_ms: i64,
    },
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`: webhook signatures,
/// and the runner's compile cache of WASM plugins.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_signed_type_has_a_domain_of_its_own() {
        let domains = [
            Grant::DOMAIN,
            crate::wire::RunnerSettingsInfo::DOMAIN,
            crate::wire::RunnerReleaseInfo::DOMAIN,
        ];
        for (i, a) in domains.iter().enumerate() {
            // Not JSON, which job specs and key rotations sign.
            assert!(a.starts_with("nuon-") && !a.contains('\n'), "{a}");
            for b in &domains[i + 1..] {
                assert_ne!(a, b);
            }
        }
        // The bytes the first runners checked: a grant's stay as they were.
        let (job, runner) = (crate::JobId::generate(), crate::RunnerId::generate());
        let grant = Grant {
            job_id: &job,
            attempt: 2,
            runner_id: &runner,
            not_after_ms: 4,
            spec: b"{}",
        };
        let text = String::from_utf8(grant.signed_bytes()).unwrap();
        assert_eq!(
            text,
            format!(
                "nuon-grant/1\njob {job}\nattempt 2\nrunner {runner}\nnot-after 4\nspec sha256:{}\n",
                hex::encode(Sha256::digest(b"{}"))
            )
        );
    }

    // RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
    #[test]
    fn hmac_matches_rfc_4231() {
        let case = |key: &[u8], data: &[u8], want: &str| {
            assert_eq!(hex::encode(super::hmac_sha256(key, data)), want);
        };
        case(
            &[0x0b; 20],
            b"Hi There",
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
        );
        case(
            b"Jefe",
            b"what do ya want for nothing?",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
        );
        case(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
        );
    }

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

    #[tokio::test]
    async fn a_rotation_signed_by_the_current_key_is_learned() {
        let a = OrgSigningKey::generate();
        let b = OrgSigningKey::generate();
        let c = OrgSigningKey::generate();
        let ab = SignedRotation::sign(&a, b.public_key(), 1_000)
            .await
            .unwrap();
        let bc = SignedRotation::sign(&b, c.public_key(), 2_000)
            .await
            .unwrap();
        let mut keys = TrustedKeys::new(a.public_key());
        // A chain walks from the key trusted now, whatever came before.
        let learned = keys.learn(&[ab.clone(), bc.clone()]);
        assert_eq!(learned.adopted, vec![b.public_key(), c.public_key()]);
        assert!(learned.refused.is_empty());
        assert_eq!(keys.current, c.public_key());
        assert_eq!(keys.previous, Some((b.public_key(), 2_000)));
        // Learning it again changes nothing.
        assert_eq!(keys.learn(&[ab, bc]), Learned::default());
        let sig_b = b.sign_now(b"job");
        assert_eq!(keys.verify(b"job", &sig_b, 1_999), Ok(()));
        assert!(matches!(
            keys.verify(b"job", &sig_b, 2_000),
            Err(KeyRefused::Retired {
                until_ms: 2_000,
                ..
            })
        ));
        let sig_a = a.sign_now(b"job");
        assert_eq!(
            keys.verify(b"job", &sig_a, 0),
            Err(KeyRefused::Signature(SignatureError::Mismatch))
        );
        assert_eq!(keys.verify(b"job", &c.sign_now(b"job"), i64::MAX), Ok(()));
    }

    #[tokio::test]
    async fn a_forged_rotation_is_refused() {
        let a = OrgSigningKey::generate();
        let evil = OrgSigningKey::generate();
        let mut keys = TrustedKeys::new(a.public_key());
        // Claims to come from `a`, signed by another key.
        let rotation = serde_json::to_string(&KeyRotation {
            previous: a.public_key().to_string(),
            key: evil.public_key().to_string(),
            previous_until_ms: i64::MAX,
        })
        .unwrap();
        let forged = SignedRotation {
            signature: evil.sign_now(rotation.as_bytes()),
            rotation,
        };
        let learned = keys.learn(&[forged]);
        assert!(learned.adopted.is_empty());
        assert_eq!(learned.refused.len(), 1, "{learned:?}");
        assert_eq!(keys, TrustedKeys::new(a.public_key()));
    }
}
