# Kueue (sigs.k8s.io/kueue, pinned in mk/versions.mk) for the queue tests and `tfhelm cluster
# up --kueue`: its manager (cmd/kueue) built from the Go module like every binary and cached
# per version (~/.cache/tfhelm/bin/$(KUEUE_VERSION)/), and beside it the manifests it ships:
# the CRDs, the webhook configurations and the manager's ClusterRoles, which
# tfhelm_dev/localkueue.py installs (webhooks by URL on 127.0.0.1, its own CA).

KUEUE_BIN       := $(BIN)/kueue
KUEUE_MANIFESTS := $(BIN)/kueue-manifests.yaml

.PHONY: kueue
kueue: $(KUEUE_BIN) $(KUEUE_MANIFESTS) ## Kueue's manager and its CRDs, webhooks and RBAC, from the Go module (cached)

$(KUEUE_BIN): mk/versions.mk
	hack/cached-go-install.sh kueue $(KUEUE_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$(KUEUE_VERSION)" \
	  sigs.k8s.io/kueue/cmd/kueue@$(KUEUE_VERSION)

# One file of YAML documents, as the module has them: the CRDs of config/components/crd,
# config/components/webhook/manifests.yaml, the manager's and metrics' ClusterRoles and the
# manager's Role on the Secrets of its namespace (without it its Secret informer never syncs
# and no controller starts). The cached name changes with that list of files.
KUEUE_MANIFEST_SET := 2
$(KUEUE_MANIFESTS): mk/versions.mk mk/kueue.mk
	@cache="$(TFHELM_CACHE)/bin/$(KUEUE_VERSION)"; mkdir -p "$$cache" $(BIN); \
	if [ ! -s "$$cache/kueue-manifests-$(KUEUE_MANIFEST_SET).yaml" ]; then \
	  src=$$(go mod download -json sigs.k8s.io/kueue@$(KUEUE_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'); \
	  tmp=$$(mktemp); \
	  for f in "$$src"/config/components/crd/bases/*.yaml "$$src"/config/components/webhook/manifests.yaml \
	           "$$src"/config/components/rbac/role.yaml "$$src"/config/components/rbac/metrics_auth_role.yaml \
	           "$$src"/config/components/rbac/manager_secrets_role.yaml; do \
	    printf -- '---\n' >>"$$tmp"; cat "$$f" >>"$$tmp"; \
	  done; \
	  install -m 0644 "$$tmp" "$$cache/kueue-manifests-$(KUEUE_MANIFEST_SET).yaml"; rm -f "$$tmp"; \
	fi; \
	install -m 0644 "$$cache/kueue-manifests-$(KUEUE_MANIFEST_SET).yaml" $@
