{{- /* The body of tf-cluster's templates/storage/storageclass.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.storage.storageclass" }}{{- $sc := .Values.storage.storageClass }}
{{- if and $sc.create (include "tf-cluster.holds" (dict "root" $ "part" "storage")) }}
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: {{ $sc.name | toJson }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "storage") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
{{- if eq $sc.preset "glusterfs-heketi" }}
# The in-tree GlusterFS provisioner was removed in Kubernetes 1.26: older clusters only.
provisioner: kubernetes.io/glusterfs
parameters:
  resturl: {{ $sc.glusterfs.resturl | toJson }}
  restuser: {{ $sc.glusterfs.restuser | toJson }}
  secretName: {{ $sc.glusterfs.secretName | toJson }}
  secretNamespace: {{ $sc.glusterfs.secretNamespace | toJson }}
  volumetype: {{ $sc.glusterfs.volumetype | toJson }}
{{- else }}
provisioner: {{ $sc.provisioner | toJson }}
{{- with $sc.parameters }}
parameters:
  {{- range $k, $v := . }}
  {{ $k | toJson }}: {{ $v | toString | toJson }}
  {{- end }}
{{- end }}
{{- end }}
reclaimPolicy: {{ $sc.reclaimPolicy }}
volumeBindingMode: {{ $sc.volumeBindingMode }}
allowVolumeExpansion: {{ $sc.allowVolumeExpansion }}
{{- end }}
{{ end }}
