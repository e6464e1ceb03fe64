{{- /* The body of tf-cluster's templates/tests/test-cluster.yaml (kept here, out of every stored release). */ -}}
{{ define "tf-cluster.manifest.tests.test-cluster" }}{{- if and .Values.test.enabled (include "tf-cluster.holds" (dict "root" $ "part" "test")) }}
{{- $v := .Values }}
{{- $image := merge (deepCopy $v.worker.image) $v.image (dict "registry" (include "tf-cluster.imageRegistry" .)) }}
# `helm test {{ .Release.Name }}`: every task's TF_CONFIG is valid and every host in it
# resolves, checked from inside the cluster (tfhelm/pod/helmtest.py, in the tfconfig ConfigMap).
apiVersion: v1
kind: Pod
metadata:
  name: {{ printf "%s-test" .Release.Name }}
  labels:
    {{- include "tf-cluster.labels" (dict "root" $ "component" "test") | nindent 4 }}
  {{- with include "tf-cluster.annotations" (dict "root" $ "extra" (dict "helm.sh/hook" "test" "helm.sh/hook-delete-policy" "before-hook-creation,hook-succeeded")) }}{{ . | trim | nindent 2 }}{{ end }}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with include "tf-cluster.placement" (dict "root" $ "probe" true) }}{{ . | trim | nindent 2 }}{{ end }}
  containers:
    - name: check
      image: {{ include "tf-cluster.image" $image | toJson }}
      imagePullPolicy: {{ $image.pullPolicy | toJson }}
      command: ["python3", "/etc/tfhelm/helm-test.py", {{ $v.test.timeout | toString | toJson }}]
      env:
        - {name: {{ (include "tf-cluster.contract" . | fromYaml).env.clusterSpecFile }}, value: /etc/tfhelm/cluster-spec.json}
        - {name: HOME, value: /tmp}
      resources:
        requests: {cpu: 50m, memory: 64Mi}
        limits: {memory: 256Mi}
      securityContext:
        {{- toYaml $v.containerSecurityContext | nindent 8 }}
      volumeMounts:
        - {name: tfhelm-config, mountPath: /etc/tfhelm, readOnly: true}
  volumes:
    - name: tfhelm-config
      configMap:
        name: {{ include "tf-cluster.configName" . }}
{{- end }}
{{ end }}
