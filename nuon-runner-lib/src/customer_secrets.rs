//! Customer-held secrets: values the install's customer keeps in their
//! own cloud's secret store (AWS Secrets Manager, made by the install
//! stack). The control plane knows only their names: a job's payload
//! carries a placeholder where a value is printed, and the runner reads
//! the value at the job's start, with the job's own role, and puts it in.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nuon_core::app::SecretDecl;
use serde_json::Value;

/// Where each customer-held secret is: the ARNs the install stack
/// reported (`NAME_arn`).
#[derive(Debug, Clone, Default)]
pub struct CustomerSecrets {
    arns: BTreeMap<String, String>,
    aws: Option<PathBuf>,
}

impl CustomerSecrets {
    /// The secrets of a stack's outputs: every `NAME_arn` whose value is a
    /// Secrets Manager ARN; read with the `aws` program, when there is one.
    pub fn from_outputs(outputs: &BTreeMap<String, String>, aws: Option<PathBuf>) -> Self {
        let arns = outputs
            .iter()
            .filter(|(_, v)| v.starts_with("arn:") && v.contains(":secretsmanager:"))
            .filter_map(|(k, v)| Some((k.strip_suffix("_arn")?.to_owned(), v.clone())))
            .collect();
        CustomerSecrets { arns, aws }
    }

    /// Fills the placeholders of `names` in `payload` with the values read
    /// as `env` (the job's role); the values, and their base64, for the
    /// log's redactions. An error names the secret and how to fix it.
    pub async fn fill(
        &self,
        names: &[String],
        env: &BTreeMap<String, String>,
        payload: &mut Value,
    ) -> Result<Vec<String>, String> {
        use base64::Engine as _;
        let mut with = BTreeMap::new();
        let mut redact = Vec::new();
        for name in names {
            let value = self.read(name, env).await?;
            let encoded = base64::engine::general_purpose::STANDARD.encode(&value);
            with.insert(SecretDecl::placeholder(name), value.clone());
            with.insert(SecretDecl::placeholder_base64(name), encoded.clone());
            redact.extend([value, encoded]);
        }
        replace_in(payload, &with);
        Ok(redact)
    }

    /// Fills the customer-held secrets `spec` prints (read as `env`, the
    /// job's role), adding their values to `redact` and the log's
    /// redactions, and says so in the log.
    pub(crate) async fn fill_job(
        &self,
        spec: &mut nuon_core::JobSpec,
        env: &BTreeMap<String, String>,
        redact: &mut Vec<String>,
        spool: &mut crate::spool::SpoolWriter,
    ) -> Result<(), String> {
        if spec.customer_secrets.is_empty() {
            return Ok(());
        }
        let names = spec.customer_secrets.clone();
        let values = self
            .fill(&names, env, &mut spec.payload)
            .await
            .inspect_err(|reason| {
                tracing::warn!(job = %spec.job_id, "customer secret refused: {reason}");
            })?;
        redact.extend(values);
        spool.set_redact(redact);
        spool.system(&format!(
            "read {} from the customer's secret store",
            names.join(", ")
        ));
        Ok(())
    }

    /// The value of secret `name`, read as `env`.
    async fn read(&self, name: &str, env: &BTreeMap<String, String>) -> Result<String, String> {
        let Some(arn) = self.arns.get(name) else {
            return Err(format!(
                "secret {name} is held by the customer, and this runner's install stack reported no {name}_arn: apply the app's current install stack (`nuon installs stack`), which makes the secret in the customer's account"
            ));
        };
        let Some(aws) = &self.aws else {
            return Err(format!(
                "secret {name} is held by the customer ({arn}): reading it needs the AWS CLI (`aws`) on this runner's PATH"
            ));
        };
        // The region is the ARN's: arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME.
        let region = arn.split(':').nth(3).unwrap_or_default();
        let mut call = tokio::process::Command::new(aws);
        call.args(["secretsmanager", "get-secret-value", "--secret-id", arn])
            .args(["--region", region, "--output", "json"]);
        if !env.is_empty() {
            // As the job's role only, never the runner's own identity.
            for k in crate::credentials::RUNNER_IDENTITY_VARS {
                call.env_remove(k);
            }
        }
        let call = call.envs(env).kill_on_drop(true).output();
        let out = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .map_err(|_| format!("reading secret {name} ({arn}): no answer within 60 s"))?
            .map_err(|e| format!("cannot run {}: {e}", aws.display()))?;
        if !out.status.success() {
            return Err(format!(
                "reading secret {name} ({arn}) from the customer's Secrets Manager failed: {} (the job's role needs secretsmanager:GetSecretValue on it; a secret the customer left empty in the stack has no value)",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let v: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("reading secret {name}: the answer is not JSON: {e}"))?;
        v["SecretString"].as_str().map(str::to_owned).ok_or_else(|| {
            format!("secret {name} ({arn}) has no text value (SecretString): give it one in the customer's Secrets Manager")
        })
    }
}

/// Every string of `v` with each key of `with` replaced by its value.
fn replace_in(v: &mut Value, with: &BTreeMap<String, String>) {
    match v {
        Value::String(s) => {
            for (from, to) in with {
                if s.contains(from.as_str()) {
                    *s = s.replace(from.as_str(), to);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| replace_in(i, with)),
        Value::Object(map) => map.values_mut().for_each(|i| replace_in(i, with)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_secrets_manager_arns_and_every_placeholder_form_is_filled() {
        let outputs = BTreeMap::from([
            (
                "db_password_arn".to_owned(),
                "arn:aws:secretsmanager:us-east-1:1:secret:i/db_password-AbC".to_owned(),
            ),
            (
                "provision_iam_role_arn".to_owned(),
                "arn:aws:iam::1:role/p".to_owned(),
            ),
            ("license_arn".to_owned(), "none".to_owned()),
        ]);
        let s = CustomerSecrets::from_outputs(&outputs, None);
        assert_eq!(s.arns.keys().collect::<Vec<_>>(), ["db_password"]);
        let mut payload = serde_json::json!({
            "env": {"PW": format!("x{}y", SecretDecl::placeholder("db_password"))},
            "docs": [SecretDecl::placeholder_base64("db_password")]
        });
        let with = BTreeMap::from([
            (SecretDecl::placeholder("db_password"), "hunter2".to_owned()),
            (
                SecretDecl::placeholder_base64("db_password"),
                "aHVudGVyMg==".to_owned(),
            ),
        ]);
        replace_in(&mut payload, &with);
        assert_eq!(payload["env"]["PW"], "xhunter2y");
        assert_eq!(payload["docs"][0], "aHVudGVyMg==");
    }

    #[tokio::test]
    async fn a_secret_the_stack_did_not_report_or_without_aws_is_named() {
        let s = CustomerSecrets::from_outputs(&BTreeMap::new(), None);
        let e = s
            .fill(&["db_password".into()], &BTreeMap::new(), &mut Value::Null)
            .await
            .unwrap_err();
        assert!(e.contains("reported no db_password_arn"), "{e}");
        let outputs = BTreeMap::from([(
            "db_password_arn".to_owned(),
            "arn:aws:secretsmanager:us-east-1:1:secret:x".to_owned(),
        )]);
        let e = CustomerSecrets::from_outputs(&outputs, None)
            .fill(&["db_password".into()], &BTreeMap::new(), &mut Value::Null)
            .await
            .unwrap_err();
        assert!(e.contains("needs the AWS CLI"), "{e}");
    }
}
