{{/*
Kueue (`queue.name`): the worker Job is the cluster's one Workload; the pods of the other
roles (contract `queue.gatedRoles`) carry a scheduling gate that the in-cluster controller
removes while the workers are admitted (docs/queue.md). Without a queue nothing here renders.
*/}}

{{/* Is the cluster queued? "true" or "". */}}
{{- define "tf-cluster.queued" -}}
{{- if .Values.queue.name }}true{{ end -}}
{{- end }}

{{/* The worker Job's Kueue labels: its LocalQueue and WorkloadPriorityClass. */}}
{{- define "tf-cluster.queueLabels" -}}
{{- $q := (include "tf-cluster.contract" . | fromYaml).queue -}}
{{ $q.nameLabel }}: {{ .Values.queue.name | quote }}
{{- with .Values.queue.priorityClass }}
{{ $q.priorityLabel }}: {{ . | quote }}
{{- end }}
{{- end }}

{{/* A gated role's pods wait for the workers' admission; call with (dict "root" $ "role" "ps"). */}}
{{- define "tf-cluster.queueGate" -}}
{{- $q := (include "tf-cluster.contract" .root | fromYaml).queue -}}
{{- if and (include "tf-cluster.queued" .root) (has .role $q.gatedRoles) }}
# Held until Kueue admits the cluster's workers; the in-cluster controller removes the gate.
schedulingGates:
  - name: {{ $q.gate }}
{{- end }}
{{- end }}

{{/* Does the cluster have gated pods (PS, a chief or an evaluator), whose gates the
in-cluster controller must open? "true" or "". */}}
{{- define "tf-cluster.hasGates" -}}
{{- $v := .Values -}}
{{- if and (include "tf-cluster.queued" .) (or (gt (int $v.ps.replicas) 0) $v.chief.enabled $v.evaluator.enabled) }}true{{ end -}}
{{- end }}
