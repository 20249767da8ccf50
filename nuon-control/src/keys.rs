//! The orgs' job-signing keys and the jobs they sign, at rest.
//!
//! An org's Ed25519 private key is sealed under the secrets key
//! ([`SecretBox`]) in the store, and opened in memory once per org. A vendor
//! who keeps the key in a KMS or an HSM gives the control plane an
//! [`OrgSigners`] of its own ([`ServerConfig::signers`]); the private key
//! then never reaches it.
//!
//! A job's spec is signed, then sealed: the runner receives the signed
//! bytes, the store keeps them sealed under the job's id, next to the
//! payload as the Control API shows it (secret values replaced by
//! `(secret)`, the state credential by `(hidden)`). Terraform outputs
//! marked sensitive are sealed in the same way wherever they are kept.
//!
//! [`ServerConfig::signers`]: crate::ServerConfig::signers

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use nuon_core::wire::{ClaimedJob, InstallOutputs};
use nuon_core::{AppId, JobId, JobSpec, OrgId, OrgSigningKey, PublicKey, Signer, SignerError};
use serde_json::Value;

use crate::secrets::SecretBox;
use crate::store::{NewJob, NewOrg, Store, StoreError};

/// Why a job could not be signed, sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// No org has this id.
    #[error("org {0} not found")]
    NoOrg(OrgId),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sealed value does not open with the secrets key.
    #[error("{0}")]
    Sealed(String),
    /// The signer refused or failed.
    #[error(transparent)]
    Sign(#[from] SignerError),
}

/// Where the control plane finds the signer of each org's jobs.
///
/// The default is [`SealedKeys`]: each org's key, sealed in the store. An
/// implementation over a KMS or an HSM answers a [`Signer`] that sends the
/// bytes to be signed there; runners only ever see the public key.
#[async_trait]
pub trait OrgSigners: Send + Sync + std::fmt::Debug + 'static {
    /// The signer of `org`'s jobs; `None` when there is no such org.
    async fn signer(&self, org: &OrgId) -> Result<Option<Arc<dyn Signer>>, KeyError>;
}

/// The orgs' keys as the store keeps them, sealed; each opened once.
pub struct SealedKeys {
    store: Arc<dyn Store>,
    secrets: Arc<SecretBox>,
    cache: Mutex<HashMap<OrgId, Arc<dyn Signer>>>,
}

impl std::fmt::Debug for SealedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealedKeys(..)")
    }
}

impl SealedKeys {
    /// The keys of `store`, opened with `secrets`.
    pub fn new(store: Arc<dyn Store>, secrets: Arc<SecretBox>) -> Self {
        SealedKeys {
            store,
            secrets,
            cache: Mutex::new(HashMap::new()),
        }
    }
}

#[async_trait]
impl OrgSigners for SealedKeys {
    async fn signer(&self, org: &OrgId) -> Result<Option<Arc<dyn Signer>>, KeyError> {
        if let Some(k) = self.cache.lock().expect("keys lock").get(org) {
            return Ok(Some(k.clone()));
        }
        let Some(raw) = self.store.signing_key(org).await? else {
            return Ok(None);
        };
        let key: Arc<dyn Signer> = Arc::new(open_signing_key(&self.secrets, org, &raw)?);
        self.cache
            .lock()
            .expect("keys lock")
            .insert(org.clone(), key.clone());
        Ok(Some(key))
    }
}

/// The sealing context of an org's signing key.
fn signing_key_context(org: &OrgId) -> String {
    format!("{org}/signing-key")
}

/// The sealing context of a job's spec.
pub fn spec_context(job: &JobId) -> String {
    format!("{job}/spec")
}

/// The sealing context of a sensitive Terraform output.
fn output_context(name: &str) -> String {
    format!("output/{name}")
}

/// A new signing key for `org`, and what the store keeps of it.
pub fn new_signing_key(secrets: &SecretBox, org: &OrgId) -> (OrgSigningKey, Vec<u8>) {
    let key = OrgSigningKey::generate();
    let sealed = secrets.seal_bytes(&key.to_bytes(), &signing_key_context(org));
    (key, sealed.into_bytes())
}

/// Opens an org's key as the store keeps it.
pub fn open_signing_key(
    secrets: &SecretBox,
    org: &OrgId,
    stored: &[u8],
) -> Result<OrgSigningKey, KeyError> {
    let bad = |why: String| KeyError::Sealed(format!("the signing key of org {org}: {why}"));
    let text = std::str::from_utf8(stored).map_err(|_| {
        bad(
            "stored in the clear by an earlier version; restart the control plane to seal it"
                .into(),
        )
    })?;
    let raw = secrets
        .open_bytes(text, &signing_key_context(org))
        .map_err(|e| bad(e.to_string()))?;
    OrgSigningKey::from_bytes(&raw).map_err(|e| bad(e.to_string()))
}

/// Creates an org, its signing key sealed; answers its public key too.
pub async fn create_org(
    store: &dyn Store,
    secrets: &SecretBox,
    name: &str,
) -> Result<(NewOrg, PublicKey), StoreError> {
    let id = OrgId::generate();
    let (key, sealed) = new_signing_key(secrets, &id);
    let org = store.create_org(&id, name, &sealed).await?;
    Ok((org, key.public_key()))
}

/// Signs and seals jobs, and opens them for the runners that claim them.
pub(crate) struct JobKeys {
    signers: Arc<dyn OrgSigners>,
    secrets: Arc<SecretBox>,
}

impl JobKeys {
    pub(crate) fn new(signers: Arc<dyn OrgSigners>, secrets: Arc<SecretBox>) -> Self {
        JobKeys { signers, secrets }
    }

    /// The signer of the org's jobs.
    pub(crate) async fn signer(&self, org: &OrgId) -> Result<Arc<dyn Signer>, KeyError> {
        self.signers
            .signer(org)
            .await?
            .ok_or_else(|| KeyError::NoOrg(org.clone()))
    }

    /// The job to queue: `spec` signed by its org, sealed, and its payload
    /// as the Control API shows it.
    pub(crate) async fn sign(&self, spec: JobSpec) -> Result<NewJob, KeyError> {
        let signer = self.signer(&spec.org_id).await?;
        let text = serde_json::to_string(&spec)
            .map_err(|e| KeyError::Sealed(format!("cannot encode the job: {e}")))?;
        let signature = signer.sign(text.as_bytes()).await?;
        let payload = shown_payload(&spec);
        let sealed_spec = self.secrets.seal(&text, &spec_context(&spec.job_id));
        Ok(NewJob {
            spec,
            sealed_spec,
            signature,
            payload,
        })
    }

    /// Opens the specs of claimed jobs into the signed bytes their runner
    /// verifies; answers those that do not open apart, each with why.
    pub(crate) fn open_claimed(
        &self,
        jobs: Vec<ClaimedJob>,
    ) -> (Vec<ClaimedJob>, Vec<(ClaimedJob, String)>) {
        let mut opened = Vec::with_capacity(jobs.len());
        let mut refused = Vec::new();
        for mut job in jobs {
            match self.secrets.open(&job.spec, &spec_context(&job.job_id)) {
                Ok(spec) => {
                    job.spec = spec;
                    opened.push(job);
                }
                Err(e) => {
                    let why = format!(
                        "the control plane cannot open the job's stored spec ({e}): it was \
                         altered in the store, or sealed under another secrets key; the job \
                         was not sent to its runner"
                    );
                    refused.push((job, why));
                }
            }
        }
        (opened, refused)
    }

    /// Seals the values a job reported as sensitive
    /// (`{"outputs": ..., "sensitive": [...]}`), in place.
    pub(crate) fn seal_job_outputs(&self, outputs: &mut Value) {
        let names: Vec<String> = outputs["sensitive"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect();
        if let Some(map) = outputs.get_mut("outputs").and_then(Value::as_object_mut) {
            for name in names {
                if let Some(v) = map.get_mut(&name) {
                    seal_value(&self.secrets, &name, v);
                }
            }
        }
    }
}

/// The key of a sealed value in a JSON document.
const SEALED: &str = "$sealed";

fn seal_value(secrets: &SecretBox, name: &str, v: &mut Value) {
    if is_sealed(v) {
        return;
    }
    let text = serde_json::to_string(v).unwrap_or_default();
    *v = serde_json::json!({ SEALED: secrets.seal(&text, &output_context(name)) });
}

fn is_sealed(v: &Value) -> bool {
    v.as_object()
        .is_some_and(|m| m.len() == 1 && m.get(SEALED).is_some_and(Value::is_string))
}

fn open_value(secrets: &SecretBox, name: &str, v: &mut Value) -> Result<(), String> {
    let Some(sealed) = v
        .get(SEALED)
        .and_then(Value::as_str)
        .filter(|_| is_sealed(v))
    else {
        return Ok(());
    };
    let text = secrets
        .open(sealed, &output_context(name))
        .map_err(|e| format!("sensitive output {name:?}: {e}"))?;
    *v = serde_json::from_str(&text).map_err(|e| format!("sensitive output {name:?}: {e}"))?;
    Ok(())
}

/// Each sensitive output of `all` as the map it lives in and its name.
fn each_sensitive(all: &mut InstallOutputs, mut f: impl FnMut(&str, &mut Value)) {
    let names = all.sensitive.clone();
    for full in &names {
        let Some((from, key)) = full.split_once('.') else {
            continue;
        };
        let map = if from == "sandbox" {
            Some(&mut all.sandbox)
        } else {
            all.components.get_mut(from)
        };
        if let Some(v) = map.and_then(|m| m.get_mut(key)) {
            f(key, v);
        }
    }
}

/// Seals an install's sensitive outputs, in place (those sealed already
/// stay as they are).
pub(crate) fn seal_outputs(secrets: &SecretBox, all: &mut InstallOutputs) {
    each_sensitive(all, |name, v| seal_value(secrets, name, v));
}

/// Opens an install's sealed outputs, in place.
pub(crate) fn open_outputs(secrets: &SecretBox, all: &mut InstallOutputs) -> Result<(), String> {
    let mut failed = None;
    each_sensitive(all, |name, v| {
        if let Err(e) = open_value(secrets, name, v) {
            failed.get_or_insert(e);
        }
    });
    failed.map_or(Ok(()), Err)
}

/// Seals a part (`files`, `config`, `sources`) of an app's config version:
/// the vendor's files may hold values as secret as any input.
pub(crate) fn seal_config(secrets: &SecretBox, app: &AppId, part: &str, json: &str) -> String {
    secrets.seal(json, &format!("{app}/config/{part}"))
}

/// Opens a part of a stored config version (one stored by an earlier
/// version, in the clear, is JSON and read as it is).
pub(crate) fn open_config(
    secrets: &SecretBox,
    app: &AppId,
    part: &str,
    stored: &str,
) -> Result<String, String> {
    if stored.starts_with(['[', '{']) {
        return Ok(stored.to_owned());
    }
    secrets
        .open(stored, &format!("{app}/config/{part}"))
        .map_err(|e| format!("the stored config {part} of app {app}: {e}"))
}

/// A job's payload as the Control API shows it: the state credential and
/// the values the job redacts hidden.
pub(crate) fn shown_payload(spec: &JobSpec) -> Value {
    let mut payload = spec.payload.clone();
    // A job's state credential is for its Terraform only, and the
    // install's secrets are for its runner only.
    if let Some(p) = payload.pointer_mut("/backend/password") {
        *p = Value::String("(hidden)".into());
    }
    let mut secrets: Vec<&str> = spec
        .redact
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    // Longest first, so no part of a longer one is left.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    if !secrets.is_empty() {
        hide(&mut payload, &secrets);
    }
    payload
}

fn hide(v: &mut Value, secrets: &[&str]) {
    match v {
        Value::String(s) => {
            for secret in secrets {
                if s.contains(secret) {
                    *s = s.replace(secret, "(secret)");
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| hide(x, secrets)),
        Value::Object(m) => m.values_mut().for_each(|x| hide(x, secrets)),
        _ => {}
    }
}

/// Seals what an earlier version kept in the clear: orgs' signing keys and
/// the specs of queued and kept jobs. Runs at start, before serving; a
/// second run finds nothing.
pub(crate) async fn seal_legacy(store: &dyn Store, secrets: &SecretBox) -> Result<u64, KeyError> {
    let mut sealed = 0;
    for (org, raw) in store.clear_signing_keys().await? {
        let key = OrgSigningKey::from_bytes(&raw)
            .map_err(|e| KeyError::Sealed(format!("the signing key of org {org}: {e}")))?;
        let text = secrets.seal_bytes(&key.to_bytes(), &signing_key_context(&org));
        store.seal_signing_key(&org, text.as_bytes()).await?;
        sealed += 1;
    }
    loop {
        let batch = store.clear_job_specs(500).await?;
        if batch.is_empty() {
            break;
        }
        for (id, text) in batch {
            let payload = match serde_json::from_str::<JobSpec>(&text) {
                Ok(spec) => shown_payload(&spec),
                Err(_) => Value::Null,
            };
            let spec = secrets.seal(&text, &spec_context(&id));
            store
                .seal_job_spec(&id, &spec, &payload.to_string())
                .await?;
            sealed += 1;
        }
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_outputs_seal_and_open_in_place() {
        let secrets = SecretBox::new([3; 32]);
        let mut all = InstallOutputs::default();
        all.components.insert(
            "db".into(),
            serde_json::from_value(
                serde_json::json!({"dsn": "postgres://a:hunter2@h", "port": 5432}),
            )
            .unwrap(),
        );
        all.sensitive.push("db.dsn".into());
        let plain = all.clone();
        seal_outputs(&secrets, &mut all);
        let text = serde_json::to_string(&all).unwrap();
        assert!(!text.contains("hunter2"), "{text}");
        assert_eq!(all.components["db"]["port"], 5432);
        seal_outputs(&secrets, &mut all);
        open_outputs(&secrets, &mut all).unwrap();
        assert_eq!(all, plain);
        let mut other = all.clone();
        seal_outputs(&SecretBox::new([4; 32]), &mut other);
        assert!(open_outputs(&secrets, &mut other).is_err());
    }

    #[test]
    fn signing_keys_are_sealed_to_their_org() {
        let secrets = SecretBox::new([5; 32]);
        let org = OrgId::generate();
        let (key, stored) = new_signing_key(&secrets, &org);
        assert!(!stored.windows(32).any(|w| w == key.to_bytes()));
        let opened = open_signing_key(&secrets, &org, &stored).unwrap();
        assert_eq!(opened.to_bytes(), key.to_bytes());
        assert!(open_signing_key(&secrets, &OrgId::generate(), &stored).is_err());
        let e = open_signing_key(&secrets, &org, &[0xff; 32]).unwrap_err();
        assert!(e.to_string().contains("in the clear"), "{e}");
    }
}
