{{/*
Conventions of popular charts (values block "Conventions of popular charts"): annotations on
every object, chart-wide pod placement that a role's own settings override, the task
ServiceAccount and `global.imageRegistry`.
*/}}

{{/* An object's `annotations:` block: commonAnnotations plus "extra" (which win); nothing
when both are empty. Call with (dict "root" $ "extra" (dict ...)). */}}
{{- define "tf-cluster.annotations" -}}
{{- $all := merge (deepCopy (.extra | default dict)) (.root.Values.commonAnnotations | default dict) -}}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Pod annotations: the chart-wide ones with a role's (`r`, may be empty) merged over them. */}}
{{- define "tf-cluster.podAnnotations" -}}
{{- $role := (.r | default dict).podAnnotations | default dict -}}
{{- with merge (deepCopy $role) (.root.Values.podAnnotations | default dict) }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/* nodeSelector, tolerations and affinity of a pod: a role's (`r`) non-empty setting,
else the chart-wide one (tolerations with the node-failure ones, "tf-cluster.tolerations"). Call with (dict "root" $ "r" $roleValues)
(and "probe" true for a pod that is no task); renders pod spec keys. */}}
{{- define "tf-cluster.placement" -}}
{{- $r := .r | default dict -}}
{{- $v := .root.Values -}}
{{- with $r.nodeSelector | default $v.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "tf-cluster.tolerations" . | fromJsonArray }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $r.affinity | default $v.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The ServiceAccount task pods run as; empty means the namespace's default. */}}
{{- define "tf-cluster.serviceAccountName" -}}
{{- $sa := .Values.serviceAccount -}}
{{- if $sa.create }}{{ $sa.name | default .Release.Name }}{{ else }}{{ $sa.name }}{{ end -}}
{{- end }}

{{/* `global.imageRegistry` (may be empty), for "tf-cluster.image". */}}
{{- define "tf-cluster.imageRegistry" -}}
{{- (.Values.global | default dict).imageRegistry | default "" -}}
{{- end }}
