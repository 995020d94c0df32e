"""One command per lent GPU window: the doctor, the fidelity table, the search benchmark and the
headline, in that order, a report after each step, resumed by the next call.

    python benchmarks/gpu_headline.py --fetch-wheels   # here: the wheels a lent machine lacks -> .whl/,
                                                       # split in parts that fit one transfer with the tree
    python benchmarks/gpu_headline.py --check          # here or there: what is carried, in how many transfers
    python benchmarks/gpu_headline.py --dry-run        # the steps, their estimates, the `run` call to make
    python3 benchmarks/gpu_headline.py --out $OUT --deadline 540   # there: one window
    python benchmarks/gpu_headline.py --fake --out /tmp/w-out --work /tmp/w --deadline 300   # here: the
                                                       # whole window on the CPU (fake device, quick forms)

**The steps**, each run as its own process with what is left of the window, its output kept as
``logs/<step>.txt``: (1) ``doctor``: ``ios-bench doctor --device cuda --no-lock-clocks`` (the IOS
kernels against the oracle, host time per launch, the peers); (2) ``fidelity``:
``benchmarks/gpu_fidelity.py`` on squeezenet and inception_v3 (per-stage table, the critical-path
bound); (3) ``search``: ``benchmarks/bench_gpu_search.py`` on inception_v3 (cold, then only the
plan cache warm, then an independent cold search whose IOS-Both schedule is timed side by side
with the first's); (4) ``headline``: ``ios-bench experiment headline --device cuda --deadline S``
(batch 1 first, at fp32 and then its fp16 step), resumed by every later call until it finishes.
A step that does not fit what is left of the window (its estimate) waits for the next call; a step
that runs past the window gets SIGINT (the experiment records where it stopped), then SIGKILL to its process group.

**Where things live.** The device tool empties ``$OUT`` before each command and brings back at
most 8 files, so the working folder (``--work``, default ``/tmp/ios-bench-window``: the
experiment, ``profiles.sqlite`` with the stage costs and cuDNN plans, the logs, ``window.json``)
is outside it; after every step it is packed into ``$OUT/window.tar.gz`` (records and logs; never
build or compile caches), beside ``window.md`` (the report) and ``window.json``. The next call
continues from the working folder where the machine was kept, else from a carried copy of that
archive (``--resume-from``, default ``.window/window.tar.gz``: copy the archive that came back
there and name ``.window`` in ``carry``).

**Wheels.** ``.whl/`` is ignored by git; the device tool carries ignored paths named in ``carry``,
64 MiB per call *including the working tree that travels with them* (tracked and untracked-not-
ignored files, ``shared/``, the carried paths). ``--fetch-wheels`` splits a wheel larger than what
is left of that (``apache-tvm`` 0.27.0.post1 is about 100 MB) into parts (``<wheel>.part1of2``, ...)
with a manifest (``<wheel>.parts.json``: size and SHA-256); the parts travel in separate calls to
the same warm machine and are put together there, checked against the manifest. A missing part, a
damaged wheel or one built for another Python or platform is one line naming it; the window goes
on without that framework (its cells are skipped with their reason).

**TVM's CUDA compile** (adapters/tvm.py, read in TVM 0.27's own source): TVM compiles its kernels
with NVRTC when they are loaded on the GPU, through cuda-bindings (carried where it does not import),
with ``-I`` for the CUDA folder it picks (CUDA_PATH, else nvcc on PATH, else /usr/local/cuda; never
CUDA_HOME), which must hold the CUDA runtime headers and CCCL. Before the steps, where TVM's pick lacks
them, the steps get ``CUDA_PATH``: CUDA_HOME or /usr/local/cuda where they hold them, else a folder
made of the machine's CUDA 13 wheels' ``nvidia/cu13/include`` or of the carried nvidia-cuda-runtime and
nvidia-cuda-cccl wheels (installed apart, never on PYTHONPATH); then the toolchain's facts are printed
(``toolchain: ...`` lines: nvcc, CUDA_PATH, CUDA_HOME, /usr/local/cuda/include, where cuda_fp16.h and
CCCL are, cuda-bindings, NVRTC, TVM's verdict at fp32 and fp16).

**Bad input** (each one line, and the window goes on with what it can): a GPU that vanishes
mid-window (the GPU steps left are not started), a wheel that did not travel, a plan cache from
another cuDNN (its plans are rebuilt). The GPU's clocks and settings are never locked, reset or
changed: the report records their state at the start and the end, and that they were left alone.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script on a bare machine: the harness is not installed there
    sys.path.insert(0, str(ROOT))
from benchmarks._window_machine import plan_cache_problem, probe_gpu, toolchain_facts, tvm_cuda_path  # noqa: E402
from benchmarks._window_records import ARCHIVE, ARCHIVE_LIMIT_MIB, REPORT, STATE, load_state, save  # noqa: E402
from benchmarks._window_steps import (  # noqa: E402
    KILL_AFTER_S,
    STEPS,
    TITLES,
    run_until,
    step_command,
    step_estimates,
    window_env,
)
from benchmarks._window_wheels import (  # noqa: E402
    CARRY_LIMIT_MIB,
    WHEELS,
    fetch_wheels,
    install_header_wheels,
    install_wheels,
    transfers,
    tree_mib,
    tvm_compile_wheels,
    wheel_report,
)

WINDOW_S = 540.0  # one device command is at most 10 minutes; the issue asks for 9
# a step's own deadline is what is left of the window less this: a step started just before its
# deadline (a round, a wave, a search) finishes inside the window; one that does not gets SIGINT at
# the window's end less PACK_S and KILL_AFTER_S (the experiment records it and rewrites its
# report), SIGKILL KILL_AFTER_S later; the last PACK_S pack the working folder into the output
RESERVE_S = 45.0
PACK_S = 15.0  # the report and the archive, after the last step
MIN_HEADLINE_S = 60.0  # the headline is not started with less than this left
FAKE_MIN_HEADLINE_S = 10.0  # ... on the CPU (--fake)
WORK = Path("/tmp/ios-bench-window")  # the working folder: outside $OUT, which each call empties
CARRIED = ROOT / ".window" / "window.tar.gz"  # where a session puts the archive back for a fresh machine


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def run_call(deadline: float, out: str = "$OUT", kind: str | None = None) -> str:
    """The exact call of the device tool's ``run`` a session makes for one window."""
    carry = [".whl"] + ([".window"] if CARRIED.is_file() else [])
    cmd = f"PYTHONUNBUFFERED=1 python3 benchmarks/gpu_headline.py --out {out} --deadline {deadline:g}"
    args = {"command": cmd, "carry": carry, "timeout_s": 600}
    if kind:
        args["kind"] = kind
    return "run(" + ", ".join(f"{k}={json.dumps(v)}" for k, v in args.items()) + ")"



def _tail(path: Path, n: int = 8) -> list[str]:
    try:
        return path.read_text(errors="replace").rstrip().splitlines()[-n:]
    except OSError:
        return []


def run_window(args, extra: list[str]) -> int:
    t0 = time.monotonic()
    end = t0 + args.deadline
    work, out, fake = Path(args.work), Path(args.out), args.fake
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    carried = Path(args.resume_from) if args.resume_from else CARRIED
    state = load_state(work, carried, say)
    call = {"started": _now(), "deadline_s": args.deadline, "fake": fake, "lines": lines, "steps": []}
    state["calls"].append(call)
    wl, install, absent = wheel_report(Path(args.wheels))
    for line in wl:
        say(line)
    for problem in install_wheels(install, Path(args.site)):
        say(problem)
    if install and str(Path(args.site)) not in sys.path:
        sys.path.insert(0, str(Path(args.site)))  # this script's own imports (the estimates) see them too
    env = window_env(work, Path(args.site))
    include, problems = install_header_wheels(Path(args.wheels), Path(args.site).parent / "cuda-headers")
    for problem in problems:
        say(problem)
    cuda_path, why = tvm_cuda_path(env, include, Path(args.site).parent)
    if cuda_path:
        env["CUDA_PATH"] = cuda_path
    say(f"tvm's CUDA compile: {why}")
    for fact in toolchain_facts(env):  # what the next session needs to know about this machine's toolchain
        say(f"toolchain: {fact}")
    gpu = probe_gpu(fake, env)
    call["device"] = gpu.get("name")
    call["clocks_start"] = gpu.get("clocks")
    if gpu.get("missing"):
        say(f"no GPU here ({gpu['missing']}): the GPU steps are not started; the next call tries again")
    else:
        say(f"GPU: {gpu.get('name')}; {gpu.get('clocks')}; the clocks and settings are left alone (never locked, "
            "reset or changed by this window)")
        if gpu.get("cuda"):
            say(f"the IOS CUDA runtime cannot run here ({gpu['cuda']}): its paths and cells fail or are skipped "
                "with that reason; the window goes on")
        problem = plan_cache_problem(work / "profiles.sqlite", gpu.get("cudnn"))
        if problem:
            say(problem)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    estimates = {k: 1.0 for k in STEPS}
    if not fake:
        try:
            estimates = {k: v[0] for k, v in step_estimates().items()}
        except Exception as e:  # noqa: BLE001 - a package the estimates import is missing: assume
            say(f"the steps' estimates could not be made here ({type(e).__name__}: {str(e)[:120]}): each step is "
                "assumed to take 60 s")
            estimates = {k: 60.0 for k in STEPS}
    gone = gpu.get("missing")
    save(state, work, out, say)
    for name in STEPS:
        st = state["steps"].setdefault(name, {})
        if st.get("status") in ("done", "failed"):
            continue
        if gone is None and name != STEPS[0]:
            gone = probe_gpu(fake, env).get("missing")
            if gone:
                say(f"the GPU vanished before step {name} ({gone}): the steps left wait for the next call")
        if gone:
            st.update(status="waiting", note=f"no GPU ({str(gone)[:120]})")
            continue
        left = end - time.monotonic()
        room = left - RESERVE_S
        need = (FAKE_MIN_HEADLINE_S if fake else MIN_HEADLINE_S) if name == "headline" else estimates.get(name, 60.0)
        if room < need:
            st.update(status="waiting", note=f"not started: needs about {need:.0f} s, {max(room, 0):.0f} s were left; "
                                             "the next call runs it")
            say(f"{name}: {st['note']}")
            save(state, work, out, say)
            break
        cmd = step_command(name, work, room, fake, extra if name == "headline" else [])
        log = work / "logs" / f"{name}.txt"
        with open(log, "a") as f:
            f.write(f"\n==== {_now()}: {' '.join(cmd)}\n")
        say(f"{name}: {TITLES[name]}: {' '.join(cmd)}")
        t = time.monotonic()
        rc = run_until(cmd, env, left - PACK_S - KILL_AFTER_S, log)
        seconds = round(time.monotonic() - t, 1)
        if name == "headline":
            status = {0: "done", 3: "stopped"}.get(rc, "stopped" if rc in (130, -2, -9) else "failed")
        elif name == "doctor":
            status = "done" if rc in (0, 1) else "stopped" if rc in (130, -2, -9) else "failed"
        else:
            status = "done" if rc == 0 else "stopped" if rc in (130, -2, -9) else "failed"
        note = {"done": "", "stopped": "stopped at the window's end: the next call runs it again"
                if name != "headline" else "the next call resumes it", "failed": "see its log"}[status]
        if status == "stopped" and name != "headline" and st.get("calls", 0) >= 1:
            # stopped in two windows: a step that does not fit one is not started a third time
            status, note = "failed", "stopped at the window's end twice: run it alone, in a call of its own"
        if name == "doctor" and rc == 1:
            note = "a path failed or computed a wrong output: see its log"
        st.update(status=status, rc=rc, seconds=seconds, note=note, log=f"logs/{name}.txt",
                  calls=st.get("calls", 0) + 1)
        call["steps"].append({"step": name, "status": status, "rc": rc, "seconds": seconds})
        say(f"{name}: {status} (exit {rc}, {seconds:.1f} s)" + (f": {note}" if note else ""))
        for line in _tail(log):
            print(f"    {line}")
        save(state, work, out, say)
        if status == "stopped":
            break
    after = probe_gpu(fake, env) if not gone else {}
    call["clocks_end"] = after.get("clocks")
    call["clocks_note"] = (f"left alone (nothing here locks, resets or sets them); at the start: "
                           f"{call.get('clocks_start') or '-'}; at the end: {call.get('clocks_end') or '-'}")
    call["seconds"] = round(time.monotonic() - t0, 1)
    todo = [n for n in STEPS if (state["steps"].get(n) or {}).get("status") not in ("done", "failed")]
    say("window: " + ("every step done" if not todo else f"left for the next call: {', '.join(todo)}")
        + f" ({call['seconds']:.0f} s); the records: {out / ARCHIVE}")
    if todo:
        say("next call: copy window.tar.gz from this call's files to .window/window.tar.gz (if the machine is not "
            f"kept), then {run_call(args.deadline)}")
    save(state, work, out, say)
    return 0 if not todo else 3


def dry_run(args, extra: list[str]) -> int:
    lines, _, _ = wheel_report(Path(args.wheels), join=False)
    print("\n".join(lines) or "nothing missing here")
    print("\n".join(tvm_compile_wheels(Path(args.wheels))))
    tree = tree_mib()
    print(transfers(Path(args.wheels), tree), flush=True)
    gpu = args.gpu or "h200"
    est = step_estimates(gpu)
    from ios_bench.experiments.headline import GPUS

    print(f"\nthe window, step by step (estimates for an {GPUS[gpu]}; a step that does not fit what is left waits for "
          f"the next call; the headline takes what the window leaves, at least {MIN_HEADLINE_S:.0f} s):")
    total = 0.0
    for i, name in enumerate(STEPS, 1):
        seconds, how = est[name]
        total += seconds
        print(f"  {i}. {name:<9}{seconds:7.0f} s  {TITLES[name]}; {how}")
    windows = total / (args.deadline - RESERVE_S)
    print(f"  working folder {args.work} (outside $OUT), packed into $OUT/{ARCHIVE} after every step (records and "
          f"logs, never compile caches; at most {ARCHIVE_LIMIT_MIB:g} MiB), with {REPORT} and {STATE} beside it")
    print("  the clocks and settings of the GPU are left alone (only read, at the start and the end)")
    print(f"\nthe call to make (device tool), once per window, the same each time:\n  {run_call(args.deadline)}")
    print(f"  a fresh machine resumes from .window/{ARCHIVE}: copy the last call's {ARCHIVE} there and carry "
          "'.window' (it is named above once the file is there)")
    print(f"estimated duration {total:.0f} s on {GPUS[gpu]} ({windows:.1f} windows of {args.deadline:g} s)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="where the archive and report go ($OUT there)")
    ap.add_argument("--work", default=str(WORK), help="the working folder (outside --out)")
    ap.add_argument("--resume-from", default=None,
                    help=f"a carried copy of the last call's archive (default {CARRIED.relative_to(ROOT)} when there)")
    ap.add_argument("--deadline", type=float, default=WINDOW_S, help="seconds this window may take")
    ap.add_argument("--wheels", default=str(WHEELS), help="folder of carried wheels (and wheels in parts)")
    ap.add_argument("--site", default="/tmp/ios-bench-headline/site", help="where carried wheels are installed")
    ap.add_argument("--fetch-wheels", action="store_true", help="download the wheels a lent machine lacks (here)")
    ap.add_argument("--part-mib", type=float, default=None,
                    help="largest part of a wheel split for transfer (default: what a call leaves beside the tree)")
    ap.add_argument("--check", action="store_true", help="say what is missing, what is carried and how it travels")
    ap.add_argument("--dry-run", action="store_true",
                    help="the steps in order with their estimates, and the device tool's call to make")
    ap.add_argument("--gpu", choices=("h100", "h200"), default=None, help="--dry-run: the GPU costed")
    ap.add_argument("--fake", action="store_true",
                    help="the whole window on the CPU: the fake device, the quick forms (a run before the real one)")
    args, extra = ap.parse_known_args(argv)
    if not 60 <= args.deadline <= 600:
        print(f"error: bad --deadline {args.deadline:g}: expected 60 to 600 seconds (one device command is at most "
              "600)", file=sys.stderr)
        return 2
    if args.part_mib is not None and not 1 <= args.part_mib < CARRY_LIMIT_MIB:
        print(f"error: bad --part-mib {args.part_mib:g}: expected 1 to {CARRY_LIMIT_MIB} (less)", file=sys.stderr)
        return 2
    if args.fetch_wheels:
        return fetch_wheels(Path(args.wheels), args.part_mib)
    if args.dry_run:
        return dry_run(args, extra)
    if args.check:
        lines, _, _ = wheel_report(Path(args.wheels), join=False)
        print("\n".join(lines) or "nothing missing here")
        print("\n".join(tvm_compile_wheels(Path(args.wheels))))
        print(transfers(Path(args.wheels)), flush=True)
        return 0
    if not args.out:
        print("error: --out is required for a window (where its archive and report go: $OUT there)", file=sys.stderr)
        return 2
    try:
        Path(args.work).resolve().relative_to(Path(args.out).resolve())
        print(f"error: --work {args.work} is inside --out {args.out}: the device tool empties --out before each call",
              file=sys.stderr)
        return 2
    except ValueError:
        pass
    return run_window(args, extra)


if __name__ == "__main__":
    sys.exit(main())
