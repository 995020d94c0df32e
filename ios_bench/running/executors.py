"""Where a sweep's tasks run: the executor protocol, nodes and device targeting.

The sweep (:mod:`ios_bench.running.sweep`) owns the cell logic once: it plans the cells, builds each
worker spec and turns each worker result into a record, and it alone writes the run folder.
An executor only carries tasks to a node and brings their results back:

``LocalExecutor``  this machine, one worker process at a time (the default).
``RayExecutor``    (:mod:`ios_bench.running.fleet`) the nodes of a Ray cluster, one Ray task per cell.

A task is a worker spec (:mod:`ios_bench.running.worker`) whose file paths (keys ending in ``_path`` or
``_paths``) are relative to the run folder, the files it reads (``inputs``) and may write
(``outputs``), its log file, timeout and thread budget. The local executor resolves the paths
against the run folder; the Ray executor ships the inputs to the node, runs the same worker in a
scratch folder there and ships the outputs and the log back to the driver.

Device targeting: a device names a kind, ``cpu`` or ``cuda``, optionally with a label,
``cuda:V100`` or ``cpu:epyc``. A node offers ``cpu`` when it has CPUs and ``cuda`` when it has a
GPU; it offers ``KIND:LABEL`` when it also carries the label (see :func:`node_offers`).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.running.launch import run_worker
from ios_core.measurement.threads import usable_cores

KINDS = ("cpu", "cuda")
NAME_LABEL = "ios-bench/name"  # a node's display name (Ray label), default HOST:ID
DEVICE_LABEL = "ios-bench/device"  # comma-free device label(s) a node offers, e.g. "V100" or "epyc"


def parse_device(text: str) -> tuple[str, str | None]:
    """``cuda:V100`` -> ("cuda", "V100"); ``cpu`` -> ("cpu", None). Raises InputError."""
    kind, sep, lab = text.partition(":")
    if kind not in KINDS:
        raise InputError(f"unknown device {text!r}: the kind must be one of {', '.join(KINDS)} "
                         "(optionally with a label, e.g. cuda:V100)")
    if sep and (not lab or not all(c.isalnum() or c in "-_." for c in lab)):
        raise InputError(f"bad device label in {text!r}: use letters, digits, '-', '_' or '.'")
    return kind, (lab or None)


def device_kind(device: str) -> str:
    """The worker's device (``cpu`` or ``cuda``) for a device spec such as ``cuda:V100``."""
    return device.partition(":")[0]


@dataclass
class Host:
    """One machine (or Ray node) cells can run on."""

    id: str
    name: str
    cpus: float = 0.0
    gpus: float = 0.0
    labels: dict = field(default_factory=dict)  # Ray labels; for this machine: cpu and gpu names
    accelerators: list[str] = field(default_factory=list)  # Ray's accelerator_type:<X> resources
    any_cuda: bool = False  # the local node: let the adapters decide whether CUDA runs here

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "cpus": self.cpus, "gpus": self.gpus, "labels": self.labels,
                "accelerators": self.accelerators}


def node_offers(node: Host, device: str) -> str | None:
    """None when ``node`` can run cells of ``device``, else why not (one phrase)."""
    kind, lab = parse_device(device)
    if kind == "cpu" and node.cpus <= 0:
        return "has no CPU resource"
    if kind == "cuda" and node.gpus <= 0 and not node.any_cuda:
        return "has no GPU"
    if lab is None:
        return None
    want = lab.lower()
    offered = {a.lower() for a in node.accelerators}
    for key, value in node.labels.items():
        if key == DEVICE_LABEL or key.endswith("accelerator-type") or key in ("cpu_model", "gpu_model"):
            offered.update(v.strip().lower() for v in str(value).split(",") if v.strip())
    if want in offered or any(want in o for o in offered if key_is_model(o)):
        return None
    return f"carries no label {lab!r}"


def key_is_model(name: str) -> bool:
    """Long model strings (a CPU or GPU product name) match a label as a substring."""
    return " " in name


@dataclass
class Task:
    """One worker run: a probe, or a cell. Paths in ``spec`` are relative to the run folder."""

    key: str
    spec: dict
    log: str  # relative to the run folder
    timeout: float
    device: str  # device spec of the cell (``cuda:V100``); the worker gets its kind
    threads: int | None  # None: every CPU of the node it runs on
    inputs: list[str] = field(default_factory=list)  # files the worker reads (relative)
    outputs: list[str] = field(default_factory=list)  # files it may write, besides its result (relative)
    nodes: list[str] | None = None  # ids of the nodes that may run it (None: any that offers the device)
    group: str = ""  # tasks of one group prefer one node (one table row compares like with like)
    payload: object = None  # the caller's own data (the cell), handed back with the result


def path_keys(spec: dict) -> list[str]:
    return [k for k in spec if k.endswith("_path") or k.endswith("_paths")]


def resolve_spec(spec: dict, root: Path) -> dict:
    """Copy of ``spec`` with every path made absolute against ``root``."""
    out = dict(spec)
    for k in path_keys(spec):
        v = spec[k]
        if v is None:
            continue
        out[k] = [str(root / p) for p in v] if isinstance(v, list) else str(root / v)
    return out


Done = Callable[[Task, dict], None]
Starting = Callable[[Task], None]
Observe = Callable[[], dict]


class Executor:
    """Protocol: ``open`` (connect, list the nodes), ``probe`` one node, ``run`` tasks, ``close``.

    ``run(tasks, done)`` calls ``done(task, result)`` once per task as each finishes, in the
    caller's thread; ``result`` is the worker's result plus ``node`` / ``node_id`` (where it ran)
    and ``threads``. A task the executor could not complete anywhere (its node was lost and no
    other node can take it) is not reported: ``run`` returns those tasks, to be run on --resume.
    """

    name = "executor"
    nodes: list[Host]

    def open(self, folder: Path, say: Callable[[str], None]) -> list[Host]:
        raise NotImplementedError

    def probe(self, tasks: list[Task]) -> list[dict]:
        """Run ``tasks`` now (probes, reference outputs) and return their results in order."""
        raise NotImplementedError

    def run(self, tasks: list[Task], done: Done, starting: Starting | None = None,
            observe: Observe | None = None) -> list[Task]:
        """``starting(task)`` is told as each task starts; ``observe()`` (clock readings,
        ``clocks.ClockLock.observe``) is read before and after each task where the executor runs
        it on this machine, into the result's ``clocks``."""
        raise NotImplementedError

    def node_env(self, node: Host) -> dict | None:
        """That node's environment (envinfo.collect), when it differs from the driver's."""
        return None

    def close(self) -> None:
        pass

    def match(self, device: str) -> tuple[list[Host], dict[str, str]]:
        """(nodes that offer ``device``, {node name: why not} for the others)."""
        ok, why = [], {}
        for n in self.nodes:
            reason = node_offers(n, device)
            if reason is None:
                ok.append(n)
            else:
                why[n.name] = reason
        return ok, why


class LocalExecutor(Executor):
    """Every task on this machine, one worker process at a time, in the order given."""

    name = "local"

    def __init__(self):
        self.folder = Path(".")

    def open(self, folder: Path, say: Callable[[str], None]) -> list[Host]:

        from ios_bench.machine.envinfo import cpu_info, gpu_info

        self.folder = Path(folder)
        gpus = gpu_info()
        labels = {"cpu_model": cpu_info().get("model") or ""}
        if isinstance(gpus, list) and gpus:
            labels["gpu_model"] = ",".join(str(g.get("name", "")) for g in gpus)
        cpus = usable_cores()
        self.nodes = [Host("local", platform.node() or "localhost", float(cpus),
                           float(len(gpus)) if isinstance(gpus, list) else 0.0, labels, any_cuda=True)]
        return self.nodes

    def _run(self, task: Task, observe: Observe | None = None) -> dict:
        spec = resolve_spec(task.spec, self.folder)
        before = observe() if observe else None
        res = run_worker(spec, task.timeout, self.folder / task.log, task.threads)
        if before is not None:
            after = observe()
            res["clocks"] = {**{f"{k}_before": v for k, v in before.items()},
                             **{f"{k}_after": v for k, v in after.items()}}
        node = self.nodes[0]
        res.update(node=node.name, node_id=node.id, threads=task.threads)
        return res

    def probe(self, tasks: list[Task]) -> list[dict]:
        return [self._run(t) for t in tasks]

    def run(self, tasks: list[Task], done: Done, starting: Starting | None = None,
            observe: Observe | None = None) -> list[Task]:
        for t in tasks:
            if starting:
                starting(t)
            done(t, self._run(t, observe))
        return []


def wait_until(pred: Callable[[], bool], timeout: float, step: float = 0.2) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if pred():
            return True
        time.sleep(step)
    return pred()
