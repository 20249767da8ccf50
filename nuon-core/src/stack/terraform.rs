//! The `terraform` flavour: the install stack of the `aws` and `aws-eks`
//! runner types as one Terraform configuration (`main.tf.json`, the AWS
//! provider), for a customer who applies their infrastructure with
//! Terraform rather than CloudFormation. It makes what the CloudFormation
//! template makes and reports the same outputs:
//!
//! - the network as Nuon's VPC (or a Nuon VPC template, as a nested
//!   CloudFormation stack), unless `vpc_id` and `subnet_id` are given;
//! - the runner on one EC2 instance of an Auto Scaling group, its user
//!   data the CloudFormation template's (it phones home with the outputs);
//! - the one-time token in a Secrets Manager secret only the runner reads;
//! - each role of `permissions`, trusted by the runner's role (and by
//!   `runner_principals`: a host of the customer's that runs the runner
//!   instead of the instance), with its policies and boundary; break-glass
//!   roles behind a variable each, off unless `enabled_in_stack`;
//! - the custom nested stacks, as CloudFormation stacks;
//! - each customer-held secret in Secrets Manager (`INSTALL_ID/NAME`):
//!   generated, or given as a sensitive variable; its ARN reported as
//!   `NAME_arn`. Every operation role may read them.
//!
//! Everything is tagged `nuon:install` and `nuon:app` (the provider's
//! default tags), so what the install made can be listed, and a destroy
//! removes secrets at once (no recovery window), leaving nothing.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::aws::{RolePolicies, ScriptRefs, logical_id, user_data};
use super::hcl::{Blocks, encoded, hcl, lit, raw, tf_name};
use super::{StackSpec, file, snake, stack_role_outputs};
use crate::app::Role;
use crate::wire::StackFile;

/// The configuration and how to apply it.
pub(crate) fn files(spec: &StackSpec) -> Result<(Vec<StackFile>, String), String> {
    if spec.runner.runner_type == "aws-ecs" {
        return Err(
            "the terraform form of the install stack runs the runner on EC2 (runner types aws and aws-eks); for aws-ecs, apply the cloudformation form (`--format cloudformation`)".into(),
        );
    }
    let config = configuration(spec)?;
    let text = serde_json::to_string_pretty(&config)
        .map_err(|e| format!("cannot write the configuration: {e}"))?;
    let instructions = format!(
        "In the AWS account and region that will run install {install}, with your own credentials: `terraform init && terraform apply` in this directory \
         (set the region with AWS_REGION). It makes the runner's network (unless you set vpc_id and subnet_id), its roles, the app's secrets \
         (give each one asked for as a variable: `-var secret_NAME=...`, or a terraform.tfvars file of your own) and the runner, \
         which phones home once with the one-time token the configuration carries (it expires in {ttl} and works once); the install's provision waits for it. \
         Keep the state: `terraform destroy` removes everything the stack made. To update the stack later, download it again (a new token) and apply it.",
        install = spec.install_name,
        ttl = spec.token_ttl,
    );
    // The configuration holds the one-time token: readable by its owner only.
    Ok((vec![file("main.tf.json", text + "\n", 0o600)], instructions))
}

const PARTITION: &str = "${data.aws_partition.current.partition}";
const ACCOUNT: &str = "${data.aws_caller_identity.current.account_id}";
const REGION: &str = "${data.aws_region.current.name}";

fn configuration(spec: &StackSpec) -> Result<Value, String> {
    let stack = spec.stack.clone().unwrap_or_default();
    let mut b = Blocks::default();
    // What the runner reports on phoning home: output name, value.
    let mut reported: Vec<(String, Value)> = Vec::new();

    for (name, description) in [
        (
            "vpc_id",
            "An existing VPC to run the runner in; empty: the stack makes one.",
        ),
        (
            "subnet_id",
            "With vpc_id: the subnet the runner runs in (it needs a way out to the control plane).",
        ),
        (
            "private_subnet_ids",
            "With vpc_id: the private subnets the app runs in, comma-separated (reported as private_subnets).",
        ),
        (
            "public_subnet_ids",
            "With vpc_id: the public subnets, comma-separated (reported as public_subnets).",
        ),
        (
            "runner_image_id",
            "The runner's machine image; empty: the latest Amazon Linux 2023.",
        ),
    ] {
        b.variable(
            name,
            json!({"type": "string", "default": "", "description": description}),
        );
    }
    b.variable(
        "vpc_cidr",
        json!({
            "type": "string", "default": "10.128.0.0/16",
            "description": "The CIDR of the VPC the stack makes (a /16 to a /21: eight /24 subnets are cut from it).",
            "validation": [{"condition": "${can(cidrsubnet(var.vpc_cidr, 24 - tonumber(split(\"/\", var.vpc_cidr)[1]), 7))}", "error_message": "vpc_cidr must be an IPv4 CIDR of /21 or larger (eight /24 subnets are cut from it)."}]
        }),
    );
    b.variable(
        "install_token",
        json!({"type": "string", "sensitive": true, "default": spec.install_token, "description": "The one-time token the runner phones home with (24 h, works once)."}),
    );
    b.variable(
        "instance_type",
        json!({"type": "string", "default": spec.runner.instance_type.clone().unwrap_or_else(|| "t3a.medium".into()), "description": "The runner's instance type."}),
    );
    let (url, sha) = super::aws::binary_parameters(spec, |default, description| {
        let mut v = json!({"type": "string", "description": description});
        if let Some(d) = default {
            v["default"] = json!(d);
        }
        v
    });
    b.variable("runner_binary_url", url);
    b.variable("runner_binary_sha256", sha);
    b.variable(
        "runner_principals",
        json!({"type": "list(string)", "default": [], "description": "IAM principals (ARNs) of yours that may act as this install's runner besides the stack's instance (a host of your own that runs nuon-runner): each may assume the runner's role and the operation roles."}),
    );

    for (kind, name) in [
        ("aws_partition", "current"),
        ("aws_region", "current"),
        ("aws_caller_identity", "current"),
    ] {
        b.data(kind, name, json!({}));
    }
    b.data(
        "aws_availability_zones",
        "available",
        json!({"state": "available"}),
    );
    b.data(
        "aws_ssm_parameter",
        "runner_image",
        json!({
            "count": "${var.runner_image_id == \"\" ? 1 : 0}",
            "name": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64"
        }),
    );
    b.locals
        .insert("create_vpc".into(), json!("${var.vpc_id == \"\"}"));

    // The network.
    match &stack.vpc_nested_template_url {
        Some(url) => {
            let mut params = Map::new();
            params.insert("VpcCIDR".into(), json!("${var.vpc_cidr}"));
            params.insert("RunnerSubnetCIDR".into(), json!(subnet_cidr("0")));
            for i in 1..=3 {
                params.insert(
                    format!("PublicSubnet{i}CIDR"),
                    json!(subnet_cidr(&i.to_string())),
                );
                params.insert(
                    format!("PrivateSubnet{i}CIDR"),
                    json!(subnet_cidr(&(i + 3).to_string())),
                );
            }
            params.insert("ClusterName".into(), json!(spec.install_id));
            params.insert("NuonInstallID".into(), json!(spec.install_id));
            params.insert("NuonAppID".into(), json!(spec.app_name));
            params.insert("NuonOrgID".into(), json!(spec.org_id));
            b.resource(
                "aws_cloudformation_stack",
                "vpc",
                json!({
                    "count": "${local.create_vpc ? 1 : 0}",
                    "name": format!("{}-vpc", stack_name(spec)),
                    "template_url": lit(url),
                    "parameters": params
                }),
            );
            let out = |name: &str, given: &str| {
                format!(
                    "${{local.create_vpc ? aws_cloudformation_stack.vpc[0].outputs[\"{name}\"] : var.{given}}}"
                )
            };
            b.locals
                .insert("vpc_id".into(), json!(out("VPC", "vpc_id")));
            b.locals
                .insert("subnet_id".into(), json!(out("RunnerSubnet", "subnet_id")));
            b.locals.insert(
                "public_subnets".into(),
                json!(out("PublicSubnets", "public_subnet_ids")),
            );
            b.locals.insert(
                "private_subnets".into(),
                json!(out("PrivateSubnets", "private_subnet_ids")),
            );
        }
        None => {
            network(&mut b);
            b.locals.insert(
                "vpc_id".into(),
                json!("${local.create_vpc ? aws_vpc.this[0].id : var.vpc_id}"),
            );
            b.locals.insert(
                "subnet_id".into(),
                json!("${local.create_vpc ? aws_subnet.runner[0].id : var.subnet_id}"),
            );
            b.locals.insert("public_subnets".into(), json!("${local.create_vpc ? join(\",\", aws_subnet.public[*].id) : var.public_subnet_ids}"));
            b.locals.insert("private_subnets".into(), json!("${local.create_vpc ? join(\",\", aws_subnet.private[*].id) : var.private_subnet_ids}"));
        }
    }
    b.resource(
        "aws_security_group",
        "runner",
        json!({
            "name_prefix": "nuon-runner-",
            "description": lit(&format!("nuon runner of install {}: no way in, out to the control plane", spec.install_name)),
            "vpc_id": "${local.vpc_id}",
            "egress": [{
                "description": "the control plane, the vendor artifact store and the cloud APIs",
                "protocol": "-1", "from_port": 0, "to_port": 0, "cidr_blocks": ["0.0.0.0/0"],
                "ipv6_cidr_blocks": [], "prefix_list_ids": [], "security_groups": [], "self": false
            }],
            "lifecycle": [{"precondition": [{
                "condition": "${var.vpc_id == \"\" || var.subnet_id != \"\"}",
                "error_message": "With vpc_id, give subnet_id too: the subnet the runner runs in."
            }]}]
        }),
    );

    // The one-time token: read by the runner only.
    b.resource(
        "aws_secretsmanager_secret",
        "install_token",
        json!({
            "name_prefix": format!("nuon-{}-token-", spec.install_id),
            "description": lit(&format!("The one-time token of install {}'s runner (used once, at its first start)", spec.install_name)),
            "recovery_window_in_days": 0
        }),
    );
    b.resource(
        "aws_secretsmanager_secret_version",
        "install_token",
        json!({"secret_id": "${aws_secretsmanager_secret.install_token.id}", "secret_string": "${var.install_token}"}),
    );

    // The roles of `permissions` and `break_glass`, and the runner's.
    let mut used = BTreeMap::new();
    let roles: Vec<(String, &Role, bool, String)> = stack_role_outputs(&spec.permissions)
        .into_iter()
        .map(|(role, break_glass, output)| {
            let prefix = if break_glass {
                "BreakGlassRole"
            } else {
                kind_prefix(role)
            };
            (
                tf_name(&logical_id(prefix, &mut used)),
                role,
                break_glass,
                output,
            )
        })
        .collect();
    let arn_of = |role: &Role| format!("arn:{PARTITION}:iam::{ACCOUNT}:role/{}", lit(&role.name));
    runner_role(spec, &mut b, &roles, &arn_of, &stack);
    for (id, role, break_glass, output) in &roles {
        let count = if *break_glass {
            let var = format!("break_glass_{}_enabled", snake(&role.name));
            b.variable(
                &var,
                json!({
                    "type": "bool",
                    "default": role.enabled_in_stack == Some(true),
                    "description": lit(&format!("Break-glass role {}: true creates it (the vendor may then act with it, once the runner turns it on too); false removes it.", role.name))
                }),
            );
            format!("${{var.{var} ? 1 : 0}}")
        } else {
            "1".to_owned()
        };
        iam_role(spec, &mut b, id, role, *break_glass, &count)?;
        // A break-glass role's ARN by name, whether it is on or not: what
        // the runner is told must not change with the customer's switch.
        let value = if *break_glass {
            json!(arn_of(role))
        } else {
            json!(format!("${{aws_iam_role.{id}[0].arn}}"))
        };
        reported.push((output.clone(), value));
    }

    // Custom nested stacks, in `index` order.
    let mut nested = stack.custom_nested_stacks.clone();
    nested.sort_by_key(|n| n.index);
    for n in &nested {
        let id = format!("nested_{}", snake(&n.name));
        let mut body = json!({
            "name": format!("{}-{}", stack_name(spec), snake(&n.name).replace('_', "-")),
            "template_url": lit(&n.template_url),
            "capabilities": ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"]
        });
        if !n.parameters.is_empty() {
            let params: Map<String, Value> = (n.parameters.iter())
                .map(|(k, v)| (k.clone(), json!(lit(v))))
                .collect();
            body["parameters"] = Value::Object(params);
        }
        b.resource("aws_cloudformation_stack", &id, body);
        reported.push((
            format!("{}{}", super::cloudformation::NESTED_STACK_ID, n.name),
            json!(format!("${{aws_cloudformation_stack.{id}.id}}")),
        ));
    }

    secrets(spec, &mut b, &mut reported);

    reported.splice(
        0..0,
        [
            ("region".to_owned(), json!(REGION)),
            ("account_id".to_owned(), json!(ACCOUNT)),
            ("vpc_id".to_owned(), json!("${local.vpc_id}")),
            ("runner_subnet_id".to_owned(), json!("${local.subnet_id}")),
            (
                "public_subnets".to_owned(),
                json!("${local.public_subnets}"),
            ),
            (
                "private_subnets".to_owned(),
                json!("${local.private_subnets}"),
            ),
            (
                "runner_iam_role_arn".to_owned(),
                json!("${aws_iam_role.runner.arn}"),
            ),
            ("stack_name".to_owned(), json!(stack_name(spec))),
        ],
    );
    ec2_runner(spec, &mut b, &reported);

    let mut outputs = Map::new();
    for (name, value) in &reported {
        // An output's name is an identifier: a nested stack's dot is `__`.
        outputs.insert(
            snake(&name.replace('.', "__")),
            json!({"description": format!(".nuon.install_stack.outputs.{name}"), "value": value}),
        );
    }
    let stack_title = if stack.name.is_empty() {
        "nuon"
    } else {
        stack.name.as_str()
    };
    Ok(json!({
        "//": lit(&format!(
            "{stack_title}: the install stack of install {} ({}) of app {}, made by the control plane; it runs the install's nuon runner",
            spec.install_name, spec.install_id, spec.app_name
        )),
        "terraform": {
            "required_version": ">= 1.5",
            "required_providers": {"aws": {"source": "hashicorp/aws", "version": ">= 5.0"}}
        },
        "provider": {"aws": {"default_tags": {"tags": {
            "nuon:install": spec.install_id,
            "nuon:app": lit(&spec.app_name)
        }}}},
        "variable": b.variables,
        "locals": b.locals,
        "data": b.data,
        "resource": b.resources,
        "output": outputs,
    }))
}

/// The /24 numbered `index` (a Terraform expression) of the VPC's CIDR:
/// 0 the runner's, 1 to 3 the public subnets, 4 to 6 the private ones.
fn subnet_cidr(index: &str) -> String {
    format!("${{cidrsubnet(var.vpc_cidr, 24 - tonumber(split(\"/\", var.vpc_cidr)[1]), {index})}}")
}

fn stack_name(spec: &StackSpec) -> String {
    format!("nuon-{}", spec.install_name)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(100)
        .collect()
}

fn kind_prefix(role: &Role) -> &'static str {
    match role.kind.as_deref() {
        Some("provision") => "ProvisionRole",
        Some("maintenance") => "MaintenanceRole",
        Some("deprovision") => "DeprovisionRole",
        _ => "CustomRole",
    }
}

/// Nuon's VPC, made when no VPC is given: a public subnet for the runner;
/// three public and three private subnets, each in its own zone, the
/// private ones out through a NAT gateway.
fn network(b: &mut Blocks) {
    let made = "${local.create_vpc ? 1 : 0}";
    b.resource(
        "aws_vpc",
        "this",
        json!({"count": made, "cidr_block": "${var.vpc_cidr}", "enable_dns_support": true, "enable_dns_hostnames": true}),
    );
    b.resource(
        "aws_internet_gateway",
        "this",
        json!({"count": made, "vpc_id": "${aws_vpc.this[0].id}"}),
    );
    b.resource(
        "aws_subnet",
        "runner",
        json!({
            "count": made, "vpc_id": "${aws_vpc.this[0].id}", "cidr_block": subnet_cidr("0"),
            "availability_zone": "${data.aws_availability_zones.available.names[0]}",
            "map_public_ip_on_launch": true
        }),
    );
    b.resource(
        "aws_route_table",
        "public",
        json!({"count": made, "vpc_id": "${aws_vpc.this[0].id}"}),
    );
    b.resource(
        "aws_route",
        "public",
        json!({"count": made, "route_table_id": "${aws_route_table.public[0].id}", "destination_cidr_block": "0.0.0.0/0", "gateway_id": "${aws_internet_gateway.this[0].id}"}),
    );
    b.resource(
        "aws_route_table_association",
        "runner",
        json!({"count": made, "subnet_id": "${aws_subnet.runner[0].id}", "route_table_id": "${aws_route_table.public[0].id}"}),
    );
    let three = "${local.create_vpc ? 3 : 0}";
    for (name, first, public) in [("public", 1, true), ("private", 4, false)] {
        let role = if public { "elb" } else { "internal-elb" };
        b.resource(
            "aws_subnet",
            name,
            json!({
                "count": three, "vpc_id": "${aws_vpc.this[0].id}",
                "cidr_block": subnet_cidr(&format!("count.index + {first}")),
                "availability_zone": "${data.aws_availability_zones.available.names[count.index % length(data.aws_availability_zones.available.names)]}",
                "map_public_ip_on_launch": public,
                "tags": {format!("kubernetes.io/role/{role}"): "1"}
            }),
        );
    }
    b.resource(
        "aws_eip",
        "nat",
        json!({"count": made, "domain": "vpc", "depends_on": ["aws_internet_gateway.this"]}),
    );
    b.resource(
        "aws_nat_gateway",
        "this",
        json!({"count": made, "allocation_id": "${aws_eip.nat[0].id}", "subnet_id": "${aws_subnet.public[0].id}"}),
    );
    b.resource(
        "aws_route_table",
        "private",
        json!({"count": made, "vpc_id": "${aws_vpc.this[0].id}"}),
    );
    b.resource(
        "aws_route",
        "private",
        json!({"count": made, "route_table_id": "${aws_route_table.private[0].id}", "destination_cidr_block": "0.0.0.0/0", "nat_gateway_id": "${aws_nat_gateway.this[0].id}"}),
    );
    for name in ["public", "private"] {
        b.resource(
            "aws_route_table_association",
            name,
            json!({"count": three, "subnet_id": format!("${{aws_subnet.{name}[count.index].id}}"), "route_table_id": format!("${{aws_route_table.{name}[0].id}}")}),
        );
    }
}

/// The runner's own role: it may read its token, assume the stack's roles
/// (a break-glass one while the customer's variable turns it on) and
/// describe the nested stacks; nothing else.
fn runner_role(
    spec: &StackSpec,
    b: &mut Blocks,
    roles: &[(String, &Role, bool, String)],
    arn_of: &dyn Fn(&Role) -> String,
    stack: &crate::app::Stack,
) {
    // One statement naming both principals (with the customer's own
    // hosts, when there are any).
    let trust = |principal: Value| {
        hcl(&json!({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}]
        }))
    };
    let service = json!({"Service": "ec2.amazonaws.com"});
    let with_hosts = json!({"Service": "ec2.amazonaws.com", "AWS": raw("var.runner_principals")});
    let trust = format!(
        "${{length(var.runner_principals) > 0 ? jsonencode({}) : jsonencode({})}}",
        trust(with_hosts),
        trust(service)
    );
    b.resource(
        "aws_iam_role",
        "runner",
        json!({
            "name": format!("nuon-runner-{}", spec.install_id).chars().take(64).collect::<String>(),
            "description": lit(&format!("The nuon runner of install {}: assumes the role of each job's operation", spec.install_name)),
            "assume_role_policy": trust
        }),
    );
    let mut statements = vec![json!({
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": "${aws_secretsmanager_secret.install_token.arn}"
    })];
    let assumable: Vec<Value> = roles
        .iter()
        .filter(|(_, _, bg, _)| !bg)
        .map(|(_, role, _, _)| json!(arn_of(role)))
        .collect();
    if !assumable.is_empty() {
        statements
            .push(json!({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": assumable}));
    }
    if !stack.custom_nested_stacks.is_empty() {
        let ids: Vec<Value> = (stack.custom_nested_stacks.iter())
            .map(|n| {
                json!(format!(
                    "${{aws_cloudformation_stack.nested_{}.id}}",
                    snake(&n.name)
                ))
            })
            .collect();
        statements.push(
            json!({"Effect": "Allow", "Action": "cloudformation:DescribeStacks", "Resource": ids}),
        );
    }
    b.resource(
        "aws_iam_role_policy",
        "runner",
        json!({
            "name": "nuon-runner",
            "role": "${aws_iam_role.runner.id}",
            "policy": serde_json::to_string(&json!({"Version": "2012-10-17", "Statement": statements})).expect("JSON")
        }),
    );
    for (id, role, _, _) in roles.iter().filter(|(_, _, bg, _)| *bg) {
        let var = format!("break_glass_{}_enabled", snake(&role.name));
        let doc = json!({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": arn_of(role)}]});
        b.resource(
            "aws_iam_role_policy",
            &format!("runner_{id}"),
            json!({
                "count": format!("${{var.{var} ? 1 : 0}}"),
                "name": format!("nuon-runner-{}", snake(&role.name)),
                "role": "${aws_iam_role.runner.id}",
                "policy": serde_json::to_string(&doc).expect("JSON")
            }),
        );
    }
    b.resource(
        "aws_iam_role_policy_attachment",
        "runner_ssm",
        json!({"role": "${aws_iam_role.runner.name}", "policy_arn": format!("arn:{PARTITION}:iam::aws:policy/AmazonSSMManagedInstanceCore")}),
    );
    b.resource(
        "aws_iam_instance_profile",
        "runner",
        json!({"name": format!("nuon-runner-{}", spec.install_id).chars().take(128).collect::<String>(), "role": "${aws_iam_role.runner.name}"}),
    );
}

/// A role of `permissions`: trusted by the runner's role and
/// `runner_principals`, its policies, managed policies and boundary, and
/// the read of the install's customer-held secrets.
fn iam_role(
    spec: &StackSpec,
    b: &mut Blocks,
    id: &str,
    role: &Role,
    break_glass: bool,
    count: &str,
) -> Result<(), String> {
    let policies = RolePolicies::of(spec, role)?;
    let trust = json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Principal": {"AWS": raw("concat([aws_iam_role.runner.arn], var.runner_principals)")},
            "Action": "sts:AssumeRole"
        }]
    });
    let mut body = json!({
        "count": count,
        "name": lit(&role.name),
        "description": lit(&role.description.chars().take(1000).collect::<String>()),
        "assume_role_policy": encoded(&trust),
        "max_session_duration": 43200,
        "tags": {"nuon:role-type": if break_glass { "break-glass" } else { role.kind.as_deref().unwrap_or("custom") }}
    });
    if let Some(doc) = &policies.boundary {
        let boundary = format!("{id}_boundary");
        b.resource(
            "aws_iam_policy",
            &boundary,
            json!({
                "count": count,
                "name_prefix": format!("{}-boundary-", lit(&role.name)).chars().take(90).collect::<String>(),
                "description": lit(&format!("The permissions boundary of role {}", role.name)),
                "policy": lit(&doc.to_string())
            }),
        );
        body["permissions_boundary"] = json!(format!("${{aws_iam_policy.{boundary}[0].arn}}"));
    }
    b.resource("aws_iam_role", id, body);
    let on_role = format!("${{aws_iam_role.{id}[0].id}}");
    for (i, (name, doc)) in policies.inline.iter().enumerate() {
        b.resource(
            "aws_iam_role_policy",
            &format!("{id}_{i}"),
            json!({"count": count, "name": lit(name), "role": on_role, "policy": lit(&doc.to_string())}),
        );
    }
    for (i, m) in policies.managed.iter().enumerate() {
        let arn = if m.starts_with("arn:") {
            lit(m)
        } else {
            format!("arn:{PARTITION}:iam::aws:policy/{}", lit(m))
        };
        b.resource(
            "aws_iam_role_policy_attachment",
            &format!("{id}_managed_{i}"),
            json!({"count": count, "role": format!("${{aws_iam_role.{id}[0].name}}"), "policy_arn": arn}),
        );
    }
    if let Some(read) =
        super::aws::secrets_statement(spec, [PARTITION, REGION, ACCOUNT], |s| json!(s))
    {
        let doc = json!({"Version": "2012-10-17", "Statement": [read]});
        b.resource(
            "aws_iam_role_policy",
            &format!("{id}_customer_secrets"),
            json!({"count": count, "name": "nuon-customer-secrets", "role": on_role, "policy": serde_json::to_string(&doc).expect("JSON")}),
        );
    }
    Ok(())
}

/// Each customer-held secret in Secrets Manager (`INSTALL_ID/NAME`):
/// generated by the stack (`auto_generate`), else a sensitive variable
/// (required, or made only when given); its ARN reported as `NAME_arn`.
fn secrets(spec: &StackSpec, b: &mut Blocks, reported: &mut Vec<(String, Value)>) {
    for secret in spec.secrets.iter().filter(|s| s.held_by_customer()) {
        let id = format!("secret_{}", snake(&secret.name));
        let mut count = None;
        let value = if secret.auto_generate {
            b.data(
                "aws_secretsmanager_random_password",
                &id,
                json!({"password_length": 63, "exclude_punctuation": true}),
            );
            format!("${{data.aws_secretsmanager_random_password.{id}.random_password}}")
        } else {
            let mut var = json!({
                "type": "string",
                "sensitive": true,
                "description": lit(&format!("{}: {}", secret.display_name.as_deref().unwrap_or(&secret.name), secret.description)),
            });
            if let Some(d) = &secret.default {
                var["default"] = json!(lit(d));
            } else if !secret.required {
                var["default"] = json!("");
            } else {
                var["validation"] = json!([{"condition": format!("${{length(var.{id}) > 0}}"), "error_message": format!("Secret {} is required.", secret.name)}]);
            }
            b.variable(&id, var);
            if !secret.required && secret.default.is_none() {
                count = Some(format!("${{var.{id} != \"\" ? 1 : 0}}"));
            }
            format!("${{var.{id}}}")
        };
        let mut body = json!({
            "name": format!("{}/{}", spec.install_id, lit(&secret.name)),
            "description": lit(&secret.description),
            "recovery_window_in_days": 0
        });
        let mut version = json!({
            "secret_id": format!("${{aws_secretsmanager_secret.{id}[0].id}}"),
            "secret_string": value
        });
        if secret.auto_generate {
            // Generated once: a later plan reads a new random password.
            version["lifecycle"] = json!([{"ignore_changes": ["secret_string"]}]);
        }
        let counted = count.clone().unwrap_or_else(|| "1".into());
        body["count"] = json!(counted);
        version["count"] = json!(counted);
        b.resource("aws_secretsmanager_secret", &id, body);
        b.resource("aws_secretsmanager_secret_version", &id, version);
        let arn = match count {
            Some(_) => format!(
                "${{length(aws_secretsmanager_secret.{id}) > 0 ? aws_secretsmanager_secret.{id}[0].arn : \"none\"}}"
            ),
            None => format!("${{aws_secretsmanager_secret.{id}[0].arn}}"),
        };
        reported.push((format!("{}_arn", secret.name), json!(arn)));
    }
}

/// The runner on one EC2 instance of an Auto Scaling group; its user data
/// (the CloudFormation template's) installs the binary and the unit.
fn ec2_runner(spec: &StackSpec, b: &mut Blocks, reported: &[(String, Value)]) {
    let outputs_text: Vec<String> = reported
        .iter()
        .map(|(name, value)| format!("{name}={}", value.as_str().unwrap_or_default()))
        .collect();
    let script = user_data(
        spec,
        &ScriptRefs {
            binary_url: "${var.runner_binary_url}",
            binary_sha256: "${var.runner_binary_sha256}",
            region: REGION,
            token_secret: "${aws_secretsmanager_secret.install_token.arn}",
            api_url: &lit(&spec.runner_api),
            signing_key: &lit(&spec.signing_key),
            outputs: &outputs_text.join(" "),
        },
    );
    // The script's own text is literal but for the references it was given.
    let script = script.replace("%{", "%%{");
    b.resource(
        "aws_launch_template",
        "runner",
        json!({
            "name_prefix": "nuon-runner-",
            "image_id": "${var.runner_image_id != \"\" ? var.runner_image_id : data.aws_ssm_parameter.runner_image[0].value}",
            "instance_type": "${var.instance_type}",
            "iam_instance_profile": [{"arn": "${aws_iam_instance_profile.runner.arn}"}],
            "vpc_security_group_ids": ["${aws_security_group.runner.id}"],
            "metadata_options": [{"http_tokens": "required", "http_put_response_hop_limit": 1, "http_endpoint": "enabled"}],
            "block_device_mappings": [{"device_name": "/dev/xvda", "ebs": [{"volume_size": 40, "volume_type": "gp3", "encrypted": true}]}],
            "user_data": format!("${{base64encode({})}}", Value::String(script)),
            "tag_specifications": [{"resource_type": "instance", "tags": {"Name": lit(&format!("nuon-runner-{}", spec.install_name))}}]
        }),
    );
    b.resource(
        "aws_autoscaling_group",
        "runner",
        json!({
            "name_prefix": "nuon-runner-",
            "min_size": 1,
            "max_size": 1,
            "desired_capacity": 1,
            "vpc_zone_identifier": ["${local.subnet_id}"],
            // The runner phones home by itself: nothing to wait for here.
            "wait_for_capacity_timeout": "0",
            // A destroy terminates the instance with the group.
            "force_delete": true,
            "launch_template": [{"id": "${aws_launch_template.runner.id}", "version": "${aws_launch_template.runner.latest_version}"}],
            "instance_refresh": [{"strategy": "Rolling", "preferences": [{"min_healthy_percentage": 0}]}],
            "tag": [
                {"key": "Name", "value": lit(&format!("nuon-runner-{}", spec.install_name)), "propagate_at_launch": true},
                {"key": "nuon:install", "value": spec.install_id, "propagate_at_launch": true}
            ]
        }),
    );
}

#[cfg(test)]
#[path = "terraform_tests.rs"]
mod tests;
