{{- /* The body of tf-cluster's templates/chief/job.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.chief.job" }}{{- if and .Values.chief.enabled (include "tf-cluster.holds" (dict "root" $ "part" "chief")) }}
{{- include "tf-cluster.job" (dict "root" $ "role" "chief" "replicas" 1) }}
{{- end }}
{{ end }}
