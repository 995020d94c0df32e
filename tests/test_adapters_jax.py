"""The ``jax-xla`` adapter (adapters/jax.py) on the CPU: every operator of the coverage graph
(every op type and attribute value of the IR) against the oracle's kernel, one by one, and the
whole graph through ``build``/``run`` at batch 1 and 2; what the build records (fp32, matmul
precision, the XLA thread flags set before the backend starts); bad cases. Skipped without JAX
(the ``jax`` extra)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import adapters
from ios_core import reference
from ios_core.check import compare
from ios_core.ir import ACTIVATIONS, OPERATOR_TYPES
from ios_core.kernels import ORACLE_KERNELS, TORCH_PRIMS
from ios_core.lowering import lower_nodes, schedulable_nodes
from ios_core.models.coverage import coverage_graph, level_schedule
from tests.conftest import ROOT

jax = pytest.importorskip("jax", reason="the jax extra is not installed")
ADAPTER = adapters.get("jax-xla")


@pytest.fixture(scope="module")
def graph():
    return coverage_graph().init_weights(5)


@pytest.fixture(scope="module")
def built(graph):
    return {b: ADAPTER.build(graph, batch_size=b, device="cpu", threads=2) for b in (1, 2)}


def test_registered_with_its_name_and_protocol():
    assert "jax-xla" in adapters.names()
    assert ADAPTER.name == "jax-xla" and ADAPTER.precision == "fp32" and 0 < ADAPTER.tolerance <= 1e-3
    assert ADAPTER.devices == ("cpu", "cuda")
    assert ADAPTER.available("cpu") is None
    assert ADAPTER.version() == jax.__version__


def _per_operator(graph) -> tuple[set[str], list]:
    """Each operator of ``graph`` on its composed input (the oracle's values), JAX against the
    oracle's own kernel: (the types checked, the operators that differ)."""
    import torch

    from adapters.jax import JaxEmitter
    from ios_core.lowering import compose

    x = reference.random_input(graph, 2, seed=3)
    outputs = lower_nodes(schedulable_nodes(graph), {graph.input.name: torch.from_numpy(x)}, TORCH_PRIMS,
                          ORACLE_KERNELS.visit)
    emitter = JaxEmitter(jax)
    params = jax.tree_util.tree_map(jax.numpy.asarray, JaxEmitter.arrays(graph))
    seen, wrong = set(), []
    for op in graph.operators():
        composed = compose(op, outputs, TORCH_PRIMS)
        want = ORACLE_KERNELS.visit(op, composed).numpy()
        got = np.asarray(emitter.visit(op, jax.tree_util.tree_map(lambda t: jax.numpy.asarray(t.numpy()), composed),
                                       params))
        assert got.shape == want.shape, (op.name, got.shape, want.shape)
        check = compare(got, want, 1e-5)
        if not check.passed:
            wrong.append((op.name, op.TYPE, check.max_rel_err))
        seen.add(op.TYPE)
    return seen, wrong


def test_every_operator_of_the_coverage_graph_against_the_oracle_kernel(graph):
    """An attribute dropped anywhere fails here, not only when it reaches the output. The coverage
    graph holds every type the GPU backends lower; the general tensors' types (issue 56) are checked
    on a one-block ViT and a tiny ConvNeXt (tests/test_ops_transformer.py)."""
    from tests.test_ops_transformer import GRAPHS

    seen, wrong = _per_operator(graph)
    for make in GRAPHS.values():
        more, also_wrong = _per_operator(make())
        seen |= more
        wrong += also_wrong
    assert wrong == []
    assert seen == set(OPERATOR_TYPES)  # every op type of the IR was checked


def test_activation_table_has_every_ir_activation():
    from adapters.jax import ACTIVATIONS as TABLE

    assert set(TABLE) == set(ACTIVATIONS)


@pytest.mark.parametrize("batch", [1, 2])
def test_the_coverage_graph_against_the_oracle(graph, built, batch):
    x = reference.random_input(graph, batch, seed=batch)
    check = compare(built[batch].run(x), reference.run(graph, x), ADAPTER.tolerance)
    assert check.passed, check
    assert check.max_rel_err < 1e-5  # fp32 throughout: far inside the tolerance


def test_a_scheduled_graph_computes_the_same(graph, built):
    """Stages are the IOS runtime's business: the peer runs the same operators whatever the schedule."""
    scheduled = level_schedule(graph)
    c = ADAPTER.build(scheduled, batch_size=1, device="cpu", threads=2)
    x = reference.random_input(graph, 1, seed=9)
    np.testing.assert_allclose(c.run(x), built[1].run(x), rtol=0, atol=1e-6)


def test_the_shared_measurement_times_it_to_completion(graph, built):
    from ios_core.measurement.measure import measure

    c = built[1]
    x = reference.random_input(graph, 1, seed=4)
    prepared = c.prepare(x)
    m = measure(lambda: c.execute(prepared), sync=c.sync, timer=c.timer(), warmup=1, repeat=3, number=2)
    assert len(m.samples_ms) == 3 and all(s > 0 for s in m.samples_ms)
    assert compare(c.finish(m.last), reference.run(graph, x), ADAPTER.tolerance).passed
    assert c._last is m.last  # sync waited on the last call's output (block_until_ready)


def test_calls_in_flight_on_one_program_each_wait_for_their_own(graph, built):
    """Requests in flight share one program (concurrency "shared"): a thread's sync waits on its own call."""
    import threading

    c = built[1]
    xs = [reference.random_input(graph, 1, seed=s) for s in (11, 12)]
    got: dict = {}

    def call(i):
        out = c.execute(c.prepare(xs[i]))
        c.sync()
        got[i] = (c._last is out, c.finish(out))

    threads = [threading.Thread(target=call, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in (0, 1):
        assert got[i][0]
        assert compare(got[i][1], reference.run(graph, xs[i]), ADAPTER.tolerance).passed
    assert ADAPTER.concurrency == "shared"


def test_build_records_what_it_ran_with(built):
    info = built[1].info
    assert info["precision"] == "fp32" and info["matmul_precision"] == "highest"
    assert info["execution_mode"] == "jax.jit (XLA)" and info["tuning"] == "none"
    assert info["framework_version"] == jax.__version__ and info["platform"] == "cpu"
    assert info["threads"] == 2 and info["compile_seconds"] > 0
    assert "xla_flags" in info


def _fresh_process(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_thread_budget_is_set_before_the_backend_starts_and_a_late_one_is_noted():
    res = _fresh_process("""
        import json, os
        import adapters
        from ios_core.models.coverage import coverage_graph
        g = coverage_graph().init_weights(0)
        a = adapters.get("jax-xla")
        cores = len(os.sched_getaffinity(0))
        first = a.build(g, 1, "cpu", threads=1).info
        second = a.build(g, 1, "cpu", threads=2).info
        print(json.dumps({"first": first, "second": second, "env": os.environ.get("XLA_FLAGS"), "cores": cores}))
    """)
    first, second = res["first"], res["second"]
    assert "intra_op_parallelism_threads=1" in first["xla_flags"]
    assert "--xla_cpu_multi_thread_eigen=false" in first["xla_flags"]
    assert first["intra_op_threads"] == 1 and "threads_note" not in first
    if res["cores"] > 1:  # a budget below the machine: XLA's pool is that big, on the first core
        assert len(first["pinned_cores"]) == 1 and first["xla_pool_threads"] == 1
    assert "not applied" in second["threads_note"] and "intra_op_threads" not in second
    assert res["env"] == first["xla_flags"]


def test_importing_and_fetching_the_adapter_imports_no_jax():
    res = _fresh_process("""
        import json, sys
        import adapters
        adapters.get("jax-xla")
        print(json.dumps({"loaded": [m for m in ("jax", "jaxlib") if m in sys.modules]}))
    """)
    assert res["loaded"] == []


def test_missing_jax_is_a_reason(monkeypatch, graph):
    monkeypatch.setitem(sys.modules, "jax", None)  # ``import jax`` raises ImportError
    reason = ADAPTER.available()
    assert reason is not None and "jax" in reason and "\n" not in reason
    with pytest.raises(RuntimeError, match="cannot run"):
        ADAPTER.build(graph, 1)


def test_cuda_without_a_gpu_is_a_one_line_reason():
    if any(d.platform == "gpu" for d in jax.devices()):
        pytest.skip("this machine has a GPU")
    reason = ADAPTER.available("cuda")
    assert reason is not None and "no GPU" in reason and "\n" not in reason
    assert "does not run on" in ADAPTER.available("tpu")


def test_bad_builds_are_refused(graph):
    with pytest.raises(TypeError, match="unknown build options"):
        ADAPTER.build(graph, 1, "cpu", threads=1, nosuch=1)
    with pytest.raises(ValueError, match="no weights"):
        ADAPTER.build(coverage_graph(), 1, "cpu", threads=1)


def test_a_wrong_input_is_refused(built):
    # another shape would be compiled again, silently, inside the timed region: refused
    with pytest.raises(ValueError, match=r"built for input \(1, 6, 9, 9\), got \(1, 5, 9, 9\)"):
        built[1].run(np.zeros((1, 5, 9, 9), np.float32))
    with pytest.raises(ValueError, match="built for input"):
        built[1].prepare(np.zeros((2, 6, 9, 9), np.float32))
