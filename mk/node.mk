# The local cluster's real nodes (tfhelm_dev/localnode.py): kubelet and kube-proxy come with the
# Kubernetes build in mk/testenv.mk; here containerd and CoreDNS from Go modules (cached per
# version like every binary), kube-router (NetworkPolicy), Debian's runc, CNI plugins,
# iptables, ipset and bindfs, and the images, built without a registry by
# hack/images/build.py into the per-user cache.
# Needs root, as the node itself does.

NODE_BINS      := containerd containerd-shim-runc-v2 ctr coredns kube-router
NODE_APT       := runc containernetworking-plugins iptables ipset conntrack bindfs debootstrap gcc libc6-dev
NOTEBOOK_VERSION    := 7.6.5
TENSORBOARD_VERSION := 2.21.0
# The wheel the notebook image installs; rebuilt when the package changes.
WHEEL_DIR      := $(CURDIR)/build/wheel

.PHONY: node node-deps images image-root containerd coredns kube-router pause wheel
node: node-deps $(addprefix $(BIN)/,$(NODE_BINS)) ## The real nodes' binaries and host packages (cached)
containerd: $(BIN)/containerd
coredns: $(BIN)/coredns
kube-router: $(BIN)/kube-router
pause: $(BIN)/pause
wheel: $(WHEEL_DIR)/.stamp

node-deps: ## Debian packages the real nodes need (installed when missing)
	@missing=$$(for p in $(NODE_APT); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then echo ">> apt-get install $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

$(BIN)/containerd $(BIN)/containerd-shim-runc-v2 $(BIN)/ctr &: mk/versions.mk
	hack/cached-go-install.sh containerd,containerd-shim-runc-v2,ctr $(CONTAINERD_VERSION) $(BIN) -- \
	  go install -trimpath -tags no_btrfs \
	  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" \
	  $(foreach c,containerd containerd-shim-runc-v2 ctr,github.com/containerd/containerd/v2/cmd/$(c)@$(CONTAINERD_VERSION))

$(BIN)/coredns: mk/versions.mk
	hack/cached-go-install.sh coredns $(COREDNS_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w" github.com/coredns/coredns@$(COREDNS_VERSION)

# NetworkPolicy for the real nodes: kube-router's policy controller only (routing and
# service proxy off). v2.1.0 is the one version the module proxy here serves, and security
# flaws are reported for it: it runs for the local test cluster only, on a network that
# never leaves the machine.
$(BIN)/kube-router: mk/versions.mk
	hack/cached-go-install.sh kube-router $(KUBE_ROUTER_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$(KUBE_ROUTER_VERSION)

$(BIN)/pause: hack/images/pause.c | node-deps
	@mkdir -p $(BIN)
	gcc -static -O2 -s -o $@ $<

$(WHEEL_DIR)/.stamp: pyproject.toml MANIFEST.in $(shell find tfhelm charts examples -type f -not -name '*.pyc') | $(VENV)/.installed
	rm -rf $(WHEEL_DIR) && $(PY) -m pip wheel -q --no-deps -w $(WHEEL_DIR) . && touch $@

IMAGE_ARGS = --tensorflow $(TENSORFLOW_VERSION) --notebook $(NOTEBOOK_VERSION) \
  --tensorboard $(TENSORBOARD_VERSION)
images: node-deps $(BIN)/pause $(BIN)/helm $(WHEEL_DIR)/.stamp ## Build the local images (cached; first build ~10 min)
	python3 hack/images/build.py $(TFHELM_CACHE)/images --helm $(BIN)/helm --pause $(BIN)/pause \
	  --wheel $$(ls $(WHEEL_DIR)/tfhelm-*.whl) $(IMAGE_ARGS)
# The Debian root and TensorFlow layers only (the longest part; needs no helm or wheel), so
# they build while helm does.
image-root: node-deps
	python3 hack/images/build.py $(TFHELM_CACHE)/images --root-only $(IMAGE_ARGS)
