#!/usr/bin/env bash
# The Prometheus Operator CRDs the chart's monitoring objects are validated against, taken
# from the operator's own Go module at the version in mk/versions.mk:
#   hack/monitoring-crds.sh OUT_DIR
set -euo pipefail
out=$1
source "$(dirname "$0")/module-files.sh"

mkdir -p "$out"
operator=$(dir "github.com/prometheus-operator/prometheus-operator@$(v PROMETHEUS_OPERATOR_VERSION)")
cp "$operator"/example/prometheus-operator-crd/monitoring.coreos.com_{podmonitors,prometheusrules}.yaml "$out/"
chmod -R u+w "$out"
ls "$out"
