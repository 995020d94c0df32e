"""ios-bench doctor: what can run here, per device and framework, and why not; with a GPU, every
GPU path run once on a small graph against the oracle: the IOS runtime's paths
(``ios_bench.machine.gpu_paths``: sequential, a forced parallel schedule, CUDA-graph replay, a
cost-model stage, a clock lock and reset) and each framework's GPU variant, by default on
``ios_core.models.coverage`` (every op type and attribute value of the IR)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from ios_bench.errors import InputError
from ios_bench.planning.loading import parse_list

DEFAULT_MODEL = "coverage"  # ios_core.models.coverage: every op type and attribute value


def _probe(device: str, folder: Path, timeout: float, names: list[str] | None) -> dict:
    from ios_bench.running.launch import run_worker

    spec = {"task": "probe", "device": device, "names": names, "result_path": str(folder / f"probe-{device}.json")}
    res = run_worker(spec, timeout, folder / f"probe-{device}.log", None)
    if res.get("status") != "ok":
        return {"__failed__": res.get("reason") or "probe failed"}
    return res.get("adapters") or {}


def _run_path(adapter: str, options: dict, device: str, model: str, batch: int, folder: Path, timeout: float,
              tag: str) -> dict:
    from ios_bench.running.launch import run_worker

    spec = {"task": "doctor", "adapter": adapter, "options": options, "device": device, "model_spec": model,
            "batch_size": batch, "seed": 0, "result_path": str(folder / f"doctor-{tag}.json")}
    return run_worker(spec, timeout, folder / f"doctor-{tag}.log", None)


def _run_ios_paths(device: str, model: str, batch: int, folder: Path, timeout: float, lock_clocks: bool) -> dict:
    from ios_bench.running.launch import run_worker

    spec = {"task": "doctor_ios", "device": device, "model_spec": model, "batch_size": batch, "seed": 0,
            "lock_clocks": lock_clocks, "result_path": str(folder / "doctor-ios.json")}
    return run_worker(spec, timeout, folder / "doctor-ios.log", None)


def _line(name: str, status: str, detail: str) -> str:
    return f"  {name:<34} {status:<5} {detail}"


TRACEBACK_LINES = 14  # of a failure's traceback, printed under its line


def traceback_lines(text: str | None, n: int = TRACEBACK_LINES) -> list[str]:
    """The last traceback in ``text`` (a worker's output tail, or a path's own traceback), its last
    ``n`` lines indented under the failure's line: the worker's log lives in the doctor's temporary
    folder, gone when the doctor ends, so the report keeps what it says."""
    if not text:
        return []
    lines = text.rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    lines = lines[starts[-1]:] if starts else lines
    return [f"      | {line}" for line in lines[-n:]]


def _echo_failure(text: str, tb: str | None) -> None:
    click.echo(text)
    for line in traceback_lines(tb):
        click.echo(line)


def _path_line(label: str, row: dict) -> tuple[str, bool]:
    """One path's line against the oracle, and whether it failed."""
    status = row.get("status")
    if status == "ok" or status == "WRONG":
        err = row.get("max_rel_err", row.get("max_rel_error")) or 0.0
        ms = row.get("median_ms")
        detail = (f"max rel err {err:.1e}" + (f", {ms:.3f} ms ({row.get('clock')})" if ms is not None else "")
                  + (f"; {row['detail']}" if row.get("detail") else "")
                  + (f"; {row['clocks']}" if row.get("clocks") else "")
                  + (f"; {row['reason']}" if status != "ok" and row.get("reason") else ""))
        return _line(label, status, detail), status != "ok"
    if status == "skip":
        return _line(label, "skip", row.get("detail") or row.get("reason") or ""), False
    return _line(label, "FAIL", row.get("reason") or row.get("detail") or "failed"), True


def _model_spec(model: str, folder: Path) -> str:
    """The model the GPU paths run on: the coverage graph (saved with its weights) or a zoo model
    or file."""
    if model != DEFAULT_MODEL:
        return model
    from ios_core.models.coverage import coverage_graph

    path = folder / "coverage.json"
    coverage_graph().init_weights(0).save(path)
    return str(path)


@click.command("doctor")
@click.option("--device", "devices", default="cpu,cuda", show_default=True,
              help="Devices to check (comma-separated: cpu, cuda).")
@click.option("--model", default=DEFAULT_MODEL, show_default=True,
              help="Small graph the GPU paths run on (coverage: every op type and attribute value).")
@click.option("--batch", default=1, show_default=True, type=click.IntRange(1), help="Batch size for the GPU runs.")
@click.option("--run/--no-run", "do_run", default=True, show_default=True,
              help="With a GPU: run every GPU path against the oracle (otherwise only report availability).")
@click.option("--frameworks", default=None, help="Only these adapters (comma-separated) [default: all].")
@click.option("--timeout", default=600.0, show_default=True, type=click.FloatRange(1),
              help="Seconds per probe or path before it counts as hung.")
@click.option("--lock-clocks/--no-lock-clocks", "lock_clocks", default=False, show_default=True,
              help="With a GPU: also lock its SM clock (NVML, needs root), run the schedule under the lock and reset "
                   "it. Off by default: clocks are left alone (never lock a machine you do not own).")
@click.option("--machine-seconds", default=1.0, show_default=True, type=click.FloatRange(0, 60),
              help="At the end, sample this long what else uses the CPUs (processes by name, pid and share; steal) "
                   "and say whether a sweep started now would have its rounds disturbed (0: skip).")
def command(devices, model, batch, do_run, frameworks, timeout, lock_clocks, machine_seconds):
    """For each device and framework: can it run here, and if not, why. On a machine with an
    NVIDIA GPU it then runs every GPU path on a small graph (by default one with every op type
    and attribute value) in its own processes, checks each against the oracle
    (ios_core.reference) and prints one line per path: the IOS CUDA runtime unscheduled, under a
    forced parallel schedule (several streams, events, fork and join), replayed as a CUDA graph,
    one stage timed by the measured cost model, the host time per operator launch of the
    no-graph path, and (only with --lock-clocks) under a locked GPU clock that is then reset;
    then each framework's GPU variant. Every time printed says the clock state it was taken
    under (clocks are left alone unless --lock-clocks).

    Last, what else uses this machine now (``--machine-seconds``, ``ios_core.measurement.interference.machine_now``):
    the other processes by CPU share, steal, and whether a sweep's rounds would be disturbed.

    The first command to run on a machine with a GPU. Exit code 1 when a path that can run
    fails or computes a wrong output, 0 otherwise.
    """
    import adapters
    from ios_core.measurement.gpu import clock_state, fingerprint, gpu_missing

    devs = parse_list(devices, "device", ["cpu", "cuda"])
    names = parse_list(frameworks, "framework", adapters.names()) if frameworks else None
    if model not in (DEFAULT_MODEL, "sample") and not Path(model).is_file():
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
                               f"cuDNN {fp.get('cudnn')}, SM {fp.get('sm_clock_mhz')} MHz); {clock_state(fp)}")
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
            ios_ok = "ios" in avail and not (avail.get("ios") or {}).get("reason")
            paths = [(name, {}) for name, row in avail.items() if name != "ios" and not row.get("reason")]
            if not ios_ok and not paths:
                click.echo("  nothing can run on cuda: see the reasons above")
                continue
            spec_model = _model_spec(model, folder)
            click.echo(f"cuda paths on {model}, batch {batch}, against the oracle:")
            if ios_ok:
                res = _run_ios_paths(device, spec_model, batch, folder, timeout, lock_clocks)
                if res.get("status") == "ok":
                    for row in res.get("paths") or []:
                        text, failed = _path_line(f"ios {row.get('path')}", row)
                        failures += failed
                        _echo_failure(text, row.get("traceback") if failed else None)
                elif res.get("status") == "skipped":
                    click.echo(_line("ios", "skip", res.get("reason") or ""))
                else:
                    failures += 1
                    _echo_failure(_line("ios", "FAIL", res.get("reason") or "failed"), res.get("stderr_tail"))
            for i, (name, options) in enumerate(paths):
                res = _run_path(name, options, device, spec_model, batch, folder, timeout, f"{i}")
                status = res.get("status")
                if status == "ok":
                    chk = res.get("check") or {}
                    info = res.get("info") or {}
                    extra = ", ".join(f"{k} {info[k]}" for k in ("precision", "tf32", "variant", "kernels_used")
                                      if info.get(k) is not None)
                    row = {"status": "ok" if chk.get("passed") else "WRONG",
                           "max_rel_err": chk.get("max_rel_error", chk.get("max_rel_err", 0)),
                           "median_ms": res.get("median_ms", 0), "clock": res.get("clock"), "detail": extra,
                           "reason": chk.get("reason"), "clocks": res.get("clocks")}
                    text, failed = _path_line(name, row)
                elif status == "skipped":
                    text, failed = _line(name, "skip", res.get("reason") or ""), False
                else:
                    text, failed = _line(name, "FAIL", res.get("reason") or "failed"), True
                failures += failed
                _echo_failure(text, res.get("stderr_tail") if status not in ("ok", "skipped") else None)
    if machine_seconds > 0:
        from ios_core.measurement.interference import machine_now, quiet_verdict

        click.echo(quiet_verdict(machine_now(machine_seconds)))
    if failures:
        raise SystemExit(1)
