//! The keys only one kind of component has, read into its
//! [`ComponentSpec`], with the sources that kind may come from.
//!
//! Every key a kind takes is read even when a required one is missing, so
//! that one mistake is reported once, not again as unknown keys.

use super::keys::{pulumi, terraform_version, var_files};
use super::reader::{Located, Reader, strings_in, text};
use super::sources::source;
use super::{
    ComponentKind, ComponentSpec, DockerBuildSpec, HelmSpec, Kustomize, ManifestSpec, PulumiSpec,
    Source, TerraformSpec, WasmSpec,
};
use nuon_core::app::Diagnostics;

/// What a component of `kind` is made of beyond the common keys, and where
/// it comes from: `None` for either where a key it needs is missing or
/// wrong (reported in `d`). Its templated strings go to `strings`.
pub(super) fn read(
    kind: ComponentKind,
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
    take_ownership: bool,
) -> (Option<ComponentSpec>, Option<Source>) {
    match kind {
        ComponentKind::TerraformModule => terraform(r, d, strings),
        ComponentKind::HelmChart => helm(r, d, strings, take_ownership),
        ComponentKind::ContainerImage => (
            Some(ComponentSpec::ContainerImage),
            source(r, d, &["public", "aws_ecr", "oci"], true),
        ),
        ComponentKind::DockerBuild => docker_build(r, d, strings),
        ComponentKind::KubernetesManifest => manifest(r, d, strings),
        ComponentKind::Pulumi => {
            let program = pulumi(r, d, "config", strings);
            let env_vars = r.str_map(d, "env_vars", strings);
            let spec = program.map(|pulumi| ComponentSpec::Pulumi(PulumiSpec { pulumi, env_vars }));
            (spec, source(r, d, &["path", "public_repo", "git"], true))
        }
        ComponentKind::Wasm => wasm(r, d, strings),
    }
}

fn terraform(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
) -> (Option<ComponentSpec>, Option<Source>) {
    let version = terraform_version(r, d);
    let vars = r.map(d, "vars", strings);
    let env_vars = r.str_map(d, "env_vars", strings);
    let var_files = var_files(r, d, "var_file", strings);
    let spec = version.map(|v| {
        ComponentSpec::TerraformModule(TerraformSpec {
            terraform_version: v.text,
            vars,
            env_vars,
            var_files,
        })
    });
    let src = source(r, d, &["path", "public_repo", "git", "oci"], true);
    (spec, src)
}

fn helm(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
    take_ownership: bool,
) -> (Option<ComponentSpec>, Option<Source>) {
    let chart = r.req_str(d, "chart_name");
    let namespace = r.str(d, "namespace").map(|ns| {
        strings.push(ns.clone());
        ns.text
    });
    let driver = r.str(d, "storage_driver");
    if let Some(s) = &driver
        && !["configmap", "secret"].contains(&s.text.as_str())
    {
        d.push(r.file.at(
            &s.span,
            format!("storage_driver {:?} is not configmap or secret", s.text),
        ));
    }
    let values = r.map(d, "values", strings);
    let values_files = var_files(r, d, "values_file", strings);
    let spec = chart.map(|chart| {
        ComponentSpec::HelmChart(HelmSpec {
            chart_name: chart.text,
            namespace,
            storage_driver: text(driver),
            values,
            values_files,
            take_ownership,
        })
    });
    let src = source(
        r,
        d,
        &["path", "public_repo", "git", "helm_repo", "oci"],
        true,
    );
    (spec, src)
}

fn docker_build(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
) -> (Option<ComponentSpec>, Option<Source>) {
    let dockerfile = r.req_str(d, "dockerfile");
    let env_vars = r.str_map(d, "env_vars", strings);
    let target = text(r.str(d, "target"));
    let build_args = r.str_map(d, "build_args", strings);
    let spec = dockerfile.map(|file| {
        ComponentSpec::DockerBuild(DockerBuildSpec {
            dockerfile: file.text,
            target,
            build_args,
            env_vars,
        })
    });
    (spec, source(r, d, &["path", "public_repo", "git"], true))
}

/// `manifest` (inline objects) or `[kustomize]` (built from the source),
/// exactly one.
fn manifest(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
) -> (Option<ComponentSpec>, Option<Source>) {
    let namespace = r.str(d, "namespace").map(|ns| {
        strings.push(ns.clone());
        ns.text
    });
    let manifest = r.str(d, "manifest");
    let kustomize = r.table(d, "kustomize").map(|mut t| {
        let path = t.req_str(d, "path");
        let patches = t.str_list(d, "patches");
        let enable_helm = t.bool(d, "enable_helm").unwrap_or(false);
        let restrictor = t.str(d, "load_restrictor");
        if let Some(lr) = &restrictor
            && !["rootOnly", "none"].contains(&lr.text.as_str())
        {
            d.push(t.file.at(
                &lr.span,
                format!("load_restrictor {:?} is not rootOnly or none", lr.text),
            ));
        }
        t.finish(d, &[], |_| None);
        path.map(|path| Kustomize {
            path: path.text,
            patches: patches.into_iter().map(|p| p.text).collect(),
            enable_helm,
            load_restrictor: text(restrictor),
        })
    });
    let spec = |manifest, kustomize| {
        Some(ComponentSpec::KubernetesManifest(ManifestSpec {
            namespace: namespace.clone(),
            manifest,
            kustomize,
        }))
    };
    match (manifest, kustomize) {
        (Some(m), None) => {
            strings.push(m.clone());
            r.know(&["path", "public_repo", "git"]);
            (spec(Some(m.text), None), Some(Source::Inline))
        }
        (None, Some(k)) => {
            let src = source(r, d, &["path", "public_repo", "git"], true);
            match k {
                Some(k) => (spec(None, Some(k)), src),
                None => (None, src),
            }
        }
        (Some(m), Some(_)) => {
            d.push(r.file.at(
                &m.span,
                "a kubernetes_manifest has either manifest or [kustomize], not both",
            ));
            (None, None)
        }
        (None, None) => {
            d.push(r.file.at(
                &r.span(),
                "a kubernetes_manifest needs manifest (inline YAML, or a file of the config) or [kustomize]",
            ));
            (None, None)
        }
    }
}

fn wasm(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
) -> (Option<ComponentSpec>, Option<Source>) {
    let mut spec = WasmSpec::default();
    if let Some((v, raw)) = r.any(d, "config") {
        if v.is_object() {
            strings_in(raw, strings);
            spec.config = Some(v);
        } else {
            d.push(r.file.at(&raw.span(), "\"config\" must be a table"));
        }
    }
    if let Some((v, raw)) = r.any(d, "capabilities") {
        if v.is_object() {
            spec.capabilities = Some(v);
        } else {
            d.push(r.file.at(&raw.span(), "\"capabilities\" must be a table"));
        }
    }
    let src = source(r, d, &["path", "public_repo", "git", "oci"], true);
    (Some(ComponentSpec::Wasm(spec)), src)
}
