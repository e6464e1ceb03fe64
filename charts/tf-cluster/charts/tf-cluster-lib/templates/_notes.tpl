{{- /* The body of tf-cluster's templates/NOTES.txt (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.notes" }}{{- include "tf-cluster.validate" . -}}
{{- $name := include "tf-cluster.name" . -}}
{{- $ns := .Release.Namespace -}}
{{- $labels := (include "tf-cluster.contract" . | fromYaml).labels -}}
TensorFlow cluster "{{ $name }}" ({{ .Values.mode }}, components: {{ .Values.components }}) in namespace {{ $ns }}:
{{- if include "tf-cluster.holds" (dict "root" $ "part" "ps") }}
  parameter servers: {{ .Values.ps.replicas }} Deployment(s) {{ $name }}-ps-0..{{ sub (int .Values.ps.replicas) 1 }}
{{- end }}
{{- if include "tf-cluster.holds" (dict "root" $ "part" "worker") }}
  workers:           Job {{ $name }}-worker, {{ .Values.worker.replicas }} indexed task(s)
{{- if .Values.chief.enabled }}
  chief:             Job {{ $name }}-chief
{{- end }}
{{- if .Values.evaluator.enabled }}
  evaluator:         Job {{ $name }}-evaluator
{{- end }}
{{- end }}
{{- if and (include "tf-cluster.queued" .) (include "tf-cluster.holds" (dict "root" $ "part" "worker")) }}

Queued in Kueue LocalQueue {{ .Values.queue.name }}{{ with .Values.queue.priorityClass }} (priority {{ . }}){{ end }}: the worker Job
is the cluster's Workload, the other tasks wait (gated) until Kueue admits it:
  kubectl -n {{ $ns }} get workloads,localqueue/{{ .Values.queue.name }}
  (or `tfhelm status {{ $name }} -n {{ $ns }}`: Queued, why and where, or Admitted)
{{- end }}

Watch the tasks:
  kubectl -n {{ $ns }} get jobs,deployments,pods -l {{ $labels.cluster }}={{ $name }}
Follow every task's log, each line prefixed with its pod:
  kubectl -n {{ $ns }} logs -f -l '{{ $labels.cluster }}={{ $name }},{{ $labels.role }} in (chief,worker,ps,evaluator)' --prefix --max-log-requests {{ add (int .Values.worker.replicas) (int .Values.ps.replicas) 2 }}
  (or `tfhelm logs {{ $name }} -n {{ $ns }} -f`)
Every task's TF_CONFIG comes from the cluster spec in ConfigMap {{ include "tf-cluster.configName" . }}
(cluster-spec.json); `tfhelm tfconfig {{ $name }} --task worker:0` prints one, and so does
`python3 /etc/tfhelm/launcher.py tfconfig` in a task's container (kubectl exec).
{{- if and (include "tf-cluster.reaper.enabled" .) (include "tf-cluster.reaper.reaps" .) }}

Parameter servers never exit on their own: the in-cluster reaper (Deployment
{{ include "tf-cluster.reaperName" . }}) removes them {{ .Values.reaper.grace }} s after training is done
(completion {{ .Values.reaper.completion }}); data, logs and the Jobs stay. `tfhelm status {{ $name }}` shows it.
{{- else if and (ne .Values.components "ps") (gt (int .Values.ps.replicas) 0) }}

Parameter servers never exit on their own: once training is done, uninstall them
({{ if eq .Values.components "workload" }}helm uninstall {{ $name }}{{ (include "tf-cluster.contract" . | fromYaml).names.psReleaseSuffix }}{{ else }}`tfhelm reap {{ $name }}`, or split PS into their own release with components=ps{{ end }}).
{{- end }}
{{- if and (include "tf-cluster.reaper.enabled" .) (include "tf-cluster.reaper.replacesLost" .) }}

A node that stops answering: Kubernetes evicts its tasks (nodeFailure.unreachableSeconds after it is
marked unreachable) and the reaper ({{ include "tf-cluster.reaperName" . }}) has them started again elsewhere.
{{- end }}
{{- if and .Values.metrics.enabled (ne .Values.components "ps") }}

Every task serves Prometheus metrics on its port `metrics` ({{ .Values.metrics.port }}); look at one:
  kubectl -n {{ $ns }} port-forward job/{{ include "tf-cluster.jobName" (dict "root" $ "role" "worker") }} {{ .Values.metrics.port }} & curl -s localhost:{{ .Values.metrics.port }}/metrics
{{- $objects := list }}
{{- with .Values.monitoring }}
{{- if .podMonitor.enabled }}{{ $objects = append $objects (printf "PodMonitor %s" (include "tf-cluster.monitoringName" (dict "root" $ "part" "tasks"))) }}{{ end }}
{{- if .prometheusRule.enabled }}{{ $objects = append $objects (printf "PrometheusRule %s" (include "tf-cluster.monitoringName" (dict "root" $ "part" "alerts"))) }}{{ end }}
{{- if .dashboard.enabled }}{{ $objects = append $objects (printf "ConfigMap %s (Grafana dashboard \"tfhelm %s/%s\")" (include "tf-cluster.monitoringName" (dict "root" $ "part" "dashboard")) $ns $name) }}{{ end }}
{{- end }}
{{- with $objects }}
Monitoring: {{ join ", " . }}.
{{- end }}
{{- end }}
{{ end }}
