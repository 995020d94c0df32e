"""ios-bench doctor: what can run here, per device and framework, and why not; with a GPU, every
GPU path run once on a small graph against the oracle."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ..errors import InputError
from ..loading import parse_list

# The IOS runtime's own CUDA variants (adapter "ios" with build options).
IOS_CUDA_PATHS = (("ios", {}, "IOS runtime, CuPy streams + cuDNN"),
                  ("ios", {"cuda_graph": True}, "IOS runtime, whole schedule as one CUDA graph"))


def _probe(device: str, folder: Path, timeout: float, names: list[str] | None) -> dict:
    from ..launch import run_worker

    spec = {"task": "probe", "device": device, "names": names, "result_path": str(folder / f"probe-{device}.json")}
    res = run_worker(spec, timeout, folder / f"probe-{device}.log", None)
    if res.get("status") != "ok":
        return {"__failed__": res.get("reason") or "probe failed"}
    return res.get("adapters") or {}


def _run_path(adapter: str, options: dict, device: str, model: str, batch: int, folder: Path, timeout: float,
              tag: str) -> dict:
    from ..launch import run_worker

    spec = {"task": "doctor", "adapter": adapter, "options": options, "device": device, "model_spec": model,
            "batch_size": batch, "seed": 0, "result_path": str(folder / f"doctor-{tag}.json")}
    return run_worker(spec, timeout, folder / f"doctor-{tag}.log", None)


def _line(name: str, status: str, detail: str) -> str:
    return f"  {name:<34} {status:<5} {detail}"


@click.command("doctor")
@click.option("--device", "devices", default="cpu,cuda", show_default=True,
              help="Devices to check (comma-separated: cpu, cuda).")
@click.option("--model", default="sample", show_default=True, help="Small graph the GPU paths run on.")
@click.option("--batch", default=1, show_default=True, type=click.IntRange(1), help="Batch size for the GPU runs.")
@click.option("--run/--no-run", "do_run", default=True, show_default=True,
              help="With a GPU: run every GPU path against the oracle (otherwise only report availability).")
@click.option("--frameworks", default=None, help="Only these adapters (comma-separated) [default: all].")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Seconds per probe or path before it counts as hung.")
def command(devices, model, batch, do_run, frameworks, timeout):
    """For each device and framework: can it run here, and if not, why. On a machine with an
    NVIDIA GPU it then runs every GPU path (the IOS CUDA runtime, with and without CUDA-graph
    replay, and each framework's GPU variant) on a small graph, each in its own process,
    checks the output against the oracle (ios_core.reference) and prints one line per path.

    The first command to run on a machine with a GPU. Exit code 1 when a path that can run
    fails or computes a wrong output, 0 otherwise.
    """
    import adapters
    from ios_core.gpu import fingerprint, gpu_missing

    devs = parse_list(devices, "device", ["cpu", "cuda"])
    names = parse_list(frameworks, "framework", adapters.names()) if frameworks else None
    if model not in ("sample",) and not Path(model).is_file():
        from ios_core import models

        if model not in models.names():
            raise InputError(f"unknown model {model!r}; choose from: {', '.join(models.names())}")
    failures = 0
    with tempfile.TemporaryDirectory(prefix="ios-bench-doctor-") as tmp:
        folder = Path(tmp)
        for device in devs:
            gpu_reason = gpu_missing() if device == "cuda" else None
            if device == "cuda":
                if gpu_reason:
                    click.echo(f"cuda: {gpu_reason}")
                else:
                    fp = fingerprint()
                    click.echo(f"cuda: {fp.get('name')} (driver {fp.get('driver')}, CUDA {fp.get('cuda_runtime')}, "
                               f"cuDNN {fp.get('cudnn')}, SM {fp.get('sm_clock_mhz')} MHz)")
            else:
                click.echo("cpu:")
            avail = _probe(device, folder, timeout, names)
            if "__failed__" in avail:
                click.echo(_line("(probe)", "FAIL", avail["__failed__"]))
                failures += 1
                continue
            for name, row in avail.items():
                reason = row.get("reason")
                version = row.get("version")
                click.echo(_line(name, "no" if reason else "yes", reason or (f"version {version}" if version else "")))
            if device != "cuda" or gpu_reason or not do_run:
                continue
            paths = [p for p in IOS_CUDA_PATHS if not (avail.get("ios") or {}).get("reason")]
            paths += [(name, {}, "") for name, row in avail.items() if name != "ios" and not row.get("reason")]
            if not paths:
                click.echo("  nothing can run on cuda: see the reasons above")
                continue
            click.echo(f"cuda paths on {model}, batch {batch}, against the oracle:")
            for i, (name, options, _desc) in enumerate(paths):
                label = name + ("".join(f" {k}={v}" for k, v in options.items()))
                res = _run_path(name, options, device, model, batch, folder, timeout, f"{i}")
                status = res.get("status")
                if status == "ok":
                    chk = res.get("check") or {}
                    info = res.get("info") or {}
                    extra = ", ".join(f"{k} {info[k]}" for k in ("precision", "tf32", "variant", "kernels_used")
                                      if info.get(k) is not None)
                    ok = chk.get("passed")
                    failures += not ok
                    click.echo(_line(label, "ok" if ok else "WRONG",
                                     f"max rel err {chk.get('max_rel_error', chk.get('max_rel_err', 0)):.1e}, "
                                     f"{res.get('median_ms', 0):.3f} ms ({res.get('clock')})"
                                     + (f"; {extra}" if extra else "")
                                     + ("" if ok else f"; {chk.get('reason')}")))
                elif status == "skipped":
                    click.echo(_line(label, "skip", res.get("reason") or ""))
                else:
                    failures += 1
                    click.echo(_line(label, "FAIL", res.get("reason") or "failed"))
    if failures:
        raise SystemExit(1)
