import os
import tempfile
from pathlib import Path

import pytest

from tests.trt_manifest import VERSIONS as TRT_VERSIONS

ROOT = Path(__file__).resolve().parent.parent


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` loaded as a module (the scripts are not a package): what a script's tests call."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
DATA = Path(__file__).resolve().parent / "data"
# Small, repeatable thread budget for tests on the 2-core machines.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# `--build-cache user` (the default) keeps builds in the user's cache folder: tests keep theirs apart
os.environ.setdefault("IOS_BENCH_BUILD_CACHE_HOME", tempfile.mkdtemp(prefix="ios-bench-test-builds-"))


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def run_cli(capsys):
    """Run ``ios-bench ARGV`` in-process; returns (exit code, stdout, stderr)."""
    from ios_bench.cli import main

    def run(argv):
        with pytest.raises(SystemExit) as e:
            main(list(argv))
        captured = capsys.readouterr()
        return e.value.code, captured.out, captured.err

    return run


@pytest.fixture(scope="module")
def mixed():
    """Every operator kind the runtime runs, with weights (``runtime_helpers.mixed_graph``)."""
    from tests.runtime_helpers import mixed_graph

    return mixed_graph().init_weights(3)


@pytest.fixture(autouse=True)
def _cpu_affinity_kept():
    """A test that builds jax-xla in this process under a thread budget below the cores narrows the
    process's CPU affinity (adapters/jax.py pins XLA's pool to the first cores): put it back, or every
    later test sees one core (a plan's default budget, a runtime's threads, --instances' bound)."""
    before = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    yield
    if before is not None and os.sched_getaffinity(0) != before:
        os.sched_setaffinity(0, before)


@pytest.fixture(params=TRT_VERSIONS)
def fake_trt(request, monkeypatch):
    """The CPU stand-in of TensorRT (``tests/fake_tensorrt.py``, held to each API manifest's version) as
    ``import tensorrt`` finds it, with no engine built yet."""
    import sys

    from tests import fake_tensorrt

    m = fake_tensorrt.module(request.param)
    monkeypatch.setitem(sys.modules, "tensorrt", m)
    fake_tensorrt.Builder.built.clear()
    return m


@pytest.fixture
def trt(fake_trt):
    """:func:`fake_trt` under the name the TensorRT lowering tests give it."""
    return fake_trt
