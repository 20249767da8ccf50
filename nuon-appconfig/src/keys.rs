//! Keys that components and the sandbox share (`terraform_version`,
//! `[[var_file]]`, `operation_roles`, timeouts, retries, drift schedules, a
//! Pulumi program's settings), read the same way wherever they stand.

use std::collections::BTreeMap;

use super::PULUMI_RUNTIMES;
use super::Pulumi;
use super::reader::{Located, Reader, duration, text};
use nuon_core::app::{Diagnostics, did_you_mean};

/// Every kind-specific key of a component: what a component without a
/// known type still takes without a second complaint.
pub(super) const KIND_KEYS: &[&str] = &[
    "terraform_version",
    "vars",
    "env_vars",
    "var_file",
    "chart_name",
    "namespace",
    "storage_driver",
    "values",
    "values_file",
    "dockerfile",
    "target",
    "build_args",
    "config",
    "runtime",
    "pulumi_version",
    "capabilities",
    "manifest",
    "kustomize",
    "path",
    "public_repo",
    "git",
    "helm_repo",
    "public",
    "aws_ecr",
    "oci",
];

/// Which component types read a kind-specific key (empty: every type).
pub fn component_kinds_of(key: &str) -> &'static [&'static str] {
    match key {
        "terraform_version" | "vars" | "var_file" => &["terraform_module"],
        "chart_name" | "storage_driver" | "values" | "values_file" | "helm_repo" => &["helm_chart"],
        "namespace" => &["helm_chart", "kubernetes_manifest"],
        "manifest" | "kustomize" => &["kubernetes_manifest"],
        "dockerfile" | "target" | "build_args" => &["docker_build"],
        "public" | "aws_ecr" => &["container_image"],
        "config" => &["wasm", "pulumi"],
        "capabilities" => &["wasm"],
        "runtime" | "pulumi_version" => &["pulumi"],
        "env_vars" => &["terraform_module", "docker_build", "pulumi"],
        _ => &[],
    }
}

/// Keys of Nuon's that a component (or sandbox) may carry and this project
/// ignores.
pub(super) const NUON_ONLY_COMPONENT_KEYS: &[(&str, &str)] = &[
    (
        "connected_repo",
        "connected repos are GitHub repositories reached through Nuon's GitHub app; use [public_repo], [git] or path",
    ),
    (
        "var_name",
        "it names the component's outputs for Nuon's Terraform variables; read them with .nuon.components.NAME.outputs",
    ),
    (
        "labels",
        "a sandbox's labels are shown in Nuon's dashboard; this platform keeps a component's alone",
    ),
    (
        "source",
        "a component's keys are read from its own file here, not merged from another source",
    ),
    (
        "aws_ecr",
        "ECR images are pulled with Nuon's AWS role; use [public] or oci",
    ),
    (
        "gcp_gar",
        "Artifact Registry images are pulled with Nuon's GCP identity; use [public] or oci",
    ),
];

pub(super) fn var_files(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    key: &'static str,
    strings: &mut Vec<Located>,
) -> Vec<String> {
    let mut out = Vec::new();
    for mut t in r.tables(d, key) {
        let contents = t.str(d, "contents");
        let path = t.str(d, "path");
        let span = t.span();
        t.finish(d, &[("source", "use contents")], |_| None);
        match (contents, path) {
            (Some(c), None) | (None, Some(c)) => {
                strings.push(c.clone());
                out.push(c.text);
            }
            (Some(_), Some(p)) => d.push(r.file.at(
                &p.span,
                format!("[[{key}]] takes contents or path, not both"),
            )),
            (None, None) => d.push(r.file.at(
                &span,
                format!("[[{key}]] needs contents (inline, or a path in the config)"),
            )),
        }
    }
    out
}

/// A component's or the sandbox's own `operation_roles`: the role (by
/// name, templated) each of its operations runs with. Nuon writes them as
/// `[[operation_roles]]` tables of `operation` and `role`; a table of
/// `OPERATION = ROLE` is read too. An operation is one of `ops` (those of
/// `whose`), named once.
pub(super) fn operation_roles(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    ops: &[&str],
    whose: &str,
    strings: &mut Vec<Located>,
) -> BTreeMap<String, String> {
    let file = r.file;
    let mut out = BTreeMap::new();
    let mut add = |d: &mut Diagnostics, op: Located, role: Located| {
        if !ops.contains(&op.text.as_str()) {
            d.push(file.at(
                &op.span,
                format!(
                    "operation_roles: {:?} is not an operation of {whose} ({}){}",
                    op.text,
                    ops.join(", "),
                    did_you_mean(&op.text, ops.iter().copied())
                ),
            ));
        } else {
            match out.entry(op.text) {
                std::collections::btree_map::Entry::Occupied(e) => d.push(file.at(
                    &op.span,
                    format!("operation_roles: {:?} is given twice: keep one", e.key()),
                )),
                std::collections::btree_map::Entry::Vacant(e) => {
                    strings.push(role.clone());
                    e.insert(role.text);
                }
            }
        }
    };
    let Some(v) = r.get("operation_roles") else {
        return out;
    };
    if let toml::de::DeValue::Table(t) = v.get_ref() {
        for (k, item) in t.iter() {
            let op = Located {
                text: k.get_ref().to_string(),
                span: k.span(),
            };
            match item.get_ref() {
                toml::de::DeValue::String(role) => {
                    let role = Located {
                        text: role.to_string(),
                        span: item.span(),
                    };
                    add(d, op, role);
                }
                other => d.push(file.at(
                    &item.span(),
                    format!(
                        "operation_roles.{} must be a role's name, found {}",
                        op.text,
                        super::reader::type_name(other)
                    ),
                )),
            }
        }
        return out;
    }
    for mut t in r.tables(d, "operation_roles") {
        let (op, role) = (t.req_str(d, "operation"), t.req_str(d, "role"));
        t.finish(d, &[], |_| None);
        if let (Some(op), Some(role)) = (op, role) {
            add(d, op, role);
        }
    }
    out
}

/// `deploy_timeout`, or Nuon's `timeout` for it (one of the two).
pub(super) fn deploy_timeout(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Option<String> {
    let long = duration(r, d, "deploy_timeout");
    let short = duration(r, d, "timeout");
    if let (Some(_), Some(_)) = (&long, &short)
        && let Some(v) = r.get("timeout")
    {
        d.push(r.file.at(
            &v.span(),
            "timeout and deploy_timeout say the same thing: keep one",
        ));
    }
    long.or(short)
}

/// Nuon's `skip_noops`: here an apply whose plan changes nothing always
/// runs as a no-op, without asking for an approval.
pub(super) fn skip_noops(r: &mut Reader<'_, '_>, d: &mut Diagnostics) {
    if let Some(false) = r.bool(d, "skip_noops")
        && let Some(v) = r.get("skip_noops")
    {
        d.push(r.file.warn(
            &v.span(),
            "skip_noops = false: an apply whose plan changes nothing is still skipped on this platform (it asks for no approval and changes nothing)",
        ));
    }
}

/// `drift_schedule`: a cron schedule.
pub(super) fn drift_schedule(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Option<String> {
    let v = r.str(d, "drift_schedule")?;
    match v.text.parse::<nuon_core::cron::Schedule>() {
        Ok(_) => Some(v.text),
        Err(e) => {
            d.push(r.file.at(&v.span, format!("drift_schedule {e}")));
            None
        }
    }
}

/// `max_auto_retries`: 0 to [`nuon_core::app::MAX_AUTO_RETRIES`].
pub(super) fn max_auto_retries(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> u32 {
    let Some(n) = r.int(d, "max_auto_retries") else {
        return 0;
    };
    let max = nuon_core::app::MAX_AUTO_RETRIES;
    match u32::try_from(n) {
        Ok(n) if n <= max => n,
        _ => {
            if let Some(v) = r.get("max_auto_retries") {
                d.push(r.file.at(
                    &v.span(),
                    format!("max_auto_retries = {n}: give 0 to {max}"),
                ));
            }
            0
        }
    }
}

/// `toggleable` and `default_enabled` (on unless a toggleable component
/// says otherwise).
pub(super) fn toggles(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> (bool, bool) {
    let toggleable = r.bool(d, "toggleable").unwrap_or(false);
    let enabled = r.bool(d, "default_enabled");
    if enabled == Some(false)
        && !toggleable
        && let Some(v) = r.get("default_enabled")
    {
        d.push(r.file.warn(
            &v.span(),
            "default_enabled = false takes effect only with toggleable = true: the component is deployed to every install",
        ));
        return (false, true);
    }
    (toggleable, enabled.unwrap_or(true))
}

/// A required `terraform_version`, checked as a version constraint.
pub(super) fn terraform_version(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Option<Located> {
    let v = r.req_str(d, "terraform_version")?;
    match v.text.parse::<nuon_core::version::Constraint>() {
        Ok(_) => Some(v),
        Err(e) => {
            d.push(r.file.at(&v.span, format!("terraform_version: {e}")));
            None
        }
    }
}

/// A Pulumi program's `runtime` (required), `pulumi_version` and stack
/// config (the table `config_key`, templated).
pub(super) fn pulumi(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    config_key: &'static str,
    strings: &mut Vec<Located>,
) -> Option<Pulumi> {
    let runtime = r.req_str(d, "runtime");
    let version = r.str(d, "pulumi_version");
    let config = r.str_map(d, config_key, strings);
    if let Some(v) = &version
        && let Err(e) = v.text.parse::<nuon_core::version::Version>()
    {
        d.push(r.file.at(
            &v.span,
            format!("pulumi_version: {e} (a Pulumi CLI release such as 3.100.0)"),
        ));
    }
    if let Some(rt) = &runtime
        && !PULUMI_RUNTIMES.contains(&rt.text.as_str())
    {
        d.push(r.file.at(
            &rt.span,
            format!(
                "runtime {:?} is not a Pulumi language runtime{} (one of: {})",
                rt.text,
                did_you_mean(&rt.text, PULUMI_RUNTIMES.iter().copied()),
                PULUMI_RUNTIMES.join(", ")
            ),
        ));
        return None;
    }
    Some(Pulumi {
        runtime: runtime?.text,
        pulumi_version: text(version),
        config,
    })
}
