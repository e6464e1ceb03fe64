{{- /* The body of tf-cluster's templates/evaluator/job.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.evaluator.job" }}{{- if and .Values.evaluator.enabled (include "tf-cluster.holds" (dict "root" $ "part" "evaluator")) }}
{{- include "tf-cluster.job" (dict "root" $ "role" "evaluator" "replicas" 1) }}
{{- end }}
{{ end }}
