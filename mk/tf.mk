# TensorFlow (CPU) in the project venv: the tf test tier and `tfhelm run --local` need it.
# Included by the Makefile (uses VENV, PY, PYTEST and TENSORFLOW_VERSION from mk/versions.mk).
#
# tensorflow-cpu only: no tf-keras (the examples use no Keras) and no tensorboard (TF 2.21
# no longer depends on it; the examples write summaries with core TensorFlow).
# The stamp names the version, so bumping TENSORFLOW_VERSION reinstalls.

TF_STAMP := $(VENV)/.tf-$(TENSORFLOW_VERSION)

.PHONY: tf-deps test-tf
tf-deps: $(TF_STAMP) ## TensorFlow CPU in the venv (a large download, once)

$(TF_STAMP): mk/versions.mk mk/tf.mk | $(VENV)/.installed
	$(PY) -m pip install -q "tensorflow-cpu==$(TENSORFLOW_VERSION)"
	TF_CPP_MIN_LOG_LEVEL=3 $(PY) -c "import tensorflow as tf; v = tf.__version__; \
	  assert v == '$(TENSORFLOW_VERSION)', f'tensorflow {v} installed, $(TENSORFLOW_VERSION) wanted'"
	rm -f $(VENV)/.tf-*
	touch $@

test-tf: install tf-deps prometheus ## Real TensorFlow processes on loopback (examples, resume, run --local, a real Prometheus)
	$(PYTEST) tests/tf $(PYTEST_ARGS)
