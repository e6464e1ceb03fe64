# Benchmarks (bench/): tfhelm at scale, side by side with a per-task baseline and plain Helm,
# on the local cluster (kwok nodes only; started and stopped by the bench if not running).
# Results: bench/results/scale{,-quick}.{json,md,png}; `make bench` also rewrites the README's
# Scale table, then runs the peer bench (mk/peer.mk, bench/peer.py). matplotlib (for the plot) goes into the venv here only: no test needs it.

.PHONY: bench bench-quick bench-deps bench-chaos
bench-deps: $(VENV)/.bench-installed
$(VENV)/.bench-installed: $(VENV)/.installed
	$(PY) -m pip install -q matplotlib
	touch $@

bench: install testenv bench-deps node images training-operator ## Scale bench (N up to 100,000 rendered, 4,096 on the cluster), then the TFJob peer bench (~30 min on 2 cores)
	$(PY) bench/scale.py
	$(PY) bench/peer.py

bench-quick: install testenv bench-deps ## The scale bench at a few sizes (a few minutes)
	$(PY) bench/scale.py --quick

bench-chaos: install testenv node images ## One long training on the real nodes under random faults (~15 min): README's chaos table
	$(PY) bench/chaos.py $(CHAOS_ARGS)

-include mk/peer.mk

.PHONY: bench-queue
bench-queue: install testenv node images kueue training-operator ## What a Kueue queue costs, and tfhelm + Kueue beside TFJob + Kueue: admission and handoff on the real nodes (~15 min; bench/results/queue-cost.md)
	$(PY) bench/queue_cost.py $(QUEUE_ARGS)
