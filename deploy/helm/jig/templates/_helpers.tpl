{{/*
The prefix of every object's name: the release's name where it contains "jig" (a release `jig` gets the names of
deploy/kubernetes: jig-gateway, jig-etcd, jig-node), else RELEASE-jig. At most 47 characters: the StatefulSet
FULLNAME-etcd must leave its pods' controller-revision-hash label (the name and 11 more) within 63. A DNS label,
as Services need.
*/}}
{{- define "jig.fullname" -}}
{{- $name := ternary .Release.Name (printf "%s-%s" .Release.Name .Chart.Name) (contains .Chart.Name .Release.Name) -}}
{{- $name = $name | trunc 47 | trimSuffix "-" -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "the release name gives objects the prefix %q, which Services refuse: use lower-case letters, digits and '-', starting with a letter" $name) -}}
{{- end -}}
{{- $name -}}
{{- end }}

{{/* The labels that pick one component's pods: call with (dict "root" $ "component" "gateway"). */}}
{{- define "jig.selectorLabels" -}}
app.kubernetes.io/name: jig
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Every object's labels: the selector's and Helm's own. */}}
{{- define "jig.labels" -}}
{{ include "jig.selectorLabels" . }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ .root.Chart.Name }}-{{ .root.Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "jig.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A Service's in-cluster DNS name: (list $ "etcd") is FULLNAME-etcd.NAMESPACE.svc.DOMAIN. */}}
{{- define "jig.serviceHost" -}}
{{- $root := index . 0 -}}
{{ include "jig.fullname" $root }}-{{ index . 1 }}.{{ $root.Release.Namespace }}.svc.{{ $root.Values.clusterDomain }}
{{- end }}

{{/* The client URLs of the gateways' etcd: this chart's member, or etcd.endpoints; empty without etcd. */}}
{{- define "jig.etcdEndpoints" -}}
{{- if .Values.etcd.enabled -}}
{{ list (printf "http://%s:2379" (include "jig.serviceHost" (list . "etcd"))) | toJson }}
{{- else if .Values.etcd.endpoints -}}
{{ .Values.etcd.endpoints | toJson }}
{{- end }}
{{- end }}

{{- define "jig.controlTokenSecret" -}}
{{ .Values.secrets.controlToken | default (printf "%s-control-token" (include "jig.fullname" .)) }}
{{- end }}

{{- define "jig.nodeTokenSecret" -}}
{{ .Values.secrets.nodeToken | default (printf "%s-node-token" (include "jig.fullname" .)) }}
{{- end }}
