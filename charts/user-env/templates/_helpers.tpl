{{/* Chart label value. */}}
{{- define "user-env.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* Selector labels: only name, instance and component; never user labels.
Call with (dict "root" $ "component" "notebook"). */}}
{{- define "user-env.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Values.nameOverride | default .root.Chart.Name | trunc 63 | trimSuffix "-" | toJson }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ include "user-env.component" . }}
{{- end }}

{{/* All labels of an object: selector labels, the standard ones and the user. */}}
{{- define "user-env.labels" -}}
{{ include "user-env.selectorLabels" . }}
app.kubernetes.io/part-of: tfhelm
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
helm.sh/chart: {{ include "user-env.chart" .root }}
{{ (include "user-env.contract" .root | fromJson).labels.user }}: {{ include "user-env.user" .root }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
A component's Deployment (one replica on the user node). Call with (dict "root" $
"component" "notebook" "pod" <containers and volumes YAML>) and optionally "strategy",
"annotations" (pod annotations) and "automount" (mount the ServiceAccount token).
*/}}
{{- define "user-env.deployment" -}}
{{- $root := .root -}}
{{- $c := index $root.Values .component -}}
{{- $p := $root.Values.placement -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "user-env.componentName" . }}
  labels:
    {{- include "user-env.labels" . | nindent 4 }}
  {{- with include "user-env.annotations" (dict "root" $root) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  replicas: 1
  {{- with .strategy }}
  strategy:
    type: {{ . }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "user-env.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "user-env.labels" . | nindent 8 }}
        {{- with $c.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with merge (dict) (.annotations | default dict) $c.podAnnotations ($root.Values.podAnnotations | default dict) }}
      annotations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
    spec:
      automountServiceAccountToken: {{ .automount | default false }}
      enableServiceLinks: false
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $p.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- .pod | trim | nindent 6 }}
{{- end }}

{{/* A component's image and pull policy; call with (dict "root" $ "component" "notebook"). */}}
{{- define "user-env.containerImage" -}}
{{- $c := index .root.Values .component -}}
{{- $ref := $c.image.repository -}}
{{- with (.root.Values.global | default dict).imageRegistry }}{{ $ref = printf "%s/%s" (trimSuffix "/" .) $ref }}{{ end -}}
{{- with $c.image.tag }}{{ $ref = printf "%s:%s" $ref . }}{{ end -}}
image: {{ $ref | toJson }}
imagePullPolicy: {{ $c.image.pullPolicy | toJson }}
{{- end }}

{{/* What every container of a component shares; call with (dict "root" $ "component" "notebook")
and "loopback" true for one that no Service reaches (no `http` port). */}}
{{- define "user-env.containerCommon" -}}
{{- $c := index .root.Values .component -}}
{{- include "user-env.containerImage" . }}
{{- if not .loopback }}
ports:
  - {name: http, containerPort: {{ $c.port }}}
{{- end }}
resources:
  {{- toYaml $c.resources | nindent 2 }}
securityContext:
  {{- toYaml .root.Values.containerSecurityContext | nindent 2 }}
{{- end }}

{{/* The notebook's login token as a volume with one file, `token` (the notebook and
TensorBoard's login proxy read it). */}}
{{- define "user-env.tokenVolume" -}}
- name: token
  secret:
    secretName: {{ include "user-env.tokenSecretName" . | toJson }}
    items:
      - {key: {{ .Values.notebook.token.existingSecretKey | toJson }}, path: token}
    defaultMode: 0440
{{- end }}

{{/* A volume backed by one of the user's PVCs; call with (dict "root" $ "volume" "logs" "readOnly" true). */}}
{{- define "user-env.pvcVolume" -}}
- name: {{ .volume }}
  persistentVolumeClaim:
    claimName: {{ include "user-env.pvcName" . | toJson }}
    {{- if .readOnly }}
    readOnly: true
    {{- end }}
{{- end }}

{{/* Is a component reachable from outside the namespace (node port, load balancer, Ingress)? "" is false. */}}
{{- define "user-env.exposed" -}}
{{- $c := index .root.Values .component -}}
{{- if and $c.enabled (or (ne $c.service.type "ClusterIP") ($c.ingress | default dict).enabled) }}true{{ end -}}
{{- end }}

{{/* A component's Service; call with (dict "root" $ "component" "notebook"). */}}
{{- define "user-env.service" -}}
{{- $s := (index .root.Values .component).service -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "user-env.componentName" . }}
  labels:
    {{- include "user-env.labels" . | nindent 4 }}
  {{- with include "user-env.annotations" (dict "root" .root "extra" $s.annotations) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  type: {{ $s.type }}
  {{- if ne $s.type "ClusterIP" }}
  # Answer only on the node that runs the pod: no hop through other nodes, and the
  # client's address is kept for the NetworkPolicy.
  externalTrafficPolicy: Local
  {{- end }}
  selector:
    {{- include "user-env.selectorLabels" . | nindent 4 }}
  ports:
    - name: http
      port: {{ $s.port }}
      targetPort: http
      {{- if and $s.nodePort (ne $s.type "ClusterIP") }}
      nodePort: {{ $s.nodePort }}
      {{- end }}
{{- end }}

{{/* A component's optional Ingress; call with (dict "root" $ "component" "notebook"). */}}
{{- define "user-env.ingress" -}}
{{- $i := (index .root.Values .component).ingress -}}
{{- $s := (index .root.Values .component).service -}}
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: {{ include "user-env.componentName" . }}
  labels:
    {{- include "user-env.labels" . | nindent 4 }}
  {{- with include "user-env.annotations" (dict "root" .root "extra" $i.annotations) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  {{- with $i.className }}
  ingressClassName: {{ . | toJson }}
  {{- end }}
  {{- with $i.tls }}
  tls:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  rules:
    - {{- with $i.host }} host: {{ . | quote }}{{ end }}
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: {{ include "user-env.componentName" . }}
                port: {number: {{ $s.port }}}
{{- end }}

{{/*
Combinations the schema cannot express. Included by templates/validate.yaml and NOTES.txt,
so `helm install` and `helm template` (Argo CD) both fail with the message.
*/}}
{{- define "user-env.validate" -}}
{{- $v := .Values -}}
{{- if or (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .Release.Namespace)) (gt (len .Release.Namespace) 63) -}}
{{- fail (printf "namespace %q is not a valid namespace name: at most 63 lowercase letters, digits and '-'" .Release.Namespace) -}}
{{- end -}}
{{- $rel := .Release.Name -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $rel) -}}
{{- fail (printf "release name %q must be lowercase letters, digits and '-', starting with a letter: Service names derive from it" $rel) -}}
{{- end -}}
{{- if gt (len (printf "%s-tensorboard" $rel)) 63 -}}
{{- fail (printf "release name %q is too long: Service %s-tensorboard would exceed 63 characters (use at most 51)" $rel $rel) -}}
{{- end -}}
{{- range $key := list "notebook" "tensorboard" "codeServer" }}
{{- $s := (index $v $key).service }}
{{- if and $s.nodePort (eq $s.type "ClusterIP") }}
{{- fail (printf "%s.service.nodePort is set but %s.service.type is ClusterIP (use NodePort or LoadBalancer, or unset nodePort)" $key $key) }}
{{- end }}
{{- end }}
{{- $nb := $v.notebook.service.nodePort -}}
{{- if and $nb (eq (toString $nb) (toString $v.tensorboard.service.nodePort)) -}}
{{- fail (printf "notebook.service.nodePort and tensorboard.service.nodePort are both %v: each Service needs its own node port" $nb) -}}
{{- end -}}
{{- end }}

{{/* The fence around the namespace (NetworkPolicies, quota, LimitRange) outlives the
release: whatever still runs in the namespace after `helm uninstall` (a user's TF clusters)
stays isolated and counted; `tfhelm user remove --purge` deletes the namespace with it. */}}
{{- define "user-env.keep" -}}
helm.sh/resource-policy: keep
{{- end }}

{{/* An object's `annotations:` block: commonAnnotations plus "extra" (which win); nothing
when both are empty. Call with (dict "root" $ "extra" (dict ...)). */}}
{{- define "user-env.annotations" -}}
{{- $all := merge (deepCopy (.extra | default dict)) (.root.Values.commonAnnotations | default dict) -}}
{{- with $all }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The rules tf-cluster and tfhelm share (label keys among them): tf-cluster's contract, which
`make chart-files` copies here as files/contract.json. Read with `| fromJson`. */}}
{{- define "user-env.contract" -}}
{{- .Files.Get "files/contract.json" -}}
{{- end }}
