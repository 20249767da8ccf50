//! The `cloudformation` flavour: one AWS CloudFormation template (JSON),
//! as Nuon's install stack is, for the `aws`, `aws-ecs` and `aws-eks`
//! runner types:
//!
//! - a VPC with a public subnet for the runner, unless the customer gives
//!   `VpcId` and `SubnetId` (or `stack.toml` names a
//!   `vpc_nested_template_url`, whose `VpcId` and `RunnerSubnetId` outputs
//!   are used);
//! - the runner: an Auto Scaling group of one EC2 instance (`aws`,
//!   `aws-eks`) whose user data installs the binary and its systemd unit,
//!   or an ECS Fargate service (`aws-ecs`) whose work directory is on EFS;
//!   either way the runner keeps its token and spool across restarts and
//!   phones home with the stack's outputs;
//! - the one-time token in a Secrets Manager secret only the runner reads;
//! - each role of `permissions` (with its inline and managed policies, the
//!   config's named policies and its permissions boundary) trusted by the
//!   runner's role only; break-glass roles behind a parameter each, off
//!   unless `enabled_in_stack`;
//! - `custom_nested_stacks`, in `index` order.
//!
//! Re-applying a newly downloaded template replaces the instance (or the
//! task), which phones home with the new token: the runner token rotates
//! and the outputs are reported again.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{StackSpec, file, snake, stack_role_outputs};
use crate::app::Role;
use crate::wire::StackFile;

/// The template and how to apply it.
pub(crate) fn files(spec: &StackSpec) -> Result<(Vec<StackFile>, String), String> {
    let template = template(spec)?;
    let text = serde_json::to_string_pretty(&template)
        .map_err(|e| format!("cannot write the template: {e}"))?;
    let name = stack_name(spec);
    let instructions = format!(
        "In the AWS account and region that will run install {install}: create a CloudFormation stack named {name} from template.json \
         (`aws cloudformation create-stack --stack-name {name} --template-body file://template.json --capabilities CAPABILITY_NAMED_IAM`, \
         or the console's \"Upload a template file\"). It makes the runner's network (unless you give VpcId and SubnetId), its roles and the runner; \
         the runner phones home once with the one-time token the template carries (it expires in {ttl} and works once) and the install's provision waits for it. \
         To update the stack later, download it again (a new token) and update the stack with it.",
        install = spec.install_name,
        ttl = spec.token_ttl,
    );
    // The template holds the one-time token: readable by its owner only.
    Ok((
        vec![file("template.json", text + "\n", 0o600)],
        instructions,
    ))
}

fn stack_name(spec: &StackSpec) -> String {
    let base: String = format!("nuon-{}", spec.install_name)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(120)
        .collect();
    base
}

/// A CloudFormation logical id from a role: by its kind for the first of
/// each operation kind, numbered for the rest.
fn logical_id(prefix: &str, used: &mut BTreeMap<String, usize>) -> String {
    let n = used.entry(prefix.to_owned()).or_insert(0);
    *n += 1;
    if *n == 1 {
        prefix.to_owned()
    } else {
        format!("{prefix}{n}")
    }
}

fn role_prefix(role: &Role, break_glass: bool) -> &'static str {
    if break_glass {
        return "BreakGlassRole";
    }
    match role.kind.as_deref() {
        Some("provision") => "ProvisionRole",
        Some("maintenance") => "MaintenanceRole",
        Some("deprovision") => "DeprovisionRole",
        _ => "CustomRole",
    }
}

/// A policy document from a config's text: JSON, or an error naming it.
fn document(text: &str, what: &str) -> Result<Value, String> {
    let doc: Value = serde_json::from_str(text.trim()).map_err(|e| {
        format!("{what} is not a JSON IAM policy document ({e}): give the document itself, as AWS takes it")
    })?;
    if !doc.is_object() {
        return Err(format!(
            "{what} is not a JSON object: an IAM policy document is one"
        ));
    }
    Ok(doc)
}

/// The runner's platform: EC2 or Fargate.
fn fargate(spec: &StackSpec) -> bool {
    spec.runner.runner_type == "aws-ecs"
}

fn template(spec: &StackSpec) -> Result<Value, String> {
    let stack = spec.stack.clone().unwrap_or_default();
    let fargate = fargate(spec);
    let mut parameters = Map::new();
    let mut conditions = Map::new();
    let mut resources = Map::new();
    let mut outputs = Map::new();
    // What the runner reports on phoning home: output name, value.
    let mut reported: Vec<(String, Value)> = Vec::new();

    parameters.insert(
        "VpcId".into(),
        json!({"Type": "String", "Default": "", "Description": "An existing VPC to run the runner in; empty: the stack makes one."}),
    );
    parameters.insert(
        "SubnetId".into(),
        json!({"Type": "String", "Default": "", "Description": "With VpcId: the subnet the runner runs in (it needs a way out to the control plane)."}),
    );
    parameters.insert(
        "VpcCidr".into(),
        json!({"Type": "String", "Default": "10.128.0.0/16", "AllowedPattern": "^\\d+\\.\\d+\\.\\d+\\.\\d+/\\d+$", "Description": "The CIDR of the VPC the stack makes."}),
    );
    parameters.insert(
        "InstallToken".into(),
        json!({"Type": "String", "NoEcho": true, "Default": spec.install_token, "Description": "The one-time token the runner phones home with (24 h, works once)."}),
    );
    let given = |p: &str| json!({"Fn::Not": [{"Fn::Equals": [{"Ref": p}, ""]}]});
    conditions.insert(
        "UseExistingVpc".into(),
        json!({"Fn::And": [given("VpcId"), given("SubnetId")]}),
    );
    conditions.insert(
        "CreateVpc".into(),
        json!({"Fn::Not": [{"Condition": "UseExistingVpc"}]}),
    );
    let rules = json!({
        "SubnetWithVpc": {
            "RuleCondition": given("VpcId"),
            "Assertions": [{"Assert": given("SubnetId"), "AssertDescription": "With VpcId, give SubnetId too: the subnet the runner runs in."}]
        },
        "VpcWithSubnet": {
            "RuleCondition": given("SubnetId"),
            "Assertions": [{"Assert": given("VpcId"), "AssertDescription": "With SubnetId, give VpcId too: the VPC of that subnet."}]
        }
    });

    // The network.
    let (vpc, subnet) = match &stack.vpc_nested_template_url {
        Some(url) => {
            resources.insert(
                "VpcStack".into(),
                json!({
                    "Type": "AWS::CloudFormation::Stack",
                    "Condition": "CreateVpc",
                    "Properties": {
                        "TemplateURL": url,
                        "Parameters": {"VpcCidr": {"Ref": "VpcCidr"}, "InstallId": spec.install_id}
                    }
                }),
            );
            (
                json!({"Fn::If": ["UseExistingVpc", {"Ref": "VpcId"}, {"Fn::GetAtt": ["VpcStack", "Outputs.VpcId"]}]}),
                json!({"Fn::If": ["UseExistingVpc", {"Ref": "SubnetId"}, {"Fn::GetAtt": ["VpcStack", "Outputs.RunnerSubnetId"]}]}),
            )
        }
        None => {
            network(&mut resources, spec);
            (
                json!({"Fn::If": ["UseExistingVpc", {"Ref": "VpcId"}, {"Ref": "Vpc"}]}),
                json!({"Fn::If": ["UseExistingVpc", {"Ref": "SubnetId"}, {"Ref": "RunnerSubnet"}]}),
            )
        }
    };
    resources.insert(
        "RunnerSecurityGroup".into(),
        json!({
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": format!("nuon runner of install {}: no way in, out to the control plane", spec.install_name),
                "VpcId": vpc,
                "SecurityGroupEgress": [{"IpProtocol": "-1", "CidrIp": "0.0.0.0/0", "Description": "the control plane, the vendor's artifact store, the cloud's APIs"}],
                "Tags": tags(spec)
            }
        }),
    );

    // The one-time token: read by the runner only.
    resources.insert(
        "InstallTokenSecret".into(),
        json!({
            "Type": "AWS::SecretsManager::Secret",
            "Properties": {
                "Description": format!("The one-time token of install {}'s runner (used once, at its first start)", spec.install_name),
                "SecretString": {"Ref": "InstallToken"},
                "Tags": tags(spec)
            }
        }),
    );

    // The runner's own role: it may assume the stack's roles and read
    // its token; nothing else.
    let principal = if fargate {
        "ecs-tasks.amazonaws.com"
    } else {
        "ec2.amazonaws.com"
    };
    let mut roles = Vec::new();
    let mut used = BTreeMap::new();
    for (role, break_glass, output) in stack_role_outputs(&spec.permissions) {
        let id = logical_id(role_prefix(role, break_glass), &mut used);
        roles.push((id, role, break_glass, output));
    }
    // By name, not by reference: the roles trust the runner's role, and a
    // reference both ways would be a cycle. A break-glass role only while
    // the customer's parameter turns it on (the runner's policy changes,
    // not the instance).
    let arn_of = |role: &Role| json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:iam::${{AWS::AccountId}}:role/{}", role.name)});
    let assumable: Vec<Value> = roles
        .iter()
        .filter(|(_, _, bg, _)| !bg)
        .map(|(_, role, _, _)| arn_of(role))
        .collect();
    let mut runner_statements = vec![json!({
        "Effect": "Allow",
        "Action": "secretsmanager:GetSecretValue",
        "Resource": {"Ref": "InstallTokenSecret"}
    })];
    if !assumable.is_empty() {
        runner_statements
            .push(json!({"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": assumable}));
    }
    for (id, role, _, _) in roles.iter().filter(|(_, _, bg, _)| *bg) {
        runner_statements.push(json!({"Fn::If": [
            format!("{id}Enabled"),
            {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": arn_of(role)},
            {"Ref": "AWS::NoValue"}
        ]}));
    }
    let mut runner_role = json!({
        "Type": "AWS::IAM::Role",
        "Properties": {
            "Description": format!("The nuon runner of install {}: assumes the role of each job's operation", spec.install_name),
            "AssumeRolePolicyDocument": {
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Principal": {"Service": principal}, "Action": "sts:AssumeRole"}]
            },
            "Policies": [{"PolicyName": "nuon-runner", "PolicyDocument": {"Version": "2012-10-17", "Statement": runner_statements}}],
            "Tags": tags(spec)
        }
    });
    if fargate {
        runner_role["Properties"]["ManagedPolicyArns"] = json!([
            {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/service-role/AmazonECSTaskExecutionRolePolicy"}
        ]);
    } else {
        runner_role["Properties"]["ManagedPolicyArns"] = json!([
            {"Fn::Sub": "arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore"}
        ]);
    }
    resources.insert("RunnerRole".into(), runner_role);

    // The roles of `permissions` and `break_glass`.
    for (id, role, break_glass, output) in &roles {
        let role_resources = iam_role(spec, id, role, *break_glass)?;
        if *break_glass {
            let param = format!("{id}Enabled");
            parameters.insert(
                param.clone(),
                json!({
                    "Type": "String",
                    "AllowedValues": ["true", "false"],
                    "Default": if role.enabled_in_stack == Some(true) { "true" } else { "false" },
                    "Description": format!("Break-glass role {}: true creates it (the vendor may then act with it); false removes it.", role.name)
                }),
            );
            conditions.insert(
                param.clone(),
                json!({"Fn::Equals": [{"Ref": param}, "true"]}),
            );
        }
        for (rid, mut r) in role_resources {
            if *break_glass {
                r["Condition"] = json!(format!("{id}Enabled"));
            }
            resources.insert(rid, r);
        }
        let output = output.clone();
        // A break-glass role's ARN by name, whether it is on or not: what
        // the runner is told must not change with the customer's switch
        // (new user data would replace the instance).
        let value = if *break_glass {
            arn_of(role)
        } else {
            json!({"Fn::GetAtt": [id, "Arn"]})
        };
        reported.push((output, value));
    }

    // Custom nested stacks, in `index` order.
    let mut nested = stack.custom_nested_stacks.clone();
    nested.sort_by_key(|n| n.index);
    let mut nested_used = BTreeMap::new();
    for n in &nested {
        let id = logical_id(&format!("Nested{}", camel(&n.name)), &mut nested_used);
        let mut props = json!({"TemplateURL": n.template_url});
        if !n.parameters.is_empty() {
            props["Parameters"] = json!(n.parameters);
        }
        resources.insert(
            id,
            json!({"Type": "AWS::CloudFormation::Stack", "Properties": props}),
        );
    }

    reported.splice(
        0..0,
        [
            ("region".to_owned(), json!({"Ref": "AWS::Region"})),
            ("account_id".to_owned(), json!({"Ref": "AWS::AccountId"})),
            ("vpc_id".to_owned(), vpc.clone()),
            ("runner_subnet_id".to_owned(), subnet.clone()),
            (
                "runner_iam_role_arn".to_owned(),
                json!({"Fn::GetAtt": ["RunnerRole", "Arn"]}),
            ),
            ("stack_name".to_owned(), json!({"Ref": "AWS::StackName"})),
        ],
    );
    if fargate {
        ecs_runner(spec, &mut parameters, &mut resources, &subnet, &reported);
    } else {
        ec2_runner(spec, &mut parameters, &mut resources, &subnet, &reported);
    }
    for (name, value) in &reported {
        outputs.insert(
            camel(name),
            json!({"Description": format!(".nuon.install_stack.outputs.{name}"), "Value": value}),
        );
    }

    Ok(json!({
        "AWSTemplateFormatVersion": "2010-09-09",
        "Description": format!(
            "{}: the install stack of install {} ({}) of app {}, made by the control plane; it runs the install's nuon runner",
            if stack.name.is_empty() { "nuon" } else { stack.name.as_str() },
            spec.install_name, spec.install_id, spec.app_name
        ),
        "Parameters": parameters,
        "Rules": rules,
        "Conditions": conditions,
        "Resources": resources,
        "Outputs": outputs,
    }))
}

fn tags(spec: &StackSpec) -> Value {
    json!([
        {"Key": "nuon:install", "Value": spec.install_id},
        {"Key": "nuon:app", "Value": spec.app_name}
    ])
}

/// A VPC with one public subnet for the runner, made when no VPC is given.
fn network(resources: &mut Map<String, Value>, spec: &StackSpec) {
    let c = "CreateVpc";
    resources.insert("Vpc".into(), json!({
        "Type": "AWS::EC2::VPC", "Condition": c,
        "Properties": {"CidrBlock": {"Ref": "VpcCidr"}, "EnableDnsSupport": true, "EnableDnsHostnames": true, "Tags": tags(spec)}
    }));
    resources.insert(
        "InternetGateway".into(),
        json!({"Type": "AWS::EC2::InternetGateway", "Condition": c, "Properties": {"Tags": tags(spec)}}),
    );
    resources.insert(
        "GatewayAttachment".into(),
        json!({
            "Type": "AWS::EC2::VPCGatewayAttachment", "Condition": c,
            "Properties": {"VpcId": {"Ref": "Vpc"}, "InternetGatewayId": {"Ref": "InternetGateway"}}
        }),
    );
    resources.insert(
        "RunnerSubnet".into(),
        json!({
            "Type": "AWS::EC2::Subnet", "Condition": c,
            "Properties": {
                "VpcId": {"Ref": "Vpc"},
                "CidrBlock": {"Fn::Select": [0, {"Fn::Cidr": [{"Ref": "VpcCidr"}, 4, 8]}]},
                "AvailabilityZone": {"Fn::Select": [0, {"Fn::GetAZs": ""}]},
                "MapPublicIpOnLaunch": true,
                "Tags": tags(spec)
            }
        }),
    );
    resources.insert(
        "RouteTable".into(),
        json!({"Type": "AWS::EC2::RouteTable", "Condition": c, "Properties": {"VpcId": {"Ref": "Vpc"}, "Tags": tags(spec)}}),
    );
    resources.insert("DefaultRoute".into(), json!({
        "Type": "AWS::EC2::Route", "Condition": c, "DependsOn": "GatewayAttachment",
        "Properties": {"RouteTableId": {"Ref": "RouteTable"}, "DestinationCidrBlock": "0.0.0.0/0", "GatewayId": {"Ref": "InternetGateway"}}
    }));
    resources.insert("RunnerSubnetRoutes".into(), json!({
        "Type": "AWS::EC2::SubnetRouteTableAssociation", "Condition": c,
        "Properties": {"SubnetId": {"Ref": "RunnerSubnet"}, "RouteTableId": {"Ref": "RouteTable"}}
    }));
}

/// A role of `permissions` (and its boundary, a managed policy of its own).
fn iam_role(
    spec: &StackSpec,
    id: &str,
    role: &Role,
    break_glass: bool,
) -> Result<Vec<(String, Value)>, String> {
    let what = |w: &str| format!("role {:?}: {w}", role.name);
    let name_ok = !role.name.is_empty()
        && role.name.len() <= 64
        && role
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c));
    if !name_ok {
        return Err(what(
            "an IAM role name is 1 to 64 letters, digits and +=,.@_- (as rendered for the install)",
        ));
    }
    let mut inline = Vec::new();
    let mut managed = Vec::new();
    for (i, p) in role.policies.iter().enumerate() {
        let name = p.get("name").and_then(Value::as_str);
        if let Some(m) = p.get("managed_policy_name").and_then(Value::as_str) {
            managed.push(if m.starts_with("arn:") {
                json!(m)
            } else {
                json!({"Fn::Sub": format!("arn:${{AWS::Partition}}:iam::aws:policy/{m}")})
            });
        }
        if let Some(c) = p.get("contents").and_then(Value::as_str) {
            let label =
                name.map_or_else(|| format!("policy {}", i + 1), |n| format!("policy {n:?}"));
            inline.push(json!({
                "PolicyName": name.map_or_else(|| format!("policy-{}", i + 1), str::to_owned),
                "PolicyDocument": document(c, &what(&label))?
            }));
        }
    }
    for r in &role.named_policies {
        let Some(name) = r.get("name").and_then(Value::as_str) else {
            continue;
        };
        let Some(p) = spec
            .permissions
            .named_policies
            .iter()
            .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
        else {
            return Err(what(&format!(
                "named policy {name:?} is not one of the config's [[named_policies]]"
            )));
        };
        let contents = p.get("contents").and_then(Value::as_str).unwrap_or("");
        inline.push(json!({
            "PolicyName": name,
            "PolicyDocument": document(contents, &what(&format!("named policy {name:?}")))?
        }));
    }
    let mut props = json!({
        "RoleName": role.name,
        "Description": role.description.chars().take(1000).collect::<String>(),
        "AssumeRolePolicyDocument": {
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow",
                "Principal": {"AWS": {"Fn::GetAtt": ["RunnerRole", "Arn"]}},
                "Action": "sts:AssumeRole"
            }]
        },
        "MaxSessionDuration": 43200,
        "Tags": [
            {"Key": "nuon:install", "Value": spec.install_id},
            {"Key": "nuon:role-type", "Value": if break_glass { "break-glass" } else { role.kind.as_deref().unwrap_or("custom") }}
        ]
    });
    if !inline.is_empty() {
        props["Policies"] = json!(inline);
    }
    if !managed.is_empty() {
        props["ManagedPolicyArns"] = json!(managed);
    }
    let mut out = Vec::new();
    if let Some(b) = &role.permissions_boundary {
        let boundary = format!("{id}Boundary");
        props["PermissionsBoundary"] = json!({"Ref": boundary});
        out.push((
            boundary,
            json!({
                "Type": "AWS::IAM::ManagedPolicy",
                "Properties": {
                    "Description": format!("The permissions boundary of role {}", role.name),
                    "PolicyDocument": document(b, &what("permissions_boundary"))?
                }
            }),
        ));
    }
    out.push((
        id.to_owned(),
        json!({"Type": "AWS::IAM::Role", "Properties": props}),
    ));
    Ok(out)
}

/// `KEY=value ...` of what the runner reports on phoning home, as a
/// `Fn::Sub` text and its variables.
fn outputs_sub(reported: &[(String, Value)]) -> (String, Map<String, Value>) {
    let mut text = Vec::new();
    let mut vars = Map::new();
    for (i, (name, value)) in reported.iter().enumerate() {
        let var = format!("Out{i}");
        text.push(format!("{name}=${{{var}}}"));
        vars.insert(var, value.clone());
    }
    (text.join(" "), vars)
}

/// The runner on one EC2 instance of an Auto Scaling group: its user data
/// installs the binary and the unit, and starts it.
fn ec2_runner(
    spec: &StackSpec,
    parameters: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
    subnet: &Value,
    reported: &[(String, Value)],
) {
    parameters.insert(
        "InstanceType".into(),
        json!({"Type": "String", "Default": spec.runner.instance_type.clone().unwrap_or_else(|| "t3a.medium".into()), "Description": "The runner's instance type."}),
    );
    parameters.insert(
        "RunnerImageId".into(),
        json!({"Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default": "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64", "Description": "The runner's machine image (Amazon Linux 2023)."}),
    );
    parameters.insert(
        "RunnerBinaryUrl".into(),
        json!({"Type": "String", "Default": format!("https://github.com/nuon-byoc/nuon/releases/download/v{}/nuon-runner-x86_64-linux", spec.version), "Description": "Where the instance downloads nuon-runner from (an https URL, or s3://bucket/key)."}),
    );
    let (outputs_text, mut vars) = outputs_sub(reported);
    vars.insert("ApiUrl".into(), json!(spec.runner_api));
    vars.insert("SigningKey".into(), json!(spec.signing_key));
    let init = spec
        .runner
        .init_script_url
        .as_deref()
        .map(|u| {
            format!(
                "curl -fsSL '{}' -o /tmp/nuon-init.sh && bash /tmp/nuon-init.sh\n",
                u.replace('\'', "")
            )
        })
        .unwrap_or_default();
    // `${` is Fn::Sub's; the shell's own variables are written without braces.
    let script = format!(
        "#!/bin/bash\n\
         # The nuon runner of install {install}; stack generation {generation}.\n\
         set -euo pipefail\n\
         {init}\
         mkdir -p /opt/nuon-runner/bin /var/lib/nuon-runner\n\
         case \"${{RunnerBinaryUrl}}\" in\n\
         \x20 s3://*) aws s3 cp \"${{RunnerBinaryUrl}}\" /opt/nuon-runner/bin/nuon-runner.new ;;\n\
         \x20 *) curl -fsSL --retry 5 -o /opt/nuon-runner/bin/nuon-runner.new \"${{RunnerBinaryUrl}}\" ;;\n\
         esac\n\
         chmod 0755 /opt/nuon-runner/bin/nuon-runner.new\n\
         mv /opt/nuon-runner/bin/nuon-runner.new /opt/nuon-runner/bin/nuon-runner\n\
         token=$(aws secretsmanager get-secret-value --region ${{AWS::Region}} --secret-id ${{InstallTokenSecret}} --query SecretString --output text)\n\
         umask 077\n\
         cat > /opt/nuon-runner/nuon-runner.env <<EOF\n\
         NUON_RUNNER_API_URL=${{ApiUrl}}\n\
         NUON_RUNNER_SIGNING_KEY=${{SigningKey}}\n\
         NUON_RUNNER_INSTALL_TOKEN=$token\n\
         NUON_RUNNER_WORK_DIR=/var/lib/nuon-runner\n\
         NUON_RUNNER_CREDENTIALS=aws\n\
         NUON_RUNNER_STACK_OUTPUTS=\"{outputs_text}\"\n\
         EOF\n\
         cat > /etc/systemd/system/nuon-runner.service <<'EOF'\n\
         {unit}\
         EOF\n\
         systemctl daemon-reload\n\
         systemctl enable --now nuon-runner.service\n",
        install = spec.install_name,
        generation = spec.token_expires_at_ms,
        unit = super::vm::UNIT,
    );
    resources.insert(
        "RunnerInstanceProfile".into(),
        json!({"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [{"Ref": "RunnerRole"}]}}),
    );
    resources.insert(
        "RunnerLaunchTemplate".into(),
        json!({
            "Type": "AWS::EC2::LaunchTemplate",
            "Properties": {
                "LaunchTemplateData": {
                    "ImageId": {"Ref": "RunnerImageId"},
                    "InstanceType": {"Ref": "InstanceType"},
                    "IamInstanceProfile": {"Arn": {"Fn::GetAtt": ["RunnerInstanceProfile", "Arn"]}},
                    "SecurityGroupIds": [{"Ref": "RunnerSecurityGroup"}],
                    "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
                    "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 40, "VolumeType": "gp3", "Encrypted": true}}],
                    "UserData": {"Fn::Base64": {"Fn::Sub": [script, vars]}}
                }
            }
        }),
    );
    resources.insert(
        "RunnerGroup".into(),
        json!({
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "UpdatePolicy": {"AutoScalingRollingUpdate": {"MinInstancesInService": 0, "MaxBatchSize": 1}},
            "Properties": {
                "MinSize": "1",
                "MaxSize": "1",
                "DesiredCapacity": "1",
                "VPCZoneIdentifier": [subnet],
                "LaunchTemplate": {
                    "LaunchTemplateId": {"Ref": "RunnerLaunchTemplate"},
                    "Version": {"Fn::GetAtt": ["RunnerLaunchTemplate", "LatestVersionNumber"]}
                },
                "Tags": [{"Key": "Name", "Value": format!("nuon-runner-{}", spec.install_name), "PropagateAtLaunch": true}]
            }
        }),
    );
}

/// The runner as an ECS Fargate service; its work directory (token,
/// spool) on an encrypted EFS file system, so a new task keeps them.
fn ecs_runner(
    spec: &StackSpec,
    parameters: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
    subnet: &Value,
    reported: &[(String, Value)],
) {
    parameters.insert(
        "RunnerImage".into(),
        json!({"Type": "String", "Default": format!("ghcr.io/nuon-byoc/nuon-runner:{}", spec.version), "Description": "The runner's container image (its entry point is nuon-runner)."}),
    );
    let (outputs_text, vars) = outputs_sub(reported);
    resources.insert(
        "RunnerCluster".into(),
        json!({"Type": "AWS::ECS::Cluster", "Properties": {"ClusterName": format!("nuon-runner-{}", snake(&spec.install_name).replace('_', "-"))}}),
    );
    resources.insert(
        "RunnerLogs".into(),
        json!({"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 30}}),
    );
    resources.insert(
        "WorkDirFileSystem".into(),
        json!({"Type": "AWS::EFS::FileSystem", "Properties": {"Encrypted": true}}),
    );
    resources.insert(
        "WorkDirSecurityGroup".into(),
        json!({
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": "NFS from the nuon runner only",
                "VpcId": {"Fn::GetAtt": ["RunnerSecurityGroup", "VpcId"]},
                "SecurityGroupIngress": [{"IpProtocol": "tcp", "FromPort": 2049, "ToPort": 2049, "SourceSecurityGroupId": {"Ref": "RunnerSecurityGroup"}}]
            }
        }),
    );
    resources.insert(
        "WorkDirMountTarget".into(),
        json!({
            "Type": "AWS::EFS::MountTarget",
            "Properties": {"FileSystemId": {"Ref": "WorkDirFileSystem"}, "SubnetId": subnet, "SecurityGroups": [{"Ref": "WorkDirSecurityGroup"}]}
        }),
    );
    resources.insert(
        "RunnerTask".into(),
        json!({
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "RequiresCompatibilities": ["FARGATE"],
                "NetworkMode": "awsvpc",
                "Cpu": "1024",
                "Memory": "2048",
                "ExecutionRoleArn": {"Fn::GetAtt": ["RunnerRole", "Arn"]},
                "TaskRoleArn": {"Fn::GetAtt": ["RunnerRole", "Arn"]},
                "Volumes": [{"Name": "work", "EFSVolumeConfiguration": {"FilesystemId": {"Ref": "WorkDirFileSystem"}, "TransitEncryption": "ENABLED"}}],
                "ContainerDefinitions": [{
                    "Name": "nuon-runner",
                    "Image": {"Ref": "RunnerImage"},
                    "Essential": true,
                    "Command": ["run"],
                    "StopTimeout": 120,
                    "MountPoints": [{"SourceVolume": "work", "ContainerPath": "/var/lib/nuon-runner"}],
                    "Environment": [
                        {"Name": "NUON_RUNNER_API_URL", "Value": spec.runner_api},
                        {"Name": "NUON_RUNNER_SIGNING_KEY", "Value": spec.signing_key},
                        {"Name": "NUON_RUNNER_WORK_DIR", "Value": "/var/lib/nuon-runner"},
                        {"Name": "NUON_RUNNER_CREDENTIALS", "Value": "aws"},
                        {"Name": "NUON_RUNNER_STACK_OUTPUTS", "Value": {"Fn::Sub": [outputs_text, vars]}},
                        {"Name": "NUON_STACK_GENERATION", "Value": spec.token_expires_at_ms.to_string()}
                    ],
                    "Secrets": [{"Name": "NUON_RUNNER_INSTALL_TOKEN", "ValueFrom": {"Ref": "InstallTokenSecret"}}],
                    "LogConfiguration": {"LogDriver": "awslogs", "Options": {
                        "awslogs-group": {"Ref": "RunnerLogs"},
                        "awslogs-region": {"Ref": "AWS::Region"},
                        "awslogs-stream-prefix": "runner"
                    }}
                }]
            }
        }),
    );
    resources.insert(
        "RunnerService".into(),
        json!({
            "Type": "AWS::ECS::Service",
            "DependsOn": "WorkDirMountTarget",
            "Properties": {
                "Cluster": {"Ref": "RunnerCluster"},
                "LaunchType": "FARGATE",
                "DesiredCount": 1,
                "DeploymentConfiguration": {"MinimumHealthyPercent": 0, "MaximumPercent": 100},
                "TaskDefinition": {"Ref": "RunnerTask"},
                "NetworkConfiguration": {"AwsvpcConfiguration": {
                    "AssignPublicIp": "ENABLED",
                    "Subnets": [subnet],
                    "SecurityGroups": [{"Ref": "RunnerSecurityGroup"}]
                }}
            }
        }),
    );
}

/// `provision-role` as `ProvisionRole`.
fn camel(s: &str) -> String {
    let mut out = String::new();
    let mut up = true;
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(if up { c.to_ascii_uppercase() } else { c });
            up = false;
        } else {
            up = true;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'X');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::Permissions;
    use crate::stack::test_spec;

    use crate::stack::test_role as role;

    #[test]
    fn roles_trust_the_runner_only_and_break_glass_is_off_by_default() {
        let mut spec = test_spec();
        let mut p = role("provision", "acme-provision");
        p.policies = vec![json!({"managed_policy_name": "AdministratorAccess"})];
        p.permissions_boundary = Some(r#"{"Version":"2012-10-17","Statement":[]}"#.into());
        spec.permissions = Permissions {
            roles: vec![p, role("maintenance", "acme-maint")],
            named_policies: vec![],
            break_glass: vec![role("custom", "acme-bg")],
        };
        let t = template(&spec).unwrap();
        let r = &t["Resources"];
        assert_eq!(
            r["ProvisionRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
                ["AWS"],
            json!({"Fn::GetAtt": ["RunnerRole", "Arn"]})
        );
        assert_eq!(
            r["ProvisionRole"]["Properties"]["PermissionsBoundary"],
            json!({"Ref": "ProvisionRoleBoundary"})
        );
        assert_eq!(r["BreakGlassRole"]["Condition"], "BreakGlassRoleEnabled");
        assert_eq!(t["Parameters"]["BreakGlassRoleEnabled"]["Default"], "false");
        assert!(t["Outputs"]["ProvisionIamRoleArn"].is_object());
        assert!(t["Outputs"]["MaintenanceIamRoleArn"].is_object());
        // The token is in the secret and the parameter, never in user data.
        let user_data = r["RunnerLaunchTemplate"].to_string();
        assert!(!user_data.contains("stk_secret"));
    }

    #[test]
    fn a_policy_that_is_not_json_is_named() {
        let mut spec = test_spec();
        let mut p = role("provision", "acme-provision");
        p.policies = vec![json!({"name": "s3", "contents": "Allow everything"})];
        spec.permissions.roles = vec![p];
        let e = template(&spec).unwrap_err();
        assert!(
            e.contains("role \"acme-provision\": policy \"s3\" is not a JSON IAM policy document"),
            "{e}"
        );
    }
}
