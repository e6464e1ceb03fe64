{{- /* The body of tf-cluster's templates/reaper/serviceaccount.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.reaper.serviceaccount" }}{{- if include "tf-cluster.reaper.enabled" . }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "tf-cluster.reaperName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "reaper") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
# Only the reaper's pod mounts the token (it says so itself).
automountServiceAccountToken: false
{{- end }}
{{ end }}
