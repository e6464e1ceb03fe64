{{/*
A Job role (worker, chief, evaluator): one Indexed Job and one headless Service, so
task i has the DNS name `<job>-<i>.<service>.<ns>.svc`. The Job's name carries the
cluster's generation (see tf-cluster.generation); the Service's does not. Call with
(dict "root" $ "role" "worker" "replicas" n).
*/}}
{{- define "tf-cluster.job" -}}
{{- $r := index .root.Values .role -}}
{{- $labels := include "tf-cluster.labels" (dict "root" .root "component" .role) -}}
{{- $contract := include "tf-cluster.contract" .root | fromYaml -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "tf-cluster.jobName" . }}
  labels:
    {{- $labels | nindent 4 }}
    {{ $contract.labels.generation }}: {{ include "tf-cluster.generation" .root | quote }}
    {{- if and (eq .role "worker") (include "tf-cluster.queued" .root) }}
    {{- /* The cluster's one Kueue Workload. No `suspend` here: Kueue's webhook sets it at
    creation and Kueue alone changes it after, so an upgrade never fights Kueue over it. */}}
    {{- include "tf-cluster.queueLabels" .root | nindent 4 }}
    {{- end }}
  {{- /* What its tasks run: the reaper stops a Job of servers (in-graph workers). */}}
  {{- with include "tf-cluster.annotations" (dict "root" .root "extra" (dict $contract.annotations.runs (include "tf-cluster.runs" .))) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  completionMode: Indexed
  completions: {{ .replicas }}
  parallelism: {{ .replicas }}
  # Never two pods for one index: TF fails on a duplicate task registration.
  podReplacementPolicy: Failed
  backoffLimitPerIndex: {{ $r.backoffLimitPerIndex }}
  {{- /* null leaves a setting to Kubernetes; a number from --set is an int64, from a file a float64 */}}
  {{- if not (kindIs "invalid" $r.maxFailedIndexes) }}
  maxFailedIndexes: {{ min $r.maxFailedIndexes .replicas }}
  {{- end }}
  {{- if not (kindIs "invalid" $r.backoffLimit) }}
  backoffLimit: {{ $r.backoffLimit }}
  {{- end }}
  {{- with $r.activeDeadlineSeconds }}
  activeDeadlineSeconds: {{ . }}
  {{- end }}
  {{- if not (kindIs "invalid" $r.ttlSecondsAfterFinished) }}
  ttlSecondsAfterFinished: {{ $r.ttlSecondsAfterFinished }}
  {{- end }}
  {{- with include "tf-cluster.podFailurePolicy" .root }}
  podFailurePolicy:
    {{- . | trim | nindent 4 }}
  {{- end }}
  template:
    {{- include "tf-cluster.pod" . | nindent 4 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "tf-cluster.jobServiceName" . }}
  labels:
    {{- $labels | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" .root) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  clusterIP: None
  # Workers must find each other before they report ready.
  publishNotReadyAddresses: true
  selector:
    {{- include "tf-cluster.selectorLabels" (dict "root" .root "component" .role) | nindent 4 }}
  ports:
    - {name: tf, port: {{ .root.Values.port }}, targetPort: tf}
{{- end }}

{{/*
The Jobs' podFailurePolicy from `failurePolicy` (TFJob's `restartPolicy: ExitCode`): rules
apply in order, the first that matches decides. A disruption is not the task's fault; an
exit code of a fault around the script is counted and retried; any other non-zero exit
(of any container: the script, fetching the code, installing packages) fails the task's
index at once. Kubernetes wants the codes sorted: "%03d" sorts them as text.
*/}}
{{- define "tf-cluster.podFailurePolicy" -}}
{{- $f := .Values.failurePolicy -}}
{{- $retry := $f.retryExitCodes -}}
{{- if kindIs "invalid" $retry -}}
{{- $task := (include "tf-cluster.contract" . | fromYaml).task -}}
{{- $retry = prepend $task.retrySignalExitCodes $task.retryExitCode -}}
{{- end -}}
{{- $codes := list -}}
{{- range $retry }}{{ $codes = append $codes (printf "%03d" (int .)) }}{{ end -}}
{{- $codes = $codes | sortAlpha | uniq -}}
{{- $sorted := list -}}
{{- range $codes }}{{ $sorted = append $sorted (atoi .) }}{{ end -}}
{{- if or $f.ignoreDisruptions (eq $f.mode "exitCode") }}
rules:
  {{- if $f.ignoreDisruptions }}
  - action: Ignore
    onPodConditions: [{type: DisruptionTarget}]
  {{- end }}
  {{- if eq $f.mode "exitCode" }}
  - action: Count
    onExitCodes: {operator: In, values: {{ $sorted | toJson }}}
  - action: FailIndex
    onExitCodes: {operator: NotIn, values: {{ $sorted | toJson }}}
  {{- end }}
{{- end }}
{{- end }}
