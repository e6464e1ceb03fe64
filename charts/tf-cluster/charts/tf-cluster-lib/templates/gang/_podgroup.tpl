{{- /* The body of tf-cluster's templates/gang/podgroup.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.gang.podgroup" }}{{- if and (include "tf-cluster.gang" .) (include "tf-cluster.holds" (dict "root" $ "part" "worker")) }}
{{- $generation := include "tf-cluster.generation" . }}
{{- /* Kubernetes' own gang scheduling (alpha in 1.36, docs/gang.md): a standalone PodGroup
(no Workload template: the scheduler reads the PodGroup only) that every task pod of the
cluster names in `spec.schedulingGroup`. The scheduler binds none of them until it can place
`minCount` at once. Its spec is immutable: the name carries the generation, as the Jobs' do,
so a change of values makes a new one. The release holding the workers holds it; the PS of a
split cluster wait for it. */}}
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata:
  name: {{ include "tf-cluster.podGroupName" (dict "root" $ "generation" $generation) }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "gang") | nindent 4 }}
    {{ (include "tf-cluster.contract" . | fromYaml).labels.generation }}: {{ $generation | quote }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  schedulingPolicy:
    gang:
      # Every task pod of the cluster: chief, evaluator, PS and workers.
      minCount: {{ include "tf-cluster.gangMinCount" . }}
{{- end }}
{{ end }}
