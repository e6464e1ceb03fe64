{{/* Chart label value. */}}
{{- define "tf-cluster.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* Selector labels: only name, instance and component; never user labels.
Call with (dict "root" $ "component" "worker"). */}}
{{- define "tf-cluster.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Values.nameOverride | default .root.Chart.Name | trunc 63 | trimSuffix "-" | toJson }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* All labels of an object: selector labels, the standard ones, the TF role and cluster. */}}
{{- define "tf-cluster.labels" -}}
{{- $keys := (include "tf-cluster.contract" .root | fromYaml).labels -}}
{{ include "tf-cluster.selectorLabels" . }}
app.kubernetes.io/part-of: tfhelm
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ include "tf-cluster.chart" .root }}
{{ $keys.cluster }}: {{ include "tf-cluster.name" .root }}
{{ $keys.role }}: {{ .component }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Does this release hold a part? Call with (dict "root" $ "part" "ps"); "" is false. */}}
{{- define "tf-cluster.holds" -}}
{{- $c := .root.Values.components -}}
{{- if or (eq $c "all") (eq $c .part) (and (eq $c "workload") (ne .part "ps")) }}true{{ end -}}
{{- end }}

{{/* What a role's tasks run (the contract's `task.modes`): a TF server that never exits, or
the script. Call with (dict "root" $ "role" "worker"). */}}
{{- define "tf-cluster.runs" -}}
{{- $task := (include "tf-cluster.contract" .root | fromYaml).task -}}
{{- if has .role (index $task.servers .root.Values.mode) }}{{ $task.modes.server }}{{ else }}{{ $task.modes.script }}{{ end -}}
{{- end }}

{{/* `[registry/]repository:tag`, or without the tag when the repository carries a digest.
`registry` is `global.imageRegistry` ("tf-cluster.imageRegistry"). */}}
{{- define "tf-cluster.image" -}}
{{- with .registry }}{{ trimSuffix "/" . }}/{{ end }}{{ .repository }}{{ with .tag }}:{{ . }}{{ end -}}
{{- end }}

{{/* Script path in the container. */}}
{{- define "tf-cluster.scriptPath" -}}
{{- $code := .Values.code -}}
{{- if eq $code.source "image" }}{{ $code.script }}{{ else }}{{ $code.mountPath }}/{{ base $code.script }}{{ end -}}
{{- end }}

{{/*
Combinations the schema cannot express. Included by the always-rendered ConfigMap and by
NOTES.txt, so `helm install` and `helm template` (Argo CD) both fail with the message.
*/}}
{{- define "tf-cluster.validate" -}}
{{- $v := .Values -}}
{{- $contract := include "tf-cluster.contract" . | fromYaml -}}
{{- $dnsLabel := int $contract.limits.dnsLabel -}}
{{- if and (eq $v.code.source "url") (not $v.code.url) -}}
{{- fail "code.url is required when code.source is \"url\" (set it to the http(s) URL of your script)" -}}
{{- end -}}
{{- if and (eq $v.code.source "inline") (not $v.code.inline) -}}
{{- fail "code.inline is required when code.source is \"inline\" (the script's text)" -}}
{{- end -}}
{{- if eq $v.code.source "inline" -}}
{{- $size := len $v.code.inline -}}
{{- range $file, $text := $v.code.extraFiles }}{{ $size = add $size (len $text) }}{{ end -}}
{{- $max := int $contract.limits.inlineCodeBytes -}}
{{- if gt $size $max -}}
{{- fail (printf "code.inline and code.extraFiles hold %d bytes, over the %d (%d KiB) that fit in the code ConfigMap (an object and a release hold 1 MiB): serve the code with code.source url, or put it in the image (code.source image)" $size $max (div $max 1024)) -}}
{{- end -}}
{{- end -}}
{{- if and (eq $v.code.source "configMap") (not $v.code.configMap) -}}
{{- fail "code.configMap is required when code.source is \"configMap\" (name the ConfigMap holding code.script)" -}}
{{- end -}}
{{- if and $v.metrics.enabled (eq (int $v.metrics.port) (int $v.port)) -}}
{{- fail (printf "metrics.port %d is the TensorFlow servers' port: choose another one" (int $v.metrics.port)) -}}
{{- end -}}
{{- if and $v.gang.enabled $v.queue.name -}}
{{- fail (printf "gang.enabled and queue.name %q exclude each other: Kueue already admits the cluster as one (docs/queue.md); Kubernetes gang scheduling (docs/gang.md) is the way without Kueue. Set one of them" $v.queue.name) -}}
{{- end -}}
{{- if and (eq $v.components "ps") (eq (int $v.ps.replicas) 0) -}}
{{- fail "components is \"ps\" but ps.replicas is 0: this release would be empty" -}}
{{- end -}}
{{- if and (eq $v.mode "in-graph") (eq (int $v.ps.replicas) 0) -}}
{{- fail "mode \"in-graph\" needs parameter servers: set ps.replicas >= 1 (or use mode between-graph for MultiWorkerMirroredStrategy)" -}}
{{- end -}}
{{- if and $v.storage.storageClass.create (eq $v.storage.storageClass.preset "custom") (not $v.storage.storageClass.provisioner) -}}
{{- fail "storage.storageClass.provisioner is required for the \"custom\" preset (e.g. nfs.csi.k8s.io)" -}}
{{- end -}}
{{- if and $v.storage.storageClass.create (eq $v.storage.storageClass.preset "glusterfs-heketi") (not $v.storage.storageClass.glusterfs.resturl) -}}
{{- fail "storage.storageClass.glusterfs.resturl is required for the \"glusterfs-heketi\" preset" -}}
{{- end -}}
{{- if or (not (regexMatch (printf "^(%s)$" $contract.patterns.dns1123Label) .Release.Namespace)) (gt (len .Release.Namespace) $dnsLabel) -}}
{{- fail (printf "namespace %q is not a valid namespace name: at most %d lowercase letters, digits and '-'" .Release.Namespace $dnsLabel) -}}
{{- end -}}
{{- $name := include "tf-cluster.name" . -}}
{{- if not (regexMatch (printf "^(%s)$" $contract.patterns.dns1035Label) $name) -}}
{{- fail (printf "cluster name %q must be lowercase letters, digits and '-', starting with a letter (set clusterName)" $name) -}}
{{- end -}}
{{- $counts := include "tf-cluster.counts" . | fromJson -}}
{{- $generation := include "tf-cluster.generation" . -}}
{{- range $role := list "chief" "evaluator" "ps" "worker" }}
{{- $n := int (index $counts $role) }}
{{- $base := ternary (printf "%s-ps" $name) (include "tf-cluster.jobName" (dict "root" $ "role" $role "generation" $generation)) (eq $role "ps") }}
{{- $longest := printf "%s-%d" $base (sub $n 1) }}
{{- if and $n (gt (len $longest) $dnsLabel) }}
{{- fail (printf "cluster name %q is too long: the %s hostname %q exceeds %d characters (shorten clusterName to at most %d characters for %d %s task(s))" $name $role $longest $dnsLabel (sub $dnsLabel (sub (len $longest) (len $name))) $n $role) }}
{{- end }}
{{- end }}
{{- end }}
