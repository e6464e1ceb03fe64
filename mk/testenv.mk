# The local Kubernetes used by the `cluster` test tier and `make demo`: the real
# control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
# plus kubectl, kwok and kwokctl, all built from Go modules at the versions in
# mk/versions.mk and cached per version by hack/cached-go-install.sh
# (~/.cache/tfhelm/bin/<version>/), so a fresh clone copies instead of rebuilding.
# tfhelm_dev/localcluster.py runs them; see hack/testenv/README.md.

TESTENV     := $(CURDIR)/hack/testenv
K8S_BINS    := kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy
KWOK_BINS   := kwok kwokctl
KWOK_STAGES := $(BIN)/kwok-stages.yaml
TESTENV_BINS := $(addprefix $(BIN)/,$(K8S_BINS) etcd $(KWOK_BINS))

tfhelm_comma := ,
tfhelm_space := $(subst ,, )
# The flags hack/lib/golang.sh and hack/lib/version.sh use for release builds.
K8S_TAGS    := selinux,notest,grpcnotrace
K8S_SEMVER  := $(subst ., ,$(KUBERNETES_VERSION:v%=%))
K8S_LDFLAGS  = -s -w $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
  -X $(p).gitVersion=$(KUBERNETES_VERSION) -X $(p).gitMajor=$(word 1,$(K8S_SEMVER)) \
  -X $(p).gitMinor=$(word 2,$(K8S_SEMVER)) -X $(p).gitTreeState=clean \
  -X $(p).buildDate=$(shell date -u +%Y-%m-%dT%H:%M:%SZ))
KWOK_LDFLAGS := -s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$(KWOK_VERSION:v%=%) \
  -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=$(KUBERNETES_VERSION:v%=%)

.PHONY: testenv kubernetes etcd kwok kwok-stages cluster cluster-down cluster-status
testenv: $(TESTENV_BINS) $(KWOK_STAGES) helm ## Build the local control plane, kubectl, kwok and helm (cached)
kubernetes: $(addprefix $(BIN)/,$(K8S_BINS))
etcd: $(BIN)/etcd
kwok: $(addprefix $(BIN)/,$(KWOK_BINS))
kwok-stages: $(KWOK_STAGES)

# One `go build` for all four: they share most packages, so one invocation
# compiles the shared code once (a cold build takes a while on two cores).
$(addprefix $(BIN)/,$(K8S_BINS)) &: mk/versions.mk $(TESTENV)/gomod.sh
	$(TESTENV)/gomod.sh k8s $(KUBERNETES_VERSION)
	hack/cached-go-install.sh $(subst $(tfhelm_space),$(tfhelm_comma),$(K8S_BINS)) $(KUBERNETES_VERSION) $(BIN) -- \
	  sh -c 'exec go -C $(TESTENV)/k8s build -trimpath -tags $(K8S_TAGS) -ldflags "$(K8S_LDFLAGS)" -o "$$GOBIN/" \
	    $(addprefix k8s.io/kubernetes/cmd/,$(K8S_BINS))'

$(BIN)/etcd: mk/versions.mk $(TESTENV)/gomod.sh
	$(TESTENV)/gomod.sh etcd $(ETCD_VERSION)
	hack/cached-go-install.sh etcd $(ETCD_VERSION) $(BIN) -- \
	  sh -c 'exec go -C $(TESTENV)/etcd build -trimpath -ldflags "-s -w" -o "$$GOBIN/etcd" go.etcd.io/etcd/server/v3'

$(addprefix $(BIN)/,$(KWOK_BINS)) &: mk/versions.mk
	hack/cached-go-install.sh kwok,kwokctl $(KWOK_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "$(KWOK_LDFLAGS)" \
	  sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION) sigs.k8s.io/kwok/cmd/kwokctl@$(KWOK_VERSION)

# kwok Stages: kwok's own kustomize/stage/ files from the module cache, patched
# by hack/testenv/stages/kustomization.yaml. Also kept beside the kwok binaries
# in the cache so tfhelm_dev.localcluster finds a complete set there.
$(KWOK_STAGES): mk/versions.mk $(TESTENV)/stages/kustomization.yaml | $(BIN)/kubectl
	@echo ">> assembling $@ from sigs.k8s.io/kwok@$(KWOK_VERSION) kustomize/stage"
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	src=$$(go mod download -json sigs.k8s.io/kwok@$(KWOK_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'); \
	cp -r "$$src/kustomize/stage" "$$tmp/upstream"; chmod -R u+w "$$tmp"; \
	cp $(TESTENV)/stages/kustomization.yaml "$$tmp/"; \
	$(BIN)/kubectl kustomize "$$tmp" >"$$tmp/stages.yaml"; \
	cache="$(TFHELM_CACHE)/bin/$(KWOK_VERSION)"; \
	mkdir -p "$$cache"; cp "$$tmp/stages.yaml" "$$cache/kwok-stages.yaml"; mv "$$tmp/stages.yaml" $@

cluster: testenv node images $(VENV)/.installed ## Start the local cluster (three real nodes, kwok nodes); prints `export KUBECONFIG=...`
	$(TFHELM) cluster up

cluster-down: ## Stop the local cluster; leaves no process behind
	$(TFHELM) cluster down

cluster-status: ## Show the local cluster
	$(TFHELM) cluster status
