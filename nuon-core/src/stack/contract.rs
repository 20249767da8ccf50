//! The install stack's outputs as Nuon's templates read them
//! (`.nuon.install_stack.outputs.*`), and the cloud account they tell
//! (`.nuon.cloud_account.*`).
//!
//! A stack reports flat `KEY=VALUE` text when it phones home (what a
//! CloudFormation output or an instance's user data can carry). Nuon's
//! phone-home payload (its CloudFormation custom resource) has maps where a
//! sandbox written for Nuon reads maps: `break_glass_role_arns` and
//! `custom_role_arns` (role name to ARN, as the role's name is rendered
//! for the install), `install_inputs`, `custom_nested_stacks` (each
//! nested stack's `outputs`, as the runner read them from CloudFormation),
//! and `phone_home_type`. The control
//! plane makes those from what the stack reported and the app's roles when
//! the stack phones home ([`nuon_outputs`]); every key the stack reported
//! stays as it is, so ours (`runner_subnet_id`, `iam_role_arn_NAME`, ...)
//! are read too.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::stack_role_outputs;
use crate::app::Permissions;
pub use crate::app::template::cloud_account;

/// The cloud a runner type runs in, as Nuon's `phone_home_type` names it:
/// `aws`, `gcp`, `azure`, or `local` (a machine of the customer's own).
pub fn phone_home_type(runner_type: &str) -> &'static str {
    match runner_type {
        t if t.starts_with("aws") => "aws",
        t if t.starts_with("gcp") => "gcp",
        t if t.starts_with("azure") => "azure",
        _ => "local",
    }
}

/// The outputs a stack reported, in Nuon's contract: each reported key
/// as text, and beside them `phone_home_type`; on AWS the maps
/// `break_glass_role_arns` and `custom_role_arns` (each role the stack
/// makes, by its rendered name, to the ARN the stack reported for it) and
/// `install_inputs` (empty: our stack asks the customer for nothing);
/// `runner_subnet` as Nuon names `runner_subnet_id`. A key the stack
/// reported itself is never replaced.
pub fn nuon_outputs(
    reported: &BTreeMap<String, String>,
    runner_type: &str,
    permissions: &Permissions,
) -> BTreeMap<String, Value> {
    let mut out: BTreeMap<String, Value> = reported
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let kind = phone_home_type(runner_type);
    let mut add = |k: &str, v: Value| {
        out.entry(k.to_owned()).or_insert(v);
    };
    add("phone_home_type", Value::String(kind.into()));
    if let Some(subnet) = reported.get("runner_subnet_id") {
        add("runner_subnet", Value::String(subnet.clone()));
    }
    if kind == "aws" {
        let mut break_glass = Map::new();
        let mut custom = Map::new();
        for (role, is_break_glass, output) in stack_role_outputs(permissions) {
            let Some(arn) = reported.get(&output) else {
                continue;
            };
            let arn = Value::String(arn.clone());
            if is_break_glass {
                break_glass.insert(role.name.clone(), arn);
            } else if !matches!(
                role.kind.as_deref(),
                Some("provision" | "maintenance" | "deprovision")
            ) {
                custom.insert(role.name.clone(), arn);
            }
        }
        add("break_glass_role_arns", Value::Object(break_glass));
        add("custom_role_arns", Value::Object(custom));
        add("install_inputs", Value::Object(Map::new()));
        // Each custom nested stack's outputs, as the runner read them.
        let mut nested = Map::new();
        for (k, v) in reported {
            let Some(rest) = k.strip_prefix(NESTED_OUTPUTS) else {
                continue;
            };
            if let Some((stack, key)) = rest.split_once(".outputs.") {
                let entry = nested
                    .entry(stack.to_owned())
                    .or_insert_with(|| serde_json::json!({"outputs": {}}));
                entry["outputs"][key] = Value::String(v.clone());
            }
        }
        for k in reported.keys() {
            if let Some(stack) = k.strip_prefix(super::cloudformation::NESTED_STACK_ID) {
                nested
                    .entry(stack.to_owned())
                    .or_insert_with(|| serde_json::json!({"outputs": {}}));
            }
        }
        add("custom_nested_stacks", Value::Object(nested));
    }
    out
}

/// How the runner reports a custom nested stack's output `KEY` of stack
/// `NAME`: `custom_nested_stacks.NAME.outputs.KEY`.
pub const NESTED_OUTPUTS: &str = "custom_nested_stacks.";

/// What a stack would report, for rendering before there is one (`nuon
/// apps render`): each role's ARN made from its (rendered) name in a
/// stand-in account, the rest [`crate::app::template::KNOWN_AFTER_APPLY`],
/// in Nuon's contract.
pub fn stand_in_outputs(runner_type: &str, permissions: &Permissions) -> BTreeMap<String, Value> {
    let unknown = crate::app::template::KNOWN_AFTER_APPLY;
    // What each cloud's stack reports, as far as `cloud_account` reads it.
    let keys: &[&str] = match phone_home_type(runner_type) {
        "gcp" => &["project_id", "region", "runner_subnet_id"],
        "azure" => &["location", "resource_group_name", "runner_subnet_id"],
        _ => &[
            "region",
            "account_id",
            "vpc_id",
            "runner_subnet_id",
            "public_subnets",
            "private_subnets",
            "runner_iam_role_arn",
        ],
    };
    let mut reported: BTreeMap<String, String> = keys
        .iter()
        .map(|k| (k.to_string(), unknown.to_owned()))
        .collect();
    for (role, _, output) in stack_role_outputs(permissions) {
        reported.insert(
            output,
            format!("arn:aws:iam::000000000000:role/{}", role.name),
        );
    }
    nuon_outputs(&reported, runner_type, permissions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::test_role;

    fn reported(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn aws_outputs_have_nuons_maps_by_rendered_role_name() {
        let mut p = Permissions::default();
        p.roles.push(test_role("provision", "inst1-provision"));
        p.roles.push(test_role("custom", "inst1-reader"));
        p.break_glass.push(test_role("custom", "inst1-break-glass"));
        let r = reported(&[
            ("region", "eu-west-1"),
            ("account_id", "123456789012"),
            ("runner_subnet_id", "subnet-1"),
            (
                "provision_iam_role_arn",
                "arn:aws:iam::123456789012:role/inst1-provision",
            ),
            (
                "iam_role_arn_inst1_reader",
                "arn:aws:iam::123456789012:role/inst1-reader",
            ),
            (
                "break_glass_iam_role_arn_inst1_break_glass",
                "arn:aws:iam::123456789012:role/inst1-break-glass",
            ),
        ]);
        let out = nuon_outputs(&r, "aws-eks", &p);
        assert_eq!(
            out["break_glass_role_arns"],
            serde_json::json!({"inst1-break-glass": "arn:aws:iam::123456789012:role/inst1-break-glass"})
        );
        assert_eq!(
            out["custom_role_arns"],
            serde_json::json!({"inst1-reader": "arn:aws:iam::123456789012:role/inst1-reader"})
        );
        assert_eq!(out["install_inputs"], serde_json::json!({}));
        assert_eq!(out["runner_subnet"], "subnet-1");
        assert_eq!(out["phone_home_type"], "aws");
        // What the stack reported stays, ours included.
        assert_eq!(
            out["provision_iam_role_arn"],
            "arn:aws:iam::123456789012:role/inst1-provision"
        );
        assert_eq!(out["runner_subnet_id"], "subnet-1");
        assert_eq!(
            cloud_account(&out),
            serde_json::json!({"aws": {"region": "eu-west-1"}, "azure": {"location": ""}, "gcp": {"project_id": "", "region": ""}})
        );
        // A key the stack reported itself wins.
        let mine = reported(&[("custom_role_arns", "mine")]);
        assert_eq!(nuon_outputs(&mine, "aws", &p)["custom_role_arns"], "mine");
    }

    #[test]
    fn other_clouds_and_no_stack_yet() {
        let gcp = nuon_outputs(
            &reported(&[("project_id", "acme-prod"), ("region", "us-central1")]),
            "gcp",
            &Permissions::default(),
        );
        assert!(!gcp.contains_key("break_glass_role_arns"));
        assert_eq!(
            cloud_account(&gcp),
            serde_json::json!({"aws": {"region": ""}, "azure": {"location": ""}, "gcp": {"project_id": "acme-prod", "region": "us-central1"}})
        );
        let azure = nuon_outputs(
            &reported(&[("location", "westeurope")]),
            "azure-aks",
            &Permissions::default(),
        );
        assert_eq!(cloud_account(&azure)["azure"]["location"], "westeurope");
        // Before the stack phones home: every field there, empty.
        assert_eq!(
            cloud_account(&BTreeMap::new()),
            serde_json::json!({"aws": {"region": ""}, "azure": {"location": ""}, "gcp": {"project_id": "", "region": ""}})
        );
        // Outputs kept before phone_home_type: told by their keys.
        let old: BTreeMap<String, Value> = [("account_id", "1"), ("region", "us-east-2")]
            .into_iter()
            .map(|(k, v)| (k.into(), Value::from(v)))
            .collect();
        assert_eq!(cloud_account(&old)["aws"]["region"], "us-east-2");
    }

    #[test]
    fn nested_stack_outputs_the_runner_read_are_a_map_by_stack() {
        let out = nuon_outputs(
            &reported(&[
                (
                    "custom_nested_stack_id.rds_instance",
                    "arn:aws:cloudformation:us-east-2:1:stack/x/1",
                ),
                (
                    "custom_nested_stacks.rds_instance.outputs.DBEndpoint",
                    "db.example:5432",
                ),
                ("custom_nested_stacks.rds_instance.outputs.DBPort", "5432"),
                (
                    "custom_nested_stack_id.dns",
                    "arn:aws:cloudformation:us-east-2:1:stack/y/2",
                ),
            ]),
            "aws",
            &Permissions::default(),
        );
        assert_eq!(
            out["custom_nested_stacks"],
            serde_json::json!({
                "rds_instance": {"outputs": {"DBEndpoint": "db.example:5432", "DBPort": "5432"}},
                "dns": {"outputs": {}}
            })
        );
        // What was reported stays as it was.
        assert_eq!(
            out["custom_nested_stacks.rds_instance.outputs.DBPort"],
            "5432"
        );
    }
}
