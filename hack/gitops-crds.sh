#!/usr/bin/env bash
# The CRDs the GitOps examples are validated against, taken from the projects' own Go
# modules at the versions in mk/versions.mk:
#   hack/gitops-crds.sh OUT_DIR
# Argo CD and Flux's source-controller ship their CRD YAML in their modules. Flux's
# helm-controller publishes only its API types as a module, so its HelmRelease CRD is
# generated from those types with controller-gen, as helm-controller's own Makefile does.
set -euo pipefail
out=$1
source "$(dirname "$0")/module-files.sh"

mkdir -p "$out"
argo=$(dir "github.com/argoproj/argo-cd/v3@$(v ARGOCD_VERSION)")
cp "$argo"/manifests/crds/{application,applicationset,appproject}-crd.yaml "$out/"
source=$(dir "github.com/fluxcd/source-controller@$(v FLUX_SOURCE_VERSION)")
cp "$source"/config/crd/bases/source.toolkit.fluxcd.io_{gitrepositories,ocirepositories,helmrepositories}.yaml "$out/"
api=$(dir "github.com/fluxcd/helm-controller/api@$(v FLUX_HELM_API_VERSION)")
tools=$(v CONTROLLER_TOOLS_VERSION)
"$repo/hack/cached-go-install.sh" controller-gen "$tools" "$repo/bin" -- \
  go install -trimpath -ldflags "-s -w" "sigs.k8s.io/controller-tools/cmd/controller-gen@$tools"
(cd "$api" && "$repo/bin/controller-gen" crd:crdVersions=v1 paths=./... output:crd:dir="$out")
chmod -R u+w "$out"
ls "$out"
