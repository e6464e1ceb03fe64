#!/usr/bin/env bash
# The Prometheus Operator CRDs the chart's monitoring objects are validated against, taken
# from the operator's own Go module at the version in mk/versions.mk:
#   hack/monitoring-crds.sh OUT_DIR
set -euo pipefail
out=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
export GOTOOLCHAIN=local
v() { sed -n "s/^$1[[:space:]]*:=[[:space:]]*//p" "$repo/mk/versions.mk"; }
dir() { go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p'; }

mkdir -p "$out"
operator=$(dir "github.com/prometheus-operator/prometheus-operator@$(v PROMETHEUS_OPERATOR_VERSION)")
cp "$operator"/example/prometheus-operator-crd/monitoring.coreos.com_{podmonitors,prometheusrules}.yaml "$out/"
chmod -R u+w "$out"
ls "$out"
