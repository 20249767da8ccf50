//! Building blocks of the CloudFormation stack: logical ids, tags, the
//! VPC the stack makes (as Nuon's), and the app's secrets in the
//! customer's Secrets Manager.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::StackSpec;

/// A CloudFormation logical id from a role: by its kind for the first of
/// each operation kind, numbered for the rest.
pub(super) fn logical_id(prefix: &str, used: &mut BTreeMap<String, usize>) -> String {
    let n = used.entry(prefix.to_owned()).or_insert(0);
    *n += 1;
    if *n == 1 {
        prefix.to_owned()
    } else {
        format!("{prefix}{n}")
    }
}

pub(super) fn tags(spec: &StackSpec) -> Value {
    json!([
        {"Key": "nuon:install", "Value": spec.install_id},
        {"Key": "nuon:app", "Value": spec.app_name}
    ])
}

/// The `i`th /24 (of eight) of the VPC's CIDR: 0 the runner's, 1 to 3
/// the public subnets, 4 to 6 the private ones.
pub(super) fn subnet_cidr(i: usize) -> Value {
    json!({"Fn::Select": [i, {"Fn::Cidr": [{"Ref": "VpcCidr"}, 8, 8]}]})
}

/// A VPC as Nuon's, made when no VPC is given: a public subnet for the
/// runner; three public subnets and three private ones (each in its own
/// zone) whose way out is a NAT gateway.
pub(super) fn network(resources: &mut Map<String, Value>, spec: &StackSpec) {
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
                "CidrBlock": subnet_cidr(0),
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
    // The app's subnets: public ones routed to the internet gateway,
    // private ones to a NAT gateway in the first public one.
    resources.insert(
        "NatAddress".into(),
        json!({"Type": "AWS::EC2::EIP", "Condition": c, "DependsOn": "GatewayAttachment", "Properties": {"Domain": "vpc", "Tags": tags(spec)}}),
    );
    resources.insert("NatGateway".into(), json!({
        "Type": "AWS::EC2::NatGateway", "Condition": c,
        "Properties": {"AllocationId": {"Fn::GetAtt": ["NatAddress", "AllocationId"]}, "SubnetId": {"Ref": "PublicSubnet1"}, "Tags": tags(spec)}
    }));
    resources.insert(
        "PrivateRouteTable".into(),
        json!({"Type": "AWS::EC2::RouteTable", "Condition": c, "Properties": {"VpcId": {"Ref": "Vpc"}, "Tags": tags(spec)}}),
    );
    resources.insert("PrivateDefaultRoute".into(), json!({
        "Type": "AWS::EC2::Route", "Condition": c,
        "Properties": {"RouteTableId": {"Ref": "PrivateRouteTable"}, "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": {"Ref": "NatGateway"}}
    }));
    for (kind, first, public, table) in [
        ("Public", 1, true, "RouteTable"),
        ("Private", 4, false, "PrivateRouteTable"),
    ] {
        for i in 0..3 {
            let id = format!("{kind}Subnet{}", i + 1);
            let role = if public { "elb" } else { "internal-elb" };
            resources.insert(
                id.clone(),
                json!({
                    "Type": "AWS::EC2::Subnet", "Condition": c,
                    "Properties": {
                        "VpcId": {"Ref": "Vpc"},
                        "CidrBlock": subnet_cidr(first + i),
                        "AvailabilityZone": {"Fn::Select": [i, {"Fn::GetAZs": ""}]},
                        "MapPublicIpOnLaunch": public,
                        "Tags": [
                            {"Key": "nuon:install", "Value": spec.install_id},
                            {"Key": "nuon:app", "Value": spec.app_name},
                            {"Key": format!("kubernetes.io/role/{role}"), "Value": "1"}
                        ]
                    }
                }),
            );
            resources.insert(
                format!("{id}Routes"),
                json!({
                    "Type": "AWS::EC2::SubnetRouteTableAssociation", "Condition": c,
                    "Properties": {"SubnetId": {"Ref": id}, "RouteTableId": {"Ref": table}}
                }),
            );
        }
    }
}

/// Each customer-held secret of `secrets.toml` as a Secrets Manager secret of the
/// customer's account (`INSTALL_ID/NAME`): generated by the stack
/// (`auto_generate`), else given as a `NoEcho` parameter (required, or
/// made only when given); its ARN reported as `NAME_arn`.
pub(super) fn secrets(
    spec: &StackSpec,
    parameters: &mut Map<String, Value>,
    conditions: &mut Map<String, Value>,
    resources: &mut Map<String, Value>,
    reported: &mut Vec<(String, Value)>,
) {
    let mut secret_used = BTreeMap::new();
    for secret in spec.secrets.iter().filter(|s| s.held_by_customer()) {
        let id = logical_id(&format!("Secret{}", camel(&secret.name)), &mut secret_used);
        let mut props = json!({
            "Name": format!("{}/{}", spec.install_id, secret.name),
            "Description": secret.description,
            "Tags": tags(spec)
        });
        let mut resource = json!({"Type": "AWS::SecretsManager::Secret"});
        let arn = if secret.auto_generate {
            props["GenerateSecretString"] =
                json!({"ExcludePunctuation": true, "PasswordLength": 63});
            json!({"Ref": id})
        } else {
            let param = format!("{id}Value");
            let mut p = json!({
                "Type": "String",
                "NoEcho": true,
                "Description": format!("{}: {}", secret.display_name.as_deref().unwrap_or(&secret.name), secret.description),
            });
            if let Some(d) = &secret.default {
                p["Default"] = json!(d);
            } else if !secret.required {
                p["Default"] = json!("");
            }
            if secret.required {
                p["AllowedPattern"] = json!("^[^\\s]{1,}$");
                p["ConstraintDescription"] = json!("This secret is required.");
            }
            parameters.insert(param.clone(), p);
            props["SecretString"] = json!({"Ref": param});
            if secret.required {
                json!({"Ref": id})
            } else {
                // Made only when the customer gives a value.
                let given = format!("{id}Given");
                conditions.insert(
                    given.clone(),
                    json!({"Fn::Not": [{"Fn::Equals": [{"Ref": param}, ""]}]}),
                );
                resource["Condition"] = json!(given);
                json!({"Fn::If": [given, {"Ref": id}, "none"]})
            }
        };
        resource["Properties"] = props;
        resources.insert(id, resource);
        reported.push((format!("{}_arn", secret.name), arn));
    }
}

/// `provision-role` as `ProvisionRole`.
pub(super) fn camel(s: &str) -> String {
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

/// What the runner's user data reads, as the stack's language writes a
/// reference (`${RunnerBinaryUrl}` in CloudFormation's `Fn::Sub`,
/// `${var.runner_binary_url}` in Terraform).
pub(super) struct ScriptRefs<'a> {
    pub(super) binary_url: &'a str,
    /// The SHA-256 (hex) the binary must have; empty: not checked.
    pub(super) binary_sha256: &'a str,
    pub(super) region: &'a str,
    pub(super) token_secret: &'a str,
    pub(super) api_url: &'a str,
    pub(super) signing_key: &'a str,
    /// `KEY=value ...` of what the runner reports on phoning home.
    pub(super) outputs: &'a str,
}

/// The runner instance's user data: it installs the binary and its
/// systemd unit, reads the one-time token from its secret, and starts the
/// runner, which phones home with the stack's outputs. The shell's own
/// variables are written without braces (`${` is the stack language's).
pub(super) fn user_data(spec: &StackSpec, r: &ScriptRefs<'_>) -> String {
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
    format!(
        "#!/bin/bash\n\
         # The nuon runner of install {install}; stack generation {generation}.\n\
         set -euo pipefail\n\
         {init}\
         mkdir -p /opt/nuon-runner/bin /var/lib/nuon-runner\n\
         token=$(aws secretsmanager get-secret-value --region {region} --secret-id {token_secret} --query SecretString --output text)\n\
         new=/opt/nuon-runner/bin/nuon-runner.new\n\
         if [ -z \"{binary}\" ]; then\n\
         \x20 echo \"no runner binary URL: the stack was applied without one (publish a runner release, download the stack again, or set its runner binary URL)\" >&2\n\
         \x20 exit 1\n\
         fi\n\
         # The control plane serves its runner releases to the stack's token;\n\
         # no other address is sent it.\n\
         case \"{binary}\" in\n\
         \x20 s3://*) aws s3 cp \"{binary}\" $new ;;\n\
         \x20 \"{api}\"/*) printf 'Authorization: Bearer %s\\n' \"$token\" | curl -fsSL --retry 5 -H @- -o $new \"{binary}\" ;;\n\
         \x20 *) curl -fsSL --retry 5 -o $new \"{binary}\" ;;\n\
         esac\n\
         if [ -n \"{sha256}\" ] && [ \"$(sha256sum $new | cut -d' ' -f1)\" != \"{sha256}\" ]; then\n\
         \x20 echo \"nuon-runner from {binary} is not the release the stack names (SHA-256 {sha256}): refused\" >&2\n\
         \x20 rm -f $new\n\
         \x20 exit 1\n\
         fi\n\
         chmod 0755 $new\n\
         mv $new /opt/nuon-runner/bin/nuon-runner\n\
         umask 077\n\
         cat > /opt/nuon-runner/nuon-runner.env <<EOF\n\
         NUON_RUNNER_API_URL={api}\n\
         NUON_RUNNER_SIGNING_KEY={key}\n\
         NUON_RUNNER_INSTALL_TOKEN=$token\n\
         NUON_RUNNER_WORK_DIR=/var/lib/nuon-runner\n\
         NUON_RUNNER_CREDENTIALS=aws\n\
         NUON_RUNNER_STACK_OUTPUTS=\"{outputs}\"\n\
         EOF\n\
         cat > /etc/systemd/system/nuon-runner.service <<'EOF'\n\
         {unit}\
         EOF\n\
         systemctl daemon-reload\n\
         systemctl enable --now nuon-runner.service\n",
        install = spec.install_name,
        generation = spec.token_expires_at_ms,
        binary = r.binary_url,
        sha256 = r.binary_sha256,
        region = r.region,
        token_secret = r.token_secret,
        api = r.api_url,
        key = r.signing_key,
        outputs = r.outputs,
        unit = super::vm::UNIT,
    )
}

/// The stack's parameters for the runner binary, as `(url, sha256)`
/// declarations in the stack's language (`make(name, default, description)`):
/// by default the release the control plane serves, checked by digest.
pub(super) fn binary_parameters<T>(
    spec: &StackSpec,
    make: impl Fn(Option<&str>, &str) -> T,
) -> (T, T) {
    let d = spec.runner_download.as_ref();
    // Empty when nothing is served: a stack whose runner runs on a host of
    // the customer's (`runner_principals`) applies without one, and the
    // instance says what is missing.
    let url = make(
        Some(d.map_or("", |d| d.url.as_str())),
        &match d {
            Some(d) => format!(
                "Where the instance downloads nuon-runner from: by default runner version {} ({}) from the vendor's control plane; or an https URL, or s3://bucket/key.",
                d.version, d.platform
            ),
            None => "Where the instance downloads nuon-runner (linux-x86_64) from: an https URL, or s3://bucket/key. The vendor's control plane serves no runner release yet (`nuon runners release publish`); with one, this defaults to it. Empty: the instance installs no runner (one runs on a host of yours).".into(),
        },
    );
    let sha = make(
        Some(d.map_or("", |d| d.sha256.as_str())),
        "The SHA-256 (64 hex digits) the downloaded nuon-runner must have, else the instance refuses it; empty: not checked.",
    );
    (url, sha)
}

/// The IAM statement that lets an operation role read the install's
/// customer-held secrets (`INSTALL_ID/NAME` in Secrets Manager); the ARN
/// pattern's partition, region and account as the stack's language writes
/// them (`${AWS::Region}`), `sub` making the text a value of it. `None`
/// when the app has none.
pub(super) fn secrets_statement(
    spec: &StackSpec,
    [partition, region, account]: [&str; 3],
    sub: impl Fn(String) -> Value,
) -> Option<Value> {
    spec.secrets.iter().any(|s| s.held_by_customer()).then(|| {
        json!({
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": sub(format!("arn:{partition}:secretsmanager:{region}:{account}:secret:{}/*", spec.install_id))
        })
    })
}

/// A policy document from a config's text: JSON, or an error naming it.
pub(super) fn document(text: &str, what: &str) -> Result<Value, String> {
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

/// A role's policies, checked: its inline documents by name (its own and
/// the config's named policies it uses), the managed policies it attaches
/// (AWS's by name, or ARNs), and its permissions boundary.
pub(super) struct RolePolicies {
    pub(super) inline: Vec<(String, Value)>,
    pub(super) managed: Vec<String>,
    pub(super) boundary: Option<Value>,
}

impl RolePolicies {
    /// `role`'s; an error names the role and the policy that is not an
    /// IAM policy document, or a role name IAM would refuse.
    pub(super) fn of(spec: &StackSpec, role: &crate::app::Role) -> Result<Self, String> {
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
        let mut out = RolePolicies {
            inline: Vec::new(),
            managed: Vec::new(),
            boundary: None,
        };
        for (i, p) in role.policies.iter().enumerate() {
            let name = p.get("name").and_then(Value::as_str);
            if let Some(m) = p.get("managed_policy_name").and_then(Value::as_str) {
                out.managed.push(m.to_owned());
            }
            if let Some(c) = p.get("contents").and_then(Value::as_str) {
                let label =
                    name.map_or_else(|| format!("policy {}", i + 1), |n| format!("policy {n:?}"));
                out.inline.push((
                    name.map_or_else(|| format!("policy-{}", i + 1), str::to_owned),
                    document(c, &what(&label))?,
                ));
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
            out.inline.push((
                name.to_owned(),
                document(contents, &what(&format!("named policy {name:?}")))?,
            ));
        }
        if let Some(b) = &role.permissions_boundary {
            out.boundary = Some(document(b, &what("permissions_boundary"))?);
        }
        Ok(out)
    }
}
