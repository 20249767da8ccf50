//! Rotating the secrets key: every value the store keeps sealed is opened
//! with the keyring and sealed again with the ring's first key.
//!
//! `nuon-ctl rotate-secrets-key --new-key HEX` puts the new key first in
//! `secrets.key` (the old one after it, so both open), waits for running
//! control planes to read the file again, seals everything again in
//! batches, and then leaves the new key alone in the file. A value already
//! under the new key is left as it is, so a run that was stopped is simply
//! run again; each value is replaced only if it is still what was read, so a
//! control plane writing meanwhile loses nothing (the next pass looks again).

use std::path::Path;
use std::time::Duration;

use nuon_core::{AppId, InstallId, JobId, OrgId};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::keys;
use crate::secrets::{
    SECRETS_KEY_ENV, SECRETS_KEY_FILE, SecretBox, key_hex, key_ring, seal_context, state_context,
};
use crate::store::{SealedColumn, Store};

/// The most passes over the store before giving up on a store that keeps
/// being written under the old key (a control plane that has not read the
/// new key).
const MAX_PASSES: u32 = 5;

/// What a rotation did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Resealed {
    /// Values sealed again with the new key (or sealed for the first time:
    /// config versions an earlier version kept in the clear).
    pub resealed: u64,
    /// Values found under the new key already.
    pub current: u64,
    /// Passes over the store.
    pub passes: u32,
    /// Where the key is now: `secrets.key` holds the new key alone, or
    /// what to change in `NUON_SECRETS_KEY`.
    pub key: String,
}

/// How a rotation runs.
#[derive(Debug, Clone)]
pub struct RotateSecrets {
    /// The new key, 64 hex characters.
    pub new_key: String,
    /// How long to wait, once the file names the new key, for running
    /// control planes to read it (longer than their `--key-refresh`).
    pub grace: Duration,
    /// Values read and sealed per batch.
    pub batch: u32,
}

/// One batch done: the column, and the values of it sealed again so far.
pub type OnBatch<'a> = &'a mut (dyn FnMut(SealedColumn, u64) + Send);

/// Rotates the secrets key of the store at `data_dir` (see the module).
pub async fn rotate_secrets_key(
    store: &dyn Store,
    data_dir: &Path,
    how: &RotateSecrets,
    on_batch: OnBatch<'_>,
) -> Result<Resealed> {
    let bad = |path: &str, message: String| Error::DataDir {
        path: path.into(),
        message,
    };
    let new = key_hex(&how.new_key).map_err(|m| bad("--new-key", m))?;
    let file = data_dir.join(SECRETS_KEY_FILE);
    let from_env = std::env::var(SECRETS_KEY_ENV).ok();
    let ring_text = match &from_env {
        Some(text) => text.clone(),
        None => std::fs::read_to_string(&file).map_err(|e| {
            bad(
                &file.display().to_string(),
                format!(
                    "cannot read the secrets key ({e}): give the data dir the control plane uses"
                ),
            )
        })?,
    };
    let mut ring = key_ring(&ring_text).map_err(|m| bad(SECRETS_KEY_FILE, m))?;
    if ring.first() != Some(&new) {
        if from_env.is_some() {
            return Err(bad(
                SECRETS_KEY_ENV,
                format!(
                    "the keys come from {SECRETS_KEY_ENV}: set it to the new key, a comma, and the \
                     old key (NEW,OLD) for every replica and restart them, then run this again"
                ),
            ));
        }
        ring.retain(|k| *k != new);
        ring.insert(0, new);
        crate::private::write_private(&file, &ring_text_of(&ring))?;
    }
    let secrets = SecretBox::with_keys(&ring).expect("the ring holds the new key");
    check_key(store, &secrets).await?;
    if ring.len() > 1 {
        tracing::info!(
            grace_s = how.grace.as_secs_f64(),
            "waiting for running control planes to read the new key"
        );
        tokio::time::sleep(how.grace).await;
    }
    let mut total = Resealed::default();
    loop {
        total.passes += 1;
        let pass = reseal_all(store, &secrets, how.batch, on_batch).await?;
        total.resealed += pass.resealed;
        total.current = pass.current;
        if pass.resealed == 0 && pass.missed == 0 {
            break;
        }
        if total.passes >= MAX_PASSES {
            return Err(bad(
                SECRETS_KEY_FILE,
                format!(
                    "after {MAX_PASSES} passes values are still being sealed under the old key: a \
                     control plane has not read the new key (give each replica's secrets.key, or \
                     {SECRETS_KEY_ENV}, the new key first), then run this again"
                ),
            ));
        }
    }
    total.key = match from_env {
        None => {
            crate::private::write_private(&file, &hex::encode(new))?;
            format!("{} holds the new key alone", file.display())
        }
        Some(_) => format!(
            "every value is sealed with the new key: set {SECRETS_KEY_ENV} to the new key alone on every replica"
        ),
    };
    Ok(total)
}

/// The store's check value must open with the ring: it is the ring of this
/// store.
async fn check_key(store: &dyn Store, secrets: &SecretBox) -> Result<()> {
    let checks = store.sealed_values(SealedColumn::KeyCheck, "", 1).await?;
    if let Some((name, value)) = checks.first()
        && secrets.open(value, name).is_err()
    {
        return Err(Error::DataDir {
            path: SECRETS_KEY_FILE.into(),
            message: "neither key opens this store's secrets: the old key is not the one the \
                      store is sealed with; nothing was changed"
                .into(),
        });
    }
    Ok(())
}

/// What one pass did.
struct Pass {
    resealed: u64,
    current: u64,
    /// Values written meanwhile by someone else (left for the next pass).
    missed: u64,
}

async fn reseal_all(
    store: &dyn Store,
    secrets: &SecretBox,
    batch: u32,
    on_batch: OnBatch<'_>,
) -> Result<Pass> {
    let mut pass = Pass {
        resealed: 0,
        current: 0,
        missed: 0,
    };
    for column in SealedColumn::ALL {
        let mut after = String::new();
        let mut done = 0;
        loop {
            let rows = store.sealed_values(column, &after, batch.max(1)).await?;
            let Some((last, _)) = rows.last() else {
                break;
            };
            after = last.clone();
            for (key, value) in rows {
                match reseal_value(secrets, column, &key, &value) {
                    Ok(None) => pass.current += 1,
                    Ok(Some(new)) => {
                        if store.replace_sealed(column, &key, &value, &new).await? {
                            pass.resealed += 1;
                            done += 1;
                        } else {
                            pass.missed += 1;
                        }
                    }
                    Err(why) => {
                        return Err(Error::DataDir {
                            path: SECRETS_KEY_FILE.into(),
                            message: format!(
                                "{} of {key} does not open with either key ({why}); nothing more \
                                 was changed: find what wrote it, then run this again",
                                column.name()
                            ),
                        });
                    }
                }
            }
            on_batch(column, done);
        }
    }
    Ok(pass)
}

/// `value` of `column` at `key` sealed again with the first key of
/// `secrets`, or `None` when all of it is sealed with that key already.
pub fn reseal_value(
    secrets: &SecretBox,
    column: SealedColumn,
    key: &str,
    value: &str,
) -> std::result::Result<Option<String>, String> {
    let id = |what: &str| format!("the row key {key:?} is not {what}");
    match column {
        SealedColumn::SigningKeys => {
            let org: OrgId = key.parse().map_err(|_| id("an org id"))?;
            again(secrets, value, &keys::signing_key_context(&org))
        }
        SealedColumn::JobSpecs => {
            let job: JobId = key.parse().map_err(|_| id("a job id"))?;
            again(secrets, value, &keys::spec_context(&job))
        }
        SealedColumn::JobOutputs | SealedColumn::InstallOutputs | SealedColumn::StepOutputs => {
            again_in_json(value, |doc| {
                let mut changed = false;
                let mut failed = Ok(());
                keys::each_sealed_output(doc, &mut |name, sealed| match again(
                    secrets,
                    sealed,
                    &keys::output_context(name),
                ) {
                    Ok(Some(new)) => {
                        *sealed = new;
                        changed = true;
                    }
                    Ok(None) => {}
                    Err(e) => failed = Err(e),
                });
                failed.map(|()| changed)
            })
        }
        SealedColumn::InstallSecrets => {
            let install: InstallId = key.parse().map_err(|_| id("an install id"))?;
            install_sealed_again(secrets, &install, value)
        }
        SealedColumn::InstallPending => {
            // The sealed values deployed before a pending change.
            let install: InstallId = key.parse().map_err(|_| id("an install id"))?;
            again_in_json(value, |doc| {
                let Some(inner) = doc["deployed"]["sealed_json"].as_str() else {
                    return Ok(false);
                };
                match install_sealed_again(secrets, &install, inner)? {
                    Some(new) => {
                        doc["deployed"]["sealed_json"] = Value::String(new);
                        Ok(true)
                    }
                    None => Ok(false),
                }
            })
        }
        SealedColumn::States => {
            let (install, rest) = key
                .split_once('/')
                .ok_or_else(|| id("INSTALL/COMPONENT/VERSION"))?;
            let (component, _version) = rest
                .rsplit_once('/')
                .ok_or_else(|| id("INSTALL/COMPONENT/VERSION"))?;
            let install: InstallId = install.parse().map_err(|_| id("an install's state"))?;
            again(secrets, value, &state_context(&install, component))
        }
        SealedColumn::ConfigFiles | SealedColumn::ConfigConfig | SealedColumn::ConfigSources => {
            let (app, _version) = key.split_once('/').ok_or_else(|| id("APP/VERSION"))?;
            let app: AppId = app.parse().map_err(|_| id("an app's config version"))?;
            let part = match column {
                SealedColumn::ConfigFiles => "files",
                SealedColumn::ConfigConfig => "config",
                _ => "sources",
            };
            if value.starts_with(['[', '{']) {
                // Kept in the clear by an earlier version: sealed now.
                return Ok(Some(keys::seal_config(secrets, &app, part, value)));
            }
            again(secrets, value, &keys::config_context(&app, part))
        }
        SealedColumn::KeyCheck => again(secrets, value, key),
        SealedColumn::WebhookSecrets => {
            let hook: nuon_core::WebhookId = key.parse().map_err(|_| id("a webhook id"))?;
            again(secrets, value, &crate::secrets::webhook_context(&hook))
        }
        SealedColumn::StackOutputs => {
            let install: InstallId = key.parse().map_err(|_| id("an install id"))?;
            let context = crate::secrets::stack_context(&install);
            if value.starts_with('{') {
                // Kept in the clear by an earlier version: sealed now.
                return Ok(Some(secrets.seal(value, &context)));
            }
            again(secrets, value, &context)
        }
    }
}

/// An install's sealed inputs and secrets (a JSON document of them)
/// sealed again, when an older key sealed one.
fn install_sealed_again(
    secrets: &SecretBox,
    install: &InstallId,
    text: &str,
) -> std::result::Result<Option<String>, String> {
    again_in_json(text, |doc| {
        let mut changed = false;
        for kind in ["input", "secret"] {
            let map = doc
                .get_mut(format!("{kind}s"))
                .and_then(Value::as_object_mut);
            for (name, v) in map.into_iter().flatten() {
                let Some(sealed) = v.as_str() else { continue };
                if let Some(new) = again(secrets, sealed, &seal_context(install, kind, name))? {
                    *v = Value::String(new);
                    changed = true;
                }
            }
        }
        Ok(changed)
    })
}

/// `sealed` sealed again with the first key, when an older one sealed it.
fn again(
    secrets: &SecretBox,
    sealed: &str,
    context: &str,
) -> std::result::Result<Option<String>, String> {
    let (value, current) = secrets
        .open_which(sealed, context)
        .map_err(|e| e.to_string())?;
    Ok((!current).then(|| secrets.seal_bytes(&value, context)))
}

/// A JSON document changed in place by `f`; its new text when it changed.
fn again_in_json(
    text: &str,
    f: impl FnOnce(&mut Value) -> std::result::Result<bool, String>,
) -> std::result::Result<Option<String>, String> {
    let mut doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    Ok(f(&mut doc)?.then(|| doc.to_string()))
}

fn ring_text_of(ring: &[[u8; 32]]) -> String {
    let keys: Vec<String> = ring.iter().map(hex::encode).collect();
    format!(
        "# the first key seals; the others still open, until nuon-ctl rotate-secrets-key completes\n{}",
        keys.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_value_is_sealed_again_once() {
        let old = SecretBox::new([1; 32]);
        let ring = SecretBox::with_keys(&[[2; 32], [1; 32]]).unwrap();
        let new = SecretBox::new([2; 32]);
        let org = OrgId::generate();
        let job = JobId::generate();
        let install = InstallId::generate();
        let app = AppId::generate();
        let hook = nuon_core::WebhookId::generate();
        let sealed_output = serde_json::json!({
            "outputs": {"db": {"$sealed": old.seal("\"pw\"", &keys::output_context("db"))}, "plain": 1},
            "sensitive": ["db"],
        })
        .to_string();
        let install_secrets = serde_json::json!({
            "inputs": {"api_key": old.seal("k", &seal_context(&install, "input", "api_key"))},
            "secrets": {"db_password": old.seal("p", &seal_context(&install, "secret", "db_password"))},
        })
        .to_string();
        let cases = [
            (
                SealedColumn::SigningKeys,
                org.to_string(),
                old.seal_bytes(&[9; 32], &keys::signing_key_context(&org)),
            ),
            (
                SealedColumn::JobSpecs,
                job.to_string(),
                old.seal("{}", &keys::spec_context(&job)),
            ),
            (
                SealedColumn::JobOutputs,
                job.to_string(),
                sealed_output.clone(),
            ),
            (SealedColumn::StepOutputs, "wf/1".into(), sealed_output),
            (
                SealedColumn::InstallPending,
                install.to_string(),
                serde_json::json!({
                    "deployed": {"inputs_json": "{}", "sealed_json": install_secrets.clone()},
                    "since_ms": 1,
                })
                .to_string(),
            ),
            (
                SealedColumn::InstallSecrets,
                install.to_string(),
                install_secrets,
            ),
            (
                SealedColumn::States,
                format!("{install}/vpc/3"),
                old.seal("{}", &state_context(&install, "vpc")),
            ),
            (
                SealedColumn::ConfigFiles,
                format!("{app}/2"),
                old.seal("[]", &keys::config_context(&app, "files")),
            ),
            (
                SealedColumn::KeyCheck,
                "secrets_key_check".into(),
                old.seal("x", "secrets_key_check"),
            ),
            (
                SealedColumn::WebhookSecrets,
                hook.to_string(),
                old.seal("whsec_x", &crate::secrets::webhook_context(&hook)),
            ),
        ];
        for (column, key, value) in cases {
            let again = reseal_value(&ring, column, &key, &value)
                .unwrap()
                .unwrap_or_else(|| panic!("{column:?} was under the old key"));
            assert_eq!(
                reseal_value(&new, column, &key, &again).unwrap(),
                None,
                "{column:?}"
            );
            assert!(
                reseal_value(&old, column, &key, &again).is_err(),
                "{column:?}"
            );
            // Sealed again once only.
            assert_eq!(
                reseal_value(&ring, column, &key, &again).unwrap(),
                None,
                "{column:?}"
            );
        }
        // A config an earlier version kept in the clear is sealed now.
        let clear = reseal_value(
            &ring,
            SealedColumn::ConfigConfig,
            &format!("{app}/1"),
            "{\"a\":1}",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            new.open(&clear, &keys::config_context(&app, "config"))
                .unwrap(),
            "{\"a\":1}"
        );
        // A value no key opens is an error that says where.
        let stray = SecretBox::new([7; 32]).seal("x", "secrets_key_check");
        assert!(reseal_value(&ring, SealedColumn::KeyCheck, "secrets_key_check", &stray).is_err());
    }

    #[test]
    fn the_ring_file_reads_back() {
        let ring = [[2; 32], [1; 32]];
        assert_eq!(key_ring(&ring_text_of(&ring)).unwrap(), ring.to_vec());
        assert!(key_hex("abc").is_err());
    }
}
