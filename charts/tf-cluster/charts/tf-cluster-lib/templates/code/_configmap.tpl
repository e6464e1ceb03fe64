{{- /* The body of tf-cluster's templates/code/configmap.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.code.configmap" }}{{- if and (eq .Values.code.source "inline") (include "tf-cluster.holds" (dict "root" $ "part" "code")) }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "tf-cluster.codeConfigName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "code") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
data:
  {{ base .Values.code.script | toJson }}: {{ .Values.code.inline | toJson }}
  {{- range $file, $text := .Values.code.extraFiles }}
  {{ $file | toJson }}: {{ $text | toJson }}
  {{- end }}
{{- end }}
{{ end }}
