# The two commands of the README.  Both set everything up first (scripts/setup.sh is idempotent).
.PHONY: setup demo lint test test-all image test-image
PY := .venv/bin/python
export OMP_NUM_THREADS ?= 1

setup:
	@bash scripts/setup.sh

# Render the sample book shipped in examples/ (random weights: the real ones need the Hugging Face hub).
demo: setup
	$(PY) -m flows.cli examples/daodejing.epub --model random-tiny --out output
	@ls -l output/daodejing

# The test suite as CI runs it: CPU only, one torch thread a process, TEST_JOBS processes (pytest-xdist: a module
# runs whole on one of them, tests/conftest.py), the 25 slowest tests listed; slow and GPU tests are skipped.
# TEST_JOBS=0 runs it in one process.  test-all: the slow tests too (RUN_SLOW=1).
TEST_JOBS ?= 2
PYTEST := $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) --dist loadfile --durations=25

# lint: ruff (lint and import order, the whole tree) and mypy (the types of flows tasks engine manifests), both
# set in pyproject.toml; `make test` runs it first and stops at the first finding.
lint:
	$(PY) -m ruff check .
	$(PY) -m mypy

test:
	@bash scripts/setup.sh test
	@$(MAKE) --no-print-directory lint
	$(PYTEST) -m "not slow and not gpu"

test-all:
	@bash scripts/setup.sh test
	@$(MAKE) --no-print-directory lint
	RUN_SLOW=1 $(PYTEST)

# The container image (Containerfile, docs/containers.md): podman, no registry needed for the CPU image.
image:
	@bash scripts/setup.sh image
	@bash scripts/image.sh

# The image's tests: podman run of the sample book, bad input, the Docker work pool (slow: minutes).
test-image: image
	@bash scripts/setup.sh test
	RUN_SLOW=1 $(PY) -m pytest -q -m image -p no:cacheprovider
