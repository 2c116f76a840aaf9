{{/*
Names and labels. Resource names are truncated to 63 characters (the DNS label limit many
fields are held to).
*/}}
{{- define "kopc.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kopc.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kopc.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kopc.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kopc.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kopc.labels" -}}
helm.sh/chart: {{ include "kopc.chart" . }}
{{ include "kopc.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: kube-ovn
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The Deployment, Service and ServiceMonitor name: kube-ovn's (controllerName) unless emptied.
*/}}
{{- define "kopc.controllerName" -}}
{{- default (include "kopc.fullname" .) .Values.controllerName | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels kube-ovn v1.8.18's install.sh gives its controller's pods; kube-ovn's Service,
ServiceMonitor and kubectl-ko select `app`. Nothing when controllerName is empty.
*/}}
{{- define "kopc.kubeOvnLabels" -}}
{{- with .Values.controllerName }}
app: {{ . }}
component: network
type: infra
{{- end }}
{{- end }}

{{/*
What kube-ovn's Service and ServiceMonitor select (app=<controllerName>), or the chart's own
selector labels when controllerName is empty.
*/}}
{{- define "kopc.serviceSelector" -}}
{{- if .Values.controllerName }}
app: {{ .Values.controllerName }}
{{- else }}
{{- include "kopc.selectorLabels" . }}
{{- end }}
{{- end }}

{{/*
"true" when the object (apiVersion, kind, namespace, name) may be rendered: absent from the
cluster, or already this release's. kube-ovn's own Service is left as it is.
*/}}
{{- define "kopc.ours" -}}
{{- $ctx := index . 0 -}}
{{- $existing := lookup (index . 1) (index . 2) (index . 3) (index . 4) -}}
{{- if not $existing -}}
true
{{- else -}}
{{- $annotations := $existing.metadata.annotations | default dict -}}
{{- if eq (get $annotations "meta.helm.sh/release-name") $ctx.Release.Name -}}
true
{{- end -}}
{{- end -}}
{{- end }}

{{- define "kopc.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kopc.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kopc.image" -}}
{{- $repo := .Values.image.repository }}
{{- if .Values.image.registry }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .Values.image.registry) $repo }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
One flag value as the controller parses it: lists joined with commas, whole numbers without an
exponent (YAML numbers reach templates as float64, and 1000000 would print as 1e+06).
*/}}
{{- define "kopc.flagValue" -}}
{{- if kindIs "slice" . }}
{{- join "," . }}
{{- else if kindIs "float64" . }}
{{- if eq . (float64 (int64 .)) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- else }}
{{- . }}
{{- end }}
{{- end }}

{{/*
The controller's arguments as a YAML list: the chart-owned flags first, then every non-empty
`config` key in key order as --key=value, then `extraArgs`.
*/}}
{{- define "kopc.args" -}}
{{- $ssl := .Values.ovn.ssl }}
{{- if .Values.ovn.nbAddr }}
- {{ printf "--ovn-nb-addr=%s" .Values.ovn.nbAddr | quote }}
{{- end }}
{{- if $ssl.enabled }}
- {{ printf "--ovn-nb-ssl-key=%s/%s" $ssl.mountPath $ssl.keyKey | quote }}
- {{ printf "--ovn-nb-ssl-cert=%s/%s" $ssl.mountPath $ssl.certKey | quote }}
- {{ printf "--ovn-nb-ssl-ca=%s/%s" $ssl.mountPath $ssl.caKey | quote }}
{{- end }}
- {{ printf "--metrics-addr=%s" .Values.metrics.bindAddress | quote }}
- {{ printf "--metrics-port=%d" (int .Values.metrics.port) | quote }}
{{- range $key, $value := .Values.config }}
{{- if not (or (kindIs "invalid" $value) (and (kindIs "string" $value) (eq $value ""))) }}
- {{ printf "--%s=%s" $key (include "kopc.flagValue" $value) | quote }}
{{- end }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
Cross-field checks the JSON schema cannot express; each fails the render with a clear message.
*/}}
{{- define "kopc.validate" -}}
{{- $leaderElect := true }}
{{- if hasKey .Values.config "leader-elect" }}
{{- if kindIs "bool" (index .Values.config "leader-elect") }}
{{- $leaderElect = index .Values.config "leader-elect" }}
{{- end }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not $leaderElect) }}
{{- fail "replicaCount > 1 needs config.leader-elect: true (replicas would program OVN concurrently)" }}
{{- end }}
{{- $nb := .Values.ovn.nbAddr }}
{{- if and .Values.ovn.ssl.enabled $nb (not (hasPrefix "ssl:" $nb)) }}
{{- fail "ovn.ssl.enabled: ovn.nbAddr must use ssl: remotes (e.g. ssl:[10.0.0.1]:6641)" }}
{{- end }}
{{- if and (not .Values.ovn.ssl.enabled) (contains "ssl:" $nb) }}
{{- fail "ovn.nbAddr has ssl: remotes: set ovn.ssl.enabled=true and ovn.ssl.secretName" }}
{{- end }}
{{- if eq (index .Values.config "network-type" | default "geneve") "vlan" }}
{{- if not (index .Values.config "default-interface-name") }}
{{- fail "config.network-type vlan needs config.default-interface-name" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The Service label whose value the ServiceMonitor makes Prometheus' `job` label.
*/}}
{{- define "kopc.jobLabelKey" -}}
kube-ovn-pod-controller/job
{{- end }}

{{/*
"true" when the CRD named by the second argument should be rendered: crds.install is set and the
cluster has no such CRD owned by something else (kube-ovn's install). lookup returns nothing under
`helm template`, so the CRD is rendered there.
*/}}
{{- define "kopc.installCrd" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- if $ctx.Values.crds.install -}}
{{- $existing := lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition" "" $name -}}
{{- if not $existing -}}
true
{{- else -}}
{{- $annotations := $existing.metadata.annotations | default dict -}}
{{- if eq (get $annotations "meta.helm.sh/release-name") $ctx.Release.Name -}}
true
{{- end -}}
{{- end -}}
{{- end -}}
{{- end }}
