{{- /* The body of tf-cluster's templates/reaper/deployment.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.reaper.deployment" }}{{- if include "tf-cluster.reaper.enabled" . }}
{{- $r := .Values.reaper }}
{{- $v := .Values }}
{{- /* The tasks' image (its python3 runs the reaper the chart ships), unless overridden. */}}
{{- $image := merge (deepCopy ($r.image | default dict)) $v.image (dict "registry" (include "tf-cluster.imageRegistry" .)) }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "tf-cluster.reaperName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "reaper") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  replicas: 1
  # One reaper at a time (two would be harmless: every action is idempotent).
  strategy:
    type: Recreate
  selector:
    matchLabels:
      {{- include "tf-cluster.selectorLabels" (dict "root" $ "component" "reaper") | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "tf-cluster.labels" (dict "root" $ "component" "reaper") | nindent 8 }}
      annotations:
        # A new reaper program (a chart upgrade) restarts it.
        checksum/program: {{ include "tf-cluster.programs" . | sha256sum }}
        {{- with include "tf-cluster.podAnnotations" (dict "root" $) }}
        {{- . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "tf-cluster.reaperName" . }}
      # Outlives the tasks' grace: stopped by its namespace's deletion, it releases the finished
      # tasks' pods that Kubernetes would leave behind (tfhelm/reaper/lost.py).
      terminationGracePeriodSeconds: {{ add $v.nodeFailure.terminationGraceSeconds 15 }}
      # The one pod of the cluster that talks to the API server.
      automountServiceAccountToken: true
      enableServiceLinks: false
      securityContext:
        {{- toYaml $v.podSecurityContext | nindent 8 }}
      {{- with include "tf-cluster.placement" (dict "root" $) }}{{ . | trim | nindent 6 }}{{ end }}
      {{- with $v.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      containers:
        - name: reaper
          image: {{ include "tf-cluster.image" $image | toJson }}
          imagePullPolicy: {{ $image.pullPolicy | toJson }}
          # tfhelm/reaper/incluster.py: the loop and rules of `tfhelm reap`, with the standard
          # library. It keeps watching after a reap (a re-run of the training is reaped too)
          # and deletes this cluster's PS objects by name, never through Helm: uninstalling a
          # release needs its Secrets, and RBAC cannot limit Secrets to one release.
          command: [python3, /etc/tfhelm/reaper.py]
          args:
            - {{ include "tf-cluster.name" . | toJson }}
            - {{ printf "--namespace=%s" .Release.Namespace | toJson }}
            - {{ printf "--grace=%v" $r.grace | toJson }}
            - {{ printf "--completion=%s" $r.completion | toJson }}
            - {{ printf "--on-failure=%s" $r.onFailure | toJson }}
            {{- if include "tf-cluster.hasGates" . }}
            # Open the PS, chief and evaluator pods' scheduling gates while Kueue has admitted
            # the workers; close them (evict the pods) when it preempts or requeues them.
            - --gates
            {{- end }}
            {{- if not (include "tf-cluster.reaper.reaps" .) }}
            # Nothing to reap (reaper.enabled is false, or no parameter servers): the rules only.
            - --no-reap
            {{- end }}
            {{- if include "tf-cluster.reaper.replacesLost" . }}
            - --replace-lost-tasks
            {{- end }}
            {{- if eq $v.logFormat "json" }}
            - --log-format=json
            {{- end }}
            {{- if $r.metrics.enabled }}
            - {{ printf "--metrics-port=%v" $r.metrics.port | toJson }}
            {{- end }}
          {{- if $r.metrics.enabled }}
          ports:
            - {name: metrics, containerPort: {{ $r.metrics.port }}}
          {{- end }}
          env:
            - {name: HOME, value: /tmp}
            - {name: PYTHONUNBUFFERED, value: "1"}
          resources:
            {{- toYaml $r.resources | nindent 12 }}
          securityContext:
            {{- toYaml $v.containerSecurityContext | nindent 12 }}
          volumeMounts:
            - {name: tfhelm-config, mountPath: /etc/tfhelm, readOnly: true}
            - {name: tmp, mountPath: /tmp}
      volumes:
        # The config ConfigMap carries the reaper's program beside the tasks' (reaper.py).
        - name: tfhelm-config
          configMap:
            name: {{ include "tf-cluster.configName" . }}
        - {name: tmp, emptyDir: {}}
{{- end }}
{{ end }}
