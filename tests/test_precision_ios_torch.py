"""IOS at bf16 on its torch kernel provider (issue 46; docs/precision.md, "IOS at a reduced precision on
the CPU"): the planned torch closures with bf16 weights (cast once at build) and bf16 activations in the
arena, zero-copy concatenation included, the input converted on entry and the output back to float32;
the precision read back from the program, never the request; fp32 exactly as before; the search timing
the torch provider's stages at bf16; the precision table naming how."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import torch

import adapters
from ios_core.check import check_precision, tolerance_for
from ios_core.reference import random_input
from ios_core.reference import run as oracle
from ios_core.runtime import Runtime, providers
from tests.adapter_graphs import imported_ops, mini_inception
from tests.runtime_helpers import level_schedule, mixed_graph, sequential_schedule

IOS = adapters.get("ios")


def _graph(make):
    g = make()
    g.init_weights(0)
    return g


def _held_dtypes(rt: Runtime) -> set:
    """The dtypes of every tensor the program's closures hold (weights, arena views), found by walking
    the closures they are made of, and of its arena's buffers."""
    prog = rt.program
    found: set = {prog.env[b.index].dtype for b in prog.plan.buffers if b.offset is not None}
    seen: set[int] = set()

    def walk(obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.add(obj.dtype)
        elif isinstance(obj, (tuple, list)) and obj is not prog.env:
            for o in obj:
                walk(o)
        elif callable(obj) and getattr(obj, "__closure__", None):
            for c in obj.__closure__:
                try:
                    walk(c.cell_contents)
                except ValueError:  # an empty cell
                    pass

    for fns in prog.op_fns:
        for f in fns:
            walk(f)
    return found


# ---- bf16 on torch kernels: within bf16's bound, and it says bf16 --------------------------------


@pytest.mark.parametrize("make", [mini_inception, imported_ops], ids=["mini_inception", "imported_ops"])
def test_a_bf16_torch_runtime_is_within_bf16s_bound_of_the_oracle_and_says_bf16(make):
    g = _graph(make)
    x = random_input(g, 2, seed=1)
    rt = Runtime(level_schedule(g), 2, threads=2, provider="torch", precision="bf16")
    assert rt.stats["parallel_stages"] > 0  # groups run concurrently, each with its thread share
    y = rt.run(x)
    assert y.dtype == np.float32  # back to float32 on exit, as the torch adapter's bf16 cell
    res = check_precision(y, oracle(g, x), "bf16")
    assert res.passed, res.reason
    assert res.max_rel_err > tolerance_for("fp32")  # it computed in bf16: fp32's bound would fail it
    assert rt.stats["precision"] == "bf16" and "precision_note" not in rt.stats
    assert _held_dtypes(rt) == {torch.bfloat16}  # weights cast once at build, the arena bf16
    assert rt.prepare(x).dtype == torch.bfloat16  # the input converted on entry (outside the timed call)
    m = rt.measure(warmup=0, repeat=2, x=x)
    assert m.meta["precision"] == "bf16"


def test_an_ios_cell_on_torch_kernels_at_bf16_passes_its_check_and_records_bf16():
    from ios_bench.running.task_cell import precision_problem

    g = _graph(mini_inception)
    x = random_input(g, 2, seed=2)
    c = IOS.build(level_schedule(g), 2, threads=2, provider="torch", precision="bf16")
    assert c.info["precision"] == "bf16" and precision_problem(IOS, c.info, "bf16") is None
    assert check_precision(c.run(x), oracle(g, x), "bf16").passed


def test_a_plan_that_stayed_float32_is_reported_fp32_and_fails_a_bf16_cell(monkeypatch):
    """The precision is read back from the program (its weights and arena), not taken from the request:
    a bf16 request whose closures were emitted in float32 says fp32, and the cell fails its check."""
    from ios_bench.running.task_cell import precision_problem
    from ios_core.runtime import emit_torch
    from ios_core.runtime.tensors import TORCH

    monkeypatch.setattr(emit_torch, "for_provider", lambda provider, precision="fp32": TORCH)
    c = IOS.build(level_schedule(_graph(mini_inception)), 2, threads=2, provider="torch", precision="bf16")
    assert c.info["precision"] == "fp32"
    assert precision_problem(IOS, c.info, "bf16").startswith("precision: asked for bf16, ios computes in fp32")


# ---- fp32 exactly as before ---------------------------------------------------------------------


@pytest.mark.parametrize("make", [mixed_graph, mini_inception, imported_ops],
                         ids=["mixed", "mini_inception", "imported_ops"])
def test_fp32_is_unchanged_bit_for_bit(make):
    """A sequential schedule at the oracle's thread count runs the oracle's kernels on the same float32
    values: its output equals the oracle's bit for bit (as it did before bf16; asymmetric convolutions
    and affines, which read the program's own weights since, included in imported_ops)."""
    g = _graph(make)
    x = random_input(g, 2, seed=5)
    rt = Runtime(sequential_schedule(g), 2, threads=torch.get_num_threads(), provider="torch")
    np.testing.assert_array_equal(rt.run(x), oracle(g, x))
    assert rt.stats["precision"] == "fp32" and _held_dtypes(rt) == {torch.float32}
    assert rt.stats["arena_bytes"] == rt.plan.arena_bytes  # float32: the plan's bytes are the memory's
    assert rt.prepare(x).dtype == torch.float32


# ---- zero-copy concatenation in a bf16 arena ------------------------------------------------------


def test_a_concat_heavy_graph_writes_its_bf16_producers_straight_into_the_arena():
    g = _graph(mixed_graph)
    s = level_schedule(g)
    x = random_input(g, 2, seed=3)
    f32 = Runtime(s, 2, threads=2, provider="torch")
    bf = Runtime(s, 2, threads=2, provider="torch", precision="bf16")
    assert bf.stats["zero_copy_concat_inputs"] == f32.stats["zero_copy_concat_inputs"] >= 8
    assert bf.stats["arena_bytes"] * 2 == f32.stats["arena_bytes"] > 0  # the same plan, 2 bytes an element
    assert bf.stats["peak_activation_bytes"] * 2 == f32.stats["peak_activation_bytes"]
    res = check_precision(bf.run(x), oracle(g, x), "bf16")
    assert res.passed, res.reason
    # every concatenation buffer is a bf16 view of the one arena, which its producers wrote
    prog = bf.program
    concat = [b for b in prog.plan.buffers if b.kind == "concat"]
    arena = {prog.env[b.index].untyped_storage().data_ptr() for b in concat}
    assert len(concat) >= 3 and len(arena) == 1
    assert all(prog.env[b.index].dtype == torch.bfloat16 for b in concat)
    bufs = {b.index: prog.env[b.index].float() for b in concat}
    f32.run(x)
    for b in concat:  # each concatenation's contents as fp32's, to bf16's bound
        want = f32.program.env[b.index]
        assert torch.allclose(bufs[b.index], want, rtol=5e-2, atol=5e-2 * float(want.abs().max())), b.node.name


# ---- a piece on the torch provider, and the search at bf16 ---------------------------------------


def test_a_piece_compiled_by_the_torch_provider_at_bf16_takes_and_gives_float32():
    from ios_core.runtime.providers import make_piece

    g = _graph(mini_inception)
    nodes = g.blocks[1].nodes
    piece = make_piece("p", list(nodes), [nodes[-1]])
    prov = providers.get("torch")
    ins = [np.random.default_rng(0).standard_normal((2, *n.output_shape), dtype=np.float32) for n in piece.inputs]
    want = prov.compile(piece, 2, 2)(ins)[0]
    k = prov.compile(piece, 2, 2, precision="bf16")
    got = k(ins)[0]
    assert k.info["precision"] == "bf16" and got.dtype == np.float32
    assert check_precision(got, want, "bf16").passed and not np.array_equal(got, want)


def test_the_search_times_torch_stages_at_bf16_and_never_reuses_fp32_figures(tmp_path, monkeypatch):
    from ios_core.cost.measured import MeasuredCostModel
    from ios_core.runtime import emit_torch
    from tests.runtime_helpers import fan_stage_timed_at_fp32

    stage, db, fp32, fast = fan_stage_timed_at_fp32(tmp_path / "p.sqlite", "torch")
    built = []
    real = emit_torch.emit

    def spy(*a, **kw):
        prog = real(*a, **kw)
        built.append(prog.stats["precision"])
        return prog

    monkeypatch.setattr(emit_torch, "emit", spy)
    bf16 = MeasuredCostModel(cache=db, precision="bf16", **fast)
    bf16.stage_latency(stage, 1)
    assert bf16.measured == 1 and bf16.hits == 0, "a bf16 search reused the fp32 figure of the same stage"
    assert built and set(built) == {"bf16"}  # the stage's program built (and read back) at bf16
    assert bf16.method.endswith(":bf16") and bf16.plan_store()[1] != fp32.plan_store()[1]


# ---- what IOS declares, and a sweep's cells ------------------------------------------------------


def test_list_frameworks_names_the_torch_providers_bf16():
    from rich.console import Console

    from ios_bench.commands.list import framework_rows, precisions_table
    from ios_core.runtime.providers.torch import BF16_HOW

    assert providers.get("torch").precision_reason("bf16") is None
    assert "no:" in IOS.precision_reason("int8", "cpu", provider="torch")  # int8 unchanged
    rows = {r["name"]: r for r in framework_rows()}
    how = rows["ios"]["precisions"]["cpu"]["bf16"]
    assert not how.startswith(("no:", "not yet:")) and f"torch: {BF16_HOW}" in how and "openvino:" in how
    out = io.StringIO()
    Console(file=out, width=4000, color_system=None).print(precisions_table(list(rows.values())))
    lines = [" ".join(line.replace("│", " ").split()) for line in out.getvalue().splitlines()]
    assert any(line.startswith("ios cpu bf16 ") and "torch: the planned closures in torch.bfloat16" in line
               for line in lines)


def test_a_sweep_runs_ios_bf16_on_torch_kernels_with_its_schedule_searched_at_bf16(tmp_path):
    from tests.harness_helpers import FAST, cli

    res = cli(["run", "--models", "sample", "--frameworks", "none", "--schedules", "both", "--precision", "bf16",
               *FAST, "--out", "runs/p", "--no-report"], tmp_path)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    run = tmp_path / "runs/p"
    (rec,) = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert rec["cell"] == "sample|b1|ios-both|cpu|bf16" and rec["status"] == "ok", rec.get("reason")
    assert rec["precision"] == rec["engine_precision"] == "bf16"
    assert rec["check"]["passed"] and rec["check"]["tolerance"] == tolerance_for("bf16")
    assert rec["cost_model_stats"]["method"].endswith(":bf16")  # stages timed at bf16 on torch kernels
    assert [p.name for p in (run / "schedules").glob("*.json")] == ["sample-b1-cpu-both-bf16.json"]
