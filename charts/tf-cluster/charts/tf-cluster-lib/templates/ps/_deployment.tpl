{{- /* The body of tf-cluster's templates/ps/deployment.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.ps.deployment" }}{{- if include "tf-cluster.holds" (dict "root" $ "part" "ps") }}
{{- $clusterSpec := include "tf-cluster.clusterSpec" . }}
{{- $indexKey := (include "tf-cluster.contract" . | fromYaml).labels.taskIndex }}
{{- range $i := until (int .Values.ps.replicas) }}
{{- $task := dict "root" $ "role" "ps" "index" $i "clusterSpec" $clusterSpec }}
{{- $selector := include "tf-cluster.selectorLabels" (dict "root" $ "component" "ps") }}
{{- /* The roles whose Jobs this cluster has: `tfhelm list` and `status` name one that is gone. */}}
{{- $jobRoles := dict "tfhelm.io/job-roles" (compact (list (ternary "chief" "" $.Values.chief.enabled) "worker" (ternary "evaluator" "" $.Values.evaluator.enabled)) | join ",") }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "tf-cluster.psName" $task }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "ps") | nindent 4 }}
    {{ $indexKey }}: {{ $i | quote }}
  {{- with include "tf-cluster.annotations" (dict "root" $ "extra" $jobRoles) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  replicas: 1
  # Never two processes for one PS task: TF fails on a duplicate task registration.
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- $selector | nindent 6 }}
      {{ $indexKey }}: {{ $i | quote }}
  template:
    {{- include "tf-cluster.pod" $task | nindent 4 }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ include "tf-cluster.psName" $task }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "ps") | nindent 4 }}
    {{ $indexKey }}: {{ $i | quote }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  selector:
    {{- $selector | nindent 4 }}
    {{ $indexKey }}: {{ $i | quote }}
  ports:
    - {name: tf, port: {{ $.Values.port }}, targetPort: tf}
{{- end }}
{{- end }}
{{ end }}
