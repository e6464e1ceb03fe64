# The peer bench (bench/peer.py): tfhelm side by side with Kubeflow's TFJob
# (training-operator $(TRAINING_OPERATOR_VERSION), the last release with TFJob), on the local
# cluster's real nodes and its kwok nodes. The operator and its TFJob CRD come from the
# operator's Go module, cached per version like every other binary
# (~/.cache/tfhelm/bin/$(TRAINING_OPERATOR_VERSION)/), so a second clone copies them.
# Results: bench/results/peer{,-quick}.{json,md}; a full run also rewrites the README's Peer table.

TRAINING_OPERATOR := $(BIN)/training-operator.v1
TFJOB_CRD         := $(BIN)/kubeflow.org_tfjobs.yaml
PEER_ARGS         ?=

.PHONY: training-operator bench-peer bench-peer-quick
training-operator: $(TRAINING_OPERATOR) $(TFJOB_CRD) ## Kubeflow's training-operator (TFJob) and its CRD, from the Go module (cached)

$(TRAINING_OPERATOR): mk/versions.mk
	hack/cached-go-install.sh training-operator.v1 $(TRAINING_OPERATOR_VERSION) $(BIN) -- \
	  go install -trimpath -ldflags "-s -w" \
	  github.com/kubeflow/training-operator/cmd/training-operator.v1@$(TRAINING_OPERATOR_VERSION)

# The CRD as the module ships it, kept beside the binary in the cache.
$(TFJOB_CRD): mk/versions.mk
	@cache="$(TFHELM_CACHE)/bin/$(TRAINING_OPERATOR_VERSION)"; mkdir -p "$$cache"; \
	if [ ! -s "$$cache/kubeflow.org_tfjobs.yaml" ]; then \
	  src=$$(go mod download -json github.com/kubeflow/training-operator@$(TRAINING_OPERATOR_VERSION) \
	    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$$/\1/p'); \
	  install -m 0644 "$$src/manifests/base/crds/kubeflow.org_tfjobs.yaml" "$$cache/kubeflow.org_tfjobs.yaml"; \
	fi; \
	install -m 0644 "$$cache/kubeflow.org_tfjobs.yaml" $@

bench-peer: install testenv node images training-operator ## tfhelm vs TFJob: real node (4 workers, 1 PS, 600 steps, 5 reps), faults (pod deleted, process killed in place), kwok N=256/1,024 (~22 min on 2 cores; PEER_ARGS="--fault-reps 3")
	$(PY) bench/peer.py $(PEER_ARGS)

bench-peer-quick: install testenv node images training-operator ## The peer bench with kwok N=32 and 128 instead of 256 and 1,024
	$(PY) bench/peer.py --quick $(PEER_ARGS)
