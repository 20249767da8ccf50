//! Just enough OpenPGP (RFC 4880, v4 keys and signatures) to check a
//! release's detached signature, as `gpgv` does: HashiCorp signs each
//! Terraform release's `SHA256SUMS`, OpenTofu each of its own, and a
//! runner installs neither without checking.
//!
//! A [`Keyring`] is read from a public key block (ASCII-armored or
//! binary). Its primary keys are trusted as given; a subkey only when its
//! binding signature from its primary key verifies. RSA (2048 bits and
//! more) and Ed25519 keys, SHA-256/384/512 hashes; nothing else is read,
//! and expiry and revocation are not looked at (the key file is the
//! operator's choice, or pinned by fingerprint).

use ring::digest;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

/// Why a key or a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PgpError(String);

fn err<T>(what: impl Into<String>) -> Result<T, PgpError> {
    Err(PgpError(what.into()))
}

/// One key that can check signatures.
#[derive(Debug, Clone)]
struct Key {
    fingerprint: [u8; 20],
    /// The primary key's fingerprint (its own for a primary key).
    primary: [u8; 20],
    material: Material,
}

#[derive(Debug, Clone)]
enum Material {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    Ed25519([u8; 32]),
    /// An algorithm this module does not check with (ElGamal, ECDH …).
    Other(u8),
}

/// The keys signatures are checked against.
#[derive(Debug, Clone, Default)]
pub struct Keyring {
    keys: Vec<Key>,
}

/// Who made a signature that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The fingerprint of the key that signed (a subkey's own), upper-case hex.
    pub key: String,
    /// Its primary key's fingerprint.
    pub primary: String,
}

/// Upper-case hex of a fingerprint.
pub fn hex_of(fpr: &[u8]) -> String {
    fpr.iter().map(|b| format!("{b:02X}")).collect()
}

impl Keyring {
    /// Reads a public key block: armored (`-----BEGIN PGP PUBLIC KEY
    /// BLOCK-----`) or the binary packets `gpg --export` writes.
    pub fn parse(bytes: &[u8]) -> Result<Keyring, PgpError> {
        let bytes = dearmor(bytes, "PUBLIC KEY BLOCK")?;
        let mut keys: Vec<Key> = Vec::new();
        // The primary key and the subkey a binding signature follows.
        let mut primary: Option<(Vec<u8>, [u8; 20])> = None;
        let mut subkey: Option<(Vec<u8>, Key)> = None;
        for (tag, body) in packets(&bytes)? {
            match tag {
                6 => {
                    let key = read_key(body, None)?;
                    primary = Some((body.to_vec(), key.fingerprint));
                    subkey = None;
                    keys.push(key);
                }
                14 => {
                    let Some((_, fpr)) = &primary else {
                        return err("a subkey comes before any primary key");
                    };
                    subkey = Some((body.to_vec(), read_key(body, Some(*fpr))?));
                }
                2 => {
                    // A subkey binding signature (0x18) by the primary key.
                    let (Some((pbody, pfpr)), Some((sbody, sub))) = (&primary, &subkey) else {
                        continue;
                    };
                    let Ok(sig) = Signature::read(body) else {
                        continue;
                    };
                    if sig.kind != 0x18 {
                        continue;
                    }
                    let Some(pkey) = keys.iter().find(|k| k.fingerprint == *pfpr) else {
                        continue;
                    };
                    let mut signed = key_hash_prefix(pbody);
                    signed.extend(key_hash_prefix(sbody));
                    if sig.check(pkey, &signed).is_ok()
                        && !keys.iter().any(|k| k.fingerprint == sub.fingerprint)
                    {
                        keys.push(sub.clone());
                    }
                }
                _ => {}
            }
        }
        if keys.is_empty() {
            return err("the key file holds no public key");
        }
        Ok(Keyring { keys })
    }

    /// The keyring with only the primary key `fingerprint` (hex, spaces
    /// allowed) and its bound subkeys; an error when it is not there.
    pub fn pinned(self, fingerprint: &str) -> Result<Keyring, PgpError> {
        let want: String = fingerprint
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_uppercase();
        let keys: Vec<Key> = self
            .keys
            .iter()
            .filter(|k| hex_of(&k.primary) == want)
            .cloned()
            .collect();
        if keys.is_empty() {
            let found: Vec<String> = self
                .keys
                .iter()
                .filter(|k| k.fingerprint == k.primary)
                .map(|k| hex_of(&k.fingerprint))
                .collect();
            return err(format!(
                "the key's fingerprint is not the expected {want} (found {})",
                found.join(", ")
            ));
        }
        Ok(Keyring { keys })
    }

    /// The primary keys' fingerprints.
    pub fn primaries(&self) -> Vec<String> {
        self.keys
            .iter()
            .filter(|k| k.fingerprint == k.primary)
            .map(|k| hex_of(&k.fingerprint))
            .collect()
    }

    /// Checks a detached signature (armored or binary) of `data`.
    pub fn verify(&self, data: &[u8], signature: &[u8]) -> Result<Signer, PgpError> {
        let bytes = dearmor(signature, "SIGNATURE")?;
        let mut tried = Vec::new();
        for (tag, body) in packets(&bytes)? {
            if tag != 2 {
                continue;
            }
            let sig = Signature::read(body)?;
            if sig.kind != 0x00 {
                tried.push(format!(
                    "a signature of type {:#04x}, not of a binary document",
                    sig.kind
                ));
                continue;
            }
            let candidates: Vec<&Key> = self
                .keys
                .iter()
                .filter(|k| sig.issuer.as_ref().is_none_or(|i| i.matches(k)))
                .collect();
            if candidates.is_empty() {
                tried.push(format!(
                    "made by key {}, which is not in the keyring (it holds {})",
                    sig.issuer.as_ref().map_or("?".into(), Issuer::hex),
                    self.primaries().join(", ")
                ));
                continue;
            }
            for key in candidates {
                match sig.check(key, data) {
                    Ok(()) => {
                        return Ok(Signer {
                            key: hex_of(&key.fingerprint),
                            primary: hex_of(&key.primary),
                        });
                    }
                    Err(e) => tried.push(format!("key {}: {e}", hex_of(&key.fingerprint))),
                }
            }
        }
        if tried.is_empty() {
            return err("the signature file holds no signature");
        }
        err(format!(
            "the signature does not verify: {}",
            tried.join("; ")
        ))
    }
}

/// What a signature names as its maker.
#[derive(Debug, Clone)]
enum Issuer {
    KeyId([u8; 8]),
    Fingerprint([u8; 20]),
}

impl Issuer {
    fn matches(&self, k: &Key) -> bool {
        match self {
            Issuer::KeyId(id) => k.fingerprint[12..] == id[..],
            Issuer::Fingerprint(f) => k.fingerprint == *f,
        }
    }

    fn hex(&self) -> String {
        match self {
            Issuer::KeyId(id) => hex_of(id),
            Issuer::Fingerprint(f) => hex_of(f),
        }
    }
}

/// A v4 signature packet.
struct Signature {
    kind: u8,
    algo: u8,
    hash: u8,
    /// The bytes the signature covers after the data: the hashed part of
    /// the packet and its trailer.
    trailer: Vec<u8>,
    issuer: Option<Issuer>,
    /// RSA: the signature; Ed25519: r then s, 32 bytes each.
    value: Vec<Vec<u8>>,
}

impl Signature {
    fn read(body: &[u8]) -> Result<Signature, PgpError> {
        let mut r = Reader(body);
        if r.u8()? != 4 {
            return err("only version 4 signatures are read");
        }
        let kind = r.u8()?;
        let algo = r.u8()?;
        let hash = r.u8()?;
        let hashed_len = r.u16()? as usize;
        let hashed = r.take(hashed_len)?;
        let mut trailer = body[..6 + hashed_len].to_vec();
        trailer.extend([4, 0xff]);
        trailer.extend(((6 + hashed_len) as u32).to_be_bytes());
        let unhashed_len = r.u16()? as usize;
        let unhashed = r.take(unhashed_len)?;
        let mut issuer = None;
        for area in [hashed, unhashed] {
            for (t, data) in subpackets(area)? {
                match (t & 0x7f, data.len()) {
                    (33, 21) if issuer.is_none() || matches!(issuer, Some(Issuer::KeyId(_))) => {
                        let mut f = [0; 20];
                        f.copy_from_slice(&data[1..]);
                        issuer = Some(Issuer::Fingerprint(f));
                    }
                    (16, 8) if issuer.is_none() => {
                        let mut id = [0; 8];
                        id.copy_from_slice(data);
                        issuer = Some(Issuer::KeyId(id));
                    }
                    _ => {}
                }
            }
        }
        r.take(2)?; // the hash's first two bytes, a quick check only
        let mut value = Vec::new();
        while !r.0.is_empty() {
            value.push(r.mpi()?.to_vec());
        }
        Ok(Signature {
            kind,
            algo,
            hash,
            trailer,
            issuer,
            value,
        })
    }

    /// Whether `key` made this signature over `data` (then the trailer).
    fn check(&self, key: &Key, data: &[u8]) -> Result<(), String> {
        let mut message = Vec::with_capacity(data.len() + self.trailer.len());
        message.extend_from_slice(data);
        message.extend_from_slice(&self.trailer);
        let (rsa, dig): (&signature::RsaParameters, &digest::Algorithm) = match self.hash {
            8 => (&signature::RSA_PKCS1_2048_8192_SHA256, &digest::SHA256),
            9 => (&signature::RSA_PKCS1_2048_8192_SHA384, &digest::SHA384),
            10 => (&signature::RSA_PKCS1_2048_8192_SHA512, &digest::SHA512),
            other => {
                return Err(format!(
                    "hash algorithm {other} is not read (SHA-256/384/512 are)"
                ));
            }
        };
        match (&key.material, self.algo) {
            (Material::Rsa { n, e }, 1 | 3) => {
                let [s] = &self.value[..] else {
                    return Err("an RSA signature has one number".into());
                };
                if s.len() > n.len() {
                    return Err("the signature is longer than the key".into());
                }
                let mut padded = vec![0; n.len() - s.len()];
                padded.extend_from_slice(s);
                RsaPublicKeyComponents { n, e }
                    .verify(rsa, &message, &padded)
                    .map_err(|_| "the RSA signature does not match".to_string())
            }
            (Material::Ed25519(pk), 22) => {
                let [r, s] = &self.value[..] else {
                    return Err("an EdDSA signature has two numbers".into());
                };
                if r.len() > 32 || s.len() > 32 {
                    return Err("an Ed25519 signature's numbers are 32 bytes".into());
                }
                let mut sig = [0u8; 64];
                sig[32 - r.len()..32].copy_from_slice(r);
                sig[64 - s.len()..].copy_from_slice(s);
                let hashed = digest::digest(dig, &message);
                UnparsedPublicKey::new(&signature::ED25519, pk)
                    .verify(hashed.as_ref(), &sig)
                    .map_err(|_| "the Ed25519 signature does not match".to_string())
            }
            (Material::Other(a), _) => Err(format!("key algorithm {a} is not read")),
            (_, a) => Err(format!(
                "signature algorithm {a} does not fit the key's algorithm"
            )),
        }
    }
}

/// What a key's signatures hash for it: 0x99, its length, its body.
fn key_hash_prefix(body: &[u8]) -> Vec<u8> {
    let mut v = vec![0x99];
    v.extend((body.len() as u16).to_be_bytes());
    v.extend_from_slice(body);
    v
}

const ED25519_OID: [u8; 9] = [0x2b, 0x06, 0x01, 0x04, 0x01, 0xda, 0x47, 0x0f, 0x01];

fn read_key(body: &[u8], primary: Option<[u8; 20]>) -> Result<Key, PgpError> {
    let mut r = Reader(body);
    if r.u8()? != 4 {
        return err("only version 4 keys are read");
    }
    r.take(4)?; // creation time
    let algo = r.u8()?;
    let material = match algo {
        1 | 3 => {
            let n = r.mpi()?.to_vec();
            let e = r.mpi()?.to_vec();
            Material::Rsa { n, e }
        }
        22 => {
            let len = r.u8()? as usize;
            let oid = r.take(len)?;
            let point = r.mpi()?;
            match (oid == ED25519_OID, point) {
                (true, [0x40, rest @ ..]) if rest.len() == 32 => {
                    let mut pk = [0; 32];
                    pk.copy_from_slice(rest);
                    Material::Ed25519(pk)
                }
                _ => Material::Other(algo),
            }
        }
        other => Material::Other(other),
    };
    let hash = digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, &key_hash_prefix(body));
    let mut fingerprint = [0; 20];
    fingerprint.copy_from_slice(hash.as_ref());
    Ok(Key {
        fingerprint,
        primary: primary.unwrap_or(fingerprint),
        material,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PgpError> {
        if self.0.len() < n {
            return err("a packet ends early");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, PgpError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, PgpError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A multiprecision integer: its bit count, then its bytes.
    fn mpi(&mut self) -> Result<&'a [u8], PgpError> {
        let bits = self.u16()? as usize;
        self.take(bits.div_ceil(8))
    }
}

/// The packets of `bytes`: each tag and body.
fn packets(bytes: &[u8]) -> Result<Vec<(u8, &[u8])>, PgpError> {
    let mut out = Vec::new();
    let mut r = Reader(bytes);
    while !r.0.is_empty() {
        let head = r.u8()?;
        if head & 0x80 == 0 {
            return err("not an OpenPGP packet (is this a key or signature file?)");
        }
        let (tag, len) = if head & 0x40 != 0 {
            let tag = head & 0x3f;
            let first = r.u8()? as usize;
            let len = match first {
                0..=191 => first,
                192..=223 => ((first - 192) << 8) + r.u8()? as usize + 192,
                255 => {
                    let b = r.take(4)?;
                    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
                }
                _ => return err("partial-length packets are not read"),
            };
            (tag, len)
        } else {
            let tag = (head >> 2) & 0x0f;
            let len = match head & 3 {
                0 => r.u8()? as usize,
                1 => r.u16()? as usize,
                2 => {
                    let b = r.take(4)?;
                    u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
                }
                _ => r.0.len(),
            };
            (tag, len)
        };
        out.push((tag, r.take(len)?));
    }
    Ok(out)
}

/// The subpackets of a signature's area: each type and data.
fn subpackets(mut area: &[u8]) -> Result<Vec<(u8, &[u8])>, PgpError> {
    let mut out = Vec::new();
    while !area.is_empty() {
        let mut r = Reader(area);
        let first = r.u8()? as usize;
        let len = match first {
            0..=191 => first,
            192..=254 => ((first - 192) << 8) + r.u8()? as usize + 192,
            _ => {
                let b = r.take(4)?;
                u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
            }
        };
        if len == 0 {
            return err("an empty signature subpacket");
        }
        let body = r.take(len)?;
        out.push((body[0], &body[1..]));
        area = r.0;
    }
    Ok(out)
}

/// The binary packets of an armored block (`-----BEGIN PGP WHAT-----`),
/// its checksum checked; binary input is returned as it is.
fn dearmor(bytes: &[u8], what: &str) -> Result<Vec<u8>, PgpError> {
    use base64::Engine;
    let text = String::from_utf8_lossy(bytes);
    let begin = format!("-----BEGIN PGP {what}-----");
    let Some(start) = text.find(&begin) else {
        if bytes.first().is_some_and(|b| b & 0x80 != 0) {
            return Ok(bytes.to_vec());
        }
        return err(format!(
            "neither an armored {begin} block nor binary OpenPGP"
        ));
    };
    let mut lines = text[start + begin.len()..].lines().map(str::trim);
    // Armor headers (`Comment: …`) end at the first blank line.
    for line in lines.by_ref() {
        if line.is_empty() {
            break;
        }
    }
    let (mut body, mut crc) = (String::new(), None);
    let mut ended = false;
    for line in lines {
        if line.starts_with("-----END") {
            ended = true;
            break;
        }
        if let Some(c) = line.strip_prefix('=') {
            crc = Some(c.to_owned());
        } else {
            body.push_str(line);
        }
    }
    if !ended {
        return err(format!("the armored {what} has no END line"));
    }
    let data = base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|e| PgpError(format!("the armored {what} is not valid base64: {e}")))?;
    if let Some(crc) = crc {
        let want = base64::engine::general_purpose::STANDARD
            .decode(crc.as_bytes())
            .map_err(|e| PgpError(format!("the armored {what}'s checksum is not base64: {e}")))?;
        let got = crc24(&data).to_be_bytes();
        if want[..] != got[1..] {
            return err(format!(
                "the armored {what}'s checksum does not match: it was changed"
            ));
        }
    }
    Ok(data)
}

fn crc24(data: &[u8]) -> u32 {
    let mut crc: u32 = 0xB7_04CE;
    for b in data {
        crc ^= (*b as u32) << 16;
        for _ in 0..8 {
            crc <<= 1;
            if crc & 0x100_0000 != 0 {
                crc ^= 0x186_4CFB;
            }
        }
    }
    crc & 0xFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        let e = Keyring::parse(b"hello").unwrap_err().to_string();
        assert!(e.contains("neither an armored"), "{e}");
        let e = Keyring::parse(b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nAAAA\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no END line"), "{e}");
        let e = Keyring::parse(&[0x99, 0x00, 0x05, 4, 0, 0])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ends early"), "{e}");
        // An old-format signature packet naming a key that is not there.
        let e = Keyring::default()
            .verify(b"x", &[0x88, 0x00])
            .unwrap_err()
            .to_string();
        assert!(e.contains("ends early"), "{e}");
    }

    #[test]
    fn crc24_is_openpgps() {
        // RFC 4880's checksum of no data is its initial value.
        assert_eq!(crc24(b""), 0xB7_04CE);
        assert_ne!(crc24(b"a"), crc24(b"b"));
    }
}
