{{/* Is the in-cluster reaper rendered? It lives in the workload release (never in the PS
release it uninstalls), when it has work: reaping (`tf-cluster.reaper.reaps`), opening and
closing a queued cluster's scheduling gates (`tf-cluster.hasGates`), which no other component
does, or replacing the tasks of lost nodes (`nodeFailure.replaceLostTasks`), which every cluster
needs. */}}
{{- define "tf-cluster.reaper.enabled" -}}
{{- if and (include "tf-cluster.holds" (dict "root" . "part" "reaper")) (or (include "tf-cluster.reaper.reaps" .) (include "tf-cluster.hasGates" .) (include "tf-cluster.reaper.replacesLost" .)) }}true{{ end -}}
{{- end }}

{{/* Does it replace the tasks of lost nodes? `nodeFailure.replaceLostTasks`, with `reaper.enabled`. */}}
{{- define "tf-cluster.reaper.replacesLost" -}}
{{- if and .Values.reaper.enabled .Values.nodeFailure.replaceLostTasks }}true{{ end -}}
{{- end }}

{{/* Does it reap? With `reaper.enabled`, parameter servers (the only thing it removes) and a
Job that ends the training: an in-graph cluster without a chief is driven from outside (a notebook). */}}
{{- define "tf-cluster.reaper.reaps" -}}
{{- $v := .Values -}}
{{- $ends := or (ne $v.mode "in-graph") $v.chief.enabled -}}
{{- if and $v.reaper.enabled (include "tf-cluster.holds" (dict "root" . "part" "reaper")) (gt (int $v.ps.replicas) 0) $ends -}}
{{- if and (eq $v.reaper.completion "chief") (not $v.chief.enabled) -}}
{{- fail "reaper.completion is \"chief\" but chief.enabled is false (use auto, or enable the chief)" -}}
{{- end -}}
{{- if and (eq $v.mode "in-graph") (has $v.reaper.completion (list "all-workers" "worker-0")) -}}
{{- fail (printf "reaper.completion %q never holds in-graph: the workers only run TF servers and never finish (use auto or chief)" $v.reaper.completion) -}}
{{- end -}}
true
{{- end -}}
{{- end }}

{{/* Names of this cluster's PS Deployments and Services: the only ones it may delete. */}}
{{- define "tf-cluster.reaper.psNames" -}}
{{- $names := list -}}
{{- range $i := until (int .Values.ps.replicas) -}}
{{- $names = append $names (include "tf-cluster.psName" (dict "root" $ "index" $i)) -}}
{{- end -}}
{{- toJson $names -}}
{{- end }}

{{/* The programs the config ConfigMap carries: the tasks' (files/task/) and, where the reaper
runs, what it adds (files/reaper/), as `make chart-files` writes them. */}}
{{- define "tf-cluster.programs" -}}
{{- $lib := index .Subcharts "tf-cluster-lib" -}}
{{- $dirs := list "task" -}}
{{- if include "tf-cluster.reaper.enabled" . }}{{ $dirs = append $dirs "reaper" }}{{ end -}}
{{- range $dir := $dirs }}
{{- range $path, $_ := $lib.Files.Glob (printf "files/%s/*" $dir) }}
{{ base $path }}: |
  {{- $lib.Files.Get $path | nindent 2 }}
{{- end }}
{{- end }}
{{- end }}
