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
{{- $name := include "tf-cluster.name" $root -}}
{{- $clusterSpec := .clusterSpec | default (include "tf-cluster.clusterSpec" $root) -}}
{{- $image := merge (deepCopy ($r.image | default dict)) $v.image (dict "registry" (include "tf-cluster.imageRegistry" $root)) -}}
{{- $fetch := and (not $isPS) (eq $v.code.source "url") -}}
{{- /* Extra packages: for the tasks that run the script, in a directory of the shared data
volume named by what goes into it (so it is installed once, and reused by later runs). */ -}}
{{- $packages := and (eq $runs "script") $v.code.packages -}}
{{- $packagesDir := printf "%s/.tfhelm/packages/%s" $v.storage.data.mountPath (sha256sum (toJson (list $v.code.packages $v.code.pip (include "tf-cluster.image" $image))) | trunc 16) -}}
metadata:
  labels:
    {{- include "tf-cluster.labels" (dict "root" $root "component" $role) | nindent 4 }}
    {{- if $isPS }}
    {{ (include "tf-cluster.contract" $root | fromYaml).labels.taskIndex }}: {{ .index | quote }}
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
        - {name: HOME, value: /tmp}
        - {name: PYTHONUNBUFFERED, value: "1"}
        - {name: TFHELM_TERMINATION_LOG, value: /dev/termination-log}
        {{- if eq $v.logFormat "json" }}
        - {name: TFHELM_LOG_FORMAT, value: json}
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
      {{- if eq $runs "server" }}
      args: ["server"]
      {{- else }}
      args:
        - script
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
        - name: TFHELM_TASK_INDEX
          {{- if $isPS }}
          value: {{ .index | quote }}
          {{- else }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/job-completion-index']
          {{- end }}
        - {name: TFHELM_TASK_TYPE, value: {{ $role }}}
        - {name: TFHELM_CLUSTER, value: {{ $name }}}
        - {name: TFHELM_CLUSTER_SPEC_FILE, value: /etc/tfhelm/cluster-spec.json}
        {{- /* PS too: under ParameterServerStrategy each PS writes its variables' shard of a checkpoint. */}}
        - {name: TFHELM_DATA_DIR, value: {{ $v.storage.data.mountPath | toJson }}}
        - {name: TFHELM_LOG_DIR, value: {{ printf "%s/%s" $v.storage.logs.mountPath $name | toJson }}}
        - {name: TFHELM_CHECKPOINT_DIR, value: {{ printf "%s/%s/checkpoints" $v.storage.logs.mountPath $name | toJson }}}
        - {name: HOME, value: /tmp}
        - {name: PYTHONUNBUFFERED, value: "1"}
        - {name: TFHELM_TERMINATION_LOG, value: /dev/termination-log}
        - {name: TFHELM_RETRY_ERRORS, value: {{ join "," $v.failurePolicy.retryErrors | toJson }}}
        {{- if eq $v.logFormat "json" }}
        - {name: TFHELM_LOG_FORMAT, value: json}
        {{- end }}
        {{- if $v.metrics.enabled }}
        - {name: TFHELM_METRICS_PORT, value: {{ $v.metrics.port | quote }}}
        {{- if not $v.metrics.trainingProgress }}
        - {name: TFHELM_METRICS_PROGRESS, value: "0"}
        {{- end }}
        {{- if not $isPS }}
        {{- /* Earlier failed pods of this index (the Job controller's annotations): tfhelm_task_restarts_total. */}}
        {{- range $env, $key := dict "TFHELM_INDEX_FAILURES" "job-index-failure-count" "TFHELM_INDEX_IGNORED_FAILURES" "job-index-ignored-failure-count" }}
        - name: {{ $env }}
          valueFrom:
            fieldRef:
              fieldPath: metadata.annotations['batch.kubernetes.io/{{ $key }}']
        {{- end }}
        {{- end }}
        {{- end }}
        {{- with toString $v.keras }}
        {{- if ne . "auto" }}
        - {name: TF_USE_LEGACY_KERAS, value: {{ ternary "1" "0" (eq . "2") | quote }}}
        {{- end }}
        {{- end }}
        {{- if $packages }}
        - {name: PYTHONUSERBASE, value: {{ $packagesDir | toJson }}}
        {{- end }}
        {{- with $r.env }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with $r.envFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- if eq $runs "server" }}
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
