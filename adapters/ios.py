"""The IOS runtime as an adapter: runs the graph as given, with its stages (a graph without
stages runs sequentially), on ``ios_core.runtime``: on ``cpu`` the kernels of the provider named
by the build option ``provider`` (``torch`` by default; ``onnxruntime``, ``openvino``); on ``cuda``
the CUDA executor (CuPy streams, cuDNN Frontend convolutions), by default the whole schedule
captured into one CUDA graph and replayed (build option ``cuda_graph``, true by default on
``cuda``; ``cuda_graph=false`` is the variant launching every kernel from Python at each run).
The record's ``execution`` says which ran. A CPU cell on ONNX Runtime or OpenVINO kernels imports
no torch (the runtime keeps its values in numpy arrays there: ``ios_core.runtime.tensors``), except an
int8 cell on OpenVINO: its quantizer, NNCF, imports torch when it is installed. On the CPU the
build option ``precision`` (bf16, int8: what the provider offers, :meth:`IOSAdapter.precisions`)
compiles every piece at it (docs/precision.md, "IOS at a reduced precision on the CPU")."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from ios_core.ir import Graph
from ios_core.measurement.threads import pool_record
from ios_core.runtime import Runtime, make_runtime

from .base import (
    REFUSED,
    Adapter,
    Compiled,
    OpTime,
    ProfilerMissing,
    median_per_name,
    precision_reason,
    write_chrome_trace,
)


class IOSCompiled(Compiled):
    def __init__(self, runtime: Runtime, info: dict):
        super().__init__(info)
        self.runtime = runtime
        self.cuda = str(runtime.device).startswith("cuda")

    def prepare(self, x):
        return self.runtime.prepare(x)

    def execute(self, prepared):
        return self.runtime.execute(prepared)

    def finish(self, out):
        if self.cuda:
            self.runtime.sync()
            return self.runtime.dev.read(out, self.runtime._stream0)
        return self.runtime.finish(out)

    def sync(self) -> None:
        if self.cuda:
            self.runtime.sync()

    def timer(self):
        return self.runtime.timer() if self.cuda else None

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """The runtime's per-stage profile (``Runtime.measure(profile_stages=True)``): one row per
        stage (median over the samples), its sources the operators of its groups (several: a
        group the stage ran at once). A build with ``timeline=True`` (``profile_options``) also gives
        ``meta["timeline"]``: one further call's stages per worker (``Runtime.timeline``), kept as a
        Chrome trace at ``trace`` when given."""
        if self.cuda:
            raise ProfilerMissing("per-stage figures on cuda: `ios-bench profile --device cuda` without --frameworks")
        m = self.runtime.measure(warmup=warmup, number=1, repeat=repeat, profile_stages=True, x=x)
        if getattr(self.runtime, "trace", None) is not None:  # a profiling build: one more call, its timeline
            m.meta["timeline"] = self.runtime.timeline(x)
            if trace is not None:  # that call's stages per worker, as a Chrome trace
                write_chrome_trace(trace, [(f"stage {b['stage']}: " + " | ".join("+".join(g) for g in b["groups"]),
                                            "ios runtime", "caller" if b["worker"] == 0 else f"worker {b['worker']}",
                                            1000 * b["start_ms"], 1000 * (b["end_ms"] - b["start_ms"]))
                                           for b in m.meta["timeline"]])
        per_stage = median_per_name([{str(i): t for i, t in enumerate(sample)} for sample in m.stage_ms])
        rows = [OpTime(f"stage {i}", per_stage[str(i)], tuple(n for group in names for n in group), "stage")
                for i, names in enumerate(m.meta["stage_names"])]
        return rows, m


# what an IOS cell on cuda runs (the record's ``execution``; the report compares graph replay with
# graph replay: ``torch-compile-cudagraphs`` is the peer that replays one)
EXECUTION = {True: "CUDA graph replay", False: "kernel launches, no CUDA graph"}


@dataclass
class IOSAdapter(Adapter):
    def profile_options(self) -> dict:
        return {"timeline": True}

    def available(self, device: str = "cpu") -> str | None:
        if device not in self.devices:
            return f"{self.name} does not run on {device}"
        # torch is found, not imported: a cell on another provider's kernels never imports it
        # (the provider itself is checked when the cell is built)
        reason = None if importlib.util.find_spec("torch") is not None else "torch is not installed"
        if reason is None and device.startswith("cuda"):
            from ios_core.measurement.gpu import cuda_missing

            reason = cuda_missing()
        return reason

    def precisions(self, device: str = "cpu", provider: str | None = None) -> dict[str, str]:
        """On the CPU, per kernel provider (``ios_core.runtime.providers``: each declares how its library
        compiles a piece at each precision): ``provider``'s table, or without one each precision that
        some provider offers, its "how" naming each provider's way (refused where none offers it)."""
        if device.split(":", 1)[0] != "cpu":
            return super().precisions(device)
        from ios_core.runtime import providers

        if provider is not None:
            return {"fp32": self.fp32_how, **providers.get(provider).precisions()}
        tables = {name: providers.get(name).precisions() for name in providers.names()}
        out = {"fp32": self.fp32_how}
        for p in dict.fromkeys(p for t in tables.values() for p in t):
            hows = {name: t[p] for name, t in tables.items() if p in t}
            offered = [name for name, how in hows.items() if not how.startswith(REFUSED)]
            text = "; ".join(f"{name}: {how}" for name, how in hows.items())
            out[p] = text if offered else f"not yet: {text}"
        return out

    def precision_reason(self, precision: str, device: str = "cpu", provider: str | None = None) -> str | None:
        """Why IOS cannot give ``precision`` on ``device`` (on its kernel ``provider``, when named), or None."""
        if provider is None or device.split(":", 1)[0] != "cpu":
            return super().precision_reason(precision, device)
        return precision_reason(f"{self.name} on {provider} kernels", self.precisions(device, provider), precision,
                                device)

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None,
               max_workers: int | None = None, cuda_graph: bool | None = None, provider: str = "torch",
               timeline: bool = False, precision: str = "fp32", cache_dir=None, calibration_data=None) -> Compiled:
        """``precision`` (the cell's, on the CPU): every piece compiled at it by ``provider``'s library
        (``Runtime(precision=)``, docs/precision.md), the precision recorded the one the libraries
        report back; int8 calibrated per piece on the seeded calibration inputs' fp32 activations (or those
        of a ``--calibration-data`` folder's samples, ``calibration_data``), each
        piece's quantized model kept in the build cache (``cache_dir``, ``adapters.build_cache``:
        ``ios-int8-<provider>``) under a key of the piece and its calibration, and reused by later rounds."""
        if precision != "fp32":
            reason = self.precision_reason(precision, device, provider)
            if reason is not None:
                raise ValueError(reason)
        if device.startswith("cuda"):
            cuda_graph = True if cuda_graph is None else bool(cuda_graph)  # graph replay by default on the GPU
            # fp16/bf16: every buffer at that precision, cuDNN with float compute (ios_core.runtime.cuda_device)
            rt = make_runtime(graph, batch_size, device=device, cuda_graph=cuda_graph, precision=precision)
            info = {**rt.stats, "scheduled": graph.has_stages, "precision": rt.program.stats.get("precision", "fp32"),
                    "precision_source": "requested, not read back: the device's buffers are allocated at it and "
                                        "cuDNN's plans asked for its data type (ios_core.runtime.cuda_device); the "
                                        "engines cuDNN chose are not read",
                    "kernels": "cuDNN Frontend convolutions + CuPy kernels", "variant": f"cuda_graph={cuda_graph}",
                    "execution": EXECUTION[cuda_graph]}
            return IOSCompiled(rt, info)
        if cuda_graph:
            raise ValueError("cuda_graph=True needs device cuda")
        # timeline (a profiling build only): the runtime's tasks record their thread and clocks
        cache = None
        if precision == "int8":  # the quantized pieces are builds: kept across rounds, as the adapters' int8 models
            from ios_core.runtime import providers

            from .build_cache import open_cache

            cache = open_cache(cache_dir, f"ios-int8-{provider}", providers.get(provider).version())
        rt = Runtime(graph, batch_size, device=device, threads=threads, provider=provider, max_workers=max_workers,
                     trace=[] if timeline else None, precision=precision,
                     store=str(cache.dir) if cache is not None else None, calibration_data=calibration_data)
        if cache is not None:
            cache.seal()
        if provider == "torch":
            kernels = f"torch {rt.stats.get('provider_version') or self.version()} (oneDNN)"
        else:
            kernels = f"{provider} {rt.stats.get('provider_version')}"
        info = {**rt.stats, "scheduled": graph.has_stages, "kernels": kernels, "provider": provider}
        info.setdefault("precision", "fp32")
        if cache is not None:
            info.update(cache.info())
        info["threads"] = rt.threads
        info["thread_pools"] = pool_record(
            workers=(rt.stats.get("max_workers"), "a parallel stage's concurrent groups, at most the budget"),
            intra_op=(rt.threads, "the budget, divided among a stage's groups (ios_core.runtime.program."
                                  "group_threads)"))
        return IOSCompiled(rt, info)


IOS = IOSAdapter(name="ios", description="IOS runtime (ios_core.runtime): the graph's schedule; CPU: torch kernels, "
                 "concurrent groups on worker threads; cuda: CuPy streams + cuDNN", requires=("torch",),
                 devices=("cpu", "cuda"),
                 precision_table={  # cpu: per kernel provider (IOSAdapter.precisions)
                     "cuda": {"fp16": "cuDNN convolutions with HALF tensors and FLOAT compute (PSEUDO_HALF_CONFIG, "
                                      "tensor-core engines allowed, NCHW), our kernels in fp16 with float arithmetic, "
                                      "weights cast once at build; the search times stages at fp16 (written, not yet "
                                      "run on a GPU)",
                              "bf16": "cuDNN convolutions with BFLOAT16 tensors and FLOAT compute "
                                      "(PSEUDO_BFLOAT16_CONFIG, NCHW), our kernels in bf16 with float arithmetic, "
                                      "weights cast once at build; the search times stages at bf16 (written, not yet "
                                      "run on a GPU)"}})
