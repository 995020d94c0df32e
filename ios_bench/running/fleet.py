"""The Ray executor: a sweep's cells on the nodes of a Ray cluster (``ios-bench run --executor ray``);
and :func:`make_executor`, the executor ``--executor`` names (here, so that executors never imports
fleet).

Each task is one Ray task in a fresh Ray worker process (``max_calls=1``), pinned to the node the
driver chose for it (``NodeAffinitySchedulingStrategy``, hard). Inside, the task writes the files
the worker reads (reference input and output, a graph file, a stored schedule) into a scratch
folder on that node, sets CPU affinity and runs the very same worker process the local executor
runs (:func:`ios_bench.running.launch.run_worker`: timeout, crash capture, thread variables); it returns
the result, the worker's log and the files the worker wrote (a new schedule). Only the driver
writes the run folder.

Exclusive measurement: the driver keeps at most one CPU cell per node, and it asks Ray for every
CPU the node has (so no other Ray task lands there meanwhile); a CUDA cell holds one GPU (Ray sets
``CUDA_VISIBLE_DEVICES``) and one CPU, and never shares its node with a CPU cell. Ray's resources
are logical and it sets no affinity: the task pins itself to the node's first ``threads`` CPUs.

Placement: cells of one (model, batch size, device) stay on one node (the first that takes one
of them), so a row of the latency table and every speedup compares like with like. A node lost
mid-cell costs that cell only: it is retried once on another node that offers its device; when no
such node is alive the cell is left for ``--resume``; lost twice, it is stored as failed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from ios_bench.errors import InputError
from ios_bench.running.executors import (
    DEVICE_LABEL,
    NAME_LABEL,
    Done,
    Executor,
    Host,
    LocalExecutor,
    Observe,
    Starting,
    Task,
    device_kind,
    node_offers,
    resolve_spec,
)

GRACE_S = 300.0  # beyond a task's own timeout: Ray worker start, shipping files, probe imports
LOG_LIMIT = 4 << 20  # bytes of a worker log brought back
FORWARD_ENV_PREFIXES = ("IOS_BENCH_",)  # driver variables every task sees (plugins, ...)


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise InputError("--executor ray needs Ray: pip install 'ios-bench[ray]'") from e
    return ray


def _node_task(spec: dict, names: list[str], env: dict, threads: int | None, pin_cpus: bool, timeout: float,
               log: str, outputs: list[str], want_env: bool, *blobs: bytes) -> dict:
    """Runs on the node, in a fresh Ray worker process: one worker run in a scratch folder."""
    import shutil
    import tempfile

    import ray

    from ios_bench.running.launch import run_worker

    os.environ.update(env)
    tmp = Path(tempfile.mkdtemp(prefix="ios-bench-task-"))
    try:
        for rel, data in zip(names, blobs):
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        full = resolve_spec(spec, tmp)
        for rel in [*outputs, spec["result_path"], log]:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        affinity = None
        if hasattr(os, "sched_setaffinity"):
            allowed = sorted(os.sched_getaffinity(0))
            if pin_cpus and threads:
                affinity = allowed[:threads] if threads <= len(allowed) else allowed
                os.sched_setaffinity(0, affinity)  # the worker process inherits it
            else:
                affinity = allowed
        res = run_worker(full, timeout, tmp / log, threads)
        res["threads"] = threads
        res["affinity"] = affinity
        files = {rel: (tmp / rel).read_bytes() for rel in outputs if (tmp / rel).is_file()}
        try:
            data = (tmp / log).read_bytes()
            log_bytes = data[-LOG_LIMIT:]
        except OSError:
            log_bytes = b""
        from ios_bench import __file__ as code

        res["code"] = str(Path(code).resolve().parent.parent)
        out = {"result": res, "log": log_bytes, "files": files,
               "node_id": ray.get_runtime_context().get_node_id()}
        if want_env:
            from ios_bench.machine import envinfo

            out["env"] = envinfo.collect(spec.get("device", "cpu"), frameworks=False)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class RayExecutor(Executor):
    name = "ray"

    def __init__(self, address: str | None = None, threads: int | None = None, init_options: dict | None = None):
        self.address = address
        self.threads = threads  # None: every CPU of the node a cell runs on
        self.init_options = init_options or {}
        self.started = False  # this executor started Ray (and shuts it down)
        self.lost: set[str] = set()  # nodes lost during this run
        self.envs: dict[str, dict] = {}
        self.nodes: list[Host] = []
        self._blobs: dict[str, object] = {}

    # -- cluster --------------------------------------------------------------------------------
    def open(self, folder: Path, say: Callable[[str], None]) -> list[Host]:
        ray = _import_ray()
        self.folder = Path(folder)
        self.say = say
        if not ray.is_initialized():
            # nodes import ios-bench from the driver's code folder where it exists (a shared checkout),
            # else from their own installation
            root = str(Path(__file__).resolve().parents[2])
            opts = {"log_to_driver": False, "configure_logging": False,
                    "job_config": ray.job_config.JobConfig(code_search_path=[root]), **self.init_options}
            if self.address:
                why = unreachable(self.address)
                if why:
                    raise InputError(f"--ray-address {self.address}: cannot reach a Ray cluster there ({why})")
                try:
                    ray.init(address=self.address, **opts)
                except (ConnectionError, ValueError, RuntimeError) as e:
                    raise InputError(f"--ray-address {self.address}: cannot connect to a Ray cluster ({e})") from e
            else:
                opts.setdefault("include_dashboard", False)
                ray.init(address="local", **opts)
            self.started = True
        self._fn = ray.remote(max_calls=1, max_retries=0)(_node_task)
        self.nodes = self._list_nodes()
        where = self.address or "a local Ray instance"
        from rich.markup import escape

        say(escape(f"ray: {len(self.nodes)} node(s) at {where}: " + ", ".join(map(describe_node, self.nodes))))
        if not self.nodes:
            raise InputError(f"the Ray cluster at {where} has no node with a CPU or GPU")
        return self.nodes

    def _list_nodes(self) -> list[Host]:
        import ray

        out = []
        for n in ray.nodes():
            if not n.get("Alive") or n["NodeID"] in self.lost:
                continue
            res = n.get("Resources") or {}
            if res.get("CPU", 0) <= 0 and res.get("GPU", 0) <= 0:
                continue  # e.g. a head node started with --num-cpus 0
            labels = {k: v for k, v in (n.get("Labels") or {}).items() if not k.startswith("ray.io/node-id")}
            name = labels.get(NAME_LABEL) or f"{n.get('NodeManagerHostname') or n.get('NodeManagerAddress')}:" \
                                              f"{n['NodeID'][:8]}"
            accel = [k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")]
            out.append(Host(n["NodeID"], name, float(res.get("CPU", 0)), float(res.get("GPU", 0)), labels, accel))
        return out

    def _alive(self) -> dict[str, Host]:
        now = time.monotonic()
        if now - getattr(self, "_alive_at", 0.0) > 2.0:
            self._alive_at = now
            fresh = {n.id: n for n in self._list_nodes()}
            known = {n.id for n in self.nodes}
            for n in fresh.values():
                if n.id not in known:
                    self.nodes.append(n)  # joined mid-sweep: takes cells too
            self._alive_cache = fresh
        return {k: v for k, v in self._alive_cache.items() if k not in self.lost}

    def node_env(self, node: Host) -> dict | None:
        return self.envs.get(node.id)

    def close(self) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False

    # -- tasks ----------------------------------------------------------------------------------
    def _blob(self, rel: str):
        import ray

        if rel not in self._blobs:
            self._blobs[rel] = ray.put((self.folder / rel).read_bytes())
        return self._blobs[rel]

    def _threads(self, task: Task, node: Host) -> int | None:
        if task.threads:
            return task.threads
        if self.threads:
            return self.threads
        return max(1, int(node.cpus)) if node.cpus else None

    def _submit(self, task: Task, node: Host, exclusive: bool):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        kind = device_kind(task.device)
        threads = self._threads(task, node)
        spec = dict(task.spec)
        if spec.get("task") == "cell":
            spec["threads"] = threads
        opts = {"scheduling_strategy": NodeAffinitySchedulingStrategy(node.id, soft=False)}
        if not exclusive:
            opts.update(num_cpus=0)
        elif kind == "cuda":
            opts.update(num_gpus=1, num_cpus=min(1.0, node.cpus))
        else:
            opts.update(num_cpus=node.cpus)
        env = {k: v for k, v in os.environ.items() if k.startswith(FORWARD_ENV_PREFIXES)}
        want_env = spec.get("task") == "probe" and node.id not in self.envs
        return self._fn.options(**opts).remote(spec, list(task.inputs), env, threads,
                                               exclusive and kind == "cpu", task.timeout, task.log,
                                               list(task.outputs), want_env, *[self._blob(p) for p in task.inputs])

    def _collect(self, task: Task, node: Host, out: dict) -> dict:
        """Driver side: the task's files and log into the run folder, then its result."""
        from ios_core.atomic import atomic_write_bytes

        for rel, data in (out.get("files") or {}).items():
            atomic_write_bytes(self.folder / rel, data)
        atomic_write_bytes(self.folder / task.log, out.get("log") or b"")
        if out.get("env") is not None:
            self.envs[node.id] = out["env"]
        res = dict(out["result"])
        res.update(node=node.name, node_id=node.id)
        return res

    def probe(self, tasks: list[Task]) -> list[dict]:
        """Probes (pinned to their node) and reference outputs (any CPU node), all at once."""
        import ray

        alive = self._alive()
        cpu_nodes = [n for n in alive.values() if node_offers(n, "cpu") is None]
        refs = []
        for i, t in enumerate(tasks):
            if t.nodes:
                node = alive.get(t.nodes[0])
            else:
                node = cpu_nodes[i % len(cpu_nodes)] if cpu_nodes else None
            refs.append((t, node, self._submit(t, node, exclusive=False) if node else None))
        results = []
        for t, node, ref in refs:
            if ref is None:
                results.append({"status": "failed", "reason": "no alive node can run it"})
                continue
            try:
                out = ray.get(ref, timeout=t.timeout + GRACE_S)
                results.append(self._collect(t, node, out))
            except Exception as e:  # noqa: BLE001 - a lost node or Ray failure becomes this task's reason
                results.append({"status": "failed", "reason": f"on {node.name}: {_ray_reason(e)}",
                                "node": node.name, "node_id": node.id})
        return results

    def run(self, tasks: list[Task], done: Done, starting: Starting | None = None,
            observe: Observe | None = None) -> list[Task]:
        import ray

        pending = list(tasks)
        lost_on: dict[str, list[str]] = {}  # task key -> names of the nodes lost while running it
        inflight: dict = {}  # ref -> (task, node, deadline)
        # group -> node id, kept across calls: a group's later rounds (and re-runs) go to its node too
        home: dict[str, str] = self.__dict__.setdefault("_home", {})
        missing: list[Task] = []
        try:
            while pending or inflight:
                alive = self._alive()
                for t in list(pending):
                    if not any(self._eligible(t, n, lost_on) for n in alive.values()):
                        pending.remove(t)
                        missing.append(t)
                submitted = False
                for node in alive.values():
                    while True:
                        t = self._pick(pending, node, inflight, home, alive, lost_on)
                        if t is None:
                            break
                        pending.remove(t)
                        home.setdefault(t.group, node.id)
                        if starting:
                            starting(t)
                        ref = self._submit(t, node, exclusive=True)
                        inflight[ref] = (t, node, time.monotonic() + t.timeout + GRACE_S)
                        submitted = True
                if not inflight:
                    if not submitted:  # no node will take what is left (cannot happen; never spin)
                        missing.extend(pending)
                        pending.clear()
                    continue
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    t, node, _deadline = inflight.pop(ref)
                    try:
                        out = ray.get(ref)
                    except ray.exceptions.RayTaskError as e:  # our code failed on the node: the cell's record
                        done(t, {"status": "failed", "reason": f"on {node.name}: {_ray_reason(e)}",
                                 "node": node.name, "node_id": node.id})
                        continue
                    except ray.exceptions.RayError as e:  # the node (or its Ray worker) was lost
                        self._lose(node, e)
                        if isinstance(e, ray.exceptions.TaskUnschedulableError):
                            pending.insert(0, t)  # never started: not an attempt
                            continue
                        lost_on.setdefault(t.key, []).append(node.name)
                        if home.get(t.group) == node.id:
                            del home[t.group]
                        if len(lost_on[t.key]) >= 2:
                            done(t, {"status": "failed", "reason": "lost twice: its node died while it ran (" +
                                     ", ".join(lost_on[t.key]) + ")", "node": node.name, "node_id": node.id})
                        else:
                            from rich.markup import escape

                            self.say(f"[yellow]node {escape(node.name)} lost[/] ({escape(_ray_reason(e))}): "
                                     f"retrying {escape(t.key)} once on another node")
                            pending.insert(0, t)
                        continue
                    done(t, self._collect(t, node, out))
                now = time.monotonic()
                for ref, (t, node, deadline) in list(inflight.items()):
                    if now > deadline:
                        ray.cancel(ref, force=True)
                        del inflight[ref]
                        done(t, {"status": "failed", "reason": f"timeout: no answer from {node.name} after "
                                 f"{t.timeout + GRACE_S:g} s; task cancelled", "node": node.name,
                                 "node_id": node.id})
        finally:
            for ref in inflight:
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
        return missing

    def _lose(self, node: Host, error: Exception) -> None:
        self.lost.add(node.id)
        self._alive_at = 0.0

    @staticmethod
    def _eligible(t: Task, node: Host, lost_on: dict) -> bool:
        return (node_offers(node, t.device) is None and (t.nodes is None or node.id in t.nodes)
                and node.name not in lost_on.get(t.key, ()))

    def _pick(self, pending: list[Task], node: Host, inflight: dict, home: dict, alive: dict,
              lost_on: dict) -> Task | None:
        here = [t for (t, n, _d) in inflight.values() if n.id == node.id]
        if any(device_kind(t.device) == "cpu" for t in here):
            return None  # a CPU cell holds the whole node
        gpus_busy = sum(1 for t in here if device_kind(t.device) == "cuda")
        best = None
        for t in pending:
            if not self._eligible(t, node, lost_on):
                continue
            kind = device_kind(t.device)
            if kind == "cpu" and here:
                continue
            if kind == "cuda" and gpus_busy >= max(node.gpus, 1):
                continue
            h = home.get(t.group)
            if h == node.id:
                return t
            if best is None and (h is None or h not in alive or not self._eligible(t, alive[h], lost_on)):
                best = t
        return best


def unreachable(address: str, timeout: float = 5.0) -> str | None:
    """Why ``HOST:PORT`` takes no TCP connection (ray.init would wait minutes), or None."""
    import socket

    if address in ("auto", "local") or "://" in address:
        return None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return "expected HOST:PORT"
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        return e.strerror or str(e) or type(e).__name__
    return None


def describe_node(n: Host) -> str:
    parts = [f"{n.cpus:g} CPU"] + ([f"{n.gpus:g} GPU"] if n.gpus else [])
    parts += [f"{k}={v}" for k, v in n.labels.items()]
    return f"{n.name} ({', '.join(parts)})"


def _ray_reason(e: Exception) -> str:
    cause = getattr(e, "cause", None)  # RayTaskError: the exception raised on the node
    if isinstance(cause, BaseException):
        e = cause
    text = str(e).strip().splitlines()
    first = next((line for line in text if line.strip()), "")
    return f"{type(e).__name__}: {first[:300]}" if first else type(e).__name__


def make_executor(name: str, address: str | None = None, **options) -> Executor:
    if name == "local":
        if address:
            raise InputError("--ray-address needs --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address=address)
    raise InputError(f"unknown executor {name!r}; choose from: local, ray")


__all__ = ["RayExecutor", "DEVICE_LABEL", "NAME_LABEL", "make_executor"]
