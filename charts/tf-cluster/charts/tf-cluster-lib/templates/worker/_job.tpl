{{- /* The body of tf-cluster's templates/worker/job.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.worker.job" }}{{- if include "tf-cluster.holds" (dict "root" $ "part" "worker") }}
{{- include "tf-cluster.job" (dict "root" $ "role" "worker" "replicas" (int .Values.worker.replicas)) }}
{{- end }}
{{ end }}
