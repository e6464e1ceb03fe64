{{- /* The body of tf-cluster's templates/reaper/rbac.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.reaper.rbac" }}{{- if include "tf-cluster.reaper.enabled" . }}
{{- $name := include "tf-cluster.name" . }}
{{- $psNames := include "tf-cluster.reaper.psNames" . | fromJsonArray }}
{{- $labels := include "tf-cluster.labels" (dict "root" $ "component" "reaper") }}
# Least privilege for the in-cluster reaper of {{ $name }}: read this namespace's Jobs and pods,
# write Events, and delete nothing but this cluster's parameter servers (by name) and, with
# nodeFailure.replaceLostTasks, the pods a lost node holds. No Secrets (so no Helm: a
# release's Secrets cannot be limited by name), nothing cluster-wide: not even Nodes (the taint
# manager's eviction says a node is lost).
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
  {{- if include "tf-cluster.reaper.replacesLost" . }}
  # The tasks of a node that no longer answers (tfhelm/reaper/lost.py): a pod the taint manager
  # evicted and whose kubelet never confirmed it gone loses its Job's tracking finalizer
  # (patch) and is deleted with no grace. Pod names are random (a Job's), so RBAC cannot name
  # them: the reaper only touches pods labelled {{ (include "tf-cluster.contract" . | fromYaml).labels.cluster }}={{ $name }}, each request
  # conditioned on the pod's uid.
  - apiGroups: [""]
    resources: [pods]
    verbs: [patch, delete]
  {{- end }}
  {{- if and (eq .Values.mode "in-graph") (include "tf-cluster.reaper.reaps" .) }}
  {{- if include "tf-cluster.queued" . }}
  # In-graph workers run TF servers that never exit: the reaper deletes their Job (Kueue
  # would start a suspended Job of an admitted Workload again).
  - apiGroups: [batch]
    resources: [jobs]
    resourceNames: [{{ include "tf-cluster.jobName" (dict "root" $ "role" "worker") }}]
    verbs: [delete]
  {{- else }}
  # In-graph workers run TF servers that never exit: the reaper suspends their Job.
  - apiGroups: [batch]
    resources: [jobs]
    resourceNames: [{{ include "tf-cluster.jobName" (dict "root" $ "role" "worker") }}]
    verbs: [patch]
  {{- end }}
  {{- end }}
  {{- if include "tf-cluster.hasGates" . }}
  # The queue's gates (docs/queue.md): remove the scheduling gate from this cluster's PS,
  # chief and evaluator pods once Kueue admitted the workers, and evict them (their
  # Deployment or Job makes gated ones again) when Kueue preempts or requeues the workers.
  # Pod names are generated: RBAC cannot limit these to the cluster's pods.
  - apiGroups: [""]
    resources: [pods]
    verbs: [patch]
  - apiGroups: [""]
    resources: [pods/eviction]
    verbs: [create]
  {{- end }}
  # Every decision is an Event on the Job that decided.
  - apiGroups: [""]
    resources: [events]
    verbs: [create]
  {{- if include "tf-cluster.reaper.reaps" . }}
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
  {{- end }}
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
