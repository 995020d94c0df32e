"""Kernel providers: every provider computes what the oracle computes, piece by piece and for
whole schedules, with each piece's thread share and without copies between pieces."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ios_core import models
from ios_core.check import compare
from ios_core.ir import Graph, leaf_nodes
from ios_core.kernels import apply, gather_input
from ios_core.reference import random_input
from ios_core.reference import run as oracle
from ios_core.runtime import Runtime, providers
from ios_core.runtime.program import group_threads
from tests.adapter_graphs import mini_inception
from tests.runtime_helpers import check_runtime, level_schedule, sequential_schedule

LIBRARIES = [p for p in providers.names() if p != "torch" and providers.get(p).available() is None]
ALL = ["torch", *LIBRARIES]


def _values(graph: Graph, x: np.ndarray) -> dict[str, np.ndarray]:
    """Every node's value for input ``x`` (the oracle's kernels, kept)."""
    out = {graph.input.name: torch.from_numpy(x)}
    with torch.inference_mode():
        for block in graph.blocks:
            for node in block.nodes:
                for op in leaf_nodes(node):
                    out[op.name] = apply(op, gather_input(op, out))
                out[node.name] = out[leaf_nodes(node)[-1].name]
    return {k: v.contiguous().numpy() for k, v in out.items()}






# ---- pieces ------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("provider", ALL)
def test_piece_reads_channel_slices_of_its_inputs(mixed, provider, batch):
    """The second block alone: its inputs are channel slices of the first block's concatenation
    (two ranges of one value, one of them also summed), its outputs two values, one of them
    also read inside the piece."""
    nodes = mixed.blocks[1].nodes
    t, cat2 = nodes[2], nodes[3]
    piece = providers.make_piece("block1", nodes, [t, nodes[-1]])
    assert [n.name for n in piece.inputs] == [mixed.blocks[0].exit_node.name]
    x = random_input(mixed, batch, seed=5)
    vals = _values(mixed, x)
    kernel = providers.get(provider).compile(piece, batch, threads=2)
    outs = kernel([vals[n.name] for n in piece.inputs])
    for node, y in zip(piece.outputs, outs):
        assert compare(y, vals[node.name]).passed, node.name
    assert cat2 in piece.nodes


@pytest.mark.parametrize("provider", ALL)
def test_piece_whose_output_is_its_input(provider):
    """An identity of an input as an output: the export copies it through."""
    from ios_core.ir import GraphBuilder

    b = GraphBuilder("through", (4, 3, 3))
    ident = b.identity(b.input)
    r = b.relu(ident)
    b.end_block(r)
    g = b.finish().init_weights(0)
    piece = providers.make_piece("p", [ident.node, r.node], [ident.node, r.node])
    x = random_input(g, 2)
    a, y = providers.get(provider).compile(piece, 2, threads=1)([x])
    np.testing.assert_array_equal(a, x)
    np.testing.assert_allclose(y, np.maximum(x, 0), atol=1e-6)


def test_bind_checks_buffers(mixed):
    piece = providers.make_piece("all", list(mixed.blocks[0].nodes))
    kernel = providers.get(ALL[-1]).compile(piece, 1, threads=1)
    good_in = [np.zeros((1, *n.output_shape), np.float32) for n in piece.inputs]
    good_out = [np.zeros((1, *n.output_shape), np.float32) for n in piece.outputs]
    with pytest.raises(ValueError, match="shape"):
        kernel.bind([np.zeros((2, *piece.inputs[0].output_shape), np.float32)], good_out)
    with pytest.raises(ValueError, match="C-contiguous"):
        kernel.bind(good_in, [np.asfortranarray(good_out[0])])
    with pytest.raises(ValueError, match="outputs bound"):
        kernel.bind(good_in, [])


def test_unknown_provider():
    g = models.get("sample", input_shape=(8, 5, 5)).init_weights(0)
    with pytest.raises(ValueError, match="unknown kernel provider 'tensorrt'.*onnxruntime"):
        Runtime(g, 1, provider="tensorrt")
    assert providers.names() == ["torch", "onnxruntime", "openvino"]


# ---- whole schedules -------------------------------------------------------------------------

@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("schedule", ["sequential", "levels"])
@pytest.mark.parametrize("provider", LIBRARIES)
def test_mixed_graph_every_op(mixed, provider, schedule, batch):
    """Concatenations of whole outputs and of slices, sums, products, a Sequential, pools,
    flatten, linear; sequential (one piece) and ASAP levels (parallel stages)."""
    sched = {"sequential": sequential_schedule(mixed), "levels": level_schedule(mixed)}[schedule]
    rt = check_runtime(mixed, sched, batch, provider)
    st = rt.stats
    assert st["provider"] == provider
    if schedule == "sequential":
        assert st["pieces"] == 1 and st["stages"] == 1  # the library runs the whole graph
    else:
        assert st["parallel_stages"] > 0 and st["max_workers"] == 2
        assert st["pieces"] == len(rt.plan.pieces()) == len(rt.program.kernels) > 1


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("provider", LIBRARIES)
def test_zoo_graphs(provider, batch):
    g = models.get("sample", input_shape=(32, 9, 9)).init_weights(0)
    check_runtime(g, level_schedule(g), batch, provider)
    sq = models.get("squeezenet", image_size=64).init_weights(0)
    check_runtime(sq, level_schedule(sq), batch, provider)
    if batch == 1:
        mi = mini_inception().init_weights(1)  # merged-conv slices, grouped/dilated convs, element mul
        check_runtime(mi, level_schedule(mi), batch, provider)


@pytest.mark.parametrize("provider", LIBRARIES)
def test_optimizer_schedules_with_merged_convs(provider):
    from ios_core.cost import make_cost_model
    from ios_core.optimizer import optimize

    g = models.get("squeezenet", image_size=64).init_weights(0)
    for strategy, batches in (("merge", (1, 2)), ("both", (2,))):
        sched = optimize(g, strategy, make_cost_model("synthetic"), batch_size=1)
        convs = [sum(op.TYPE == "conv" for op in h.operators()) for h in (g, sched)]
        assert convs[1] < convs[0]  # merged convolutions, read through channel slices
        for batch in batches:
            check_runtime(g, sched, batch, provider)


@pytest.mark.parametrize("provider", LIBRARIES)
def test_reference_schedule_file(data_dir, provider):
    g = Graph.load(data_dir / "tiny_schedule.json").init_weights(0)
    rt = check_runtime(g, g, 2, provider)
    assert rt.stats["parallel_stages"] == 2


# ---- threads, copies, settings -------------------------------------------------------------------

@pytest.mark.parametrize("provider", LIBRARIES)
def test_thread_shares_and_concurrency(mixed, provider):
    trace: list = []
    rt = check_runtime(mixed, level_schedule(mixed), 1, provider, trace=trace)
    prog, plan = rt.program, rt.plan
    shares = []
    for st in plan.stages:
        shares += group_threads([g.cost for g in st.groups], 2)
    assert 1 in shares and 2 in shares
    key = "intra_op_num_threads" if provider == "onnxruntime" else "intra_op_threads"
    assert [int(k.info[key]) for k in prog.kernels] == shares
    # every execution of a parallel stage ran its two tasks on two different threads
    ntasks = {si: min(len(st.groups), 2) for si, st in enumerate(plan.stages)}
    i = runs = 0
    while i < len(trace):
        chunk = trace[i:i + ntasks[trace[i]["stage"]]]
        assert len({r["stage"] for r in chunk}) == 1 and len({r["thread"] for r in chunk}) == len(chunk) == 2
        i += len(chunk)
        runs += 1
    assert runs == 2 * sum(1 for n in ntasks.values() if n > 1)  # two runs of the program


def test_settings_are_explicit():
    ort = providers.provider_settings("onnxruntime", 3)
    assert ort["intra_op_num_threads"] == 3 and ort["inter_op_num_threads"] == 1
    assert ort["execution_mode"] == "ORT_SEQUENTIAL" and ort["graph_optimization_level"] == "ORT_ENABLE_ALL"
    ov = providers.provider_settings("openvino", 3)
    assert ov["INFERENCE_PRECISION_HINT"] == "f32" and ov["INFERENCE_NUM_THREADS"] == "3"
    with pytest.raises(ValueError):
        providers.provider_settings("tensorrt", 1)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("provider", LIBRARIES)
def test_buffers_are_shared_not_copied(mixed, provider, batch):
    rt = check_runtime(mixed, level_schedule(mixed), batch, provider)
    st = rt.stats
    if batch == 1:  # channel slices of a batch-1 buffer are contiguous: nothing is staged or copied
        assert st["staged_inputs"] == 0 and st["copied_outputs"] == 0
    # every kernel wrote its outputs in place, into the arrays it was bound to
    for k in rt.program.kernels:
        outs = k.attached["outputs"]
        bound = k.attached["bound"]
        if provider == "onnxruntime":
            assert [o.data_ptr() for o in bound.io_binding.get_outputs()] == [a.ctypes.data for a in outs]
        else:
            req = bound.keep[2]
            assert all(np.shares_memory(req.get_output_tensor(i).data, a) for i, a in enumerate(outs))
    # the graph's output is the arena view the last piece wrote
    out = rt.execute(rt.prepare(random_input(mixed, batch)))
    assert isinstance(out, np.ndarray)  # numpy values on a provider's kernels (no torch there)
    assert any(np.shares_memory(out, a) for k in rt.program.kernels for a in k.attached["outputs"])


@pytest.mark.parametrize("provider", LIBRARIES)
def test_measure_and_profile(mixed, provider):
    rt = Runtime(level_schedule(mixed), 1, provider=provider, threads=2)
    m = rt.measure(warmup=1, number=1, repeat=2, profile_stages=True)
    assert len(m.stage_ms[0]) == rt.stats["stages"] == len(m.meta["stage_names"])
    m2, names, op_ms = rt.measure_operators(warmup=1, repeat=2)
    assert len(names) == len(op_ms) == rt.stats["pieces"] == len(rt.program.kernels)


def test_ios_adapter_passes_the_provider(mixed):
    import adapters

    sched = level_schedule(mixed)
    x = random_input(mixed, 2)
    for provider in ALL:
        compiled = adapters.get("ios").build(sched, 2, threads=2, provider=provider)
        assert compiled.info["provider"] == provider
        assert compare(compiled.run(x), oracle(mixed, x)).passed


# ---- the whole zoo (slow) --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", models.default_names())
@pytest.mark.parametrize("provider", LIBRARIES)
def test_every_zoo_model_every_strategy(provider, name, batch):
    from ios_core.cost import make_cost_model
    from ios_core.optimizer import optimize

    g = models.get(name).init_weights(0)
    check_runtime(g, g, batch, provider)
    check_runtime(g, level_schedule(g), batch, provider)
    for strategy in ["greedy", "merge", "parallel", "both"]:
        check_runtime(g, optimize(g, strategy, make_cost_model("synthetic"), batch_size=batch), batch, provider)
