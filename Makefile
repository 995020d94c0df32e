# Two entry points (see README): `make run` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,onnx,openvino,tf,tvm,ray,learned,gpu-api,loadgen,jax

.PHONY: setup run test slow lint test-gpu

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
