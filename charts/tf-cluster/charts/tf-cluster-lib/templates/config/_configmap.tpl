{{- /* The body of tf-cluster's templates/config/configmap.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.config.configmap" }}{{- include "tf-cluster.validate" . }}
{{- $lib := index .Subcharts "tf-cluster-lib" }}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "tf-cluster.configName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "config") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
data:
  # The cluster's generation (the hash in its Job names), for tfhelm and GitOps tooling.
  generation: {{ include "tf-cluster.generation" . | quote }}
  # The cluster spec: per role a count and a host pattern; the launcher expands it into
  # each task's TF_CONFIG (`launcher.py tfconfig` in a task's container prints it).
  cluster-spec.json: {{ include "tf-cluster.clusterSpec" . | toJson }}
  # The launcher every task runs (launcher.py; helm-test.py for `helm test`), the tfhelm
  # modules they import and the contract, and with the in-cluster reaper its program too
  # (reaper.py and the modules it adds): tfhelm/ without its prose (`make chart-files`).
  {{- include "tf-cluster.programs" . | nindent 2 }}
  {{- if eq .Values.code.source "url" }}
  fetch.py: |
    {{- $lib.Files.Get "files/fetch.py" | nindent 4 }}
  {{- end }}
{{ end }}
