"""Sweep planning and execution: models x batch sizes x (frameworks + IOS schedules) x devices.

Every task runs in its own worker process (:mod:`ios_bench.worker`) with the thread budget in
its environment and a timeout; the parent never imports a framework. Per (model, batch) a
reference task computes the oracle output once (``refs/``); each cell then checks its output
against it and is timed with ``ios_core.measure.measure``. Finished cells are appended to the
store (:mod:`ios_bench.results`) as they finish; ``resume`` skips cells already stored.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ios_core.atomic import atomic_write, atomic_write_json
from ios_core.optimizer import STRATEGIES
from ios_core.threads import ENV_VARS, policy_name, spin_env, spin_policy, thread_env, usable_cores

from . import envinfo
from .clocks import STATE_FILE as CLOCK_STATE_FILE
from .clocks import ClockLock
from .errors import InputError
from .escape import file_part, term
from .executors import Executor, LocalExecutor, Task, device_kind
from .locks import FileLock
from .results import Store, cell_key, check_record
from .worker import PARENT_ENV

SCHEDULES = STRATEGIES  # the IOS schedules a sweep can ask for: the optimizer's one list
DEFAULT_SCHEDULES = ("sequential", "greedy", "both")
DEFAULT_MODELS = ("sample", "squeezenet")
# Left out of the default sweep's "every available framework"; named explicitly or with
# --frameworks all they run. Untuned TVM is a strawman here (hundreds of ms to seconds per run on
# these CPUs, far from what a TVM user would deploy); tuning takes far more than minutes.
SLOW_FRAMEWORKS = {
    "tvm": "untuned TVM (hundreds of ms to seconds per run here) is no fair peer; tvm-tuned is the tuned one",
    "tvm-tuned": "tuning takes far more than minutes",
}
IOS_ADAPTER = "ios"
PLAN_FILE = "plan.json"
LOCK_FILE = ".lock"
ENV_FILE = "env.json"


IOS_PROVIDERS = ("torch", "onnxruntime", "openvino")  # the IOS runtime's kernel providers
DEFAULT_IOS_PROVIDER = "torch"


def schedule_key(schedule: str, provider: str = DEFAULT_IOS_PROVIDER) -> str:
    """``ios-both`` (the default torch provider) or ``ios-both[onnxruntime]``."""
    return f"ios-{schedule}" if provider == DEFAULT_IOS_PROVIDER else f"ios-{schedule}[{provider}]"


def split_framework(framework: str) -> tuple[str, str | None]:
    """``ios-both[openvino]`` -> (``ios-both``, ``openvino``); ``ios-both`` -> (``ios-both``, ``torch``);
    a peer framework -> (name, None)."""
    if not framework.startswith("ios-"):
        return framework, None
    if framework.endswith("]") and "[" in framework:
        base, provider = framework[:-1].split("[", 1)
        return base, provider
    return framework, DEFAULT_IOS_PROVIDER


def label(framework: str) -> str:
    """Display name: ``ios-both`` -> ``IOS-Both``, ``ios-both[onnxruntime]`` -> ``IOS-Both[onnxruntime]``;
    frameworks keep their registry name."""
    if framework.startswith("ios-"):
        base, provider = split_framework(framework)
        return "IOS-" + base[4:].capitalize() + ("" if provider == DEFAULT_IOS_PROVIDER else f"[{provider}]")
    return framework


def safe_name(text: str) -> str:
    """A file name from names that come from files (model names): see ios_core.names.file_part."""
    return file_part(text)


@dataclass
class Plan:
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    frameworks: list[str] | None = None  # None: every available framework except SLOW_FRAMEWORKS
    schedules: list[str] | None = None  # None: DEFAULT_SCHEDULES where the optimizer exists
    devices: list[str] = field(default_factory=lambda: ["cpu"])
    warmup: int = 3
    number: int = 1
    repeat: int = 20
    min_sample_ms: float | None = 10.0
    timeout: float = 600.0
    optimize_timeout: float = 3600.0  # added to an IOS cell's timeout while its schedule is searched
    threads: int | None = field(default_factory=usable_cores)  # the CPU affinity mask, not os.cpu_count()
    seed: int = 0
    input_seed: int = 0
    cost_model: str = "measured"
    precision: str = "fp32"  # every cell's output is checked at this precision's tolerance
    lock_clocks: bool = False
    gpu_clock_mhz: int | None = None
    ios_providers: list[str] = field(default_factory=lambda: [DEFAULT_IOS_PROVIDER])  # IOS kernel providers
    # one spin/wait policy for every cell (ios_core.threads.SPIN_POLICIES; IOS_BENCH_SPIN_POLICY)
    spin_policy: str = field(default_factory=policy_name)
    executor: str = "local"  # where cells run (ios_bench.executors); --resume reuses it
    ray_address: str | None = None
    # settings of the IOS optimizer for every IOS cell of the sweep (IOS_OPTIONS; empty: each cell's
    # schedule is optimized for its own batch size and thread budget, pruning r=3, s=8)
    ios_options: dict = field(default_factory=dict)
    # {framework or "ios": {option: value}}: build options handed to adapter.build (e.g. tvm-tuned's
    # trials_per_task); "ios" applies to every IOS cell, "ios-both" to that schedule only
    adapter_options: dict = field(default_factory=dict)
    # per-core CPU (SM on cuda) utilization sampled during each cell's timed loop: util/<cell>.json
    sample_utilization: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, base: str | os.PathLike | None = None) -> Plan:
        """A plan from ``plan.json``, every field type-checked (``InputError`` naming the field).
        Model files given by a relative path are relative to ``base`` (the run folder)."""
        if not isinstance(d, dict):
            raise InputError(f"not a JSON object ({type(d).__name__})")
        kwargs = {}
        for name in cls.__dataclass_fields__:
            if name not in d:
                continue
            value = d[name]
            check, what = _PLAN_TYPES.get(name, (lambda v: True, ""))
            if not check(value):
                if name == "ios_options" and isinstance(value, dict):
                    raise InputError(f"field 'ios_options': {ios_options_problem(value)}")
                raise InputError(f"field {name!r} is {str(value)[:40]!r}, expected {what}")
            kwargs[name] = value
        plan = cls(**kwargs)
        if base is not None:
            plan.models = [_from_base(m, Path(base)) for m in plan.models]
        return plan


def _is_int(v, lo: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (lo is None or v >= lo)


def _is_num(v, lo: float = 0.0) -> bool:
    import math

    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= lo


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(s, str) and s for s in v)


_PLAN_TYPES = {
    "models": (lambda v: _str_list(v) and bool(v), "a list of model names or files"),
    "batch_sizes": (lambda v: isinstance(v, list) and bool(v) and all(_is_int(b, 1) for b in v),
                    "a list of positive integers"),
    "frameworks": (lambda v: v is None or _str_list(v), "null or a list of names"),
    "schedules": (lambda v: v is None or _str_list(v), "null or a list of names"),
    "devices": (lambda v: _str_list(v) and bool(v), "a list of devices"),
    "warmup": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "number": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "repeat": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "min_sample_ms": (lambda v: v is None or _is_num(v), "null or a number >= 0"),
    "timeout": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "optimize_timeout": (lambda v: _is_num(v) and v > 0, "a positive number"),
    "threads": (lambda v: v is None or _is_int(v, 1), "null or an integer >= 1"),
    "seed": (_is_int, "an integer"),
    "input_seed": (_is_int, "an integer"),
    "cost_model": (lambda v: isinstance(v, str), "a string"),
    "precision": (lambda v: isinstance(v, str), "a string"),
    "lock_clocks": (lambda v: isinstance(v, bool), "true or false"),
    "gpu_clock_mhz": (lambda v: v is None or _is_int(v, 1), "null or a positive integer"),
    "executor": (lambda v: isinstance(v, str), "a string"),
    "ray_address": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "ios_options": (lambda v: ios_options_problem(v) is None, "an object of IOS optimizer settings "
                    "(optimize_batch, optimize_threads, max_group_size, max_num_groups: positive integers; "
                    "cost_cache: default, off or private)"),
    "adapter_options": (lambda v: _options_map(v), "an object {framework: {option: value}}"),
    "sample_utilization": (lambda v: isinstance(v, bool), "true or false"),
}

# The IOS optimizer settings a sweep may fix for its IOS cells (Plan.ios_options):
#   optimize_batch    the batch size the schedule is optimized for (default: the cell's own); a
#                     sweep over batch sizes then executes one schedule at every batch size
#   optimize_threads  the thread budget the measured cost model times stages with (default: the
#                     cell's own): a schedule specialized for another "device"
#   max_group_size    pruning r: most operators in one group of a parallel stage (default 3)
#   max_num_groups    pruning s: most groups in one parallel stage (default 8)
#   cost_cache        the measured cost model's profile database: "default" (the shared one, whose
#                     stage costs and block schedules are reused across runs), "off" (none: every
#                     stage timed again in each cell), "private" (a fresh one in the run folder, so
#                     search times are those of a cold search, yet shared by the run's cells)
IOS_OPTIONS = {"optimize_batch": "a positive integer", "optimize_threads": "a positive integer",
               "max_group_size": "a positive integer", "max_num_groups": "a positive integer",
               "cost_cache": "one of default, off, private"}
COST_CACHES = ("default", "off", "private")
PRIVATE_PROFILE_DB = "profiles.sqlite"  # cost_cache=private: in the run folder


def ios_options_problem(options) -> str | None:
    """Why ``options`` are not valid IOS optimizer settings (one line), or None."""
    if not isinstance(options, dict):
        return f"IOS options must be an object, not {type(options).__name__}"
    for key, value in options.items():
        if key not in IOS_OPTIONS:
            return f"unknown IOS option {str(key)[:40]!r}; choose from: {', '.join(IOS_OPTIONS)}"
        if key == "cost_cache":
            if value not in COST_CACHES:
                return f"IOS option cost_cache is {str(value)[:40]!r}, expected {IOS_OPTIONS[key]}"
        elif not _is_int(value, 1):
            return f"IOS option {key} is {str(value)[:40]!r}, expected {IOS_OPTIONS[key]}"
    return None


def ios_options_tag(options: dict) -> str:
    """The part of a schedule file's name that says what it was optimized under (empty for the
    defaults), e.g. ``-t1-r2-s3-cprivate``; the optimized-for batch size is the file's batch."""
    parts = [f"t{options['optimize_threads']}" if "optimize_threads" in options else "",
             f"r{options['max_group_size']}" if "max_group_size" in options else "",
             f"s{options['max_num_groups']}" if "max_num_groups" in options else "",
             f"c{options['cost_cache']}" if options.get("cost_cache", "default") != "default" else ""]
    return "".join(f"-{p}" for p in parts if p)


def optimized_for(options: dict, batch_size: int, threads: int | None) -> dict:
    """What an IOS cell's schedule is optimized for, given the sweep's IOS options and the cell."""
    return {"batch_size": options.get("optimize_batch", batch_size),
            "threads": options.get("optimize_threads", threads),
            "max_group_size": options.get("max_group_size", 3), "max_num_groups": options.get("max_num_groups", 8),
            "cost_cache": options.get("cost_cache", "default")}


def _options_map(v) -> bool:
    """``{framework: {option: JSON value}}`` with non-empty names (values must survive plan.json)."""
    if not isinstance(v, dict):
        return False
    for fw, opts in v.items():
        if not (isinstance(fw, str) and fw and isinstance(opts, dict) and all(isinstance(k, str) and k for k in opts)):
            return False
        try:
            json.dumps(opts, allow_nan=False)
        except (TypeError, ValueError):
            return False
    return True


def adapter_options(plan: Plan, framework: str, adapter: str) -> dict:
    """The build options of one cell: the adapter's entry (``ios`` for every IOS cell), then the
    framework's own (``ios-both``, ``tvm-tuned``) over it."""
    opts = plan.adapter_options or {}
    return {**(opts.get(adapter) or {} if adapter != framework else {}), **(opts.get(framework) or {})}


def _from_base(spec: str, base: Path) -> str:
    """A model file named relative to the run folder becomes absolute; zoo names stay."""
    if (spec.endswith(".json") or "/" in spec) and not Path(spec).is_absolute():
        return str((base / spec).resolve())
    return spec


def absolute_model_spec(spec: str) -> str:
    """What plan.json stores for a model: zoo names as given, files as absolute paths (so that
    ``--resume`` works from any folder)."""
    path = Path(spec)
    if spec.endswith(".json") or path.is_file():
        return str(path.resolve())
    return spec


@dataclass
class Cell:
    model: str  # graph name
    model_spec: str  # zoo name or JSON path
    batch_size: int
    framework: str  # adapter name, or ios-<schedule>
    device: str
    schedule: str | None = None
    adapter: str = ""
    weight: float = 1.0  # relative expected duration (progress ETA)
    skip_reason: str | None = None  # known before running (framework unavailable here)
    nodes: list[str] | None = None  # ids of the nodes that can run it (None: any offering the device)
    provider: str | None = None  # IOS cells: the runtime's kernel provider

    @property
    def key(self) -> str:
        return cell_key(self.model, self.batch_size, self.framework, self.device)

    @property
    def file_stem(self) -> str:
        return safe_name(f"{self.model}-b{self.batch_size}-{self.framework}-{self.device}")


# ---- worker processes -------------------------------------------------------------------------

def _signal_name(rc: int) -> str:
    try:
        return signal.Signals(-rc).name
    except ValueError:
        return f"signal {-rc}"


def tail(path: Path, lines: int = 25, chars: int = 3000) -> str:
    try:
        text = path.read_bytes()[-chars * 4:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])[-chars:]


def run_worker(spec: dict, timeout: float, log_path: Path, threads: int | None) -> dict:
    """Run one task in a fresh process; returns the worker's result, or a failure record with
    the reason (crash signal, exit code, timeout) and the tail of its output."""
    result_path = Path(spec["result_path"])
    result_path.unlink(missing_ok=True)
    env = dict(os.environ)
    if threads:
        env.update(thread_env(threads))
    env = spin_env(spec.get("spin_policy"), env)  # the worker sets it again before any framework import
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env[PARENT_ENV] = str(os.getpid())  # the worker dies with this process (see worker.die_with_parent)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ios_bench.worker", json.dumps(spec)], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=env,
                                # its own session, so a timeout kills its whole group; no preexec_fn,
                                # which is unsafe while other threads are alive
                                start_new_session=os.name == "posix")
        timed_out = False
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            rc = proc.returncode
        except BaseException:  # SIGINT/SIGTERM in the parent: take the worker down with us
            _kill_group(proc)
            raise
    wall = time.perf_counter() - t0
    result = None
    if result_path.exists():
        try:
            result = json.loads(result_path.read_text())
        except (OSError, json.JSONDecodeError):
            result = None
        result_path.unlink(missing_ok=True)
    if result is None:
        if timed_out:
            reason = f"timeout: no result after {timeout:g} s (hang?); worker killed"
        elif rc is not None and rc < 0:
            sig = _signal_name(rc)
            reason = f"crashed: worker killed by {sig}" + (" (out of memory?)" if sig == "SIGKILL" else "")
        else:
            reason = f"crashed: worker exited with code {rc} without a result"
        result = {"status": "failed", "reason": reason, "returncode": rc}
    result["wall_seconds"] = round(wall, 3)
    if result.get("status") != "ok":
        result["stderr_tail"] = tail(log_path)
    return result


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker's own session: it and its children only
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:  # pragma: no cover
        pass


def merge_probes(probes: list[tuple[str, dict]]) -> dict:
    """One probe for a device from its nodes' probes: an adapter is available when one node runs
    it (``nodes``: those node ids; ``reason``: the first node's reason when none does)."""
    merged = {"status": "failed", "adapters": {}, "optimize": False, "optimize_nodes": []}
    reasons = []
    for nid, p in probes:
        if p.get("status") != "ok":
            reasons.append(p.get("reason"))
            continue
        merged["status"] = "ok"
        if p.get("optimize"):
            merged["optimize"] = True
            merged["optimize_nodes"].append(nid)
        for name, info in (p.get("adapters") or {}).items():
            m = merged["adapters"].setdefault(name, {**info, "nodes": []})
            if not info.get("reason"):
                if m.get("reason"):
                    m.update({**info, "nodes": m["nodes"]})
                m["nodes"].append(nid)
    if merged["status"] != "ok":
        merged["reason"] = "; ".join(str(r) for r in reasons)
    return merged


# ---- the sweep --------------------------------------------------------------------------------

class Sweep:
    def __init__(self, plan: Plan, folder: str | os.PathLike, console=None, resume: bool = False,
                 progress: bool = True, executor: Executor | None = None, retry_failed: bool = False):
        from rich.console import Console

        problem = ios_options_problem(plan.ios_options)
        if problem:
            raise InputError(problem)
        self.plan = plan
        self.folder = Path(folder)
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.resume = resume or retry_failed
        self.retry_failed = retry_failed
        self.show_progress = progress
        self.store = Store(self.folder)
        self.notes: list[str] = []
        self.executor = executor or LocalExecutor()
        self.placement: dict[str, dict] = {}  # device -> nodes offering it, and why the others do not
        self._fresh = False
        self._prepared = False  # set once prepare_folder has written the store and the plan

    # -- setup ----------------------------------------------------------------------------------
    def prepare_folder(self) -> None:
        check_writable(self.folder)
        if not self.resume and self.store.path.exists() and self.store.path.stat().st_size:
            raise InputError(f"{self.folder} already holds results; use --resume to continue it or another --out")
        for sub in ("refs", "schedules", "logs", "work"):
            (self.folder / sub).mkdir(exist_ok=True)
        msg = self.store.repair()
        if msg:
            self.say(f"[yellow]warning:[/] {term(msg)}")
        self.store.path.touch()  # an empty store is a valid run (and reportable)
        atomic_write_json(self.folder / PLAN_FILE, self.plan.to_dict())
        self._prepared = True  # a run folder now (an empty store is a valid run): kept from here on

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def _warn_ignored(self, message: str) -> None:
        self.say(f"[yellow]warning:[/] {message}; its earlier sessions are not kept")

    def probe(self) -> dict:
        """Which adapters run where (and their versions), asked in a worker on every node that offers
        each device, so that the driver imports no framework. Only the named frameworks are probed
        when the plan names them. Returns {device: merged probe}: an adapter is available for a
        device when one of its nodes runs it (``nodes`` lists those node ids)."""
        names = None
        if self.plan.frameworks is not None:
            names = list(self.plan.frameworks) + [IOS_ADAPTER]
        timeout = max(self.plan.timeout, 120)
        per_node: dict[tuple[str, str], dict] = {}  # (node id, kind) -> probe
        wanted: dict[str, list] = {}
        for device in self.plan.devices:
            nodes, why = self.executor.match(device)
            wanted[device] = nodes
            self.placement[device] = {"nodes": [n.name for n in nodes], "not": why}
            for n in nodes:
                per_node.setdefault((n.id, device_kind(device)), {})
        tasks = [self._probe_task(nid, kind, names, timeout) for nid, kind in per_node]
        for t, res in zip(tasks, self.executor.probe(tasks)):
            if res.get("status") != "ok":
                # frameworks imported together can clash (one crash takes all down): ask one by one
                self.say(f"[yellow]warning:[/] probing all frameworks at once failed on {term(res.get('node'))} "
                         f"({term(res.get('reason'))}); probing them one by one")
                import adapters

                nid, kind = t.payload
                res = {**res, "status": "ok", "adapters": {}, "optimize": False}
                ones = [self._probe_task(nid, kind, [name], timeout) for name in names or adapters.names()]
                for one_task, one in zip(ones, self.executor.probe(ones)):
                    name = one_task.spec["names"][0]
                    if one.get("status") == "ok":
                        res["adapters"].update(one.get("adapters") or {})
                        res["optimize"] = res["optimize"] or bool(one.get("optimize"))
                    else:
                        res["adapters"][name] = {"reason": f"probe failed: {one.get('reason')}", "version": None}
            per_node[t.payload] = res
        probes = {}
        for device in self.plan.devices:
            nodes = wanted[device]
            if not nodes:
                why = "; ".join(f"{k} {v}" for k, v in self.placement[device]["not"].items()) or "no nodes"
                probes[device] = {"status": "ok", "no_node": f"no node offers {device} ({why})", "adapters": {},
                                  "optimize": False}
                continue
            probes[device] = merge_probes([(n.id, per_node[(n.id, device_kind(device))]) for n in nodes])
        return probes

    def _probe_task(self, node_id: str, kind: str, names: list[str] | None, timeout: float):
        stem = safe_name(f"probe-{kind}" + (f"-{node_id[:12]}" if self.executor.name != "local" else "")
                         + (f"-{names[0]}" if names and len(names) == 1 else ""))
        spec = {"task": "probe", "spin_policy": self.plan.spin_policy, "device": kind, "names": names,
                "result_path": f"work/{stem}.json"}
        return Task(stem, spec, f"logs/{stem}.log", timeout, kind, self.plan.threads, nodes=[node_id],
                    payload=(node_id, kind))

    def plan_cells(self, probes: dict, graphs: dict) -> list[Cell]:
        import adapters

        plan = self.plan
        cells: list[Cell] = []
        noted = set()
        for device in plan.devices:
            probe = probes.get(device) or {}
            avail = probe.get("adapters") or {}
            no_node = probe.get("no_node")
            if probe.get("status") != "ok":
                self.say(f"[red]probe failed on {term(device)}:[/] {term(probe.get('reason'))}")
            peers = [n for n in adapters.names() if n != IOS_ADAPTER]
            if no_node:  # every cell of this device is skipped, and shown as such before anything runs
                fws = plan.frameworks if plan.frameworks is not None else [n for n in peers
                                                                          if n not in SLOW_FRAMEWORKS]
                fw_cells = [(n, no_node) for n in fws]
            elif plan.frameworks is None:
                fws = []
                for n in peers:
                    reason = (avail.get(n) or {}).get("reason", "not probed")
                    if device_kind(device) not in (avail.get(n) or {}).get("devices", [device_kind(device)]):
                        continue  # a GPU-only adapter in a CPU sweep (or the reverse): not a finding
                    if n in SLOW_FRAMEWORKS:
                        note = f"{n}: left out of the default sweep ({SLOW_FRAMEWORKS[n]}; name it with --frameworks)"
                    elif reason:
                        note = f"{n} unavailable on {device}: {reason}"
                    else:
                        fws.append(n)
                        continue
                    if note not in noted:
                        noted.add(note)
                        self.notes.append(note)
                fw_cells = [(n, None) for n in fws]
            else:
                fw_cells = [(n, (avail.get(n) or {}).get("reason", "not probed")) for n in plan.frameworks]
            ios_reason = None
            if no_node:
                ios_reason = no_node
            elif not probe.get("optimize"):
                ios_reason = "the IOS optimizer (ios_core.optimize with ios_core.cost) is not installed"
            elif (avail.get(IOS_ADAPTER) or {"reason": f"adapter {IOS_ADAPTER!r} is not installed"}).get("reason"):
                ios_reason = (avail.get(IOS_ADAPTER) or {}).get("reason") or f"adapter {IOS_ADAPTER!r} is not installed"
            if plan.schedules is None and not no_node:
                scheds = [] if ios_reason else list(DEFAULT_SCHEDULES)
                if ios_reason:
                    self.notes.append(f"IOS schedules left out on {device}: {ios_reason}")
                sched_cells = [(s, None) for s in scheds]
            else:
                scheds = plan.schedules if plan.schedules is not None else list(DEFAULT_SCHEDULES)
                sched_cells = [(s, ios_reason) for s in scheds]
            ios_nodes = [n for n in (avail.get(IOS_ADAPTER) or {}).get("nodes") or []
                         if n in (probe.get("optimize_nodes") or [])]
            for spec in plan.models:
                g = graphs[spec]
                gmacs = g.macs() / 1e9
                for bs in plan.batch_sizes:
                    runs = plan.warmup + plan.repeat * plan.number
                    weight = 2.0 + gmacs * bs * runs / 20.0 + (plan.min_sample_ms or 0) * plan.repeat / 1000
                    for fw, reason in fw_cells:
                        cells.append(Cell(g.name, spec, bs, fw, device, None, fw, weight, reason,
                                          (avail.get(fw) or {}).get("nodes")))
                    for s, reason in sched_cells:
                        for prov in plan.ios_providers:
                            cells.append(Cell(g.name, spec, bs, schedule_key(s, prov), device, s, IOS_ADAPTER,
                                              weight * 2.5, reason, ios_nodes, provider=prov))
        return cells

    def show_placement(self, cells: list[Cell]) -> None:
        """Which nodes can run which cells (printed before anything runs; kept in env.json)."""
        names = {n.id: n.name for n in self.executor.nodes}
        for device in self.plan.devices:
            mine = [c for c in cells if c.device == device and not c.skip_reason]
            counts = {names[nid]: sum(1 for c in mine if c.nodes is None or nid in c.nodes)
                      for nid in names if names[nid] in self.placement.get(device, {}).get("nodes", [])}
            self.placement.setdefault(device, {})["cells"] = counts
            if self.executor.name == "local" and len(self.executor.nodes) == 1:
                continue
            where = ", ".join(f"{n} ({k} cells)" for n, k in counts.items()) or "no node"
            self.say(term(f"plan: {device} -> {where}"))
            for n, why in self.placement.get(device, {}).get("not", {}).items():
                self.say(f"[dim]{term(f'      not on {n}: {why}')}[/]")

    # -- run ------------------------------------------------------------------------------------
    def run(self) -> dict:
        from .loading import load_graph, unique_names
        from .worker import load_plugins

        load_plugins()
        graphs = {spec: load_graph(spec) for spec in self.plan.models}
        unique_names(graphs)
        for g in graphs.values():  # refused here, not as an out-of-memory crash in a worker
            g.check_fits(max(self.plan.batch_sizes))
        self._fresh = not self.folder.exists()
        self._prepared = False
        check_writable(self.folder)
        # one sweep per run folder at a time: a second `run`/`--resume` on it is refused
        with FileLock(self.folder / LOCK_FILE, f"ios-bench run on {self.folder}"):
            try:
                clocks = ClockLock(self.plan.lock_clocks, [device_kind(d) for d in self.plan.devices],
                                   self.plan.gpu_clock_mhz, echo=lambda s: self.say(f"[yellow]{s}[/]"),
                                   state_path=self.folder / CLOCK_STATE_FILE)
                clocks.reserve()  # one sweep with locked clocks per machine: refused before anything is written
                try:
                    return self._run_locked(graphs, clocks)
                finally:
                    clocks.release()
            except BaseException:
                if self._fresh and not self._prepared:
                    # refused up front (clocks, executor, folder checks): the folder made for the lock
                    # holds no record, so nothing is left behind. Removed while the lock is held; a
                    # FileLock taken on the unlinked lock file notices and retries on a new one.
                    import shutil

                    shutil.rmtree(self.folder, ignore_errors=True)
                raise

    def _run_locked(self, graphs: dict, clock_lock: ClockLock) -> dict:
        fresh = self._fresh
        try:
            nodes = self.executor.open(self.folder, self.say)  # before writing anything: a bad cluster
        except BaseException:
            self.executor.close()
            raise
        try:
            self.prepare_folder()
        except BaseException:
            self.executor.close()
            raise
        self._keep_model_files()
        env_path = self.folder / ENV_FILE
        env = envinfo.collect(device_kind(self.plan.devices[0]), frameworks=False)
        env["run"] = self.folder.name
        env["plan"] = self.plan.to_dict()
        # what every worker runs under (the parent's own environment is not the cells')
        env["spin_policy"] = spin_policy(self.plan.spin_policy)
        budget = thread_env(self.plan.threads) if self.plan.threads else {}
        cell_env = spin_env(self.plan.spin_policy, {**os.environ, **budget})
        env["thread_env"] = {k: cell_env[k] for k in ENV_VARS if k in cell_env}
        env["executor"] = self.executor.name
        previous = _read_json(env_path, self._warn_ignored) if self.resume else None
        self.say(f"run folder: {term(self.folder)}")
        env["warnings"] = busy_warnings()
        for w in env["warnings"]:
            self.say(f"[yellow]warning:[/] {term(w)}")
        stats = {"planned": 0, "ran": 0, "ok": 0, "wrong": 0, "failed": 0, "skipped": 0, "missing": 0}
        try:
            env["nodes"] = [n.to_dict() for n in nodes]
            probes = self.probe()
            self._write_node_envs()
            env["frameworks"] = {d: p.get("adapters") for d, p in probes.items()}
            cells = self.plan_cells(probes, graphs)
            gpus = [d for d in self.plan.devices if device_kind(d) != "cpu"]
            if gpus and not self.resume and all(c.skip_reason for c in cells):
                # nothing at all would run (a GPU sweep without what it needs): say what is missing
                # instead of writing an all-skipped run
                reasons = list(dict.fromkeys([f"{c.framework}: {c.skip_reason}" for c in cells]
                                             + [n for n in self.notes if any(f" on {d}" in n for d in gpus)]))
                if fresh:
                    import shutil

                    shutil.rmtree(self.folder, ignore_errors=True)
                raise InputError(f"nothing can run on {', '.join(gpus)}: " + "; ".join(reasons[:4])
                                 + (f"; ... ({len(reasons) - 4} more)" if len(reasons) > 4 else "")
                                 + " (`ios-bench doctor` lists what runs here)")
            for note in self.notes:
                self.say(f"[dim]note:[/] {term(note)}")
            self.show_placement(cells)
            env["placement"] = self.placement
            latest = self.store.latest(on_problem=lambda m: self.say(f"[yellow]warning:[/] {term(m)}"))
            done = {k for k, r in latest.items() if not (self.retry_failed and r["status"] == "failed")}
            self._attempts = {k: int(r.get("attempt") or 1) for k, r in latest.items()}
            todo = [c for c in cells if c.key not in done]
            if self.resume and done:
                self.say(f"resuming: {len(cells) - len(todo)} of {len(cells)} cells already finished")
            retried = [c for c in todo if c.key in latest]
            if retried:
                self.say(f"retrying {len(retried)} failed cell(s)")
            if cells:
                from rich.markup import escape

                variants = list(dict.fromkeys(escape(label(c.framework)) for c in cells))
                threads = self.plan.threads or "all the node's"
                self.say(f"{len(todo)} cells to run: {len(self.plan.models)} model(s) x batch "
                         f"{self.plan.batch_sizes} x {len(variants)} ({term(', '.join(variants))}) x "
                         f"{term(', '.join(self.plan.devices))}; {threads} threads per cell")
            if not cells:
                self.say("[yellow]nothing to run:[/] no framework or IOS schedule is available for this sweep "
                         "(see `ios-bench list frameworks`)")
            env["cells_planned"] = stats["planned"] = len(cells)
            env["notes"] = self.notes
            with clock_lock as clocks:
                env["clocks"] = clocks.state.get("clocks")
                env["clock_settings"] = clocks.state
                self._write_env(env_path, env, previous)
                if isinstance(self.executor, LocalExecutor):
                    self.executor.observe = clocks.observe
                try:
                    self._run_cells(todo, stats, len(cells) - len(todo), len(cells))
                except BaseException as e:
                    env["interrupted"] = f"{type(e).__name__} after {stats['ran']} cells (resume with --resume)"
                    self.say(f"[yellow]interrupted[/] ({type(e).__name__}): {stats['ran']} cells stored in "
                             f"{term(self.store.path)}; continue with: ios-bench run --resume --out "
                             f"{term(self.folder)}")
                    raise
                finally:
                    clocks.restore()
                    clocks.state["after"] = clocks.snapshot()
                    env["clock_settings"] = clocks.state
                    env["finished"] = _now()
                    env["stats"] = stats
                    self._write_env(env_path, env, previous)
        finally:
            self.executor.close()
        return stats

    def _keep_model_files(self) -> None:
        """A graph given as a file is copied into the run folder (``models/``): the run keeps the
        graph it measured, and every node reads that copy (shipped to it with the task)."""
        import shutil

        for spec in self.plan.models:
            src = Path(spec)
            if not (spec.endswith(".json") or src.is_file()):
                continue
            dst = self.folder / self.model_file(spec)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if not dst.exists():
                atomic_write(dst, lambda f, src=src: shutil.copyfileobj(open(src, "rb"), f))
            weights = src.with_suffix(".npz")
            if weights.exists() and not dst.with_suffix(".npz").exists():
                atomic_write(dst.with_suffix(".npz"), lambda f, w=weights: shutil.copyfileobj(open(w, "rb"), f))

    @staticmethod
    def model_file(spec: str) -> str | None:
        """Run-folder-relative copy of a graph file or an ONNX model (None for a zoo name)."""
        if not (spec.endswith(".json") or Path(spec).is_file()):
            return None
        if spec.lower().endswith(".onnx"):  # keeps its file name: the imported graph is named after it
            return f"models/{safe_name(spec[: -len('.onnx')])}/{Path(spec).name}"
        return f"models/{safe_name(spec.removesuffix('.json'))}.json"

    def _model_inputs(self, spec: dict, model_spec: str) -> list[str]:
        rel = self.model_file(model_spec)
        if rel is None:
            return []
        spec["model_path"] = rel
        npz = str(Path(rel).with_suffix(".npz"))
        return [rel] + ([npz] if (self.folder / npz).exists() else [])

    def _write_node_envs(self) -> None:
        """Each node's environment, ``nodes/<node>/env.json`` (the local executor's is env.json)."""
        for node in self.executor.nodes:
            env = self.executor.node_env(node)
            if env is None:
                continue
            path = self.folder / node_env_path(node.name)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, {**env, "node": node.to_dict()})

    def _write_env(self, path: Path, env: dict, previous: dict | None) -> None:
        if previous:
            sessions = previous.get("sessions", [])
            first = {k: v for k, v in previous.items() if k != "sessions"}
            merged = {**first, "sessions": sessions + [env]}
            atomic_write_json(path, merged)
        else:
            atomic_write_json(path, env)

    def _references(self, models: dict[str, str]) -> dict:
        """Oracle outputs for each model at every batch size: computed once per run, in a worker
        (through the executor: on a node of the sweep). ``models``: {graph name: model spec}.
        Returns {graph name: {batch_size: {"status", "input_sha1", ...}}}."""
        out: dict[str, dict] = {}
        tasks = []
        for model, model_spec in models.items():
            out[model], missing = {}, []
            for bs in self.plan.batch_sizes:
                stem = safe_name(f"{model}-b{bs}")
                ref_path, meta_path = self.folder / "refs" / f"{stem}.npy", self.folder / "refs" / f"{stem}.json"
                in_path = self.folder / "refs" / f"{stem}.input.npy"
                meta = _read_json(meta_path, lambda m: self.say(f"[yellow]warning:[/] {m}; computing it again"))
                if meta and meta.get("status") == "ok" and _npy_ok(ref_path) and _npy_ok(in_path):
                    out[model][bs] = meta
                else:
                    missing.append(bs)
            if not missing:
                continue
            stem = safe_name(model)
            spec = {"task": "reference", "spin_policy": self.plan.spin_policy, "model_spec": model_spec,
                    "batch_sizes": missing,
                    "ref_paths": [ref_file(model, bs) for bs in missing],
                    "input_paths": [ref_file(model, bs, "input.npy") for bs in missing],
                    "seed": self.plan.seed, "input_seed": self.plan.input_seed,
                    "result_path": f"work/{stem}.ref-result.json"}
            inputs = self._model_inputs(spec, model_spec)
            tasks.append(Task(f"reference:{model}", spec, f"logs/{stem}.reference.log", self.plan.timeout, "cpu",
                              self.plan.threads, inputs=inputs,
                              outputs=spec["ref_paths"] + spec["input_paths"]
                              + [ref_file(model, bs, "source.npy") for bs in missing],
                              payload=(model, missing)))
        for task, res in zip(tasks, self.executor.probe(tasks) if tasks else []):
            model, missing = task.payload
            for bs in missing:
                if res.get("status") == "ok":
                    meta = {"status": "ok", **res["batches"][str(bs)]}
                    atomic_write_json(self.folder / ref_file(model, bs, "json"), meta)
                else:
                    meta = {"status": "failed", "reason": res.get("reason"), "stderr_tail": res.get("stderr_tail", "")}
                out[model][bs] = meta
        return out

    def _run_cells(self, todo: list[Cell], stats: dict, already: int, total: int) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[cells]}"),
                            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
                            disable=not self.show_progress, transient=True,
                            refresh_per_second=1)  # the parent stays quiet while a cell is timed
        count = [already]

        def store(cell: Cell, record: dict) -> None:
            problem = check_record(record)
            if problem:  # never lose a cell (nor crash the sweep) over a malformed worker result
                record = {k: record[k] for k in ("cell", "model", "batch_size", "framework", "device", "label",
                                                 "started", "log", "node", "attempt") if k in record}
                record.update(status="failed", reason=f"invalid result from the worker: {problem}", finished=_now())
            self.store.append(record)
            stats["ran"] += 1
            stats[record["status"]] = stats.get(record["status"], 0) + 1
            count[0] += 1
            progress.advance(bar, cell.weight)
            progress.update(bar, cells=f"{count[0]}/{total} cells")
            self.say(f"[{count[0]}/{total}] {describe(record)}")

        with progress:
            bar = progress.add_task("sweep", total=sum(c.weight for c in todo) or 1, cells=f"{already}/{total} cells")
            # cells no node can run are reported (and stored) before anything runs
            for cell in [c for c in todo if c.skip_reason]:
                store(cell, {**self._record(cell), "status": "skipped", "reason": cell.skip_reason,
                             "finished": _now()})
            runnable = [c for c in todo if not c.skip_reason]
            if runnable:
                progress.update(bar, description="reference outputs")
                refs = self._references({c.model: c.model_spec for c in runnable})
            tasks = []
            for cell in runnable:
                ref = refs[cell.model][cell.batch_size]
                if ref.get("status") != "ok":
                    store(cell, {**self._record(cell), "status": "failed",
                                 "reason": f"reference output failed: {ref.get('reason')}",
                                 "stderr_tail": ref.get("stderr_tail", ""), "finished": _now()})
                else:
                    tasks.append(self._cell_task(cell, ref))
            started: dict[str, str] = {}

            def finished(task: Task, res: dict) -> None:
                store(task.payload, self._cell_record(task, res, started.get(task.key)))

            def starting(task: Task) -> None:
                started[task.key] = _now()
                progress.update(bar, description=term(f"{task.payload.model} b{task.payload.batch_size} "
                                                      f"{label(task.payload.framework)}", newlines=False))

            self.executor.starting = starting
            missing = self.executor.run(tasks, finished)
            stats["missing"] = len(missing)
            if missing:
                self.say(f"[yellow]{len(missing)} cells not run[/] (their nodes were lost and no other node can run "
                         f"them): continue with: ios-bench run --resume --out {term(self.folder)}")

    def _record(self, cell: Cell) -> dict:
        plan = self.plan
        return {"cell": cell.key, "model": cell.model, "batch_size": cell.batch_size, "framework": cell.framework,
                "label": label(cell.framework), "kind": "ios" if cell.schedule else "framework",
                "schedule": cell.schedule, "device": cell.device, "adapter": cell.adapter,
                **({"provider": cell.provider or DEFAULT_IOS_PROVIDER} if cell.schedule else {}),
                **({"optimized_for": optimized_for(plan.ios_options, cell.batch_size, plan.threads)}
                   if cell.schedule and plan.ios_options else {}),
                "threads": plan.threads, "seed": plan.seed, "input_seed": plan.input_seed, "started": _now(),
                **({"options": o} if (o := adapter_options(plan, cell.framework, cell.adapter)) else {}),
                **({"attempt": self._attempts[cell.key] + 1} if cell.key in getattr(self, "_attempts", {}) else {})}

    def _cell_task(self, cell: Cell, ref: dict) -> Task:
        plan = self.plan
        stem = cell.file_stem
        spec = {"task": "cell", "spin_policy": plan.spin_policy, "model_spec": cell.model_spec,
                "batch_size": cell.batch_size,
                "device": device_kind(cell.device), "adapter": cell.adapter, "schedule": cell.schedule,
                "threads": plan.threads, "seed": plan.seed, "input_seed": plan.input_seed,
                "input_sha1": ref.get("input_sha1"), "ref_path": ref_file(cell.model, cell.batch_size),
                "input_path": ref_file(cell.model, cell.batch_size, "input.npy"),
                "warmup": plan.warmup, "number": plan.number, "repeat": plan.repeat,
                "min_sample_ms": plan.min_sample_ms, "cost_model": plan.cost_model, "precision": plan.precision,
                "result_path": f"work/{stem}.result.json"}
        options = adapter_options(plan, cell.framework, cell.adapter)
        if options:
            spec["options"] = options
        inputs = [spec["ref_path"], spec["input_path"]] + self._model_inputs(spec, cell.model_spec)
        source_ref = ref_file(cell.model, cell.batch_size, "source.npy")
        if (self.folder / source_ref).exists():  # an imported model: onnxruntime on the original file
            spec["source_ref_path"] = source_ref
            inputs.append(source_ref)
        elif ref.get("source_error"):  # ... which could not run it: the record says so (independent_check)
            spec["source_error"] = ref["source_error"]
        outputs = []
        if plan.sample_utilization:
            spec["util_path"] = util_file(cell)
            outputs.append(spec["util_path"])
        timeout = plan.timeout
        if cell.schedule:
            spec["provider"] = cell.provider or DEFAULT_IOS_PROVIDER
            suffix = "" if spec["provider"] == DEFAULT_IOS_PROVIDER else f"-{spec['provider']}"
            opts = plan.ios_options or {}
            if opts:
                spec["ios_options"] = dict(opts)
                suffix += ios_options_tag(opts)
                if opts.get("cost_cache") == "private":
                    spec["profile_db_path"] = PRIVATE_PROFILE_DB
            # one schedule per batch size it is optimized for: with optimize_batch, every cell of the
            # run executes the same schedule (optimized by the first, reused by the others)
            opt_bs = opts.get("optimize_batch", cell.batch_size)
            sched = "schedules/" + safe_name(f"{cell.model}-b{opt_bs}-{cell.device}-{cell.schedule}{suffix}")
            spec["schedule_path"] = sched + ".json"
            both = [sched + ".json", sched + ".npz", sched + ".stats"]  # Graph.save: schedule + weights
            if (self.folder / spec["schedule_path"]).exists():
                inputs += [p for p in both if (self.folder / p).exists()]
            else:
                outputs += both
                timeout += plan.optimize_timeout
        return Task(cell.key, spec, f"logs/{stem}.log", timeout, cell.device, plan.threads, inputs, outputs,
                    cell.nodes, group=f"{cell.model}|b{cell.batch_size}|{cell.device}", payload=cell)

    def _cell_record(self, task: Task, res: dict, started: str | None) -> dict:
        cell: Cell = task.payload
        record = self._record(cell)
        if started:
            record["started"] = started
        if cell.schedule:
            record["schedule_file"] = task.spec["schedule_path"]
        res = dict(res)
        res.pop("pid", None)
        record.update(res)
        record["log"] = task.log
        if isinstance(record.get("utilization"), dict):
            record["utilization"]["trace"] = task.spec["util_path"]
        if record.get("node") is not None and not record.get("node_env"):
            record["node_env"] = node_env_path(record["node"]) if self.executor.name != "local" else ENV_FILE
        if record.get("status") in ("ok", "wrong") and record.get("median_ms"):
            bs = cell.batch_size
            record["throughput"] = bs * 1000.0 / record["median_ms"]
            record["throughput_p10"] = bs * 1000.0 / record["p90_ms"]  # slow samples -> low throughput
            record["throughput_p90"] = bs * 1000.0 / record["p10_ms"]
        record.setdefault("status", "failed")
        record["finished"] = _now()
        return record


def ref_file(model: str, batch_size: int, ext: str = "npy") -> str:
    """Run-folder-relative path of a reference output (``npy``), its input (``input.npy``) or meta."""
    return f"refs/{safe_name(f'{model}-b{batch_size}')}.{ext}"


def util_file(cell: Cell) -> str:
    """Run-folder-relative path of a cell's utilization trace (``sample_utilization``)."""
    return f"util/{cell.file_stem}.json"


def node_env_path(node: str) -> str:
    return f"nodes/{safe_name(node)}/env.json"


def busy_warnings() -> list[str]:
    """What makes timings noisy before the sweep starts (pyperf checks the same)."""
    out = []
    cores = usable_cores()
    try:
        load1 = os.getloadavg()[0]
        if load1 >= 0.75 * cores:
            out.append(f"the machine is busy (load average {load1:.1f} on {cores} cores): timings will be noisy")
    except OSError:
        pass
    return out


def describe(record: dict) -> str:
    """One line of rich markup for a finished cell (names and reasons escaped)."""
    head = term(f"{record['model']} b{record['batch_size']} {record.get('label') or record['framework']}", False)
    if record["status"] in ("ok", "wrong"):
        check = record.get("check") or {}
        mark = ("output ok" if record["status"] == "ok" else
                f"[red]WRONG OUTPUT[/] ({term(check.get('reason', '?'), False)})")
        if (record.get("independent_check") or {}).get("ran") is False:
            mark += f" [yellow](oracle only: {term(record['independent_check'].get('reason', '?'), False)})[/]"
        return f"{head}: {record['median_ms']:.3f} ms (±{record['std_ms']:.3f}), {mark}"
    color = "yellow" if record["status"] == "skipped" else "red"
    return f"{head}: [{color}]{term(record['status'])}[/]: {term(record.get('reason', ''), False)}"


def check_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise InputError(f"cannot write to {folder}: {e.strerror or e}") from e


def default_run_name() -> str:
    return _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def latest_run(root: Path = Path("runs")) -> Path | None:
    runs = [p for p in root.glob("*") if (p / PLAN_FILE).exists()] if root.is_dir() else []
    return max(runs, key=lambda p: (p / PLAN_FILE).stat().st_mtime) if runs else None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _npy_ok(path: Path) -> bool:
    """A readable .npy file (header and size), e.g. not truncated by a crash or edited by hand."""
    import numpy as np

    try:
        np.load(path, mmap_mode="r")
        return True
    except (OSError, ValueError):
        return False


def _read_json(path: Path, on_problem=None) -> dict | None:
    """A JSON object from ``path``; None if absent or corrupt (reported through ``on_problem``)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        problem = f"{type(e).__name__}: {str(e)[:80]}"
    else:
        if isinstance(data, dict):
            return data
        problem = f"not a JSON object ({type(data).__name__})"
    if on_problem:
        on_problem(f"{path}: corrupt ({problem})")
    return None

