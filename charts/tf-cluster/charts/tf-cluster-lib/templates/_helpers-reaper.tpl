{{/* Is the in-cluster reaper rendered? It lives in the workload release (never in the PS
release it uninstalls) and only has work when there are parameter servers. */}}
{{- define "tf-cluster.reaper.enabled" -}}
{{- $v := .Values -}}
{{- if and $v.reaper.enabled (include "tf-cluster.holds" (dict "root" . "part" "reaper")) (gt (int $v.ps.replicas) 0) -}}
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
