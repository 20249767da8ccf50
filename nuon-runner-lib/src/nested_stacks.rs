//! The outputs of an install stack's custom nested stacks, read by the
//! runner when it phones home.
//!
//! A CloudFormation template cannot name the outputs of a nested stack it
//! does not know, and the control plane never reaches into the customer's
//! account: so the stack reports each nested stack by its id
//! (`custom_nested_stack_id.NAME=ARN`), and the runner, inside the account,
//! asks CloudFormation for its outputs (`aws cloudformation
//! describe-stacks`, which the stack lets the runner's role do on those
//! stacks alone) and reports each as `custom_nested_stacks.NAME.outputs.KEY`.
//! The control plane folds them into Nuon's `custom_nested_stacks` map.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The reported key of a nested stack's id (the stack's own output).
const ID_PREFIX: &str = "custom_nested_stack_id.";

/// `outputs` with the outputs of each nested stack they name added, read
/// with the AWS CLI `aws`; and what could not be read, one line each (the
/// runner goes on: a template that reads a missing output fails with its
/// name).
pub async fn with_nested_outputs(
    mut outputs: BTreeMap<String, String>,
    aws: Option<&Path>,
) -> (BTreeMap<String, String>, Vec<String>) {
    let stacks: Vec<(String, String)> = outputs
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(ID_PREFIX)?.to_owned(), v.clone())))
        .collect();
    let mut problems = Vec::new();
    for (name, id) in stacks {
        let Some(aws) = aws else {
            problems.push(format!(
                "the outputs of nested stack {name} are not read: the AWS CLI (`aws`) is not on PATH"
            ));
            continue;
        };
        match describe(aws, &id).await {
            Ok(found) => {
                for (key, value) in found {
                    outputs.insert(format!("custom_nested_stacks.{name}.outputs.{key}"), value);
                }
            }
            Err(e) => problems.push(format!("the outputs of nested stack {name}: {e}")),
        }
    }
    (outputs, problems)
}

/// The outputs of stack `id`, by key.
async fn describe(aws: &Path, id: &str) -> Result<Vec<(String, String)>, String> {
    let call = tokio::process::Command::new(aws)
        .args(["cloudformation", "describe-stacks", "--stack-name", id])
        .args(["--output", "json"])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .map_err(|_| "no answer from CloudFormation within 60 s".to_owned())?
        .map_err(|e| format!("cannot run {}: {e}", aws.display()))?;
    if !out.status.success() {
        return Err(format!(
            "describe-stacks failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("describe-stacks answered no JSON: {e}"))?;
    Ok(v["Stacks"][0]["Outputs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| {
            Some((
                o["OutputKey"].as_str()?.to_owned(),
                o["OutputValue"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stand_in_aws(dir: &Path) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let bin = dir.join("aws");
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> {rec}\ncase \"$*\" in\n  *stack/rds*) echo '{{\"Stacks\": [{{\"Outputs\": [{{\"OutputKey\": \"DBEndpoint\", \"OutputValue\": \"db.internal\"}}, {{\"OutputKey\": \"DBPort\", \"OutputValue\": \"5432\"}}]}}]}}' ;;\n  *) echo 'An error occurred (ValidationError): Stack does not exist' >&2; exit 254 ;;\nesac\n",
            rec = dir.join("record").display()
        );
        std::fs::write(&bin, script).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[tokio::test]
    async fn each_nested_stack_is_described_and_its_outputs_reported() {
        let dir = tempfile::tempdir().unwrap();
        let aws = stand_in_aws(dir.path());
        let outputs = BTreeMap::from([
            ("region".to_owned(), "us-east-2".to_owned()),
            (
                "custom_nested_stack_id.rds_instance".to_owned(),
                "arn:aws:cloudformation:us-east-2:1:stack/rds/1".to_owned(),
            ),
            (
                "custom_nested_stack_id.gone".to_owned(),
                "arn:aws:cloudformation:us-east-2:1:stack/gone/2".to_owned(),
            ),
        ]);
        let (out, problems) = with_nested_outputs(outputs.clone(), Some(&aws)).await;
        assert_eq!(
            out["custom_nested_stacks.rds_instance.outputs.DBEndpoint"],
            "db.internal"
        );
        assert_eq!(
            out["custom_nested_stacks.rds_instance.outputs.DBPort"],
            "5432"
        );
        assert_eq!(out["region"], "us-east-2");
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("nested stack gone") && problems[0].contains("does not exist")
        );
        let rec = std::fs::read_to_string(dir.path().join("record")).unwrap();
        assert!(rec.contains(
            "cloudformation describe-stacks --stack-name arn:aws:cloudformation:us-east-2:1:stack/rds/1 --output json"
        ));
        // Without the AWS CLI: said, and the rest reported as it was.
        let (out, problems) = with_nested_outputs(outputs.clone(), None).await;
        assert_eq!(out, outputs);
        assert!(problems.iter().all(|p| p.contains("`aws`")) && problems.len() == 2);
    }
}
