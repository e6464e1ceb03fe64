{{- /* The body of tf-cluster's templates/monitoring/dashboard.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.monitoring.dashboard" }}{{- $d := .Values.monitoring.dashboard }}
{{- if and $d.enabled (include "tf-cluster.holds" (dict "root" $ "part" "monitoring")) }}
{{- $name := include "tf-cluster.name" . }}
{{- $ns := .Release.Namespace }}
{{- $sel := printf "namespace=%q, cluster=%q" $ns $name }}
{{- $pods := printf "namespace=%q, pod=~%q" $ns (include "tf-cluster.podRegex" .) }}
{{- $reaper := printf "namespace=%q, pod=~%q" $ns (printf "%s-.+" (include "tf-cluster.reaperName" .)) }}
{{- /* title, unit, width, [expr, legend]...: one panel each, laid out in rows of 24. */}}
{{- $panels := list
  (list "Tasks by phase (kube-state-metrics)" "short" 8 (printf "sum by (phase) (kube_pod_status_phase{%s})" $pods) "{{phase}}")
  (list "Tasks up, by role" "short" 8 (printf "sum by (role) (tfhelm_task_up{%s})" $sel) "{{role}}")
  (list "Task restarts" "short" 8 (printf "max by (role, index) (tfhelm_task_restarts_total{%s}) > 0" $sel) "{{role}}:{{index}}")
  (list "Step" "short" 12 (printf "max by (dir) (tfhelm_train_step{%s})" $sel) "{{dir}}")
  (list "Steps per second" "short" 12 (printf "max by (dir) (deriv(tfhelm_train_step{%s}[5m]))" $sel) "{{dir}}")
  (list "Loss" "short" 12 (printf "max by (dir, tag) (tfhelm_train_scalar{%s, tag=~\".*loss.*\"})" $sel) "{{dir}} {{tag}}")
  (list "Other scalars" "short" 12 (printf "max by (dir, tag) (tfhelm_train_scalar{%s, tag!~\".*loss.*\"})" $sel) "{{dir}} {{tag}}")
  (list "CPU (cAdvisor)" "short" 12 (printf "sum by (pod) (rate(container_cpu_usage_seconds_total{%s, container!=\"\"}[5m]))" $pods) "{{pod}}")
  (list "Memory working set (cAdvisor)" "bytes" 12 (printf "sum by (pod) (container_memory_working_set_bytes{%s, container!=\"\"})" $pods) "{{pod}}")
  (list "Reaps (the reaper)" "short" 12 (printf "sum by (action, outcome) (tfhelm_reaper_reaps_total{%s})" $sel) "{{action}} {{outcome}}" (printf "sum by (kind) (tfhelm_reaper_errors_total{%s})" $reaper) "errors: {{kind}}")
  (list "Reap latency after the grace period (p90)" "s" 12 (printf "histogram_quantile(0.9, sum by (le) (rate(tfhelm_reaper_reap_latency_seconds_bucket{%s}[1h])))" $reaper) "p90")
}}
{{- $ds := dict "type" "prometheus" "uid" "${datasource}" }}
{{- $out := list }}
{{- $x := 0 }}{{ $y := 0 }}
{{- range $i, $p := $panels }}
{{- $w := index $p 2 }}
{{- if gt (add $x $w) 24 }}{{ $x = 0 }}{{ $y = add $y 8 }}{{ end }}
{{- $targets := list }}
{{- range $k := until (div (sub (len $p) 3) 2 | int) }}
{{- $targets = append $targets (dict "datasource" $ds "expr" (index $p (add 3 (mul 2 $k))) "legendFormat" (index $p (add 4 (mul 2 $k))) "refId" (printf "%c" (add 65 $k))) }}
{{- end }}
{{- $out = append $out (dict "id" (add1 $i) "type" "timeseries" "title" (index $p 0) "datasource" $ds "targets" $targets
      "gridPos" (dict "x" $x "y" $y "w" $w "h" 8)
      "fieldConfig" (dict "defaults" (dict "unit" (index $p 1)) "overrides" list)) }}
{{- $x = add $x $w }}
{{- end }}
{{- $dashboard := dict
  "uid" (printf "tfhelm-%s" (sha256sum (printf "%s/%s" $ns $name) | trunc 12))
  "title" (printf "tfhelm %s/%s" $ns $name)
  "tags" (list "tfhelm" "tensorflow")
  "schemaVersion" 39 "editable" true "time" (dict "from" "now-3h" "to" "now") "refresh" "30s"
  "templating" (dict "list" (list (dict "name" "datasource" "label" "Prometheus" "type" "datasource" "query" "prometheus")))
  "panels" $out }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "tf-cluster.monitoringName" (dict "root" $ "part" "dashboard") }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "monitoring") | nindent 4 }}
    {{ $d.sidecarLabel }}: {{ $d.sidecarLabelValue | quote }}
    {{- with $d.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with include "tf-cluster.annotations" (dict "root" $ "extra" $d.annotations) }}{{ . | trim | nindent 2 }}{{ end }}
data:
  {{ printf "tfhelm-%s-%s.json" $ns $name }}: {{ toJson $dashboard | quote }}
{{- end }}
{{ end }}
