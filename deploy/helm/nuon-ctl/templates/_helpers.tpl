{{- define "nuon-ctl.labels" -}}
app.kubernetes.io/name: nuon-ctl
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{- define "nuon-ctl.selector" -}}
app.kubernetes.io/name: nuon-ctl
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The values that cannot work together, refused with what to set. */}}
{{- define "nuon-ctl.check" -}}
{{- $db := .Values.database.existingSecret -}}
{{- if and (gt (int .Values.replicas) 1) (not $db) -}}
{{- fail (printf "replicas: %v needs PostgreSQL: the embedded store serves one replica; set database.existingSecret to a Secret holding the database URL" .Values.replicas) -}}
{{- end -}}
{{- if and $db (not .Values.secretsKey.existingSecret) -}}
{{- fail "secretsKey.existingSecret: with a database every replica must seal secrets with one key, kept apart from any pod; create a Secret holding 64 hex characters (openssl rand -hex 32) and name it here" -}}
{{- end -}}
{{- if and .Values.ingress.enabled (not (or .Values.ingress.controlHost .Values.ingress.runnerHost)) -}}
{{- fail "ingress.enabled: give ingress.controlHost (the Control API and dashboard) and ingress.runnerHost (the Runner API)" -}}
{{- end -}}
{{- end }}

{{- define "nuon-ctl.scheme" -}}
{{- if .Values.tls.secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end }}
