{{- /*
Every resource name comes from here. tfhelm/workspace/userspec.py mirrors these rules (the release
`tfhelm user add` installs is `user-env`); tests/chart/test_user_env.py proves both agree.
The workspace owns its namespace, so names derive from the release, not the user.
*/ -}}

{{/* The user: `userName`, else the namespace without tfhelm's `tfhelm-user-` prefix. */}}
{{- define "user-env.user" -}}
{{- .Values.userName | default (trimPrefix "tfhelm-user-" .Release.Namespace) -}}
{{- end }}

{{/* A component's short name (label `app.kubernetes.io/component`) from its values key. */}}
{{- define "user-env.component" -}}
{{- if eq .component "codeServer" }}files{{ else }}{{ .component }}{{ end -}}
{{- end }}

{{/* A component's Deployment, Service and Ingress; call with (dict "root" $ "component" "notebook"). */}}
{{- define "user-env.componentName" -}}
{{- .root.Release.Name }}-{{ include "user-env.component" . }}
{{- end }}

{{/* The PVC of a volume (code, logs, data); call with (dict "root" $ "volume" "logs"). */}}
{{- define "user-env.pvcName" -}}
{{- (index .root.Values.storage .volume).existingClaim | default (printf "%s-%s" .root.Release.Name .volume) -}}
{{- end }}

{{/* The Secret holding the notebook's login token. */}}
{{- define "user-env.tokenSecretName" -}}
{{- .Values.notebook.token.existingSecret | default (printf "%s-notebook-token" .Release.Name) -}}
{{- end }}

{{/* The notebook's ServiceAccount, Role and RoleBinding. */}}
{{- define "user-env.serviceAccountName" -}}
{{- .Release.Name }}-notebook
{{- end }}

{{/* The in-cluster URL of the file server, ending in `/`. */}}
{{- define "user-env.filesUrl" -}}
http://{{ include "user-env.componentName" (dict "root" . "component" "codeServer") }}.{{ .Release.Namespace }}.svc:{{ .Values.codeServer.service.port }}/
{{- end }}

{{/* The workspace's Kueue ClusterQueue (cluster-scoped): named after its namespace. */}}
{{- define "user-env.clusterQueueName" -}}
{{- .Release.Namespace -}}
{{- end }}

{{/* The Role and RoleBinding of the workspace's queue (priorities it may use, status reads). */}}
{{- define "user-env.queueRoleName" -}}
{{- .Release.Name }}-queue
{{- end }}
