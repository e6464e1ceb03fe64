{{/*
The pod of one TF task, shared by every role. Call with
(dict "root" $ "role" "worker") for Job roles and add "index" i for PS task i. Callers
rendering many pods pass "clusterSpec" (it hashes all values: render it once).
*/}}
{{- define "tf-cluster.pod" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $role := .role -}}
{{- $r := index $v $role -}}
{{- $isPS := eq $role "ps" -}}
{{- $runs := include "tf-cluster.runs" . -}}
{{- $contract := include "tf-cluster.contract" $root | fromYaml -}}
{{- $names := $contract.env -}}
{{- $name := include "tf-cluster.name" $root -}}
{{- $clusterSpec := .clusterSpec | default (include "tf-cluster.clusterSpec" $root) -}}
{{- $image := merge (deepCopy ($r.image | default dict)) $v.image (dict "registry" (include "tf-cluster.imageRegistry" $root)) -}}
{{- $fetch := and (not $isPS) (eq $v.code.source "url") -}}
{{- /* Extra packages: for the tasks that run the script, installed once per run (its Job) in a
directory of the shared data volume named by what goes into it, then checked against what pip
wrote and copied into the pod's own /tmp, which the script's Python reads (a later run, or
anything else that can write the data volume, never changes what a run imports). */ -}}
{{- $packages := and (eq $runs $contract.task.modes.script) $v.code.packages -}}
{{- $packagesDir := printf "%s/.tfhelm/packages/%s/$(%s)" $v.storage.data.mountPath (sha256sum (toJson (list $v.code.packages $v.code.pip (include "tf-cluster.image" $image))) | trunc 16) $names.run -}}
{{- $packagesPrivate := "/tmp/packages" -}}
metadata:
  labels:
    {{- include "tf-cluster.labels" (dict "root" $root "component" $role) | nindent 4 }}
    {{- if $isPS }}
    {{ $contract.labels.taskIndex }}: {{ .index | quote }}
    {{- end }}
    {{- with $r.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    checksum/cluster-spec: {{ sha256sum $clusterSpec }}
    {{- with include "tf-cluster.podAnnotations" (dict "root" $root "r" $r) }}
    {{- . | nindent 4 }}
    {{- end }}
spec:
  {{- if not $isPS }}
  subdomain: {{ include "tf-cluster.jobServiceName" . }}
  restartPolicy: Never
  {{- end }}
  {{- with include "tf-cluster.serviceAccountName" $root }}
  serviceAccountName: {{ . | toJson }}
  {{- end }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  # From SIGTERM (a drain, an eviction, a preemption) to SIGKILL: the script's time to save.
  terminationGracePeriodSeconds: {{ $v.nodeFailure.terminationGraceSeconds }}
  # TF_CONFIG hosts are fully qualified: look them up as they are first, not through
  # the search list (ndots 5 would try three NXDOMAIN answers before each of them).
  dnsConfig:
    options:
      - {name: ndots, value: "1"}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $r.priorityClassName }}
  priorityClassName: {{ . | toJson }}
  {{- end }}
  {{- with $r.schedulerName }}
  schedulerName: {{ . | toJson }}
  {{- end }}
  {{- with include "tf-cluster.queueGate" (dict "root" $root "role" $role) }}{{ . | trim | nindent 2 }}{{ end }}
  {{- with include "tf-cluster.gangGroup" (dict "root" $root) }}{{ . | trim | nindent 2 }}{{ end }}
  {{- with include "tf-cluster.placement" (dict "root" $root "r" $r) }}{{ . | trim | nindent 2 }}{{ end }}
  {{- if or $fetch $packages }}
  initContainers:
  {{- end }}
  {{- if $fetch }}
    - name: fetch-code
      image: {{ include "tf-cluster.image" $image | toJson }}
      imagePullPolicy: {{ $image.pullPolicy | toJson }}
      # Every value JSON-encoded: one value is one argument, whatever it holds.
      command: ["python3", "/etc/tfhelm/fetch.py", {{ $v.code.url | toJson }}, {{ printf "%s/%s" $v.code.mountPath (base $v.code.script) | toJson }}, {{ $v.code.sha256 | toJson }}]
      terminationMessagePolicy: FallbackToLogsOnError
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      resources:
        requests: {cpu: 50m, memory: 64Mi}
        limits: {memory: 256Mi}
      volumeMounts:
        - {name: tfhelm-config, mountPath: /etc/tfhelm, readOnly: true}
        - {name: code, mountPath: {{ $v.code.mountPath | toJson }}}
  {{- end }}
  {{- if $packages }}
    - name: install-packages
      image: {{ include "tf-cluster.image" $image | toJson }}
      imagePullPolicy: {{ $image.pullPolicy | toJson }}
      command:
        - python3
        - /etc/tfhelm/launcher.py
        - packages
        - {{ $packagesDir | toJson }}
        - {{ $packagesPrivate }}
        {{- with $v.code.pip.indexUrl }}
        - --index-url
        - {{ . | toJson }}
        {{- end }}
        {{- with $v.code.pip.findLinks }}
        {{- if not $v.code.pip.indexUrl }}
        - --no-index
        {{- end }}
        - --find-links
        - {{ . | toJson }}
        {{- end }}
        - "--"
        {{- range $v.code.packages }}
        - {{ . | toJson }}
        {{- end }}
      terminationMessagePolicy: FallbackToLogsOnError
      env:
        - name: {{ $names.run }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['batch.kubernetes.io/controller-uid']
        - {name: HOME, value: /tmp}
        - {name: PYTHONUNBUFFERED, value: "1"}
        - {name: {{ $names.terminationLog }}, value: /dev/termination-log}
        {{- if eq $v.logFormat "json" }}
        - {name: {{ $names.logFormat }}, value: json}
        {{- end }}
        {{- /* The role's own settings too: PIP_* (a private index, its credentials), proxies. */}}
        {{- with $r.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $r.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      resources:
        requests: {cpu: 100m, memory: 128Mi}
        limits: {memory: 1Gi}
      volumeMounts:
        - {name: tfhelm-config, mountPath: /etc/tfhelm, readOnly: true}
        - {name: tmp, mountPath: /tmp}
        - {name: data, mountPath: {{ $v.storage.data.mountPath | toJson }}}
  {{- end }}
  containers:
    - name: tensorflow
      image: {{ include "tf-cluster.image" $image | toJson }}
      imagePullPolicy: {{ $image.pullPolicy | toJson }}
      {{- if $r.command }}
      {{- /* Their own entrypoint, exec'd by the launcher once it has set TF_CONFIG. */}}
      command:
        - python3
        - /etc/tfhelm/launcher.py
        - exec
        - "--"
        {{- toYaml $r.command | nindent 8 }}
      {{- with $r.args }}
      args:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- else }}
      command: ["python3", "/etc/tfhelm/launcher.py"]
      {{- if eq $runs $contract.task.modes.server }}
      args: [{{ $runs }}]
      {{- else }}
      args:
        - {{ $runs }}
        - {{ include "tf-cluster.scriptPath" $root | toJson }}
        {{- range $v.code.args }}
        - {{ . | toJson }}
        {{- end }}
      {{- end }}
      {{- end }}
      ports:
        - {name: tf, containerPort: {{ $v.port }}}
        {{- if $v.metrics.enabled }}
        - {name: metrics, containerPort: {{ $v.metrics.port }}}
        {{- end }}
      # The launcher writes why a task failed (one line) to /dev/termination-log; a command
      # that does not says it in its log's last lines.
      terminationMessagePolicy: FallbackToLogsOnError
      env:
        {{- /* No TF_CONFIG: it lists every task, so every pod would grow with the cluster.
        The launcher composes it from the cluster spec and this task's type and index. */}}
        - name: {{ $names.taskIndex }}
          {{- if $isPS }}
          value: {{ .index | quote }}
          {{- else }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
          {{- end }}
        - {name: {{ $names.taskType }}, value: {{ $role }}}
        - {name: {{ $names.cluster }}, value: {{ $name }}}
        - {name: {{ $names.clusterSpecFile }}, value: /etc/tfhelm/cluster-spec.json}
        {{- /* The launcher's fence: a task stops once another pod took over its index (tfhelm/pod/fence.py). */}}
        - name: {{ $names.podUid }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.uid
        {{- /* PS too: under ParameterServerStrategy each PS writes its variables' shard of a checkpoint. */}}
        - {name: {{ $names.dataDir }}, value: {{ $v.storage.data.mountPath | toJson }}}
        - {name: {{ $names.logDir }}, value: {{ printf "%s/%s" $v.storage.logs.mountPath $name | toJson }}}
        - {name: {{ $names.checkpointDir }}, value: {{ printf "%s/%s/checkpoints" $v.storage.logs.mountPath $name | toJson }}}
        - {name: HOME, value: /tmp}
        - {name: PYTHONUNBUFFERED, value: "1"}
        - {name: {{ $names.terminationLog }}, value: /dev/termination-log}
        {{- $retryErrors := $v.failurePolicy.retryErrors }}
        {{- if kindIs "invalid" $retryErrors }}{{ $retryErrors = $contract.task.retryErrors }}{{ end }}
        - {name: {{ $names.retryErrors }}, value: {{ join "," $retryErrors | toJson }}}
        {{- if eq $v.logFormat "json" }}
        - {name: {{ $names.logFormat }}, value: json}
        {{- end }}
        {{- if $v.metrics.enabled }}
        - {name: {{ $names.metricsPort }}, value: {{ $v.metrics.port | quote }}}
        {{- if not $v.metrics.trainingProgress }}
        - {name: {{ $names.metricsProgress }}, value: "0"}
        {{- end }}
        {{- if not $isPS }}
        {{- /* Earlier failed pods of this index (the Job controller's annotations): tfhelm_task_restarts_total. */}}
        {{- range $env, $key := dict $names.indexFailures "job-index-failure-count" $names.indexIgnoredFailures "job-index-ignored-failure-count" }}
        - name: {{ $env }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/{{ $key }}']
        {{- end }}
        {{- end }}
        {{- end }}
        {{- /* The Keras switch TensorFlow reads (`keras: auto` sets none). */}}
        {{- with index $contract.keras.values (toString $v.keras) }}
        - {name: {{ $contract.keras.env }}, value: {{ . | quote }}}
        {{- end }}
        {{- if $packages }}
        - {name: PYTHONUSERBASE, value: {{ $packagesPrivate }}}
        {{- end }}
        {{- /* A parameter server serves on for a third of its grace after SIGTERM, so a chief
        stopped by the same drain can still save its variables. Worker servers (in a Job) stop at
        once: a pod still terminating once its Job is gone (a namespace deleted) keeps the Job
        controller's finalizer on Kubernetes up to 1.36.3 (kubernetes/kubernetes#141329). */}}
        {{- if and $isPS (eq $runs $contract.task.modes.server) }}
        - {name: {{ $names.stopDelay }}, value: {{ div (int $v.nodeFailure.terminationGraceSeconds) 3 | quote }}}
        {{- end }}
        {{- /* gRPC keepalive: a call to a peer that stopped answering fails in seconds, not when TCP gives up. */}}
        {{- $grpc := $v.nodeFailure.grpcOptions }}
        {{- if and $grpc (not (include "tf-cluster.envNames" $r.env | fromJsonArray | has "TF_GRPC_DEFAULT_OPTIONS")) }}
        - {name: TF_GRPC_DEFAULT_OPTIONS, value: {{ $grpc | toJson }}}
        {{- end }}
        {{- with $r.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $r.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if eq $runs $contract.task.modes.server }}
      readinessProbe:
        tcpSocket: {port: tf}
        periodSeconds: 5
      {{- end }}
      resources:
        {{- $res := deepCopy ($r.resources | default dict) }}
        {{- if $r.gpus }}
        {{- $_ := set $res "limits" (merge (dict "nvidia.com/gpu" $r.gpus) ($res.limits | default dict)) }}
        {{- end }}
        {{- toYaml $res | nindent 8 }}
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      volumeMounts:
        - {name: tfhelm-config, mountPath: /etc/tfhelm, readOnly: true}
        - {name: tmp, mountPath: /tmp}
        {{- if and (not $isPS) (ne $v.code.source "image") }}
        - {name: code, mountPath: {{ $v.code.mountPath | toJson }}}
        {{- end }}
        - {name: data, mountPath: {{ $v.storage.data.mountPath | toJson }}}
        - {name: logs, mountPath: {{ $v.storage.logs.mountPath | toJson }}}
        {{- with $r.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: tfhelm-config
      configMap:
        name: {{ include "tf-cluster.configName" $root }}
    - {name: tmp, emptyDir: {}}
    {{- if not $isPS }}
    {{- if eq $v.code.source "url" }}
    - {name: code, emptyDir: {}}
    {{- else if ne $v.code.source "image" }}
    - name: code
      configMap:
        name: {{ include "tf-cluster.codeConfigName" $root | toJson }}
    {{- end }}
    {{- end }}
    {{- range $vol := list "data" "logs" }}
    {{- if (index $v.storage $vol).enabled }}
    - name: {{ $vol }}
      persistentVolumeClaim:
        claimName: {{ include "tf-cluster.pvcName" (dict "root" $root "volume" $vol) | toJson }}
    {{- else }}
    - {name: {{ $vol }}, emptyDir: {}}
    {{- end }}
    {{- end }}
    {{- with $r.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/* The names a list of EnvVars sets, as a JSON list. */}}
{{- define "tf-cluster.envNames" -}}
{{- $names := list -}}
{{- range . }}{{ $names = append $names .name }}{{ end -}}
{{- toJson $names -}}
{{- end }}

{{/*
A pod's tolerations, as a JSON list: a role's (`r`) non-empty `tolerations`, else the
chart-wide ones, and for each node condition the list does not name (by key, or by a
key-less `Exists`) the `nodeFailure` one: how long a task stays on a node that stopped
answering (`unreachable`) or says it is not ready before Kubernetes evicts it (its default,
300 s, is five minutes of a stalled training). Call with (dict "root" $ "r" $roleValues);
"probe" true: a short-lived pod that is no task (`helm test`'s) gets the given ones only
(Kubernetes' defaults for the rest), so re-applying its manifest never changes them.
*/}}
{{- define "tf-cluster.tolerations" -}}
{{- $v := .root.Values -}}
{{- $given := (.r | default dict).tolerations | default $v.tolerations | default list -}}
{{- $all := $given -}}
{{- $conditions := ternary dict (dict "node.kubernetes.io/unreachable" $v.nodeFailure.unreachableSeconds "node.kubernetes.io/not-ready" $v.nodeFailure.notReadySeconds) (.probe | default false) -}}
{{- range $key, $seconds := $conditions -}}
{{- $named := false -}}
{{- range $given }}{{ if or (eq (.key | default "") $key) (and (not .key) (eq (.operator | default "") "Exists")) }}{{ $named = true }}{{ end }}{{ end -}}
{{- if and (not $named) (not (kindIs "invalid" $seconds)) -}}
{{- $all = append $all (dict "key" $key "operator" "Exists" "effect" "NoExecute" "tolerationSeconds" (int $seconds)) -}}
{{- end -}}
{{- end -}}
{{- toJson $all -}}
{{- end }}
