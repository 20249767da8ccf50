//! The files of Nuon's format that describe the install's cloud platform
//! and operations rather than what it runs: `stack.toml`, `permissions`,
//! `break_glass`, `operation_roles.toml`, `policies`, `kubernetes_contexts`,
//! `runbooks/`, `installer.toml` (read in `installer.rs`), and the
//! app-branch files. Each is read
//! key by key against its schema ([`Spec`]), kept in the config, and what
//! cannot take effect on this platform is answered with a warning that
//! says why.

use nuon_core::app::*;
use serde_json::Value;

use crate::reader::{Located, Reader};
use crate::runbooks::RUNBOOK;
use crate::schema::{K, Spec, read, typed};

const NESTED_STACK: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("template_url", K::Str),
        ("index", K::Int),
        ("parameters", K::StrMap),
    ],
    required: &["name", "template_url"],
};

/// `stack.toml`.
pub(crate) const STACK: Spec = Spec {
    keys: &[
        ("type", K::Str),
        ("name", K::Str),
        ("description", K::Str),
        ("vpc_nested_template_url", K::Str),
        ("runner_nested_template_url", K::Str),
        ("deployment_scope", K::Str),
        ("custom_nested_stacks", K::Tables(&NESTED_STACK)),
    ],
    required: &["name", "description"],
};

const ROLE_POLICY: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("managed_policy_name", K::Str),
        ("contents", K::Str),
        ("gcp_permissions", K::StrList),
        ("gcp_predefined_role", K::Str),
        ("azure_actions", K::StrList),
        ("azure_built_in_roles", K::StrList),
    ],
    required: &[],
};

const NAMED_REF: Spec = Spec {
    keys: &[("name", K::Str)],
    required: &["name"],
};

/// A role of `permissions` or `break_glass`.
pub(crate) const ROLE: Spec = Spec {
    keys: &[
        ("type", K::Str),
        ("cloud_platform", K::Str),
        ("name", K::Str),
        ("description", K::Str),
        ("display_name", K::Str),
        ("policies", K::Tables(&ROLE_POLICY)),
        ("permissions_boundary", K::Str),
        ("enabled_in_stack", K::Bool),
        ("named_policies", K::Tables(&NAMED_REF)),
    ],
    required: &["name", "description"],
};

const NAMED_POLICY: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("description", K::Str),
        ("contents", K::Str),
    ],
    required: &["name", "contents"],
};

const RULE: Spec = Spec {
    keys: &[
        ("principal", K::Str),
        ("operation", K::Str),
        ("role", K::Str),
    ],
    required: &["principal", "operation", "role"],
};

/// `operation_roles.toml`.
pub(crate) const OPERATION_ROLES: Spec = Spec {
    keys: &[("type", K::Str), ("rules", K::Tables(&RULE))],
    required: &["type"],
};

/// A policy of `policies.toml` or `policies/`.
pub(crate) const POLICY: Spec = Spec {
    keys: &[
        ("type", K::Str),
        ("engine", K::Str),
        ("name", K::Str),
        ("contents", K::Str),
        ("components", K::StrList),
    ],
    required: &["type", "contents"],
};

/// A `[[kubernetes_context]]` (or one file of `kubernetes_contexts/`).
pub(crate) const KUBERNETES_CONTEXT: Spec = Spec {
    keys: &[("name", K::Str), ("component", K::Str)],
    required: &["name", "component"],
};

/// What the platform files gave, with what the cross-file checks need.
#[derive(Default)]
pub(crate) struct Loaded {
    pub(crate) stack: Option<Stack>,
    pub(crate) permissions: Permissions,
    pub(crate) operation_roles: Option<OperationRoles>,
    pub(crate) policies: Vec<Policy>,
    pub(crate) kubernetes_contexts: Vec<KubernetesContext>,
    pub(crate) runbooks: Vec<Runbook>,
    pub(crate) installer: Option<super::Installer>,
    /// Every string, by file, for template checks.
    pub(crate) strings: Vec<(usize, Vec<Located>)>,
    /// Names of components (`"component"`) and actions (`"action"`) these
    /// files refer to, by file.
    pub(crate) refs: Vec<(usize, Located, &'static str)>,
}

fn role_of(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
    kind: Option<&str>,
) -> Option<Role> {
    let m = read(r, d, &ROLE, strings);
    r.finish(d, &[], |_| None);
    let mut role: Role = typed(m)?;
    if let Some(k) = kind {
        role.kind = Some(k.to_owned());
    }
    if let Some(k) = role.kind.as_deref()
        && ![
            "provision",
            "maintenance",
            "deprovision",
            "custom",
            "break_glass",
        ]
        .contains(&k)
    {
        d.push(r.file.at(
            &r.span(),
            format!("role type {k:?} is not one of provision, maintenance, deprovision, custom"),
        ));
        return None;
    }
    if let Some(p) = role.cloud_platform.as_deref()
        && !["aws", "azure", "gcp"].contains(&p)
    {
        d.push(r.file.at(
            &r.span(),
            format!("cloud_platform {p:?} is not one of aws, azure, gcp"),
        ));
    }
    Some(role)
}

fn file_stem(name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    base.strip_suffix(".toml").unwrap_or(base).to_owned()
}

const POLICY_TYPES: &[&str] = &[
    "terraform_module",
    "helm_chart",
    "kubernetes_manifest",
    "docker_build",
    "container_image",
    "sandbox",
    "kubernetes_cluster",
    "pulumi",
];

/// The policy types a Rego policy is evaluated for.
const EVALUATED: &[&str] = &[
    "terraform_module",
    "sandbox",
    "helm_chart",
    "kubernetes_manifest",
];

fn policy_of(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
    default_name: Option<String>,
) -> Option<Policy> {
    let m = read(r, d, &POLICY, strings);
    r.finish(d, &[], |_| None);
    let mut p: Policy = typed(m)?;
    if p.name.is_none() {
        p.name = default_name;
    }
    let at = r.span();
    if !POLICY_TYPES.contains(&p.kind.as_str()) {
        d.push(r.file.at(
            &at,
            format!(
                "policy type {:?} is not one of {}{}",
                p.kind,
                POLICY_TYPES.join(", "),
                super::did_you_mean(&p.kind, POLICY_TYPES.iter().copied())
            ),
        ));
        return None;
    }
    // No engine: Rego when it reads as Rego (a `.rego` file it names, or
    // inline text starting with `package`), else Kyverno, Nuon's default.
    match nuon_core::app::policy_engine(&p, &p.contents) {
        "opa" if !EVALUATED.contains(&p.kind.as_str()) => d.push(r.file.warn(&at, format!("{} policies are not evaluated on this platform (Terraform module and sandbox plans and rendered Helm and Kubernetes manifests are); the policy is kept with the config", p.kind))),
        "opa" => {}
        "kyverno" if !nuon_core::app::KYVERNO_TYPES.contains(&p.kind.as_str()) => d.push(r.file.warn(&at, format!("Kyverno policies check the Kubernetes objects of charts and manifests (types {}); a {} policy is not evaluated (the policy is kept with the config)", nuon_core::app::KYVERNO_TYPES.join(", "), p.kind))),
        "kyverno" => {}
        other => {
            d.push(r.file.at(&at, format!("policy engine {other:?} is not one of opa (rego) or kyverno")));
            return None;
        }
    }
    if p.components.iter().any(|c| c == "*") && p.components.len() > 1 {
        d.push(r.file.at(
            &at,
            "components = [\"*\"] means every component: do not list others with it",
        ));
    }
    Some(p)
}

const OPERATIONS: &[&str] = &[
    "provision",
    "deprovision",
    "reprovision",
    "deploy",
    "teardown",
    "trigger",
];

/// Reads one platform file (`name`, the `file`-th) into `out`.
pub(crate) fn load(
    mut r: Reader<'_, '_>,
    file: usize,
    name: &str,
    d: &mut Diagnostics,
    out: &mut Loaded,
) {
    let mut strings = Vec::new();
    let dir = name.split_once('/').map(|(d, _)| d);
    match (name, dir) {
        ("stack.toml", _) => {
            let m = read(&mut r, d, &STACK, &mut strings);
            r.finish(d, &[], |_| None);
            out.stack = typed(m);
        }
        ("permissions.toml", _) => {
            for (key, kind) in [
                ("provision_role", "provision"),
                ("maintenance_role", "maintenance"),
                ("deprovision_role", "deprovision"),
            ] {
                if let Some(mut t) = r.table(d, key) {
                    out.permissions
                        .roles
                        .extend(role_of(&mut t, d, &mut strings, Some(kind)));
                }
            }
            for key in ["custom_roles", "roles"] {
                for mut t in r.tables(d, key) {
                    let kind = (key == "custom_roles").then_some("custom");
                    out.permissions
                        .roles
                        .extend(role_of(&mut t, d, &mut strings, kind));
                }
            }
            for mut t in r.tables(d, "named_policies") {
                let m = read(&mut t, d, &NAMED_POLICY, &mut strings);
                t.finish(d, &[], |_| None);
                out.permissions.named_policies.push(Value::Object(m));
            }
            r.finish(d, &[], |_| None);
        }
        (_, Some("permissions")) if name.starts_with("permissions/policies/") => {
            let m = read(&mut r, d, &NAMED_POLICY, &mut strings);
            r.finish(d, &[], |_| None);
            out.permissions.named_policies.push(Value::Object(m));
        }
        (_, Some("permissions")) => {
            if r.get("type").is_none() {
                r.req_str(d, "type");
            }
            out.permissions
                .roles
                .extend(role_of(&mut r, d, &mut strings, None));
        }
        ("break_glass.toml", _) => {
            for mut t in r.tables(d, "role") {
                out.permissions
                    .break_glass
                    .extend(role_of(&mut t, d, &mut strings, None));
            }
            r.finish(d, &[], |_| None);
        }
        (_, Some("break_glass")) => {
            out.permissions
                .break_glass
                .extend(role_of(&mut r, d, &mut strings, None));
        }
        ("operation_roles.toml", _) => {
            let m = read(&mut r, d, &OPERATION_ROLES, &mut strings);
            r.finish(d, &[], |_| None);
            if let Some(o) = typed::<OperationRoles>(m) {
                if o.kind != "matrix" {
                    d.push(r.file.at(
                        &r.span(),
                        format!("operation_roles type {:?} is not \"matrix\"", o.kind),
                    ));
                }
                let mut seen = std::collections::BTreeSet::new();
                for rule in &o.rules {
                    let at = r.file.text.find(&rule.principal).unwrap_or(0);
                    if !OPERATIONS.contains(&rule.operation.as_str()) {
                        d.push(r.file.diag(
                            at,
                            format!(
                                "operation {:?} is not one of {}",
                                rule.operation,
                                OPERATIONS.join(", ")
                            ),
                        ));
                    }
                    if !seen.insert((rule.principal.clone(), rule.operation.clone())) {
                        d.push(r.file.diag(
                            at,
                            format!("{} {} is given two roles", rule.principal, rule.operation),
                        ));
                    }
                    let target = rule.principal.strip_prefix("nuon::");
                    match target.and_then(|t| t.split_once(':')) {
                        Some(("component", n)) | Some(("action", n)) if n != "*" => {
                            let kind = if target.is_some_and(|t| t.starts_with("component")) { "component" } else { "action" };
                            out.refs.push((file, Located { text: n.to_owned(), span: at..at }, kind));
                        }
                        Some(("component" | "action", _)) => {}
                        _ if target == Some("sandbox") => {}
                        _ => d.push(r.file.diag(at, format!("principal {:?} is not nuon::sandbox, nuon::component:NAME (or *), or nuon::action:NAME (or *)", rule.principal))),
                    }
                }
                out.operation_roles = Some(o);
            }
        }
        ("policies.toml", _) => {
            for mut t in r.tables(d, "policy") {
                out.policies
                    .extend(policy_of(&mut t, d, &mut strings, None));
            }
            r.finish(d, &[], |_| None);
        }
        (_, Some("policies")) => {
            out.policies
                .extend(policy_of(&mut r, d, &mut strings, Some(file_stem(name))));
        }
        ("kubernetes_contexts.toml", _) | (_, Some("kubernetes_contexts")) => {
            let tables = if name == "kubernetes_contexts.toml" {
                let t = r.tables(d, "kubernetes_context");
                t.into_iter().map(Some).collect::<Vec<_>>()
            } else {
                vec![None]
            };
            for t in tables {
                let m = match t {
                    Some(mut t) => {
                        let m = read(&mut t, d, &KUBERNETES_CONTEXT, &mut strings);
                        t.finish(d, &[], |_| None);
                        m
                    }
                    None => read(&mut r, d, &KUBERNETES_CONTEXT, &mut strings),
                };
                if let Some(k) = typed::<KubernetesContext>(m) {
                    let at = r.file.text.find(&format!("{:?}", k.component)).unwrap_or(0);
                    out.refs.push((
                        file,
                        Located {
                            text: k.component.clone(),
                            span: at..at,
                        },
                        "component",
                    ));
                    out.kubernetes_contexts.push(k);
                }
            }
            r.finish(d, &[], |_| None);
        }
        (_, Some("runbooks")) => {
            let m = read(&mut r, d, &RUNBOOK, &mut strings);
            r.finish(d, &[], |_| None);
            if let Some(rb) = typed::<Runbook>(m) {
                super::runbooks::check(&rb, &r, d, file, &mut out.refs);
                out.runbooks.push(rb);
            }
        }
        ("installer.toml", _) => {
            out.installer = super::installer::read_installer(&mut r, d, &mut strings);
        }
        _ => {}
    }
    out.strings.push((file, strings));
}
