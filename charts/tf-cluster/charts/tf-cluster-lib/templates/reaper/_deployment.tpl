{{- /* The body of tf-cluster's templates/reaper/deployment.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.reaper.deployment" }}{{- if include "tf-cluster.reaper.enabled" . }}
{{- $r := .Values.reaper }}
{{- $v := .Values }}
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
      {{- with include "tf-cluster.podAnnotations" (dict "root" $) }}
      annotations:
        {{- . | nindent 8 }}
      {{- end }}
    spec:
      serviceAccountName: {{ include "tf-cluster.reaperName" . }}
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
          image: {{ include "tf-cluster.image" (dict "registry" (include "tf-cluster.imageRegistry" .) "repository" $r.image.repository "tag" ($r.image.tag | default .Chart.Version)) | toJson }}
          imagePullPolicy: {{ $r.image.pullPolicy | toJson }}
          command: [tfhelm]
          args:
            - reap
            - {{ include "tf-cluster.name" . | toJson }}
            - {{ printf "--namespace=%s" .Release.Namespace | toJson }}
            - {{ printf "--grace=%v" $r.grace | toJson }}
            - {{ printf "--completion=%s" $r.completion | toJson }}
            - {{ printf "--on-failure=%s" $r.onFailure | toJson }}
            # Keep watching after a reap: a re-run of the training (new Jobs) is reaped too.
            - --forever
            # Delete this cluster's PS objects by name, never through Helm: uninstalling a
            # release needs its Secrets, and RBAC cannot limit Secrets to one release.
            - --delete-directly
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
            - {name: tmp, mountPath: /tmp}
      volumes:
        - {name: tmp, emptyDir: {}}
{{- end }}
{{ end }}
