{{- /* The body of tf-cluster's templates/networkpolicy/networkpolicy.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.networkpolicy.networkpolicy" }}{{- $np := .Values.networkPolicy }}
{{- if $np.enabled }}
# This release's pods (a TF server answers anyone who reaches it: reads, writes, runs ops)
# admit pods of this namespace only, plus `metricsFrom` on the metrics port and `clientFrom`
# (an in-graph chief elsewhere, e.g. a notebook) on the TensorFlow port. Egress stays open.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ include "tf-cluster.networkPolicyName" . }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "networkpolicy") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  podSelector:
    matchLabels:
      app.kubernetes.io/instance: {{ .Release.Name }}
      {{ (include "tf-cluster.contract" . | fromYaml).labels.cluster }}: {{ include "tf-cluster.name" . }}
  policyTypes: [Ingress]
  ingress:
    - from:
        - podSelector: {}
    {{- if and $np.metricsFrom (or .Values.metrics.enabled .Values.reaper.metrics.enabled) }}
    - ports:
        - {port: metrics, protocol: TCP}
      from:
        {{- toYaml $np.metricsFrom | nindent 8 }}
    {{- end }}
    {{- with $np.clientFrom }}
    - ports:
        - {port: tf, protocol: TCP}
      from:
        {{- toYaml . | nindent 8 }}
    {{- end }}
{{- end }}
{{ end }}
