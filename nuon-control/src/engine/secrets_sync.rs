//! The secrets sync: the app's secrets written into Kubernetes Secrets of
//! the sandbox's cluster, as one `kubernetes_manifest` job.

use std::collections::BTreeMap;

use nuon_core::app::template::RenderContext;
use nuon_core::workflow::WorkflowKind;
use nuon_core::{HelmAction, KubernetesJob};
use serde_json::Value;

use super::Ctx;
use super::render::{kubeconfig_of, render_text};

/// The secrets sync: every Kubernetes Secret the config's secrets are
/// synced to (with its namespace), each key holding its secret's value
/// (base64 as Kubernetes keeps `data`; a `format = "base64"` value is
/// decoded and encoded again, so only base64 reaches the manifest),
/// applied server-side to the sandbox's cluster. The objects are written
/// as JSON documents (which YAML reads), so no value can add to them.
/// Also the encoded values, for the job's redactions.
pub(super) fn secrets_job(
    cx: &Ctx,
    ctx: &RenderContext,
    values: &BTreeMap<String, String>,
    synced_before: &[String],
) -> std::result::Result<(KubernetesJob, Vec<String>), String> {
    // A deprovision writes nothing, so it deletes all the last sync wrote.
    let removing = cx.wf.kind == WorkflowKind::Deprovision;
    let (objects, encoded) = secret_objects(cx, ctx, values)?;
    let namespaces: std::collections::BTreeSet<&String> =
        objects.keys().map(|(ns, _)| ns).collect();
    // The namespaces first (applied server-side, an existing one is left
    // as it is but for nothing), then the Secrets.
    let docs = namespaces
        .iter()
        .map(|ns| {
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        })
        .chain(objects.iter().map(|((ns, name), data)| {
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": {"app.kubernetes.io/managed-by": "nuon"},
                },
                "type": "Opaque",
                "data": data,
            })
        }))
        .map(|d| format!("{d}\n"))
        .collect::<Vec<_>>()
        .join("---\n");
    // What the last sync wrote and this one does not.
    let now: std::collections::BTreeSet<String> = objects
        .keys()
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect();
    let gone: Vec<String> = synced_before
        .iter()
        .filter(|o| !now.contains(*o))
        .cloned()
        .collect();
    let delete_namespaced = gone
        .iter()
        .filter_map(|o| o.split_once('/'))
        .map(|(ns, name)| format!("{ns}/secret/{name}"))
        .collect();
    let job = KubernetesJob {
        action: if removing {
            HelmAction::Destroy
        } else {
            HelmAction::Apply
        },
        component: "secrets".into(),
        manifest: (!removing).then_some(docs),
        kustomize: None,
        namespace: None,
        kubeconfig: kubeconfig_of(cx, ctx, None)?,
        applied: Vec::new(),
        policies: Vec::new(),
        delete_namespaced,
    };
    Ok((job, encoded))
}

/// The Secrets the config's secrets are synced to on this install, by
/// namespace and name, with their data.
pub(super) type SecretObjects = BTreeMap<(String, String), serde_json::Map<String, Value>>;

/// [`SecretObjects`] of the install's `values` (rendered with `ctx`), and
/// the encoded values.
pub(super) fn secret_objects(
    cx: &Ctx,
    ctx: &RenderContext,
    values: &BTreeMap<String, String>,
) -> std::result::Result<(SecretObjects, Vec<String>), String> {
    use base64::Engine as _;
    let b64 = &base64::engine::general_purpose::STANDARD;
    let mut objects: BTreeMap<(String, String), serde_json::Map<String, Value>> = BTreeMap::new();
    let mut encoded = Vec::new();
    // A deprovision's secrets step removes them: it writes none.
    if cx.wf.kind == WorkflowKind::Deprovision {
        return Ok((objects, encoded));
    }
    for s in &cx.config.secrets {
        if s.kubernetes.is_empty() {
            continue;
        }
        // A secret the install gave no value is written empty, as the
        // key its readers expect.
        let value = values.get(&s.name).map(String::as_str).unwrap_or("");
        let data = if s.held_by_customer() {
            // The runner fills it, in base64, from the customer's store.
            nuon_core::app::SecretDecl::placeholder_base64(&s.name)
        } else if s.format.as_deref() == Some("base64") {
            let bytes = b64.decode(value.trim()).map_err(|_| {
                format!(
                    "secret {} has format = \"base64\" and its value on this install is not base64: set it again (`nuon installs secrets set`)",
                    s.name
                )
            })?;
            b64.encode(bytes)
        } else {
            b64.encode(value)
        };
        if !value.is_empty() && !s.held_by_customer() {
            encoded.push(data.clone());
        }
        for t in &s.kubernetes {
            let who = format!("secret {} kubernetes sync", s.name);
            let name = render_text(&t.name, ctx, &format!("{who} name"))?;
            let key = render_text(&t.key, ctx, &format!("{who} key"))?;
            if !nuon_core::app::kubernetes_name_ok(&name) {
                return Err(format!("{who}: {name:?} is not a Kubernetes Secret name"));
            }
            if !nuon_core::app::secret_key_ok(&key) {
                return Err(format!(
                    "{who}: {key:?} is not a key of a Kubernetes Secret"
                ));
            }
            for ns in &t.namespaces {
                let ns = render_text(ns, ctx, &format!("{who} namespace"))?;
                if !nuon_core::app::kubernetes_namespace_ok(&ns) {
                    return Err(format!("{who}: {ns:?} is not a Kubernetes namespace"));
                }
                objects
                    .entry((ns, name.clone()))
                    .or_default()
                    .insert(key.clone(), Value::String(data.clone()));
            }
        }
    }
    Ok((objects, encoded))
}
