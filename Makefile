# tfhelm: `make test` installs everything it needs (venv, helm, the local control
# plane, TensorFlow) and runs every test tier.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

include mk/versions.mk

BIN    := $(CURDIR)/bin
# The per-user build cache (Go binaries per version, images): hack/cache-dir.sh says where
# (`make TFHELM_CACHE_DIR=...` passed on, as $(shell) does not see command-line variables).
TFHELM_CACHE := $(shell TFHELM_CACHE_DIR='$(TFHELM_CACHE_DIR)' hack/cache-dir.sh)
VENV   := $(CURDIR)/.venv
PY     := $(VENV)/bin/python
PYTEST := $(PY) -m pytest
TFHELM := $(VENV)/bin/tfhelm
export PATH := $(BIN):$(VENV)/bin:$(PATH)
export GOTOOLCHAIN := local

.PHONY: help install install-venv helm helm-docs test test-unit test-chart test-cluster demo docs api-docs chart-files schemas clean \
  build-demo build-test
help: ## Show the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

install: $(VENV)/.installed helm ## Python venv with tfhelm (editable) and helm
install-venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml tfhelm_dev/__init__.py hack/install-dev.py
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	# The development cluster (tfhelm_dev/) is not in the wheel: the checkout goes on the path,
	# and its `tfhelm cluster` commands are registered with tfhelm.
	$(PY) hack/install-dev.py
	# Byte-compiled as pip does for an installed wheel (an editable install is not), so every
	# command starts as fast as a user's, PYTHONDONTWRITEBYTECODE or not.
	$(PY) -m compileall -q tfhelm
	touch $@

helm: $(BIN)/helm
$(BIN)/helm: mk/versions.mk
	hack/cached-go-install.sh helm $(HELM_VERSION) $(BIN) -- \
	  go install -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" \
	  helm.sh/helm/v4/cmd/helm@$(HELM_VERSION)

helm-docs: $(BIN)/helm-docs
$(BIN)/helm-docs: mk/versions.mk
	hack/cached-go-install.sh helm-docs $(HELM_DOCS_VERSION) $(BIN) -- \
	  go install -ldflags "-s -w" github.com/norwoodj/helm-docs/cmd/helm-docs@$(HELM_DOCS_VERSION)

docs: helm-docs chart-files schemas api-docs ## Regenerate the charts' READMEs from their values.yaml comments, and docs/api.md
	$(BIN)/helm-docs --chart-search-root charts --template-files README.md.gotmpl
	$(BIN)/helm-docs --chart-search-root charts/tf-cluster --template-files VALUES.md.gotmpl --output-file VALUES.md

api-docs: install-venv ## docs/api.md, the Python API's reference, from its docstrings
	$(PY) hack/api-docs.py

chart-files: install-venv ## The programs the charts run in pods (tfhelm/pod/, the reaper) without their prose
	$(PY) hack/chart-files.py

schemas: install-venv ## Each chart's values.schema.json from its values.schema.yaml, the shared defs and the contract
	$(PY) hack/schemas.py

test-unit: install ## Pure Python tests
	$(PYTEST) tests/unit

test-chart: install helm-docs helm3 promtool ## helm lint/template tests, schema rejections, promtool on the alerts
	$(PYTEST) tests/chart

-include mk/testenv.mk mk/tf.mk mk/node.mk mk/package.mk mk/kueue.mk

# The prerequisites of `make demo` and `make test`, independent steps at the same time, with
# progress (hack/steps.py; each step is one of the targets here, cached as before).
build-demo: ## Build what the demo needs (venv, helm, control plane, nodes, images), in parallel
	python3 hack/steps.py demo
build-test: ## Build what the tests need: the demo's and the test-only tools, in parallel
	python3 hack/steps.py test

# The targets again after the build: nothing to do when it built them, and a step the plan
# missed is still built (serially) rather than failing a test.
# The quick tiers first (no cluster: a broken change shows in minutes), then those on the local
# cluster, Kueue's last (it starts Kueue for itself and stops it).
TIERS := tests/unit tests/chart tests/tf tests/cluster tests/programs tests/realpods tests/queue
test: build-test install helm-docs helm3 promtool prometheus testenv node images tf-deps registry kueue ## Every tier: unit, chart, tf, cluster, programs, real pods, queue
	$(PYTEST) $(TIERS) --durations=25 $(PYTEST_ARGS)

test-queue: install testenv node images kueue ## The queue tier: trainings sharing the training nodes through a real Kueue
	$(PYTEST) tests/queue $(PYTEST_ARGS)

test-cluster: install testenv node images registry ## The cluster tier against the local control plane
	$(PYTEST) tests/cluster $(PYTEST_ARGS)

demo: build-demo install testenv node images ## The main job, for real: 8 workers and 2 PS train on the local cluster's two training nodes
	hack/demo.sh

clean: ## Stop the local cluster, remove build outputs (the per-user binary cache stays)
	-[ -x $(TFHELM) ] && $(TFHELM) cluster down
	rm -rf $(BIN) $(VENV) .pytest_cache .tfhelm $(DIST)

-include mk/bench.mk
