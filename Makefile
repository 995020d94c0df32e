# Two entry points (see README): `make run` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,onnx,openvino,tf,tvm,ray,learned,gpu-api,loadgen,jax

.PHONY: setup run test slow lint test-gpu mutate

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --upgrade pip
	$(VENV)/bin/python -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/ios-bench run $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q $(ARGS)

# On a machine with an NVIDIA GPU: `make test-gpu EXTRAS=dev,onnx,openvino,tf,tvm,gpu` (run
# `ios-bench doctor` first); without a GPU every test here skips with its reason.
test-gpu: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m gpu -rs $(ARGS)

slow: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m slow $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# Mutation testing (cosmic-ray, in the dev extra), scoped to the modules a change touched and the tests
# that cover them, e.g. `make mutate MODULES="ios_core/quantize.py" TESTS="tests/test_quantize.py"`.
# Each module is mutated in place, one mutant at a time, the tests run, the file restored: run it on a
# committed tree (`git status` clean after). Per module, .mutate/<module>.txt lists every mutant that
# survived (cr-report --surviving-only, with its diff) and the score: read each survivor before calling
# the work done, and kill it with a test or say why it is equivalent. docs/architecture.md, "Tests".
# A module gives a thousand mutants or more (hours): SAMPLE=N runs a seeded uniform random sample of N of
# them (SEED, default 0, picks which; the same seed, the same mutants of the same code) and the score is
# then killed/run with a 95 % Wilson interval for the whole module (benchmarks/mutate_sample.py).
MUTATE_DIR ?= .mutate
SAMPLE ?=
SEED ?= 0
# seconds a mutant's test run may take (longer counts as killed): quantize's tests take 110-160 s under load
MUTATE_TIMEOUT ?= 300.0
COSMIC_RAY ?= $(VENV)/bin/cosmic-ray
CR_REPORT ?= $(VENV)/bin/cr-report

mutate: $(STAMP)
	@test -n "$(MODULES)" && test -n "$(TESTS)" || { echo "make mutate: give MODULES='pkg/mod.py ...' and TESTS='tests/test_x.py ...'" >&2; exit 2; }
	@mkdir -p $(MUTATE_DIR)
	@set -e; for m in $(MODULES); do \
	  n=$(MUTATE_DIR)/$$(echo $$m | tr '/.' '__'); \
	  printf '[cosmic-ray]\nmodule-path = "%s"\ntimeout = %s\nexcluded-modules = []\ntest-command = "%s -m pytest -x -q -p no:cacheprovider %s"\n\n[cosmic-ray.distributor]\nname = "local"\n' \
	    "$$m" "$(MUTATE_TIMEOUT)" "$(abspath $(VENV))/bin/python" "$(TESTS)" > $$n.toml; \
	  rm -f $$n.sqlite; \
	  $(COSMIC_RAY) init $$n.toml $$n.sqlite; \
	  if test -n "$(SAMPLE)"; then $(VENV)/bin/python benchmarks/mutate_sample.py sample $$n.sqlite $(SAMPLE) --seed $(SEED); fi; \
	  $(COSMIC_RAY) exec $$n.toml $$n.sqlite; \
	  $(CR_REPORT) --surviving-only --show-diff $$n.sqlite > $$n.txt; \
	  $(VENV)/bin/python benchmarks/mutate_sample.py score $$n.sqlite >> $$n.txt; \
	  echo "$$m: $$(tail -n 1 $$n.txt) (survivors: $$n.txt)"; \
	done
