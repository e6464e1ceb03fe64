# Every pinned tool version, in one place.
HELM_VERSION       := v4.3.2
KUBERNETES_VERSION := v1.36.3
ETCD_VERSION       := v3.6.16
KWOK_VERSION       := v0.8.0
TENSORFLOW_VERSION := 2.21.0
HELM_DOCS_VERSION  := v1.14.2
CONTAINERD_VERSION := v2.2.9
COREDNS_VERSION    := v1.14.7
KUBE_ROUTER_VERSION := v2.1.0
# Test-only: the OCI registry server and the GitOps CRDs' source modules.
DISTRIBUTION_VERSION := v3.1.2
ARGOCD_VERSION       := v3.5.7
FLUX_SOURCE_VERSION  := v1.9.6
FLUX_HELM_API_VERSION := v1.6.5
CONTROLLER_TOOLS_VERSION := v0.19.0
HELM3_VERSION        := v3.22.0
# promtool (checks and unit-tests the chart's PrometheusRule): the Prometheus module's version
# (v0.X.Y is Prometheus 3.X.Y).
PROMETHEUS_VERSION   := v0.316.0
# The PodMonitor and PrometheusRule CRDs (tests/cluster/test_monitoring.py).
PROMETHEUS_OPERATOR_VERSION := v0.85.0
# Kueue (the queue tests, `tfhelm cluster up --kueue`): the one version the module proxy here serves.
KUEUE_VERSION        := v0.17.0
# Bench-only: Kubeflow's training-operator, the last release with TFJob (bench/peer.py runs it
# beside tfhelm as the peer).
TRAINING_OPERATOR_VERSION := v1.8.1
