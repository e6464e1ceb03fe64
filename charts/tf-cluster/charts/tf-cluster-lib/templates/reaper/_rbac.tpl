{{- /* The body of tf-cluster's templates/reaper/rbac.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.reaper.rbac" }}{{- if include "tf-cluster.reaper.enabled" . }}
{{- $name := include "tf-cluster.name" . }}
{{- $psNames := include "tf-cluster.reaper.psNames" . | fromJsonArray }}
{{- $labels := include "tf-cluster.labels" (dict "root" $ "component" "reaper") }}
# Least privilege for `tfhelm reap {{ $name }} --delete-directly`: read this namespace's Jobs and
# pods, write Events, and delete nothing but this cluster's parameter servers (by name). No Secrets
# (so no Helm: a release's Secrets cannot be limited by name), nothing cluster-wide.
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ include "tf-cluster.reaperName" . }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
rules:
  # One watch on the cluster's Jobs. A label selector cannot be limited by name.
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [list, watch]
  # One watch on the decisive tasks' Succeeded pods (metadata only): training is done at the
  # last task's success, before the Job controller's next sync says so.
  - apiGroups: [""]
    resources: [pods]
    verbs: [list, watch]
  {{- if eq .Values.mode "in-graph" }}
  # In-graph workers run TF servers that never exit: the reaper suspends their Job.
  - apiGroups: [batch]
    resources: [jobs]
    resourceNames: [{{ include "tf-cluster.jobName" (dict "root" $ "role" "worker") }}]
    verbs: [patch]
  {{- end }}
  # Every decision is an Event on the Job that decided.
  - apiGroups: [""]
    resources: [events]
    verbs: [create]
  # PS Deployments and Services: found by label (list), deleted only by name. The reaper
  # deletes them itself; Helm's uninstall then finds them gone.
  - apiGroups: [apps]
    resources: [deployments]
    verbs: [list]
  - apiGroups: [apps]
    resources: [deployments]
    resourceNames: {{ toJson $psNames }}
    verbs: [delete]
  - apiGroups: [""]
    resources: [services]
    verbs: [list]
  - apiGroups: [""]
    resources: [services]
    resourceNames: {{ toJson $psNames }}
    verbs: [delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ include "tf-cluster.reaperName" . }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ include "tf-cluster.reaperName" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "tf-cluster.reaperName" . }}
    namespace: {{ .Release.Namespace }}
{{- end }}
{{ end }}
