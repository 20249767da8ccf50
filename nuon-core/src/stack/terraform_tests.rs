//! The Terraform flavour's tests.

use super::*;
use crate::app::Permissions;
use crate::stack::hcl::{hcl, raw, tf_name};
use crate::stack::{test_role as role, test_spec};

#[test]
fn the_same_outputs_as_the_cloudformation_template_and_policies_kept_literal() {
    let mut spec = test_spec();
    let mut p = role("provision", "acme-provision");
    p.policies = vec![
        json!({"name": "own", "contents": r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::${aws:username}/*"}]}"#}),
    ];
    spec.permissions = Permissions {
        roles: vec![p, role("maintenance", "acme-maint")],
        named_policies: vec![],
        break_glass: vec![role("custom", "acme-bg")],
    };
    spec.secrets = vec![crate::app::SecretDecl {
        name: "db_password".into(),
        display_name: None,
        description: "d".into(),
        required: true,
        auto_generate: false,
        format: None,
        default: None,
        kubernetes: Vec::new(),
        held_by: Some(crate::app::SecretHolder::Customer),
    }];
    let t = configuration(&spec).unwrap();
    let cfn: Vec<String> = super::super::cloudformation::template(&spec).unwrap()["Outputs"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["Description"].as_str().unwrap().to_owned())
        .collect();
    let ours: Vec<String> = t["output"]
        .as_object()
        .unwrap()
        .values()
        .map(|o| o["description"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ours.iter().collect::<std::collections::BTreeSet<_>>(),
        cfn.iter().collect()
    );
    // An IAM policy variable stays IAM's.
    let own = t["resource"]["aws_iam_role_policy"]["provision_role_0"]["policy"]
        .as_str()
        .unwrap();
    assert!(own.contains("$${aws:username}"), "{own}");
    // Break glass off by default; the customer's secret is a variable.
    assert_eq!(
        t["variable"]["break_glass_acme_bg_enabled"]["default"],
        false
    );
    assert_eq!(t["variable"]["secret_db_password"]["sensitive"], true);
    assert!(t["variable"]["secret_db_password"].get("default").is_none());
    // The token is a variable, never in the user data.
    let lt = t["resource"]["aws_launch_template"]["runner"].to_string();
    assert!(!lt.contains("stk_secret"), "{lt}");
    assert!(lt.contains("NUON_RUNNER_STACK_OUTPUTS"), "{lt}");
}

#[test]
fn the_ecs_runner_type_is_sent_to_cloudformation() {
    let mut spec = test_spec();
    spec.runner.runner_type = "aws-ecs".into();
    let e = files(&spec).unwrap_err();
    assert!(e.contains("--format cloudformation"), "{e}");
}

#[test]
fn expressions_and_literals_in_hcl() {
    let v = json!({"A": raw("var.x"), "B": ["${not}", 1]});
    assert_eq!(hcl(&v), r#"{"A" = var.x, "B" = ["$${not}", 1]}"#);
    assert_eq!(tf_name("BreakGlassRole2"), "break_glass_role2");
}
