"""The oracle's outputs and the seeded inputs every cell is checked against (``refs/``), one
worker per (model, batch size), and the model files a worker reads."""

from __future__ import annotations

from pathlib import Path

from ios_bench.planning.cells import ref_file, safe_name
from ios_bench.planning.plan import Plan
from ios_bench.records.runfolder import RunFolder, npy_ok, read_json
from ios_bench.running.context import SweepContext
from ios_bench.running.executors import Task
from ios_bench.scenarios import LATENCY
from ios_bench.scenarios import cells as scenario_cells
from ios_core.atomic import atomic_write_json
from ios_core.check import check_batches


def references(ctx: SweepContext, wanted: dict[tuple[str, int], str]) -> dict[tuple[str, int], dict]:
    """Oracle outputs, one worker per (model, batch size), so a failure at one batch size fails
    only that batch size's cells. ``wanted``: {(graph name, batch): model spec}. Computed once
    per run (``refs/``; reused on --resume)."""
    plan, folder = ctx.plan, ctx.folder
    out: dict[tuple[str, int], dict] = {}
    tasks = []
    for (model, bs), model_spec in wanted.items():
        meta = read_json(folder / ref_file(model, bs, "json"),
                         lambda m: ctx.say(f"[yellow]warning:[/] {m}; computing it again"))
        qsl = scenario_cells.qsl_file(model, bs) if plan.scenario != LATENCY else None
        # int8's arg-max rule over ARGMAX_SAMPLES seeded samples: the further batches and their oracle outputs
        batches = max(check_batches(bs, p) for p in plan.precisions)
        checks = ref_file(model, bs, "check.npz") if batches > 1 else None
        # int8 cells' RMS bound: the oracle's int8 simulation of the checked batches (ios_core.check)
        simulated = ref_file(model, bs, "int8sim.npy") if "int8" in plan.precisions else None
        if (meta and meta.get("status") == "ok" and npy_ok(folder / ref_file(model, bs))
                and npy_ok(folder / ref_file(model, bs, "input.npy"))
                and (qsl is None or (meta.get("qsl") or {}).get("size") == qsl_size(plan)
                     and (folder / qsl).is_file())
                and (checks is None or (meta.get("check") or {}).get("size") == batches
                     and (folder / checks).is_file())
                and (simulated is None or bool(meta.get("int8_simulated")) and npy_ok(folder / simulated)
                     and meta["int8_simulated"].get("calibration_data") == plan.calibration_data)):
            out[(model, bs)] = meta
            continue
        stem = safe_name(f"{model}-b{bs}")
        spec = {"task": "reference", "spin_policy": plan.spin_policy, "model_spec": model_spec,
                "batch_sizes": [bs], "ref_paths": [ref_file(model, bs)],
                "input_paths": [ref_file(model, bs, "input.npy")],
                "seed": plan.seed, "input_seed": plan.input_seed,
                "result_path": f"work/{stem}.ref-result.json"}
        if qsl is not None:  # a LoadGen scenario's query sample library (seeded inputs, oracle outputs)
            spec.update(qsl_size=qsl_size(plan), qsl_paths=[qsl])
        if checks is not None:  # the int8 check's further seeded batches (ios_core.check.ARGMAX_SAMPLES)
            spec.update(check_size=batches, check_paths=[checks])
        if simulated is not None:
            spec.update(int8_sim_paths=[simulated], calibration_data=plan.calibration_data)
        inputs = model_inputs(folder, spec, model_spec)
        tasks.append(Task(f"reference:{model}:b{bs}", spec, f"logs/{stem}.reference.log", plan.timeout,
                          "cpu", plan.threads, inputs=inputs,
                          outputs=spec["ref_paths"] + spec["input_paths"] + [ref_file(model, bs, "source.npy")]
                          + spec.get("qsl_paths", []) + spec.get("check_paths", []) + spec.get("int8_sim_paths", []),
                          payload=(model, bs)))
    for task, res in zip(tasks, ctx.executor.probe(tasks) if tasks else []):
        model, bs = task.payload
        if res.get("status") == "ok":
            meta = {"status": "ok", **res["batches"][str(bs)],
                    **{k: res[k] for k in ("activation_mib", "weights_mib") if k in res}}
            if meta.get("source") and wanted[(model, bs)].lower().endswith(".onnx"):
                # the worker read the run folder's copy of the user's file: both are named
                meta["source_copy"] = meta["source"]
                meta["source"] = wanted[(model, bs)]
            atomic_write_json(folder / ref_file(model, bs, "json"), meta)
        else:
            meta = {"status": "failed", "reason": res.get("reason"), "stderr_tail": res.get("stderr_tail", ""),
                    "peak_rss_mib": res.get("peak_rss_mib")}
        out[(model, bs)] = meta
    return out


def qsl_size(plan: Plan) -> int:
    """The samples of a LoadGen scenario's query sample library."""
    return int(scenario_cells.settings_of(plan, plan.scenario)["qsl_size"])


def model_inputs(folder: Path, spec: dict, model_spec: str) -> list[str]:
    """The run folder's copy of a model given as a file (its graph and weights): named in ``spec``
    (``model_path``) and returned as the task's inputs; [] for a zoo model."""
    rel = RunFolder.model_file(model_spec)
    if rel is None:
        return []
    spec["model_path"] = rel
    npz = str(Path(rel).with_suffix(".npz"))
    return [rel] + ([npz] if (folder / npz).exists() else [])
