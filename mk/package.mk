# Shipping: versioned chart archives, pushed to an OCI registry; the version policy's
# digests; the test-only registry server and GitOps CRDs (all from Go modules).
DIST        := $(CURDIR)/dist
CHARTS      := tf-cluster user-env
# Where `make publish` pushes, e.g. OCI_REPO=oci://registry.example.com/charts
OCI_REPO    ?=
chart_version = $(shell sed -n 's/^version:[[:space:]]*//p' charts/$(1)/Chart.yaml)
CHART_TGZS  := $(foreach c,$(CHARTS),$(DIST)/charts/$(c)-$(call chart_version,$(c)).tgz)

.PHONY: package publish chart-digests registry gitops-crds helm3 promtool prometheus
package: helm ## Versioned chart archives in dist/charts/ (and the wheel in dist/)
	@mkdir -p $(DIST)/charts
	$(BIN)/helm package $(addprefix charts/,$(CHARTS)) -d $(DIST)/charts
	rm -rf build/lib build/bdist.*  # setuptools keeps deleted files there and would ship them
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(DIST) .
	rm -rf build/lib build/bdist.*

publish: package ## Push the chart archives to OCI_REPO (e.g. oci://HOST/charts); HELM_PUSH_FLAGS=--plain-http for a local registry
	@[ -n "$(OCI_REPO)" ] || { echo "set OCI_REPO, e.g. make publish OCI_REPO=oci://registry.example.com/charts" >&2; exit 2; }
	$(PY) hack/chart-digests.py
	for tgz in $(CHART_TGZS); do $(BIN)/helm push "$$tgz" $(OCI_REPO) $(HELM_PUSH_FLAGS); done

chart-digests: $(VENV)/.installed ## Record each chart version's digest (the version policy; after a version bump)
	$(PY) hack/chart-digests.py

registry: $(BIN)/registry ## The OCI registry server (distribution) the OCI tests start on 127.0.0.1
$(BIN)/registry: mk/versions.mk
	hack/cached-go-install.sh registry $(DISTRIBUTION_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w" github.com/distribution/distribution/v3/cmd/registry@$(DISTRIBUTION_VERSION)

promtool: $(BIN)/promtool ## Prometheus' promtool: the chart tier checks and unit-tests the rendered PrometheusRule
prometheus: $(BIN)/prometheus ## The Prometheus server: the tf and realpods tiers scrape real tasks with it
# One `go install` for both: they share most of the module's packages, compiled once.
$(BIN)/promtool $(BIN)/prometheus &: mk/versions.mk
	hack/cached-go-install.sh promtool,prometheus $(PROMETHEUS_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w" github.com/prometheus/prometheus/cmd/promtool@$(PROMETHEUS_VERSION) \
	  github.com/prometheus/prometheus/cmd/prometheus@$(PROMETHEUS_VERSION)

gitops-crds: ## Argo CD and Flux CRDs from their Go modules into .cache/gitops-crds (the GitOps tests do this)
	hack/gitops-crds.sh $(CURDIR)/.cache/gitops-crds

helm3: $(BIN)/helm3 ## Helm 3, to prove the charts render the same with Helm 3 and 4
# As Helm 3's own release build: the default Kubernetes version (1.<client-go minor>) is set
# by ldflags, else it says v1.20 and refuses kubeVersion >=1.29.
$(BIN)/helm3: mk/versions.mk
	gomod=$$(go mod download -json helm.sh/helm/v3@$(HELM3_VERSION) | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$$/\1/p'); \
	minor=$$(sed -n 's|^[[:space:]]*k8s.io/client-go v0\.\([0-9]*\)\..*|\1|p' "$$gomod"); \
	kv=""; for p in pkg/chartutil pkg/lint/rules; do kv="$$kv -X helm.sh/helm/v3/$$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$$p.k8sVersionMinor=$$minor"; done; \
	hack/cached-go-install.sh helm $(HELM3_VERSION) $(BIN)/.helm3 -- \
	  go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$(HELM3_VERSION)$$kv" \
	  helm.sh/helm/v3/cmd/helm@$(HELM3_VERSION)
	mv $(BIN)/.helm3/helm $@ && rmdir $(BIN)/.helm3
