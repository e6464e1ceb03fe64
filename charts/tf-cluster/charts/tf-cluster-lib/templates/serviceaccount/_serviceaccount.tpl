{{- /* The body of tf-cluster's templates/serviceaccount/serviceaccount.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.serviceaccount.serviceaccount" }}{{- if .Values.serviceAccount.create }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "tf-cluster.serviceAccountName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "tasks") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $ "extra" .Values.serviceAccount.annotations) }}{{ . | trim | nindent 2 }}{{ end }}
# TF tasks do not talk to the Kubernetes API: no pod mounts this account's token.
automountServiceAccountToken: false
{{- end }}
{{ end }}
