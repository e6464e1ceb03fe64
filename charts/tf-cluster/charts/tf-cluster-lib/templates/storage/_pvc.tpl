{{- /* The body of tf-cluster's templates/storage/pvc.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.storage.pvc" }}{{- if include "tf-cluster.holds" (dict "root" $ "part" "storage") }}
{{- range $vol := list "data" "logs" }}
{{- $s := index $.Values.storage $vol }}
{{- if and $s.enabled (not $s.existingClaim) }}
{{- $class := $s.storageClassName | default (and $.Values.storage.storageClass.create $.Values.storage.storageClass.name) }}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "tf-cluster.pvcName" (dict "root" $ "volume" $vol) | toJson }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "storage") | nindent 4 }}
  {{- /* Data, logs and checkpoints outlive the cluster; `tfhelm down --purge` removes them. */}}
  {{- $keep := ternary (dict "helm.sh/resource-policy" "keep") dict $.Values.storage.keepOnUninstall }}
  {{- with include "tf-cluster.annotations" (dict "root" $ "extra" $keep) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  accessModes:
    {{- toYaml $s.accessModes | nindent 4 }}
  {{- with $class }}
  storageClassName: {{ . | toJson }}
  {{- end }}
  resources:
    requests:
      storage: {{ $s.size | toString | toJson }}
{{- end }}
{{- end }}
{{- end }}
{{ end }}
