{{/*
A Job role (worker, chief, evaluator): one Indexed Job and one headless Service, so
task i has the DNS name `<job>-<i>.<service>.<ns>.svc`. The Job's name carries the
cluster's generation (see tf-cluster.generation); the Service's does not. Call with
(dict "root" $ "role" "worker" "replicas" n).
*/}}
{{- define "tf-cluster.job" -}}
{{- $r := index .root.Values .role -}}
{{- $labels := include "tf-cluster.labels" (dict "root" .root "component" .role) -}}
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ include "tf-cluster.jobName" . }}
  labels:
    {{- $labels | nindent 4 }}
    tfhelm.io/generation: {{ include "tf-cluster.generation" .root | quote }}
  {{- with include "tf-cluster.annotations" (dict "root" .root) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  completionMode: Indexed
  completions: {{ .replicas }}
  parallelism: {{ .replicas }}
  # Never two pods for one index: TF fails on a duplicate task registration.
  podReplacementPolicy: Failed
  backoffLimitPerIndex: {{ $r.backoffLimitPerIndex }}
  {{- if kindIs "float64" $r.backoffLimit }}
  backoffLimit: {{ $r.backoffLimit }}
  {{- end }}
  {{- with $r.activeDeadlineSeconds }}
  activeDeadlineSeconds: {{ . }}
  {{- end }}
  {{- if kindIs "float64" $r.ttlSecondsAfterFinished }}
  ttlSecondsAfterFinished: {{ $r.ttlSecondsAfterFinished }}
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
