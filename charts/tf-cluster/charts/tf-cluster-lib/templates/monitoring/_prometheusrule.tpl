{{- /* The body of tf-cluster's templates/monitoring/prometheusrule.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.monitoring.prometheusrule" }}{{- $m := .Values.monitoring.prometheusRule }}
{{- if and $m.enabled (include "tf-cluster.holds" (dict "root" $ "part" "monitoring")) }}
{{- $name := include "tf-cluster.name" . }}
{{- $sel := printf "namespace=%q, cluster=%q" .Release.Namespace $name }}
{{- $by := "namespace, cluster" }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "tf-cluster.monitoringName" (dict "root" $ "part" "alerts") }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "monitoring") | nindent 4 }}
    {{- with $m.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  groups:
    - name: {{ printf "tfhelm.%s.%s" .Release.Namespace $name }}
      rules:
        # No new step in any directory of the event files for the whole window (and there were
        # steps at its start: a training that just began is not stalled).
        - alert: TFTrainingStalled
          expr: |-
            max by ({{ $by }}) (changes(tfhelm_train_step{ {{- $sel -}} }[{{ $m.stalledMinutes }}m])) == 0
            and on ({{ $by }}) count by ({{ $by }}) (tfhelm_train_step{ {{- $sel -}} } offset {{ $m.stalledMinutes }}m)
          for: 1m
          labels:
            severity: {{ $m.severity | quote }}
          annotations:
            summary: {{ printf "Training %s/%s made no step in %d minutes" .Release.Namespace $name (int $m.stalledMinutes) | quote }}
            description: {{ printf "tfhelm_train_step (the newest step in the TensorBoard event files under the run's log dir) has not changed for %d minutes while the training runs. Look at the tasks' logs: `tfhelm logs %s -n %s`." (int $m.stalledMinutes) $name .Release.Namespace | quote }}
        # Parameter servers up, and no task of the Job that decides completion (the chief, else
        # the workers) left: training is over, or never started, and nothing stops the PS.
        - alert: TFParameterServersOutliveTraining
          expr: |-
            max by ({{ $by }}) (tfhelm_task_up{ {{- $sel -}}, role="ps"})
            unless on ({{ $by }}) max by ({{ $by }}) (tfhelm_task_decides_completion{ {{- $sel -}} })
          for: {{ $m.psOutliveMinutes }}m
          labels:
            severity: {{ $m.severity | quote }}
          annotations:
            summary: {{ printf "Parameter servers of %s/%s run %d minutes after training" .Release.Namespace $name (int $m.psOutliveMinutes) | quote }}
            description: {{ printf "The PS of %s block in server.join() forever. Enable the reaper (reaper.enabled), or run `tfhelm reap %s -n %s` (or `tfhelm down`)." $name $name .Release.Namespace | quote }}
        - alert: TFTaskRestarting
          expr: |-
            max by ({{ $by }}, role, index) (tfhelm_task_restarts_total{ {{- $sel -}} }) >= {{ $m.restarts }}
          labels:
            severity: {{ $m.severity | quote }}
          annotations:
            summary: {{ printf "A task of %s/%s was restarted" .Release.Namespace $name | quote }}
            description: {{ print "Task {{ $labels.role }}:{{ $labels.index }} runs its attempt {{ $value | humanize }} + 1 (failed pods of its Job index, and container restarts). `tfhelm status " $name " -n " .Release.Namespace "` says why." | quote }}
        {{- if include "tf-cluster.queued" . }}
        # Waiting in the queue (the workers' Job suspended by Kueue, not admitted) for longer
        # than allowed: the in-cluster controller's gauge says since when, while it waits.
        - alert: TFTrainingQueuedTooLong
          expr: |-
            time() - max by ({{ $by }}) (tfhelm_queue_waiting_since_seconds{ {{- $sel -}} }) > {{ mul (int $m.queuedMinutes) 60 }}
          labels:
            severity: {{ $m.severity | quote }}
          annotations:
            summary: {{ printf "Training %s/%s has waited in queue %s for more than %d minutes" .Release.Namespace $name .Values.queue.name (int $m.queuedMinutes) | quote }}
            description: {{ printf "Kueue has not admitted the workers of %s (LocalQueue %s). `tfhelm status %s -n %s` says why: which resource, how much of it is in use, or the workload ahead of it." $name .Values.queue.name $name .Release.Namespace | quote }}
        {{- end }}
        # From kube-state-metrics (kube-prometheus-stack ships it).
        - alert: TFJobFailed
          expr: |-
            max by (namespace, job_name) (kube_job_failed{namespace={{ .Release.Namespace | quote }}, job_name=~{{ printf "%s-(chief|worker|evaluator)-[0-9a-f]{%d}" $name (int (include "tf-cluster.contract" . | fromYaml).names.generationLength) | quote }}, condition="true"}) == 1
          labels:
            severity: {{ $m.severity | quote }}
          annotations:
            summary: {{ print "Job {{ $labels.namespace }}/{{ $labels.job_name }} of training " $name " failed" | quote }}
            description: {{ printf "`tfhelm status %s -n %s` shows each task's error line." $name .Release.Namespace | quote }}
{{- end }}
{{ end }}
