{{- /* The body of tf-cluster's templates/monitoring/podmonitor.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.monitoring.podmonitor" }}{{- $m := .Values.monitoring.podMonitor }}
{{- if and $m.enabled (include "tf-cluster.holds" (dict "root" $ "part" "monitoring")) }}
{{- if not .Values.metrics.enabled }}
{{- fail "monitoring.podMonitor.enabled needs metrics.enabled: without it the tasks serve no metrics" }}
{{- end }}
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: {{ include "tf-cluster.monitoringName" (dict "root" $ "part" "tasks") }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "monitoring") | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  # Every pod of this cluster, in both releases of a split one: the tasks and the reaper.
  selector:
    matchLabels:
      {{ (include "tf-cluster.contract" . | fromYaml).labels.cluster }}: {{ include "tf-cluster.name" . }}
  namespaceSelector:
    matchNames: [{{ .Release.Namespace }}]
  podMetricsEndpoints:
    - port: metrics
      path: /metrics
      interval: {{ $m.interval }}
{{- end }}
{{ end }}
