# Two entry points for a newcomer: `make demo` and `make test`.
# Both create .venv on first use; `make test` also builds the Kubernetes
# control-plane binaries (kube-apiserver, etcd, kube-controller-manager), helm and
# Volcano's controller manager, and downloads the peers' released CRDs (all cached
# outside the repository), for the integration tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint venv

# Exactly the packages in requirements-dev.lock, checked against their hashes: the
# image's requirements.lock plus the dev extras, so the tests run on what ships. The
# package itself is built with the locked setuptools, fetching nothing.
$(BIN)/batchsched: pyproject.toml requirements-dev.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-dev.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --no-index -e .
	touch $@

venv: $(BIN)/batchsched

demo: venv
	@for f in examples/*.yaml; do \
		echo "=== $$f"; \
		$(BIN)/batchsched simulate -f $$f || exit 1; \
	done

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

test: venv lint
	@if [ "$${BATCHSCHED_SKIP_INTEGRATION:-}" = 1 ] && [ "$${CI:-}" != true ]; then \
		echo "BATCHSCHED_SKIP_INTEGRATION=1: integration tests skipped" >&2; \
		$(BIN)/pytest -q -m "not integration"; \
	else \
		assets="$$(bash hack/envtest.sh)" && bash hack/kube-controller-manager.sh >/dev/null && \
			bash hack/helm.sh >/dev/null && bash hack/vc-controller-manager.sh >/dev/null && \
			peers="$$(bash hack/peer-crds.sh)" && \
			KUBEBUILDER_ASSETS="$$assets" BATCHSCHED_PEER_CRDS="$$peers" $(BIN)/pytest -q; \
	fi
