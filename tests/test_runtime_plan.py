"""The runtime's plan and its passes (aliasing, liveness, arena), and the pieces providers compile."""

from __future__ import annotations

import numpy as np
import pytest

from ios_core import models, optimize, reference
from ios_core.cost import SyntheticCostModel
from ios_core.ir import Graph
from ios_core.runtime import Runtime, graph_stages, make_plan
from ios_core.runtime.plan import ALIAS, CONCAT, INTO, RuntimePlan
from tests.adapter_graphs import mini_inception
from tests.runtime_helpers import level_schedule, mixed_graph, sequential_schedule

SCHEDULES = {
    "mixed-seq": lambda: sequential_schedule(mixed_graph()),
    "mixed-levels": lambda: level_schedule(mixed_graph()),
    "squeezenet-levels": lambda: level_schedule(models.get("squeezenet", image_size=64)),
    "inception-both": lambda: optimize(models.get("inception_v3", image_size=107), "both", SyntheticCostModel()),
    "randwire-levels": lambda: level_schedule(models.get("randwire", image_size=64, channels=16)),
    "mini-both": lambda: optimize(mini_inception(), "both", SyntheticCostModel()),
    "nasnet-levels": lambda: level_schedule(models.get("nasnet", image_size=64, stem_filters=16, filters=16)),
}


class _Lazy(dict):
    def __missing__(self, key):
        self[key] = SCHEDULES[key]()
        return self[key]


PLANS = _Lazy()


def _plan(graph: Graph, batch: int = 2, kinds=("concat",), fuse: bool = False) -> RuntimePlan:
    return make_plan(graph_stages(graph), [graph.input], [graph.exit_node], batch, arena_kinds=kinds,
                     fuse_sequential=fuse)


def check_invariants(plan: RuntimePlan) -> None:
    nstages = len(plan.stages)
    bufs = plan.buffers
    writers: dict[int, set[tuple[int, int]]] = {}
    for s in plan.steps:
        assert s.out is not None
        buf = bufs[s.out.buffer]
        assert 0 <= s.out.begin < s.out.end <= buf.channels
        if s.mode == ALIAS:
            continue
        assert s.out.channels == s.op.output_shape[0]
        # written within its lifetime
        assert buf.start <= s.stage <= buf.end, (s.op.name, buf)
        writers.setdefault(buf.index, set()).add((s.stage, s.group))
        if s.mode == INTO:
            assert buf.kind == "concat" and not s.out.whole
        elif s.mode == CONCAT:
            assert buf.kind == "concat" and s.out.whole
        else:
            assert buf.kind == "value" and s.out.whole
        # every read is inside the buffer, and within its lifetime
        for sl in s.inputs.slices:
            ref = plan.read(sl)
            rb = bufs[ref.buffer]
            assert 0 <= ref.begin < ref.end <= rb.channels and ref.channels == sl.channels
            assert rb.start <= s.stage <= rb.end, (s.op.name, "reads", rb)
    # no value buffer is released before a reader in the same or a later stage
    released_at = {k: si for si, st in enumerate(plan.stages) for k in st.release}
    for s in plan.steps:
        for sl in s.inputs.slices:
            k = plan.read(sl).buffer
            if k in released_at:
                assert s.stage <= released_at[k], (s.op.name, k)
    for b in bufs:
        if b.kept:
            assert b.end == nstages and b.index not in released_at
    # the arena: buffers whose lifetimes overlap never overlap in memory
    placed = [b for b in bufs if b.offset is not None]
    for i, a in enumerate(placed):
        assert a.offset % 64 == 0 and a.offset + a.nbytes <= plan.arena_bytes
        for b in placed[i + 1:]:
            if a.start <= b.end and b.start <= a.end:
                assert a.offset + a.nbytes <= b.offset or b.offset + b.nbytes <= a.offset, (a, b)
    # concurrent groups never share storage: a buffer written in a parallel stage is written by
    # one group, and buffers of different groups of that stage live at once (so are disjoint above)
    for st in plan.stages:
        if len(st.groups) < 2:
            continue
        owner: dict[int, int] = {}
        for g_index, g in enumerate(st.groups):
            for s in g.steps:
                if s.mode in (ALIAS, INTO):
                    continue
                assert owner.setdefault(s.out.buffer, g_index) == g_index
    stats = plan.stats()
    assert 0 < stats["peak_activation_bytes"] <= stats["naive_activation_bytes"]


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_plan_invariants(name):
    graph = PLANS[name]
    check_invariants(_plan(graph))
    # an executor that preallocates every buffer gets the same guarantees
    everything = _plan(graph, kinds=("concat", "value"))
    check_invariants(everything)
    check_invariants(_plan(graph, fuse=True))  # what a kernel provider runs
    assert everything.arena_bytes <= sum(b.nbytes + 64 for b in everything.buffers if b.kind != "input")


def test_aliasing_writes_producers_into_concatenations():
    plan = _plan(PLANS["squeezenet-levels"])
    concats = [s for s in plan.steps if s.mode == CONCAT]
    assert concats and all(len(s.in_place_terms) == 2 for s in concats)  # both expand convs of every fire
    assert not any(s.runs for s in concats)  # nothing left to copy at run time
    for s in plan.steps:
        if s.mode == INTO:
            owner = next(c for c in concats if c.out.buffer == s.out.buffer)
            assert s.stage <= owner.stage


def test_arena_reuses_storage_between_disjoint_lifetimes():
    plan = _plan(PLANS["squeezenet-levels"])
    placed = [b for b in plan.buffers if b.offset is not None]
    assert len({b.offset for b in placed}) < len(placed)  # some block serves two buffers
    assert plan.arena_bytes < sum(b.nbytes for b in placed)


def test_liveness_keeps_view_sources_alive():
    """A channel slice read by an identity is a view: the source lives as long as the view."""
    plan = _plan(PLANS["mixed-seq"])
    for s in plan.steps:
        if s.mode == "compute" and s.op.TYPE == "identity" and s.inputs.single is not None:
            src = plan.buffers[plan.read(s.inputs.single).buffer]
            assert src.end >= plan.buffers[s.out.buffer].end


@pytest.mark.parametrize("fuse", [True, False])
def test_pieces_cover_every_operator_once(fuse):
    plan = _plan(PLANS["inception-both"], fuse=fuse)
    pieces = plan.pieces()
    seen = [s.op.name for p in pieces for s in p.steps]
    assert sorted(seen) == sorted(s.op.name for s in plan.steps) and len(seen) == len(set(seen))
    assert [p.stage for p in pieces] == sorted(p.stage for p in pieces)
    assert len(pieces) == sum(len(st.groups) for st in plan.stages)
    for p in pieces:
        inside = {s.op.name for s in p.steps} | {n.name for n in p.nodes}
        assert not any(x.name in inside for x in p.inputs)
        assert all(o.name in inside for o in p.outputs)
    assert plan.outputs[0] in pieces[-1].outputs
    unfused = _plan(PLANS["inception-both"])
    if fuse:  # runs of single-group stages became one stage each
        assert len(plan.stages) < len(unfused.stages)
        assert not any(len(a.groups) == 1 and len(b.groups) == 1 for a, b in zip(plan.stages, plan.stages[1:]))
        assert sum(len(st.groups) > 1 for st in plan.stages) == sum(len(st.groups) > 1 for st in unfused.stages)


def test_pieces_run_through_onnx_equal_the_oracle():
    """The providers' hook: every piece, exported with ios_core.lowering.onnx.export_nodes and
    run by ONNX Runtime on the oracle's values of its inputs, gives the oracle's outputs."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    import torch

    from ios_core.kernels import TORCH_PRIMS, apply
    from ios_core.lowering import lower_nodes
    from ios_core.lowering.onnx import export_nodes

    graph = PLANS["mixed-levels"]
    graph.init_weights(2)
    x = reference.random_input(graph, 2)
    with torch.inference_mode():
        values = lower_nodes([n for b in graph.blocks for n in b.nodes], {graph.input.name: torch.from_numpy(x)},
                             TORCH_PRIMS, apply)
    plan = _plan(graph, fuse=True)
    for piece in plan.pieces():
        model = export_nodes(piece.nodes, piece.inputs, piece.outputs, batch_size=2, name=piece.name)
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run([o.name for o in piece.outputs], {i.name: values[i.name].numpy() for i in piece.inputs})
        for o, y in zip(piece.outputs, got):
            np.testing.assert_allclose(y, values[o.name].numpy(), rtol=1e-4, atol=1e-5)


def test_runtime_rejects_unknown_providers():
    g = mixed_graph().init_weights(0)
    with pytest.raises(ValueError, match="torch"):
        Runtime(g, 1, provider="nonesuch")
    rt = Runtime(g, 1, provider="torch", threads=1)
    assert rt.plan.stats()["stages"] == rt.stats["stages"]


def _torch_piece(piece, io, threads):
    """A kernel provider written with the oracle's kernels: checks the emit_pieces hook."""
    import torch

    from ios_core.kernels import TORCH_PRIMS, apply
    from ios_core.lowering import lower_nodes

    assert threads >= 1

    def run():
        with torch.inference_mode():
            values = lower_nodes(piece.nodes, {name: get() for name, get in io.inputs.items()}, TORCH_PRIMS, apply)
        for o in piece.outputs:
            io.outputs[o.name](values[o.name])
    return run


def _ort_piece(piece, io, threads):
    """The same through ONNX Runtime on the piece's ONNX export (what the onnxruntime provider does)."""
    import onnxruntime as ort
    import torch

    from ios_core.lowering.onnx import export_nodes

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    model = export_nodes(piece.nodes, piece.inputs, piece.outputs, batch_size=None, name=piece.name)
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in piece.outputs]

    def run():
        feeds = {name: get().contiguous().numpy() for name, get in io.inputs.items()}
        for name, y in zip(names, sess.run(names, feeds)):
            io.outputs[name](torch.from_numpy(y))
    return run


@pytest.mark.parametrize("provider", ["torch", "onnxruntime"])
@pytest.mark.parametrize("schedule", ["mixed-seq", "mixed-levels", "mini-both"])
def test_emit_pieces_runs_a_provider_on_the_plan(provider, schedule):
    import torch

    from ios_core.runtime.program import emit_pieces

    if provider == "onnxruntime":
        pytest.importorskip("onnxruntime")
    graph = PLANS[schedule]
    graph.init_weights(4)
    compile_piece = _torch_piece if provider == "torch" else _ort_piece
    plan = _plan(graph, batch=2, fuse=True)
    program = emit_pieces(plan, 2, compile_piece)
    assert program.stats["operators"] == len([s for s in plan.steps if s.runs])
    for seed in (0, 1):
        x = reference.random_input(graph, 2, seed=seed)
        program.env[program.input_slots[graph.input.name]] = torch.from_numpy(x)
        program.run()
        got = program.output(graph.exit_node.name).contiguous().numpy()
        np.testing.assert_allclose(got, reference.run(graph, x), rtol=1e-4, atol=1e-4)
