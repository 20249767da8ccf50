//! Reading `secrets.toml` (or `secrets/*.toml`): each secret, who holds
//! it, and the Kubernetes secrets it is written to.

use crate::loaded::Item;
use crate::reader::{Located, Reader, text};
use nuon_core::app::*;

/// `held_by = "customer" | "vendor"`.
pub(super) fn holder(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Option<SecretHolder> {
    let v = r.str(d, "held_by")?;
    match v.text.as_str() {
        "customer" => Some(SecretHolder::Customer),
        "vendor" => Some(SecretHolder::Vendor),
        other => {
            d.push(r.file.at(
                &v.span,
                format!(
                    "held_by {other:?} is not \"customer\" (the customer enters it in the install stack; it stays in their cloud's secret store) or \"vendor\" (given with `nuon installs create --secret`, sealed by the control plane)"
                ),
            ));
            None
        }
    }
}

/// `held_by` at the top of `secrets.toml`: the holder of each of
/// `secrets` that names none.
pub(super) fn hold_all(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    secrets: &mut [Item<SecretDecl>],
) {
    if let Some(all) = holder(r, d) {
        for decl in secrets.iter_mut().filter_map(|s| s.value.as_mut()) {
            decl.held_by.get_or_insert(all);
        }
    }
}

/// The holder of each secret that names none, for an app of
/// `runner_type`, and the names of those the customer holds.
pub(super) fn resolve(
    runner_type: &str,
    secrets: &mut [Item<SecretDecl>],
) -> std::collections::BTreeSet<String> {
    let default = SecretHolder::default_for(runner_type);
    (secrets.iter_mut().filter_map(|s| s.value.as_mut()))
        .filter_map(|s| {
            let holder = *s.held_by.get_or_insert(default);
            (holder == SecretHolder::Customer).then(|| s.name.clone())
        })
        .collect()
}

/// Why a customer-held secret may only be printed bare.
pub(super) fn not_bare(written: &str, name: &str) -> String {
    format!(
        "{written} is held by the customer (in their cloud's secret store): the runner puts its value where `{{{{ .nuon.secrets.{name} }}}}` is printed, so it cannot go through a function, a default or a condition; print it bare (and transform it in the tool that reads it), or give the secret held_by = \"vendor\""
    )
}

/// Two secrets writing one key of one Kubernetes Secret would overwrite
/// each other (compared as written: templates are not rendered here).
pub(super) fn one_writer_per_key(
    files: &[super::SourceFile],
    secrets: &[Item<SecretDecl>],
    d: &mut Diagnostics,
) {
    let mut written: std::collections::BTreeMap<String, &str> = Default::default();
    for s in secrets {
        let (Some(decl), Some(n)) = (&s.value, &s.name) else {
            continue;
        };
        for t in &decl.kubernetes {
            for ns in &t.namespaces {
                let at = format!("{ns}/{}/{}", t.name, t.key);
                match written.get(&at) {
                    Some(other) if *other != decl.name => d.push(files[s.file].at(
                        &n.span,
                        format!(
                            "secrets {other:?} and {:?} both write key {:?} of Kubernetes Secret {:?} in namespace {ns:?}: each key is written by one secret",
                            decl.name, t.key, t.name
                        ),
                    )),
                    _ => {
                        written.insert(at, &decl.name);
                    }
                }
            }
        }
    }
}

pub(super) fn secret(mut r: Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<SecretDecl> {
    let mut item = Item::new(file);
    let name = r.name(d, "name");
    let display_name = text(r.str(d, "display_name"));
    let description = r.req_str(d, "description");
    let required = r.bool(d, "required").unwrap_or(false);
    let auto_generate = r.bool(d, "auto_generate").unwrap_or(false);
    let format = r.str(d, "format");
    if let Some(f) = &format
        && !f.text.is_empty()
        && f.text != "base64"
    {
        d.push(r.file.at(
            &f.span,
            format!("secret format {:?} is not \"base64\"", f.text),
        ));
    }
    if required && auto_generate {
        d.push(r.file.at(
            &r.span(),
            "a secret is either required or auto_generate, not both",
        ));
    }
    let default = r.str(d, "default");
    if let Some(dv) = &default {
        if required {
            d.push(r.file.at(
                &dv.span,
                "a secret is either required or has a default, not both",
            ));
        }
        if auto_generate {
            d.push(r.file.at(
                &dv.span,
                "a secret either has a default or is auto_generate, not both",
            ));
        }
    }
    let kubernetes = kubernetes_targets(&mut r, d);
    let held_by = holder(&mut r, d);
    r.finish(
        d,
        &[(
            "user_configurable",
            "it asks for the value in Nuon's install stack; give it with `nuon installs create --secret`",
        )],
        |_| None,
    );
    if let (Some(n), Some(desc)) = (&name, description) {
        item.value = Some(SecretDecl {
            name: n.text.clone(),
            display_name,
            description: desc.text,
            required,
            auto_generate,
            format: format.map(|f| f.text).filter(|f| !f.is_empty()),
            default: text(default),
            kubernetes,
            held_by,
        });
    }
    item.name = name;
    item
}

/// Where a secret is synced into the cluster, as Nuon reads it: the
/// `kubernetes_sync_targets` tables (each a name and key in one or more
/// namespaces), or else the single `kubernetes_secret_namespace` and
/// `kubernetes_secret_name` of `kubernetes_sync = true`, whose key is
/// `value`. Names and namespaces may be templates (checked once rendered).
fn kubernetes_targets(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Vec<KubernetesSecretTarget> {
    let sync = r.bool(d, "kubernetes_sync");
    let namespace = r.str(d, "kubernetes_secret_namespace");
    let secret_name = r.str(d, "kubernetes_secret_name");
    let mut out = Vec::new();
    let tables = r.tables(d, "kubernetes_sync_targets");
    let span = r.span();
    for mut t in tables {
        let namespaces = t.str_list(d, "namespaces");
        let name = t.req_str(d, "name");
        let key = t.req_str(d, "key");
        if namespaces.is_empty() {
            d.push(t.file.at(
                &t.span(),
                "a kubernetes_sync_targets entry needs namespaces = [\"...\"] (at least one)",
            ));
        }
        for n in &namespaces {
            check_namespace(t.file, d, n);
        }
        if let Some(n) = &name {
            check_kubernetes_name(t.file, d, n);
        }
        if let Some(k) = &key {
            check_secret_key(t.file, d, k);
        }
        t.finish(d, &[], |_| None);
        if let (false, Some(name), Some(key)) = (namespaces.is_empty(), name, key) {
            out.push(KubernetesSecretTarget {
                namespaces: namespaces.into_iter().map(|n| n.text).collect(),
                name: name.text,
                key: key.text,
            });
        }
    }
    if !out.is_empty() {
        if sync == Some(false) {
            d.push(r.file.warn(
                &span,
                "kubernetes_sync is false but kubernetes_sync_targets are given: the targets take precedence and the secret is synced",
            ));
        }
        return out;
    }
    if sync != Some(true) {
        return out;
    }
    match (namespace, secret_name) {
        (Some(ns), Some(name)) => {
            check_namespace(r.file, d, &ns);
            check_kubernetes_name(r.file, d, &name);
            out.push(KubernetesSecretTarget {
                namespaces: vec![ns.text],
                name: name.text,
                key: "value".into(),
            });
        }
        (ns, name) => {
            let missing: Vec<&str> = [
                ns.is_none().then_some("kubernetes_secret_namespace"),
                name.is_none().then_some("kubernetes_secret_name"),
            ]
            .into_iter()
            .flatten()
            .collect();
            d.push(r.file.at(
                &span,
                format!(
                    "kubernetes_sync = true needs {} (or kubernetes_sync_targets)",
                    missing.join(" and ")
                ),
            ));
        }
    }
    out
}

/// A Kubernetes object name or namespace: an RFC 1123 name, unless it is a
/// template (checked once rendered).
fn check_kubernetes_name(file: &SourceFile, d: &mut Diagnostics, n: &Located) {
    if !n.text.contains("{{") && !nuon_core::app::kubernetes_name_ok(&n.text) {
        d.push(file.at(
            &n.span,
            format!(
                "{:?} is not a Kubernetes name: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (at most 253)",
                n.text
            ),
        ));
    }
}

/// A Kubernetes namespace, unless it is a template (checked once
/// rendered).
fn check_namespace(file: &SourceFile, d: &mut Diagnostics, n: &Located) {
    if !n.text.contains("{{") && !nuon_core::app::kubernetes_namespace_ok(&n.text) {
        d.push(file.at(
            &n.span,
            format!(
                "{:?} is not a Kubernetes namespace: lowercase letters, digits and '-', starting and ending with a letter or digit (at most 63)",
                n.text
            ),
        ));
    }
}

/// A key of a Kubernetes Secret's data.
fn check_secret_key(file: &SourceFile, d: &mut Diagnostics, k: &Located) {
    if !k.text.contains("{{") && !nuon_core::app::secret_key_ok(&k.text) {
        d.push(file.at(
            &k.span,
            format!(
                "{:?} is not a key of a Kubernetes Secret: letters, digits, '-', '_' and '.' (at most 253)",
                k.text
            ),
        ));
    }
}
