{{- /* The body of tf-cluster's templates/pdb/poddisruptionbudget.yaml (kept here, out of every stored release). */ -}}
{{/*
The workers' PodDisruptionBudget (`nodeFailure.disruptionBudget`), for a cluster with
parameter servers and more than one worker: a drain (or any eviction) takes one worker at a
time, the next once the one before runs again elsewhere, and the others train meanwhile
(between-graph workers each apply their own updates; in-graph, the coordinator schedules on
the workers it has). It never blocks for good: at most one worker may be away, a task that is
not ready may always go (`unhealthyPodEvictionPolicy: AlwaysAllow`), and a finished worker
leaves its node by itself. None for the PS (losing one stops the training however it goes:
all at once costs one restart, one by one as many as there are PS), nor for a collective
cluster (any lost worker stops all of them: one at a time would restart it once per worker).
*/}}
{{ define "tf-cluster.manifest.pdb.poddisruptionbudget" }}
{{- $v := .Values }}
{{- if and $v.nodeFailure.disruptionBudget (include "tf-cluster.holds" (dict "root" $ "part" "worker")) (gt (int $v.ps.replicas) 0) (gt (int $v.worker.replicas) 1) }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "tf-cluster.jobServiceName" (dict "root" $ "role" "worker") }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "worker") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  # As maxUnavailable 1 (which a Job's pods cannot use: a Job has no scale subresource).
  minAvailable: {{ sub (int $v.worker.replicas) 1 }}
  unhealthyPodEvictionPolicy: AlwaysAllow
  selector:
    matchLabels:
      {{- include "tf-cluster.selectorLabels" (dict "root" $ "component" "worker") | nindent 6 }}
{{- end }}
{{ end }}
