{{/*
Kubernetes gang scheduling (`gang.enabled`; alpha in Kubernetes 1.36, the GenericWorkload and
GangScheduling feature gates and the scheduling.k8s.io/v1alpha2 API): one PodGroup for the
whole TF cluster, named by every task pod's `spec.schedulingGroup` (docs/gang.md). Without it
nothing here renders.
*/}}

{{/* Is the cluster one gang? "true" or "". */}}
{{- define "tf-cluster.gang" -}}
{{- if .Values.gang.enabled }}true{{ end -}}
{{- end }}

{{/* The PodGroup's name: `<cluster>-gang-<generation>`. Call with (dict "root" $), and
"generation" when the caller has it. */}}
{{- define "tf-cluster.podGroupName" -}}
{{- printf "%s-gang-%s" (include "tf-cluster.name" .root) (.generation | default (include "tf-cluster.generation" .root)) -}}
{{- end }}

{{/* The gang's minCount: every task pod of the cluster (tf-cluster.counts). */}}
{{- define "tf-cluster.gangMinCount" -}}
{{- $n := 0 -}}
{{- range $role, $count := include "tf-cluster.counts" . | fromJson }}{{ $n = add $n (int $count) }}{{ end -}}
{{- $n -}}
{{- end }}

{{/* A task pod's reference to the gang; call with (dict "root" $). */}}
{{- define "tf-cluster.gangGroup" -}}
{{- if include "tf-cluster.gang" .root }}
# Scheduled all-or-nothing with the cluster's other tasks (the PodGroup `gang.enabled` renders).
schedulingGroup:
  podGroupName: {{ include "tf-cluster.podGroupName" (dict "root" .root) }}
{{- end }}
{{- end }}
