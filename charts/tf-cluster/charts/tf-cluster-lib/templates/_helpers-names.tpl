{{- /*
Every resource name and TF_CONFIG host comes from here. tfhelm/cluster/spec.py mirrors
these rules; tests/chart/test_agreement.py proves both agree for many shapes.
*/ -}}

{{/* The TF cluster's name: `clusterName`, else `fullnameOverride`, else the release name. */}}
{{- define "tf-cluster.name" -}}
{{- .Values.clusterName | default .Values.fullnameOverride | default .Release.Name -}}
{{- end }}

{{/*
The cluster's generation: a short hash of what its pods are made from (every value except
`components`, which only splits the cluster into releases, `reaper`, and what no task pod
carries: `test`, `monitoring`, `networkPolicy`, `commonAnnotations`, `enabled` and the library subchart's key `tf-cluster-lib`; plus the chart's version).
Of `queue` only whether there is one counts (the gated pods differ): its name and priority
are labels of the worker Job, changed in place, and a cluster without a queue keeps the
generation it had before `queue` existed. Of `gang` likewise only whether it is on (the pods name
the PodGroup; a cluster without it keeps its generation). Null values
are left out of the hash: Helm 3 keeps the chart's null defaults, Helm 4 drops them, and
both must name the Jobs alike. Both releases of a split cluster compute the same one. A Job's pod template
cannot change in place, so a Job's name carries the generation: a change makes Helm (or
`kubectl apply --prune`) create new Jobs and delete the old ones, as a Deployment does with
its ReplicaSets, and `helm rollback` brings the old names back. tfhelm reads it from the
rendered chart (the config ConfigMap), never recomputes it.
*/}}
{{- define "tf-cluster.generation" -}}
{{- $v := omit .Values "components" "reaper" "test" "monitoring" "networkPolicy" "commonAnnotations" "enabled" "tf-cluster-lib" "queue" "gang" | toJson -}}
{{- $v = regexReplaceAll `"[^"]*":null,?` $v "" | replace ",}" "}" -}}
{{- $length := (include "tf-cluster.contract" . | fromYaml).names.generationLength -}}
{{- printf "%s/%s/%s%s%s" .Chart.Version .Chart.AppVersion $v (ternary "/queued" "" (include "tf-cluster.queued" . | empty | not)) (ternary "/gang" "" (include "tf-cluster.gang" . | empty | not)) | sha256sum | trunc (int $length) -}}
{{- end }}

{{/* Job of a Job role; pod i's hostname is `<job>-<i>`. Call with (dict "root" $ "role" "worker").
Callers rendering many names pass "generation" (it hashes all values: compute it once). */}}
{{- define "tf-cluster.jobName" -}}
{{- printf "%s-%s-%s" (include "tf-cluster.name" .root) .role (.generation | default (include "tf-cluster.generation" .root)) -}}
{{- end }}

{{/* Headless Service (the pods' subdomain) of a Job role: stable across generations. */}}
{{- define "tf-cluster.jobServiceName" -}}
{{- printf "%s-%s" (include "tf-cluster.name" .root) .role -}}
{{- end }}

{{/* Deployment and Service of PS task i; call with (dict "root" $ "index" i). */}}
{{- define "tf-cluster.psName" -}}
{{- printf "%s-ps-%d" (include "tf-cluster.name" .root) (int .index) -}}
{{- end }}

{{/* ConfigMap with the cluster spec and launcher; one per release, so either release of
a split cluster can be uninstalled alone. */}}
{{- define "tf-cluster.configName" -}}
{{- printf "%s-tfconfig" .Release.Name -}}
{{- end }}

{{/* ConfigMap holding the user's script for `code.source` configMap (theirs) or inline (ours). */}}
{{- define "tf-cluster.codeConfigName" -}}
{{- if eq .Values.code.source "configMap" }}{{ .Values.code.configMap }}{{ else }}{{ include "tf-cluster.name" . }}-code{{ end -}}
{{- end }}

{{- define "tf-cluster.pvcName" -}}
{{- $vol := index .root.Values.storage .volume -}}
{{- $vol.existingClaim | default (printf "%s-%s" (include "tf-cluster.name" .root) .volume) -}}
{{- end }}

{{/* The NetworkPolicy fencing one release's pods (either release of a split cluster may go
alone, its fence with it). */}}
{{- define "tf-cluster.networkPolicyName" -}}
{{- printf "%s-fence" .Release.Name -}}
{{- end }}

{{/* The in-cluster reaper's Deployment, ServiceAccount, Role and RoleBinding. */}}
{{- define "tf-cluster.reaperName" -}}
{{- printf "%s-reaper" (include "tf-cluster.name" .) -}}
{{- end }}

{{/* The monitoring objects (templates/monitoring/): `<cluster>-<part>`; call with
(dict "root" $ "part" "dashboard"). */}}
{{- define "tf-cluster.monitoringName" -}}
{{- printf "%s-%s" (include "tf-cluster.name" .root) .part -}}
{{- end }}

{{/* A PromQL regex of the names of this cluster's pods (PS, Job tasks, the reaper), for the
series of cAdvisor and kube-state-metrics, which carry no pod labels. */}}
{{- define "tf-cluster.podRegex" -}}
{{- $length := (include "tf-cluster.contract" . | fromYaml).names.generationLength -}}
{{- printf "%s-(ps-[0-9]+|(chief|worker|evaluator)-[0-9a-f]{%d}-[0-9]+|reaper)-.+" (include "tf-cluster.name" .) (int $length) -}}
{{- end }}

{{/* `<ns>.svc[.<domain>]:<port>`: the part every host shares. */}}
{{- define "tf-cluster.hostSuffix" -}}
{{- printf "%s.svc" .Release.Namespace -}}
{{- with .Values.clusterDomain }}.{{ . }}{{ end -}}
:{{ .Values.port }}
{{- end }}

{{/* Number of tasks of each role, as a dict. */}}
{{- define "tf-cluster.counts" -}}
{{- $v := .Values -}}
{{- dict "chief" (ternary 1 0 $v.chief.enabled) "evaluator" (ternary 1 0 $v.evaluator.enabled) "ps" (int $v.ps.replicas) "worker" (int $v.worker.replicas) | toJson -}}
{{- end }}

{{/*
The cluster spec (ConfigMap key `cluster-spec.json`): per role of the training cluster a
count and a host pattern whose `{index}` the launcher replaces by 0..count-1, as compact
JSON with sorted keys, byte-identical to tfhelm.cluster.spec.dumps(tfhelm.cluster.spec.compact_spec(...)).
Its size does not depend on the number of tasks. The evaluator runs no server and stays out
of it (as in TFJob): a coordinator or a collective would otherwise wait for it forever.
*/}}
{{- define "tf-cluster.clusterSpec" -}}
{{- $root := . -}}
{{- $suffix := include "tf-cluster.hostSuffix" . -}}
{{- $counts := include "tf-cluster.counts" . | fromJson -}}
{{- $generation := include "tf-cluster.generation" . -}}
{{- $spec := dict -}}
{{- range $role := list "chief" "ps" "worker" }}
{{- $n := int (index $counts $role) }}
{{- if $n }}
{{- $job := include "tf-cluster.jobName" (dict "root" $root "role" $role "generation" $generation) }}
{{- $svc := include "tf-cluster.jobServiceName" (dict "root" $root "role" $role) }}
{{- $host := ternary (printf "%s-ps-{index}.%s" (include "tf-cluster.name" $root) $suffix) (printf "%s-{index}.%s.%s" $job $svc $suffix) (eq $role "ps") }}
{{- $_ := set $spec $role (dict "count" $n "host" $host) }}
{{- end }}
{{- end }}
{{- toJson $spec -}}
{{- end }}
