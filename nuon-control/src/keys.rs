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

use nuon_core::Signed as _;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nuon_core::wire::{ClaimedJob, InstallOutputs};
use nuon_core::{
    AppId, JobId, JobSpec, OrgId, OrgSigningKey, PublicKey, SignedRotation, Signer, SignerError,
};
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

    /// The rotations of `org`'s key, oldest first, each signed by the key
    /// it replaced: what a runner that trusts an earlier key is sent. None
    /// by default (a signer that never rotates, or rotates out of band).
    async fn rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>, KeyError> {
        let _ = org;
        Ok(Vec::new())
    }

    /// Forgets what is cached of `org`'s key: a job was found signed by a
    /// key the cache does not know (another replica rotated first).
    async fn reload(&self, org: &OrgId) {
        let _ = org;
    }
}

/// How long [`SealedKeys`] trusts what it read of an org's key before it
/// looks again: a rotation by `nuon-ctl orgs rotate-signing-key` (or on
/// another replica) is picked up within this time.
pub const KEY_REFRESH: Duration = Duration::from_secs(10);

/// The orgs' keys as the store keeps them, sealed; each opened once and
/// looked at again every [`KEY_REFRESH`].
pub struct SealedKeys {
    store: Arc<dyn Store>,
    secrets: Arc<SecretBox>,
    refresh: Duration,
    cache: Mutex<HashMap<OrgId, Arc<Cached>>>,
}

/// An org's key as last read.
struct Cached {
    /// The key as kept, to open it again only when it changed.
    sealed: Vec<u8>,
    signer: Arc<dyn Signer>,
    rotations: Arc<Vec<SignedRotation>>,
    read_at: Instant,
}

impl std::fmt::Debug for SealedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealedKeys(..)")
    }
}

impl SealedKeys {
    /// The keys of `store`, opened with `secrets`, looked at again every
    /// `refresh` ([`KEY_REFRESH`] for a server).
    pub fn new(store: Arc<dyn Store>, secrets: Arc<SecretBox>, refresh: Duration) -> Self {
        SealedKeys {
            store,
            secrets,
            refresh,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The org's key as cached, read again once `refresh` has passed.
    async fn cached(&self, org: &OrgId) -> Result<Option<Arc<Cached>>, KeyError> {
        let old = self.cache.lock().expect("keys lock").get(org).cloned();
        if let Some(c) = &old
            && c.read_at.elapsed() < self.refresh
        {
            return Ok(old);
        }
        let Some(sealed) = self.store.signing_key(org).await? else {
            return Ok(None);
        };
        let rotations = Arc::new(self.store.key_rotations(org).await?);
        let signer: Arc<dyn Signer> = match old {
            Some(c) if c.sealed == sealed => c.signer.clone(),
            _ => Arc::new(open_signing_key(&self.secrets, org, &sealed)?),
        };
        let fresh = Arc::new(Cached {
            sealed,
            signer,
            rotations,
            read_at: Instant::now(),
        });
        self.cache
            .lock()
            .expect("keys lock")
            .insert(org.clone(), fresh.clone());
        Ok(Some(fresh))
    }
}

#[async_trait]
impl OrgSigners for SealedKeys {
    async fn signer(&self, org: &OrgId) -> Result<Option<Arc<dyn Signer>>, KeyError> {
        Ok(self.cached(org).await?.map(|c| c.signer.clone()))
    }

    async fn rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>, KeyError> {
        Ok(self
            .cached(org)
            .await?
            .map(|c| c.rotations.as_ref().clone())
            .unwrap_or_default())
    }

    async fn reload(&self, org: &OrgId) {
        self.cache.lock().expect("keys lock").remove(org);
    }
}

/// A job's signature as the store keeps it: the signature, a space, and
/// the public key that made it, so a claim knows which key its runner
/// needs without checking the signature. The key is public.
fn tag_signature(signature: &str, key: &PublicKey) -> String {
    format!("{signature} {key}")
}

/// Splits a stored signature into the signature the runner verifies and
/// the key that made it (unknown for one stored by an earlier version).
fn untag_signature(stored: &mut String) -> Option<String> {
    let at = stored.find(' ')?;
    let key = stored[at + 1..].to_owned();
    stored.truncate(at);
    Some(key)
}

/// The most rotations an org keeps: a runner further behind than this
/// many rotations must be given the current key by hand.
pub const MAX_ROTATIONS: usize = 16;

/// What a rotation of an org's signing key did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rotated {
    /// The org.
    pub org: OrgId,
    /// The key replaced.
    pub previous: String,
    /// The new key.
    pub key: String,
    /// Until when (ms since the epoch) runners accept jobs signed by the
    /// previous key.
    pub previous_until_ms: i64,
    /// Jobs not ended (queued or running) signed again with the new key.
    pub resigned: u64,
}

/// Rotates the org's signing key (kept sealed in the store): a new key,
/// announced to runners by a message the old key signs; runners accept
/// jobs signed by the old key for `overlap` more. Jobs that have not ended
/// are signed again with the new key, so none of them is refused once the
/// window closes.
pub async fn rotate_signing_key(
    store: &dyn Store,
    secrets: &SecretBox,
    org: &OrgId,
    overlap: Duration,
) -> Result<Rotated, KeyError> {
    let sealed_old = store
        .signing_key(org)
        .await?
        .ok_or_else(|| KeyError::NoOrg(org.clone()))?;
    let old = open_signing_key(secrets, org, &sealed_old)?;
    let (new, sealed_new) = new_signing_key(secrets, org);
    let overlap_ms = i64::try_from(overlap.as_millis()).unwrap_or(i64::MAX);
    let until = nuon_core::now_ms().saturating_add(overlap_ms);
    let signed = SignedRotation::sign(&old, new.public_key(), until).await?;
    let mut chain = store.key_rotations(org).await?;
    chain.push(signed);
    let keep_from = chain.len().saturating_sub(MAX_ROTATIONS);
    store
        .rotate_signing_key(org, &sealed_old, &sealed_new, &chain[keep_from..])
        .await?;
    let mut resigned = 0;
    let mut after: Option<JobId> = None;
    loop {
        let batch = store.unended_job_specs(org, after.as_ref(), 500).await?;
        let Some((last, _)) = batch.last() else {
            break;
        };
        after = Some(last.clone());
        for (job, sealed) in batch {
            // A spec that does not open is refused at its claim anyway.
            let Ok(text) = secrets.open(&sealed, &spec_context(&job)) else {
                tracing::warn!(%job, "cannot open the job's spec to sign it again; left as it was");
                continue;
            };
            let signature = tag_signature(&new.sign_now(text.as_bytes()), &new.public_key());
            store.set_job_signature(&job, &signature).await?;
            resigned += 1;
        }
    }
    Ok(Rotated {
        org: org.clone(),
        previous: old.public_key().to_string(),
        key: new.public_key().to_string(),
        previous_until_ms: until,
        resigned,
    })
}

/// The sealing context of an org's signing key.
pub(crate) fn signing_key_context(org: &OrgId) -> String {
    format!("{org}/signing-key")
}

/// The sealing context of a job's spec.
pub fn spec_context(job: &JobId) -> String {
    format!("{job}/spec")
}

/// The sealing context of a sensitive Terraform output.
pub(crate) fn output_context(name: &str) -> String {
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

/// Claimed jobs, opened.
pub(crate) struct OpenedJobs {
    /// Those to send, their specs the signed bytes.
    pub(crate) jobs: Vec<ClaimedJob>,
    /// Those whose stored spec does not open, each with why.
    pub(crate) refused: Vec<(ClaimedJob, String)>,
    /// The keys that signed them (`ed25519:...`), where known.
    pub(crate) signed_by: Vec<String>,
}

/// Whether the rotations `chain` lead to `key`.
fn reaches(chain: &[SignedRotation], key: &str) -> bool {
    chain.iter().any(|r| {
        serde_json::from_str::<nuon_core::KeyRotation>(&r.rotation).is_ok_and(|r| r.key == key)
    })
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

    /// The org's current public key when `runner_key` is none the org ever
    /// signed with (not its current key, nor one of its rotations): the
    /// runner was started with another org's key, or a mistyped one.
    pub(crate) async fn foreign_key(&self, org: &OrgId, runner_key: &str) -> Option<String> {
        let current = self.signer(org).await.ok()?.public_key().to_string();
        if runner_key == current {
            return None;
        }
        let chain = self.signers.rotations(org).await.ok()?;
        let ours = chain.iter().any(|r| {
            serde_json::from_str::<nuon_core::KeyRotation>(&r.rotation)
                .is_ok_and(|r| r.key == runner_key || r.previous == runner_key)
        });
        (!ours).then_some(current)
    }

    /// The org's key rotations a runner trusting `runner_key` needs, to
    /// check jobs signed by the keys `signed_by`: none when it trusts the
    /// current key and the jobs are signed by it. A job signed by a key the
    /// cached rotations do not reach (another replica rotated, or signed
    /// after a rotation this one has not read yet) makes the org's key be
    /// read again. Never fails a claim: a key that cannot be read is
    /// logged, and the runner hears of it next time.
    pub(crate) async fn rotations_for(
        &self,
        org: &OrgId,
        runner_key: Option<&str>,
        signed_by: &[String],
    ) -> Vec<SignedRotation> {
        let news = async {
            let current = self.signer(org).await?.public_key().to_string();
            if runner_key == Some(current.as_str()) && signed_by.iter().all(|k| *k == current) {
                return Ok(Vec::new());
            }
            let mut chain = self.signers.rotations(org).await?;
            let known = |chain: &[SignedRotation], k: &String| {
                *k == current || Some(k.as_str()) == runner_key || reaches(chain, k)
            };
            if !signed_by.iter().all(|k| known(&chain, k)) {
                self.signers.reload(org).await;
                chain = self.signers.rotations(org).await?;
            }
            Ok(chain)
        };
        news.await.unwrap_or_else(|e: KeyError| {
            tracing::warn!(%org, error = %e, "cannot read the org's key rotations for a runner");
            Vec::new()
        })
    }

    /// The job to queue: `spec` signed by its org, sealed, and its payload
    /// as the Control API shows it.
    pub(crate) async fn sign(&self, spec: JobSpec) -> Result<NewJob, KeyError> {
        let shown = shown_payload(&spec);
        self.sign_shown(spec, shown).await
    }

    /// [`JobKeys::sign`], the payload shown as `shown` (see [`hidden`]).
    pub(crate) async fn sign_shown(&self, spec: JobSpec, shown: Value) -> Result<NewJob, KeyError> {
        let signer = self.signer(&spec.org_id).await?;
        let text = serde_json::to_string(&spec)
            .map_err(|e| KeyError::Sealed(format!("cannot encode the job: {e}")))?;
        let signature = tag_signature(&signer.sign(text.as_bytes()).await?, &signer.public_key());
        let payload = shown;
        let sealed_spec = self.secrets.seal(&text, &spec_context(&spec.job_id));
        Ok(NewJob {
            spec,
            sealed_spec,
            signature,
            payload,
        })
    }

    /// Grants each opened job to `runner` ([`nuon_core::Grant`]): this
    /// attempt, until its lease's end and leeway, signed by the org's
    /// current key (added to the keys the answer's rotations must reach).
    pub(crate) async fn grant(
        &self,
        org: &OrgId,
        runner: &nuon_core::RunnerId,
        opened: &mut OpenedJobs,
    ) -> Result<(), KeyError> {
        if opened.jobs.is_empty() {
            return Ok(());
        }
        let signer = self.signer(org).await?;
        let now = nuon_core::now_ms();
        for job in &mut opened.jobs {
            job.not_after_ms = nuon_core::Grant::not_after(now, job.lease_ms);
            let grant = nuon_core::Grant {
                job_id: &job.job_id,
                attempt: job.attempt,
                runner_id: runner,
                not_after_ms: job.not_after_ms,
                spec: job.spec.as_bytes(),
            };
            job.grant = signer.sign(&grant.signed_bytes()).await?;
        }
        let key = signer.public_key().to_string();
        if !opened.signed_by.contains(&key) {
            opened.signed_by.push(key);
        }
        Ok(())
    }

    /// Opens the specs of claimed jobs into the signed bytes their runner
    /// verifies; answers those that do not open apart, each with why.
    pub(crate) fn open_claimed(&self, jobs: Vec<ClaimedJob>) -> OpenedJobs {
        let mut opened = Vec::with_capacity(jobs.len());
        let mut refused = Vec::new();
        let mut signed_by: Vec<String> = Vec::new();
        for mut job in jobs {
            match self.secrets.open(&job.spec, &spec_context(&job.job_id)) {
                Ok(spec) => {
                    job.spec = spec;
                    if let Some(key) = untag_signature(&mut job.signature)
                        && !signed_by.contains(&key)
                    {
                        signed_by.push(key);
                    }
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
        OpenedJobs {
            jobs: opened,
            refused,
            signed_by,
        }
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
        if let Some(v) = all.of_mut(from).and_then(|m| m.get_mut(key)) {
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
    secrets.seal(json, &config_context(app, part))
}

/// The sealing context of a part of an app's config version.
pub(crate) fn config_context(app: &AppId, part: &str) -> String {
    format!("{app}/config/{part}")
}

/// Calls `f` with the name and sealed text of every sealed output in a
/// JSON document (a job's, an install's or a step's outputs), wherever it
/// stands.
pub(crate) fn each_sealed_output(doc: &mut Value, f: &mut dyn FnMut(&str, &mut String)) {
    match doc {
        Value::Object(map) => {
            for (name, v) in map.iter_mut() {
                if is_sealed(v) {
                    if let Some(Value::String(s)) = v.get_mut(SEALED) {
                        f(name, s);
                    }
                } else {
                    each_sealed_output(v, f);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| each_sealed_output(v, f)),
        _ => {}
    }
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
        .open(stored, &config_context(app, part))
        .map_err(|e| format!("the stored config {part} of app {app}: {e}"))
}

/// A job's payload as the Control API shows it: the state credential and
/// the values the job redacts hidden, in every form ([`nuon_core::redact`]).
pub(crate) fn shown_payload(spec: &JobSpec) -> Value {
    hidden(spec.payload.clone(), &spec.redact)
}

/// `view` (a payload rendered with stand-ins for the install's secrets)
/// with the state credential hidden, and any of `redact` it still holds
/// (a value that reached it some other way than a template) hidden too.
pub(crate) fn hidden(mut view: Value, redact: &[String]) -> Value {
    // A job's state credential is for its Terraform only, and the
    // install's secrets are for its runner only.
    if let Some(p) = view.pointer_mut("/backend/password") {
        *p = Value::String("(hidden)".into());
    }
    let redactor = nuon_core::redact::Redactor::new(redact).masking_with("(secret)");
    if !redactor.is_empty() {
        hide(&mut view, &redactor);
    }
    view
}

/// Replaces each secret, in each of its forms, in the strings of `v` with
/// `(secret)`.
fn hide(v: &mut Value, redactor: &nuon_core::redact::Redactor) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(o) = redactor.redact(s) {
                *s = o;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| hide(x, redactor)),
        Value::Object(m) => m.values_mut().for_each(|x| hide(x, redactor)),
        _ => {}
    }
}

/// Seals what an earlier version kept in the clear: orgs' signing keys,
/// the specs of queued and kept jobs, and install stacks' outputs. Runs at start, before serving; a
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
    // Install stacks' outputs, kept as clear JSON by an earlier version.
    let column = crate::store::SealedColumn::StackOutputs;
    let mut after = String::new();
    loop {
        let rows = store.sealed_values(column, &after, 500).await?;
        let Some((last, _)) = rows.last() else {
            break;
        };
        after = last.clone();
        for (key, value) in rows.into_iter().filter(|(_, v)| v.starts_with('{')) {
            let install: nuon_core::InstallId = key.parse().map_err(|_| {
                KeyError::Sealed(format!(
                    "installs.stack_outputs: {key:?} is not an install id"
                ))
            })?;
            let text = secrets.seal(&value, &crate::secrets::stack_context(&install));
            if store.replace_sealed(column, &key, &value, &text).await? {
                sealed += 1;
            }
        }
    }
    Ok(sealed)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_api_view_hides_secrets_in_every_form() {
        use base64::Engine as _;
        let redact = vec!["s3cret-value".to_owned()];
        let b64 = base64::engine::general_purpose::STANDARD.encode("s3cret-value");
        let view = serde_json::json!({
            "args": ["Ks3cret-valueZ", format!("x {b64}"), "S3CRET-VALUE", "plain"],
            "backend": {"password": "tok"},
        });
        let shown = super::hidden(view, &redact);
        assert_eq!(
            shown,
            serde_json::json!({
                "args": ["K(secret)Z", "x (secret)", "(secret)", "plain"],
                "backend": {"password": "(hidden)"},
            })
        );
    }

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
