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

/// Each secret of `secrets.toml` as a Secrets Manager secret of the
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
    for secret in &spec.secrets {
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
