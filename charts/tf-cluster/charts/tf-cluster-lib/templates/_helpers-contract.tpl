{{/* The rules the chart and tfhelm share (files/contract.yaml: patterns, limits, label
keys), as YAML; read with `include "tf-cluster.contract" $ | fromYaml` (numbers come back
as floats: `int` them). */}}
{{- define "tf-cluster.contract" -}}
{{- (index .Subcharts "tf-cluster-lib").Files.Get "files/contract.yaml" -}}
{{- end }}
