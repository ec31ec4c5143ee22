{{/* Labels on every object: deploy/'s one, plus Helm's own. */}}
{{- define "socklb.labels" -}}
app.kubernetes.io/name: socklb
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* kube-proxy holds 10256 and 10249: beside it socklb moves by 100. */}}
{{- define "socklb.healthzPort" -}}
{{- if .Values.healthz.port }}{{ int64 .Values.healthz.port }}{{ else if eq (include "socklb.mode" .) "beside" }}10356{{ else }}10256{{ end -}}
{{- end -}}
{{- define "socklb.metricsPort" -}}
{{- if .Values.metrics.port }}{{ int64 .Values.metrics.port }}{{ else if eq (include "socklb.mode" .) "beside" }}10349{{ else }}10249{{ end -}}
{{- end -}}

{{- define "socklb.mode" -}}
{{- $m := .Values.kubeProxy.mode -}}
{{- if not (has $m (list "replace" "beside")) -}}
{{- fail (printf "kubeProxy.mode=%q: set it to replace (socklb instead of kube-proxy) or beside (next to a running kube-proxy)" $m) -}}
{{- end -}}
{{- $m -}}
{{- end -}}

{{/* The securityContexts of values.yaml, for a release installed before
they were values (`helm upgrade --reuse-values` renders with its values). */}}
{{- define "socklb.agentSecurityContext" -}}
privileged: false
capabilities:
  drop: [ALL]
  add: [BPF, PERFMON, NET_ADMIN, SYS_ADMIN, SYS_PTRACE]
seccompProfile:
  type: RuntimeDefault
appArmorProfile:
  type: Unconfined
readOnlyRootFilesystem: true
{{- end -}}
{{- define "socklb.mountSecurityContext" -}}
privileged: false
capabilities:
  drop: [ALL]
  add: [SYS_ADMIN, SYS_CHROOT, SYS_PTRACE]
seccompProfile:
  type: RuntimeDefault
appArmorProfile:
  type: Unconfined
readOnlyRootFilesystem: true
{{- end -}}

{{/* The SocklbConfiguration file of the config value. */}}
{{- define "socklb.config" -}}
{{- merge (dict "apiVersion" "socklb.io/v1alpha1" "kind" "SocklbConfiguration") (deepCopy .Values.config) | toYaml -}}
{{- end -}}

{{- define "socklb.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
