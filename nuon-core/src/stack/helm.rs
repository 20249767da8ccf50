//! The `helm` flavour: a Helm chart that runs the install's runner in a
//! Kubernetes cluster of the customer (the Kubernetes runner types, and
//! any install whose customer would rather run it there): its own
//! namespace, a ServiceAccount (annotations for IRSA or workload identity),
//! the runner's settings and one-time token in a Secret, a StatefulSet of
//! one whose volume keeps the runner's token and spool across restarts,
//! and, unless narrowed, cluster-admin for the ServiceAccount (the runner
//! installs the app's charts and manifests).
//!
//! Every value is written as a quoted YAML string, so nothing a config
//! holds changes the chart's structure.

use std::fmt::Write as _;

use super::{StackSpec, file, snake};
use crate::wire::StackFile;

/// The chart's files (under `nuon-runner/`) and how to install it.
pub(crate) fn files(spec: &StackSpec) -> Result<(Vec<StackFile>, String), String> {
    let namespace = namespace_of(spec);
    let chart_version = chart_version(&spec.version);
    let dir = "nuon-runner";
    let files = vec![
        file(
            &format!("{dir}/Chart.yaml"),
            chart_yaml(spec, &chart_version),
            0o644,
        ),
        file(
            &format!("{dir}/values.yaml"),
            values_yaml(spec, &namespace),
            0o600,
        ),
        file(
            &format!("{dir}/.helmignore"),
            "*.tgz\n.git/\n".into(),
            0o644,
        ),
        file(
            &format!("{dir}/templates/_helpers.tpl"),
            HELPERS.into(),
            0o644,
        ),
        file(
            &format!("{dir}/templates/namespace.yaml"),
            NAMESPACE.into(),
            0o644,
        ),
        file(
            &format!("{dir}/templates/serviceaccount.yaml"),
            SERVICE_ACCOUNT.into(),
            0o644,
        ),
        file(
            &format!("{dir}/templates/secret.yaml"),
            SECRET.into(),
            0o644,
        ),
        file(&format!("{dir}/templates/rbac.yaml"), RBAC.into(), 0o644),
        file(
            &format!("{dir}/templates/service.yaml"),
            SERVICE.into(),
            0o644,
        ),
        file(
            &format!("{dir}/templates/statefulset.yaml"),
            STATEFULSET.into(),
            0o644,
        ),
        file(&format!("{dir}/templates/NOTES.txt"), NOTES.into(), 0o644),
    ];
    let instructions = format!(
        "In the Kubernetes cluster that will run install {install}'s runner: `helm install nuon-runner ./nuon-runner --set image.repository=REGISTRY/nuon-runner` \
         (the image of nuon-runner {version} your registry holds; it makes namespace {namespace} and runs the runner there; `--set namespace.create=false --namespace NS` uses one of yours; \
         {identity} gives it a cloud identity). \
         values.yaml holds the one-time token the runner phones home with (it expires in {ttl} and works once): keep it private. \
         The install's provision waits for the phone-home. To update the runner's settings later, download the chart again (a new token) and `helm upgrade` with it.",
        install = spec.install_name,
        version = spec.version,
        ttl = spec.token_ttl,
        identity = identity_flag(&spec.runner.runner_type),
    );
    Ok((files, instructions))
}

/// The `--set` that gives the runner's service account the workload
/// identity of the install's cloud (its runner type): EKS's IAM role,
/// Azure's workload identity, GKE's service account.
fn identity_flag(runner_type: &str) -> &'static str {
    match runner_type.split('-').next().unwrap_or_default() {
        "azure" => {
            "`--set serviceAccount.annotations.azure\\.workload\\.identity/client-id=CLIENT_ID` (with the pod label `azure.workload.identity/use: \"true\"`)"
        }
        "gcp" => {
            "`--set serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account=NAME@PROJECT.iam.gserviceaccount.com`"
        }
        "aws" => "`--set serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=ARN`",
        _ => {
            "the service-account annotation of your cluster's workload identity (`eks.amazonaws.com/role-arn`, `azure.workload.identity/client-id` or `iam.gke.io/gcp-service-account`)"
        }
    }
}

/// The runner's namespace: `nuon-runner-NAME`, a DNS label.
fn namespace_of(spec: &StackSpec) -> String {
    let mut ns: String = format!(
        "nuon-runner-{}",
        snake(&spec.install_name).replace('_', "-")
    )
    .chars()
    .take(63)
    .collect();
    while ns.ends_with('-') {
        ns.pop();
    }
    ns
}

/// A chart version is SemVer: the control plane's version when it is one.
fn chart_version(version: &str) -> String {
    let core = version.split(['-', '+']).next().unwrap_or("");
    let ok = core.split('.').count() == 3
        && core
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    if ok {
        version.to_owned()
    } else {
        "0.1.0".into()
    }
}

/// A YAML double-quoted string (JSON's escapes are YAML's).
fn q(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

fn chart_yaml(spec: &StackSpec, version: &str) -> String {
    format!(
        "apiVersion: v2\n\
         name: nuon-runner\n\
         description: {}\n\
         type: application\n\
         version: {}\n\
         appVersion: {}\n\
         keywords:\n  - nuon\n  - byoc\n  - runner\n",
        q(&format!(
            "The nuon runner of install {} ({}) of app {}: runs the install's jobs in this cluster",
            spec.install_name, spec.install_id, spec.app_name
        )),
        version,
        q(&spec.version),
    )
}

fn values_yaml(spec: &StackSpec, namespace: &str) -> String {
    let mut v = String::new();
    let _ = writeln!(
        v,
        "# The runner of install {}. Holds a one-time token: keep it private.",
        spec.install_id
    );
    let _ = write!(
        v,
        "install:\n  id: {id}\n  name: {name}\n\n\
         image:\n  # Required: the registry and repository of your nuon-runner image (its entry point is nuon-runner), e.g.\n  # what `nuon images tool --binary nuon-runner=PATH --tag VERSION --store REGISTRY` pushed.\n  repository: \"\"\n  # Empty: the chart's appVersion.\n  tag: \"\"\n  pullPolicy: IfNotPresent\n\n\
         namespace:\n  # The chart makes the runner's own namespace; false: the release's namespace.\n  create: true\n  name: {ns}\n\n\
         runner:\n  apiUrl: {api}\n  signingKey: {key}\n  installToken: {token}\n  slots: 4\n  helmDriver: {driver}\n  \
         # More of what the runner reports as .nuon.install_stack.outputs.* (values without blanks).\n  stackOutputs: {{}}\n\n\
         serviceAccount:\n  create: true\n  name: nuon-runner\n  # eks.amazonaws.com/role-arn, azure.workload.identity/client-id, iam.gke.io/gcp-service-account\n  annotations: {{}}\n\n\
         rbac:\n  # The runner installs the app's charts and manifests: cluster-admin, unless you bind narrower roles yourself.\n  clusterAdmin: true\n\n\
         persistence:\n  # Keeps the runner's token and unshipped results across restarts.\n  size: 10Gi\n  storageClass: \"\"\n\n\
         metrics:\n  port: 9464\n\n\
         resources:\n  requests:\n    cpu: 250m\n    memory: 512Mi\n  limits:\n    memory: 2Gi\n\n\
         nodeSelector: {{}}\n\
         tolerations: []\n",
        id = q(&spec.install_id),
        name = q(&spec.install_name),
        ns = q(namespace),
        api = q(&spec.runner_api),
        key = q(&spec.signing_key),
        token = q(&spec.install_token),
        driver = q(spec.runner.helm_driver.as_deref().unwrap_or("secret")),
    );
    v
}

const HELPERS: &str = r#"{{/* The runner's namespace: its own, or the release's. */}}
{{- define "nuon-runner.namespace" -}}
{{- if .Values.namespace.create -}}
{{- required "namespace.name is required when namespace.create is true" .Values.namespace.name -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "nuon-runner.selector" -}}
app.kubernetes.io/name: nuon-runner
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nuon-runner.labels" -}}
{{ include "nuon-runner.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
nuon.io/install: {{ .Values.install.id | quote }}
{{- end -}}

{{- define "nuon-runner.serviceAccount" -}}
{{- .Values.serviceAccount.name | default "nuon-runner" -}}
{{- end -}}

{{/* What the runner reports on phoning home. */}}
{{- define "nuon-runner.outputs" -}}
{{- $out := list (printf "namespace=%s" (include "nuon-runner.namespace" .)) (printf "service_account=%s" (include "nuon-runner.serviceAccount" .)) "platform=kubernetes" -}}
{{- range $k, $v := .Values.runner.stackOutputs -}}
{{- if regexMatch "^[A-Za-z_][A-Za-z0-9_]{0,63}$" $k -}}
{{- $out = append $out (printf "%s=%s" $k (toString $v | nospace)) -}}
{{- else -}}
{{- fail (printf "runner.stackOutputs: %q is not a name (letters, digits and _)" $k) -}}
{{- end -}}
{{- end -}}
{{- join " " $out -}}
{{- end -}}
"#;

const NAMESPACE: &str = r#"{{- if .Values.namespace.create }}
apiVersion: v1
kind: Namespace
metadata:
  name: {{ include "nuon-runner.namespace" . }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
{{- end }}
"#;

const SERVICE_ACCOUNT: &str = r#"{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "nuon-runner.serviceAccount" . }}
  namespace: {{ include "nuon-runner.namespace" . }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
  {{- with .Values.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
"#;

const SECRET: &str = r#"apiVersion: v1
kind: Secret
metadata:
  name: {{ .Release.Name }}-settings
  namespace: {{ include "nuon-runner.namespace" . }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
type: Opaque
stringData:
  NUON_RUNNER_API_URL: {{ required "runner.apiUrl is required: the control plane's Runner API" .Values.runner.apiUrl | quote }}
  NUON_RUNNER_SIGNING_KEY: {{ required "runner.signingKey is required: the org's public key" .Values.runner.signingKey | quote }}
  NUON_RUNNER_INSTALL_TOKEN: {{ required "runner.installToken is required: download the stack again for a new one" .Values.runner.installToken | quote }}
  NUON_RUNNER_STACK_OUTPUTS: {{ include "nuon-runner.outputs" . | quote }}
"#;

const RBAC: &str = r#"{{- if .Values.rbac.clusterAdmin }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ printf "%s-%s" .Release.Name (include "nuon-runner.namespace" .) | trunc 63 | trimSuffix "-" }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: cluster-admin
subjects:
  - kind: ServiceAccount
    name: {{ include "nuon-runner.serviceAccount" . }}
    namespace: {{ include "nuon-runner.namespace" . }}
{{- end }}
"#;

const SERVICE: &str = r#"apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
  namespace: {{ include "nuon-runner.namespace" . }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
spec:
  clusterIP: None
  selector:
    {{- include "nuon-runner.selector" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .Values.metrics.port }}
      targetPort: metrics
"#;

const STATEFULSET: &str = r#"apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}
  namespace: {{ include "nuon-runner.namespace" . }}
  labels:
    {{- include "nuon-runner.labels" . | nindent 4 }}
spec:
  serviceName: {{ .Release.Name }}
  replicas: 1
  selector:
    matchLabels:
      {{- include "nuon-runner.selector" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "nuon-runner.labels" . | nindent 8 }}
      annotations:
        checksum/settings: {{ include (print $.Template.BasePath "/secret.yaml") . | sha256sum }}
    spec:
      serviceAccountName: {{ include "nuon-runner.serviceAccount" . }}
      # A job's drain and cancel ladder take up to 10 min.
      terminationGracePeriodSeconds: 660
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        fsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: runner
          image: "{{ required "image.repository: set the registry and repository of your nuon-runner image (--set image.repository=REGISTRY/nuon-runner)" .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}"
          imagePullPolicy: {{ .Values.image.pullPolicy }}
          args: ["run"]
          envFrom:
            - secretRef:
                name: {{ .Release.Name }}-settings
          env:
            - name: NUON_RUNNER_WORK_DIR
              value: /var/lib/nuon-runner
            - name: NUON_RUNNER_SLOTS
              value: {{ .Values.runner.slots | quote }}
            - name: NUON_RUNNER_METRICS_LISTEN
              value: {{ printf "0.0.0.0:%v" .Values.metrics.port | quote }}
            - name: HELM_DRIVER
              value: {{ .Values.runner.helmDriver | quote }}
          ports:
            - name: metrics
              containerPort: {{ .Values.metrics.port }}
          volumeMounts:
            - name: work
              mountPath: /var/lib/nuon-runner
            - name: tmp
              mountPath: /tmp
          resources:
            {{- toYaml .Values.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
      volumes:
        - name: tmp
          emptyDir: {}
      {{- with .Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  volumeClaimTemplates:
    - metadata:
        name: work
      spec:
        accessModes: ["ReadWriteOnce"]
        {{- with .Values.persistence.storageClass }}
        storageClassName: {{ . | quote }}
        {{- end }}
        resources:
          requests:
            storage: {{ .Values.persistence.size }}
"#;

const NOTES: &str = r#"The nuon runner of install {{ .Values.install.name }} runs in namespace {{ include "nuon-runner.namespace" . }}.
It phones home once with its one-time token, then keeps its own token on its volume.

  kubectl -n {{ include "nuon-runner.namespace" . }} logs statefulset/{{ .Release.Name }}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::test_spec;

    #[test]
    fn values_quote_what_the_config_holds_and_the_version_is_semver() {
        let mut spec = test_spec();
        spec.install_name = "acme: \"prod\"\n".into();
        let v = values_yaml(&spec, "ns");
        assert!(v.contains(r#"name: "acme: \"prod\"\n""#), "{v}");
        assert_eq!(chart_version("1.2.3"), "1.2.3");
        assert_eq!(chart_version("dev"), "0.1.0");
        assert_eq!(namespace_of(&test_spec()), "nuon-runner-acme-prod");
    }

    /// The identity the instructions suggest is the install's cloud's
    /// (an Azure install was once told of EKS's role annotation).
    #[test]
    fn the_instructions_name_the_identity_of_the_installs_cloud() {
        for (runner_type, says, never) in [
            ("azure-aks", "azure\\.workload\\.identity/client-id", "eks"),
            ("gcp", "iam\\.gke\\.io/gcp-service-account", "eks"),
            ("aws-eks", "eks\\.amazonaws\\.com/role-arn", "azure"),
        ] {
            let mut spec = test_spec();
            spec.runner.runner_type = runner_type.into();
            let (_, said) = files(&spec).unwrap();
            assert!(
                said.contains(says) && !said.contains(never),
                "{runner_type}: {said}"
            );
        }
    }
}
