"""TVM adapters: the IOS graph as a Relax module, compiled for the host CPU and run on the Relax VM.

Two adapters:

* ``tvm`` (:data:`DEFAULT`): the graph is written directly with Relax's ``BlockBuilder``
  (one Relax op per IR operation, weights bound as constants) and compiled with the default
  Relax pipeline TVM uses for ``llvm`` targets (``relax.get_default_pipeline(target)``:
  legalization to TIR, constant folding, operator fusion, then lowering) without any tuning.
* ``tvm-tuned`` (:data:`TUNED`): the same module, its fused TIR functions tuned with
  MetaSchedule for the same target. Records go to a persistent JSON database under
  ``runs/tvm_db/<target-hash>/<model>_b<batch>/`` (option ``db=``); tasks that already have
  records there are not tuned again, so a second build with the same database tunes nothing.

Build options (``adapter.build(graph, batch, threads=..., **options)``):

``target``        a TVM target string or dict (default: the host, ``llvm -mcpu=<host cpu>
                  -num-cores <threads>``).
``trials_per_task`` (tvm-tuned) trials per task (default :data:`DEFAULT_TRIALS_PER_TASK`).
``trials``        (tvm-tuned) budget over all tasks tuned in this build (default
                  ``trials_per_task x tasks``); each scheduler round gives every task
                  ``trials / tasks`` trials (at most 64), so a small budget still covers all tasks.
``cache_dir``     (tvm, tvm-cudnn) the shared build cache (``adapters.build_cache``; default
                  ``IOS_BENCH_BUILD_CACHE``, set by the harness): the compiled module is kept there under
                  a key of the module, its weights and the build's settings, and a later round (a fresh
                  process) loads it instead of compiling (``adapters.tvm_cache``).
``db``            (tvm-tuned) the database folder.
``retune``        (tvm-tuned) tune every task even if the database has records for it.
``cost_model``    (tvm-tuned) ``xgb`` when xgboost is importable, else ``random``.
``strategy``      (tvm-tuned) ``evolutionary`` with xgb, else ``replay-trace``.
``num_trials_per_iter``, ``seed``: passed to MetaSchedule.

``compiled.info`` records the tvm version, target, threads, precision (fp32; fp16 on cuda: ``to_fp16``), build seconds
and, for tvm-tuned, tuning seconds (separate from build), the database path, ``tuned_now``
(tasks tuned in this build) and ``tasks``: one row per task (name, weight, trials in the
database, best latency in ms, tuned now?) like the task-scheduler table of TVM's tutorials.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path

import numpy as np

from ios_core.atomic import atomic_write_json
from ios_core.ir import ActivationMap, Graph, OpVisitor
from ios_core.ir.tensor_nodes import TENSOR_TYPES
from ios_core.lowering import Primitives, lower
from ios_core.measurement.threads import pool_record, resolve_threads

from . import tvm_cache, tvm_tensors
from .base import Adapter, Compiled
from .imports import absent
from .tvm_cuda import (  # noqa: F401 - TVM's CUDA toolchain (tvm_cuda.py), re-exported
    COMPILE_MODES,
    CUDA_RUNTIME_LIB,
    CUDART,
    DEFAULT_CUDA,
    PROBE_ARCH,
    TVM_CUDA_HEADERS,
    _compile_cuda,
    _target_triples,
    cuda_compile_problem,
    cuda_folder,
    cuda_folder_from,
    cuda_include_dirs,
    cuda_reason,
    cuda_runtime_problem,
    cuda_target,
    cuda_toolchain_facts,
    missing_headers,
    nvrtc_problem,
)
from .tvm_target import host_target, target_key  # noqa: F401 - the host's targets (tvm_target.py), re-exported

# A small default for a CPU sweep: about 1 s per trial here, so inception_v3 (63 tasks) tunes
# in about 8 minutes the first time and never again for the same target.
DEFAULT_TRIALS_PER_TASK = 8
DEFAULT_DB_ROOT = Path("runs") / "tvm_db"

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Graph -> Relax
# ---------------------------------------------------------------------------------------------
def to_relax(graph: Graph, batch_size: int, bind: bool = True):
    """Write ``graph`` as a Relax ``IRModule`` whose ``main(x)`` takes NCHW float32 input.

    Weights become parameters of ``main`` named after their node (``<node>.weight``,
    ``<node>.bias``); with ``bind`` they are bound as constants (``BindParams``), which is
    what is compiled. Returns ``(mod, params)`` with ``params`` the name -> array map.
    """
    import tvm
    from tvm import relax

    R = relax.op
    bb = relax.BlockBuilder()
    x_var = relax.Var("x", relax.TensorType((batch_size, *graph.input_shape), "float32"))
    weight_vars: list[relax.Var] = []
    params: dict[str, np.ndarray] = {}

    def weight(node, key: str, array: np.ndarray) -> relax.Var:
        name = f"{node.name}.{key}"
        v = relax.Var(name, relax.TensorType(array.shape, "float32"))
        weight_vars.append(v)
        params[name] = np.ascontiguousarray(array, dtype=np.float32)
        return v

    RelaxEmitter.check_handles(graph.operators())

    # The function's parameter list must be known up front: collect the weights first.
    def collect():
        for node in graph.operators():
            if node.HAS_WEIGHTS:
                for key, array in RelaxEmitter.weight_arrays(node):
                    weight(node, key, array)

    collect()
    wv = dict(zip(params, weight_vars))

    with bb.function("main", [x_var, *weight_vars]):
        with bb.dataflow():
            prims = Primitives(
                slice_channels=lambda t, b, e: bb.emit(R.strided_slice(t, axes=[1], begin=[b], end=[e])),
                add=lambda ts: functools.reduce(lambda a, t: bb.emit(R.add(a, t)), ts),
                mul=lambda ts: functools.reduce(lambda a, t: bb.emit(R.multiply(a, t)), ts),
                concat=lambda ts: bb.emit(R.concat(ts, axis=1)),
            )
            emitter = RelaxEmitter(bb, wv, batch_size)
            out = lower(graph, x_var, prims, emitter.visit)
            result = bb.emit_output(out)
        bb.emit_func_output(result)

    mod = bb.get()
    if bind:
        mod = relax.transform.BindParams("main", {k: tvm.runtime.tensor(a) for k, a in params.items()})(mod)
    return mod, params


def _hardsigmoid(em: RelaxEmitter, y, alpha: float, beta: float):
    bb, R = em.bb, em.R
    return bb.emit(R.clip(bb.emit(R.add(bb.emit(R.multiply(y, em.const(alpha))), em.const(beta))), 0.0, 1.0))


def _hardswish(em: RelaxEmitter, y):
    bb, R = em.bb, em.R
    r6 = bb.emit(R.clip(bb.emit(R.add(y, em.const(3.0))), 0.0, 6.0))
    return bb.emit(R.multiply(y, bb.emit(R.multiply(r6, em.const(1.0 / 6.0)))))


# IR activation kind (ios_core.ir.activations) -> its Relax ops: (emitter, y, alpha, beta) -> output
RELAX_ACTIVATIONS: ActivationMap = ActivationMap("tvm", {
    "identity": lambda em, y, a, b: y,
    "relu": lambda em, y, a, b: em.bb.emit(em.R.nn.relu(y)),
    "sigmoid": lambda em, y, a, b: em.bb.emit(em.R.sigmoid(y)),
    "tanh": lambda em, y, a, b: em.bb.emit(em.R.tanh(y)),
    "relu6": lambda em, y, a, b: em.bb.emit(em.R.clip(y, 0.0, 6.0)),
    "hardswish": lambda em, y, a, b: _hardswish(em, y),
    "silu": lambda em, y, a, b: em.bb.emit(em.R.nn.silu(y)),
    "gelu": lambda em, y, a, b: em.bb.emit(em.R.nn.gelu(y)),
    "gelu_tanh": lambda em, y, a, b: em.bb.emit(em.R.nn.gelu_tanh(y)),
    "leaky_relu": lambda em, y, a, b: em.bb.emit(em.R.nn.leakyrelu(y, float(a))),
    "hardsigmoid": lambda em, y, a, b: _hardsigmoid(em, y, a, b),
    "clip": lambda em, y, a, b: em.bb.emit(em.R.clip(y, float(a), float(b))),
})


class RelaxEmitter(tvm_tensors.TensorOps, OpVisitor):
    """Emits one (non-Sequential) operator on its composed input ``x`` into a Relax block
    builder: ``visit(node, x)``. ``wv`` maps ``"<node>.weight"``/``"<node>.bias"`` to the
    function's weight parameters; ``act(y, kind, alpha, beta)`` emits an activation. The
    general-tensor operators are ``tvm_tensors.TensorOps``'."""

    ACTIVATIONS = RELAX_ACTIVATIONS

    def __init__(self, bb, wv, batch_size: int):
        from tvm import relax

        self.bb, self.wv, self.batch_size, self.R, self._relax = bb, wv, batch_size, relax.op, relax

    def const(self, value):
        return self._relax.const(float(value), "float32")

    def act(self, y, kind: str, alpha: float = 0.0, beta: float = 0.0):
        return RELAX_ACTIVATIONS[kind](self, y, alpha, beta)

    @staticmethod
    def weight_arrays(node) -> tuple[tuple[str, np.ndarray], ...]:
        """A weighted node's parameters ``(key, array)`` as this emitter reads them (a general-tensor
        operator's: ``tvm_tensors.tensor_weights``), else its weight and bias (``weight_layout``)."""
        if node.TYPE in TENSOR_TYPES:
            return tvm_tensors.tensor_weights(node)
        w, b = RelaxEmitter.weight_layout(node)
        return ("weight", w), ("bias", b)

    @staticmethod
    def weight_layout(node) -> tuple[np.ndarray, np.ndarray]:
        """A weighted node's weight and bias as this emitter reads them: a linear layer's
        weight transposed (in, out: the matmul is then a plain x @ W), an affine's as
        (1, C, 1, 1) to broadcast ((1, C, 1, ...) on a general tensor); a convolution's as stored (OIHW)."""
        if node.TYPE == "linear":
            return node.weight.T, node.bias
        if node.TYPE == "affine":
            shape = (1, *node.channel_shape)
            return node.weight.reshape(shape), node.bias.reshape(shape)
        return node.weight, node.bias

    def visit_conv(self, node, x):
        R = self.R
        y = self.bb.emit(R.nn.conv2d(x, self.wv[f"{node.name}.weight"], strides=node.stride, padding=node.pads,
                                dilation=node.dilation, groups=node.groups, data_layout="NCHW",
                                kernel_layout="OIHW", out_dtype="float32"))
        bias = self.bb.emit(R.reshape(self.wv[f"{node.name}.bias"], (1, node.out_channels, 1, 1)))
        y = self.bb.emit(R.add(y, bias))
        return self.act(y, node.act)

    def visit_pool(self, node, x):
        R = self.R
        if node.pool_type == "global_avg":
            return self.bb.emit(R.mean(x, axis=[2, 3], keepdims=True))
        if node.pool_type == "global_max":
            return self.bb.emit(R.max(x, axis=[2, 3], keepdims=True))
        # padding (top, left, bottom, right), as the IR's pads
        common = dict(pool_size=node.kernel, strides=node.stride, padding=node.pads, layout="NCHW")
        if node.pool_type == "max":
            return self.bb.emit(R.nn.max_pool2d(x, **common))
        # The IR's default (like cuDNN's INCLUDE_PADDING and the oracle) counts padding in the average.
        return self.bb.emit(R.nn.avg_pool2d(x, count_include_pad=bool(node.count_include_pad), **common))

    def visit_identity(self, node, x):
        return x

    def visit_relu(self, node, x):
        return self.act(x, "relu")

    def visit_activation(self, node, x):
        return self.act(x, node.act_type, node.alpha, node.beta)

    def visit_affine(self, node, x):
        R = self.R
        y = self.bb.emit(R.multiply(x, self.wv[f"{node.name}.weight"]))
        return self.act(self.bb.emit(R.add(y, self.wv[f"{node.name}.bias"])), node.act)

    def visit_shuffle(self, node, x):
        R = self.R
        c, h, w = node.input_shape
        g = node.groups
        y = self.bb.emit(R.reshape(x, (self.batch_size, g, c // g, h, w)))
        y = self.bb.emit(R.permute_dims(y, [0, 2, 1, 3, 4]))
        return self.bb.emit(R.reshape(y, (self.batch_size, c, h, w)))

    def visit_resize(self, node, x):
        R = self.R
        if node.mode == "nearest":  # source pixel floor(i * in / out)
            return self.bb.emit(R.image.resize2d(x, size=tuple(node.size), layout="NCHW", method="nearest_neighbor",
                                            coordinate_transformation_mode="asymmetric", rounding_method="floor"))
        mode = "align_corners" if node.align_corners else "half_pixel"
        return self.bb.emit(R.image.resize2d(x, size=tuple(node.size), layout="NCHW", method="linear",
                                        coordinate_transformation_mode=mode))

    def visit_flatten(self, node, x):
        R = self.R
        c, h, w = node.output_shape
        return self.bb.emit(R.reshape(x, (self.batch_size, c, 1, 1)))

    def visit_linear(self, node, x):
        R = self.R
        flat = self.bb.emit(R.reshape(x, (self.batch_size, node.in_features)))
        y = self.bb.emit(R.matmul(flat, self.wv[f"{node.name}.weight"], out_dtype="float32"))
        y = self.bb.emit(R.add(y, self.wv[f"{node.name}.bias"]))
        y = self.act(y, node.act)
        return self.bb.emit(R.reshape(y, (self.batch_size, node.out_features, 1, 1)))


def apply(bb, node, x, wv, batch_size: int):
    """Emit one (non-Sequential) operator on its composed input ``x``."""
    return RelaxEmitter(bb, wv, batch_size).visit(node, x)


# ---------------------------------------------------------------------------------------------
# Target and threads
# ---------------------------------------------------------------------------------------------
def configure_threads(threads: int | None) -> int:
    """Make the TVM runtime use ``threads`` worker threads; returns the count in effect.

    TVM's pool reads ``TVM_NUM_THREADS`` when it first starts (by default it uses half the
    logical CPUs on x86, assuming hyper-threading); once started it can only be narrowed,
    which ``runtime.config_threadpool`` does. The harness runs each cell in a fresh process,
    so setting the variable here, before the first run, is what normally takes effect.
    """
    import tvm

    if threads is not None:
        os.environ["TVM_NUM_THREADS"] = str(int(threads))
    actual = int(tvm.runtime.num_threads())  # starts the pool if it was not started
    if threads is not None and actual != threads:
        tvm.get_global_func("runtime.config_threadpool")(1, int(threads))
        actual = int(tvm.runtime.num_threads())
        if actual != threads:
            log.warning("TVM runtime pool already started with %d threads; asked for %d", actual, threads)
    return actual


# ---------------------------------------------------------------------------------------------
# Compiled programs
# ---------------------------------------------------------------------------------------------
class TVMCompiled(Compiled):
    """A Relax VM executable: ``prepare`` copies the input into a TVM tensor (untimed),
    ``execute`` calls ``main`` (synchronous on the CPU; on CUDA ``sync`` waits for the
    device), ``finish`` copies back to numpy."""

    def __init__(self, executable, info: dict, device: str = "cpu"):
        import tvm
        from tvm import relax

        super().__init__(info)
        self.executable = executable
        self.gpu = device.startswith("cuda")
        self.device = tvm.cuda(_device_id(device)) if self.gpu else tvm.cpu(0)
        self.vm = relax.VirtualMachine(executable, self.device)
        self._main = self.vm["main"]

    def prepare(self, x: np.ndarray):
        import tvm

        return tvm.runtime.tensor(np.ascontiguousarray(x, dtype=np.float32), self.device)

    def execute(self, prepared):
        return self._main(prepared)

    def finish(self, out) -> np.ndarray:
        return out.numpy()

    def sync(self) -> None:
        if self.gpu:
            self.device.sync()


def _device_id(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


def to_fp16(mod):
    """TVM's fp16 build on cuda (issue 46): ``relax.transform.ToMixedPrecision(out_dtype="float32")``,
    Relax's form of Relay's ``ToMixedPrecision``: convolutions and matrix products take fp16 inputs
    and weights and accumulate in fp32, the ops around them follow TVM's mixed-precision rules, the
    model's input and output stay float32. Returns the module and what it computes in, read back
    from it (:func:`fp16_ops`); a module with a convolution or matrix product left in fp32 is refused."""
    from tvm import relax

    mixed = relax.transform.ToMixedPrecision(out_dtype="float32")(mod)
    ops = fp16_ops(mixed)
    if not ops["total"] or ops["fp16"] != ops["total"]:
        raise RuntimeError(f"ToMixedPrecision left {ops['total'] - ops['fp16']} of {ops['total']} convolutions and "
                           "matrix products outside fp16: refusing to call it an fp16 build")
    return mixed, ops


MIXED_OPS = ("relax.nn.conv2d", "relax.matmul")


def fp16_ops(mod) -> dict:
    """How many of ``mod``'s convolutions and matrix products (``main``) read fp16 operands:
    ``{"fp16": n, "total": m}``."""
    from tvm import relax

    n = total = 0
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            v = binding.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", None) in MIXED_OPS:
                total += 1
                dtypes = {str(getattr(getattr(a, "struct_info_", None) or getattr(a, "ty", None), "dtype", ""))
                          for a in v.args[:2]}
                n += dtypes == {"float16"}
    return {"fp16": n, "total": total}


def computes_in(ops: dict) -> str:
    """The precision a Relax module computes in, from :func:`fp16_ops` read on it: fp16 when every
    convolution and matrix product reads fp16 operands, fp32 when none does; a mix is refused."""
    if ops["total"] and ops["fp16"] == ops["total"]:
        return "fp16"
    if ops["fp16"] == 0:
        return "fp32"
    raise RuntimeError(f"{ops['fp16']} of {ops['total']} convolutions and matrix products on fp16 operands: "
                       "a mixed module, neither fp16 nor fp32")


def _base_info(target, threads_effective: int) -> dict:
    import tvm

    return {"tvm_version": tvm.__version__, "target": str(target), "tvm_threads": threads_effective,
            "precision": "fp32"}


# apache-tvm 0.27.0.post1 was built against apache-tvm-ffi 0.1.14; with 0.1.15.post2 (which its
# ">=0.1.14.post0" requirement lets pip pick) serializing any TIR node to JSON segfaults, and
# MetaSchedule serializes every task. The untuned build never serializes and works with both.
KNOWN_BAD_FFI = ("0.1.15",)


def ffi_incompatibility() -> str | None:
    """Why MetaSchedule would crash with the installed apache-tvm-ffi, or None."""
    try:
        from importlib.metadata import version

        tvm_v, ffi_v = version("apache-tvm"), version("apache-tvm-ffi")
    except Exception:
        return None
    if tvm_v.startswith("0.27") and ffi_v.startswith(KNOWN_BAD_FFI):
        return (f"apache-tvm-ffi {ffi_v} is ABI-incompatible with apache-tvm {tvm_v} (TIR JSON serialization "
                "segfaults, MetaSchedule needs it); install apache-tvm-ffi==0.1.14.post0")
    return None


def _compile_default(mod, target):
    import tvm
    from tvm import relax

    # The Relax pipeline TVM registers for llvm targets (legalize to TIR, fold constants,
    # fuse operators, lower); the TIR side uses tvm.compile's default TIR pipeline.
    return tvm.compile(mod, target, relax_pipeline=relax.get_default_pipeline(target))


class TVMAdapter(Adapter):
    """``tvm``: the untuned default build (see the module docstring)."""

    def distribution(self) -> str:
        return "apache-tvm"

    def version(self) -> str | None:
        v = super().version()
        if v is None:
            try:
                import tvm

                return str(tvm.__version__)
            except Exception:
                return None
        return v

    def _prepare(self, graph: Graph, batch_size: int, threads: int | None, options: dict):
        n = resolve_threads(threads)  # never TVM's own default (half the logical CPUs)
        threads_effective = configure_threads(n)
        target = host_target(n, options.get("target"))
        t0 = time.perf_counter()
        mod, _ = to_relax(graph, batch_size)
        info = _base_info(target, threads_effective)
        info["precision"] = computes_in(fp16_ops(mod))  # read back (the CPU builds have no fp16 transform)
        info["thread_pools"] = pool_record(runtime=(threads_effective, "TVM_NUM_THREADS before the pool starts, "
                                                    "runtime.config_threadpool after; tvm.runtime.num_threads"))
        info["convert_seconds"] = time.perf_counter() - t0
        return mod, target, info

    def available(self, device: str = "cpu") -> str | None:
        # TVM's tvm_ffi imports torch where it is installed (DLPack): a TVM cell runs no torch, so
        # it is left out while TVM is first imported (adapters.imports; a worker checks this first)
        with absent("torch", unless="tvm"):
            reason = super().available(device)
        if reason is None and device.startswith("cuda"):
            reason = (cuda_runtime_problem() or cuda_reason(cudnn=bool(self.options.get("cudnn")))
                      or cuda_compile_problem("fp32"))
        return reason

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None, **options) -> Compiled:
        unknown = set(options) - {"target", "cudnn", "precision", "cache_dir"}
        if unknown:
            raise ValueError(f"tvm: unknown options {sorted(unknown)}; known: ['cache_dir', 'cudnn', 'precision', "
                             "'target']")
        precision = options.get("precision", "fp32")
        if precision != "fp32" and not (device.startswith("cuda") and precision == "fp16" and not options.get("cudnn")):
            raise ValueError(f"tvm: precision {precision} is built on cuda only, fp16, without cudnn")
        if precision == "fp16" and tvm_tensors.fp16_refusal(graph):
            raise ValueError(tvm_tensors.fp16_refusal(graph))
        if device.startswith("cuda"):
            cudnn = bool(options.get("cudnn"))
            target = cuda_target(options.get("target"))
            t0 = time.perf_counter()
            mod, _ = to_relax(graph, batch_size)
            mixed = None
            if precision == "fp16":
                mod, _ = to_fp16(mod)
                mixed = fp16_ops(mod)  # read back from the module compiled below, not taken from the transform's word
                if __import__("tvm").cuda(_device_id(device)).exist:  # its kernels compile when loaded there
                    problem = cuda_compile_problem("fp16")  # (available() checked fp32's needs)
                    if problem:
                        raise RuntimeError(problem)
            info = {"tvm_version": __import__("tvm").__version__, "target": str(target),
                    "precision": computes_in(fp16_ops(mod) if mixed is None else mixed),
                    "precision_source": "read back: the operand dtypes of the compiled Relax module's convolutions "
                                        "and matrix products (before TVM's lowering to kernels)",
                    "convert_seconds": time.perf_counter() - t0, "cudnn": cudnn,
                    # TVM's own kernels compute in fp32; its cuDNN offload leaves cuDNN's math mode at its
                    # default, which NVIDIA_TF32_OVERRIDE=0 (set by every GPU worker) forces to fp32
                    "tf32": False if (not cudnn or os.environ.get("NVIDIA_TF32_OVERRIDE") == "0") else None,
                    "nvidia_tf32_override": os.environ.get("NVIDIA_TF32_OVERRIDE")}
            info["pipeline"] = ("relax.get_default_pipeline(cuda)" + (" after partition_for_cudnn" if cudnn else "")
                                + (" after ToMixedPrecision(out_dtype=float32)" if mixed else ""))
            ex = self._cached(mod, batch_size, target, cudnn, options, info,
                              lambda: _compile_cuda(mod, target, cudnn),
                              tvm_cache.gpu_name(device))
            if mixed:
                info["fp16_ops"] = mixed
                info["precision_note"] = (f"ToMixedPrecision: {mixed['fp16']} of {mixed['total']} convolutions and "
                                          "matrix products on fp16 operands, fp32 accumulation")
            return TVMCompiled(ex, info, device)
        if options.get("cudnn"):
            raise ValueError("tvm: cudnn=True needs device cuda")
        mod, target, info = self._prepare(graph, batch_size, threads, options)
        info["pipeline"] = "relax.get_default_pipeline(llvm), untuned"
        info["execution_mode"] = "Relax VM, default llvm pipeline"
        ex = self._cached(mod, batch_size, target, False, options, info, lambda: _compile_default(mod, target))
        return TVMCompiled(ex, info)

    @staticmethod
    def _cached(mod, batch_size: int, target, cudnn: bool, options: dict, info: dict, compile_fn, gpu=None):
        """``compile_fn()``'s module, or the one an earlier round kept in the build cache under this
        build's key (``adapters.tvm_cache``; ``cache_dir``, else ``IOS_BENCH_BUILD_CACHE``); ``info`` gets
        compile, load and export seconds and the record's ``build_cache``."""
        from .build_cache import open_cache

        cache = open_cache(options.get("cache_dir"), tvm_cache.FRAMEWORK, tvm_cache.versions(), gpu)
        key = None if cache is None else tvm_cache.build_key(
            mod, batch_size=batch_size, precision=info["precision"], target=target, cudnn=cudnn,
            pipeline=info["pipeline"])
        ex, got = tvm_cache.compiled(cache, key, compile_fn)
        info.update(got)
        return ex


class TunedTVMAdapter(TVMAdapter):
    """``tvm-tuned``: MetaSchedule-tuned build with a persistent, reusable database."""

    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        return reason if reason is not None else ffi_incompatibility()

    def _build(self, graph: Graph, batch_size: int, device: str, threads: int | None, **options) -> Compiled:
        from tvm.s_tir import meta_schedule as ms

        unknown = set(options) - TUNED_OPTIONS
        if unknown:
            raise ValueError(f"tvm-tuned: unknown options {sorted(unknown)}; known: {sorted(TUNED_OPTIONS)}")
        mod, target, info = self._prepare(graph, batch_size, threads, options)
        db_dir = Path(options.get("db") or DEFAULT_DB_ROOT / target_key(target) / f"{_safe(graph.name)}_b{batch_size}")
        db_dir.mkdir(parents=True, exist_ok=True)
        _write_target_note(db_dir, target)
        database = ms.database.JSONDatabase(work_dir=str(db_dir))

        t0 = time.perf_counter()
        tasks = [t for t in ms.relax_integration.extract_tasks(fuse_for_tuning(mod, target), target)
                 if not t.mod.attrs or not t.mod.attrs.get("tirx.is_scheduled", False)]
        info["extract_seconds"] = time.perf_counter() - t0
        retune = bool(options.get("retune", False))
        todo = [t for t in tasks if retune or not _has_records(database, t, target)]

        per_task = int(options.get("trials_per_task", DEFAULT_TRIALS_PER_TASK))
        total = int(options.get("trials", per_task * max(len(todo), 1)))
        per_iter = int(options.get("num_trials_per_iter", max(1, min(64, per_task, total // max(len(todo), 1)))))
        cost_model = options.get("cost_model") or _default_cost_model()
        t0 = time.perf_counter()
        strategy = None
        if todo and total > 0:
            builder, runner = in_process_measurers()
            # Without a learned cost model (xgboost), evolutionary search ranks candidates by
            # random scores at a high cost per round: plain trace replay samples the same space.
            strategy = options.get("strategy") or ("evolutionary" if cost_model == "xgb" else "replay-trace")
            contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
                todo, work_dir=str(db_dir), seed=options.get("seed", 0), strategy=strategy,
                num_threads=int(threads or info["tvm_threads"]))
            ms.tune_tasks(tasks=contexts, task_weights=weights, work_dir=str(db_dir),
                          max_trials_global=total, max_trials_per_task=min(per_task, total),
                          num_trials_per_iter=per_iter,
                          builder=builder, runner=runner, database=database, cost_model=cost_model,
                          # the default list also deletes build artifacts from disk; ours live in memory
                          measure_callbacks=[ms.measure_callback.AddToDatabase(),
                                             ms.measure_callback.UpdateCostModel()])
        info["tuning_seconds"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        ex = ms.relax_integration.compile_relax(database, mod, target, params=None)
        info["compile_seconds"] = time.perf_counter() - t0

        todo_names = {t.task_name for t in todo} if total > 0 else set()
        table = task_table(database, tasks, target, todo_names)
        info.update({
            "pipeline": "MetaSchedule (relax_integration.compile_relax)",
            "database": str(db_dir),
            "trial_budget": total if todo else 0,
            "trials_per_task": per_task,
            "cost_model": cost_model,
            "search_strategy": strategy if todo and total > 0 else None,
            "tasks_total": len(tasks),
            "tuned_now": len(todo_names),
            "tasks_untuned": sum(1 for row in table if row["trials"] == 0),
            "tasks": table,
            "estimated_latency_ms": sum(row["weight"] * row["best_ms"] for row in table if row["best_ms"] is not None),
            "execution_mode": "Relax VM, MetaSchedule-tuned kernels",
            "tuning": (f"MetaSchedule: {sum(row['trials'] for row in table)} trials in the database over "
                       f"{len(tasks)} tasks ({per_task} per task asked; {total if todo else 0} run in this build, "
                       f"{sum(1 for row in table if row['trials'] == 0)} tasks untuned)"),
            "tuning_trials": sum(row["trials"] for row in table),
        })
        return TVMCompiled(ex, info)


def fuse_for_tuning(mod, target):
    """Legalize and fuse as ``compile_relax`` does before it applies the database, so that the
    extracted tasks are exactly the fused TIR functions it later looks up."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline

    with target:
        seq = tvm.transform.Sequential([
            *pipeline.library_dispatch_passes(target),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ])
        return seq(mod)


def in_process_measurers(number: int = 3, repeat: int = 1, min_repeat_ms: int = 20):
    """A MetaSchedule builder and runner that compile and time candidates in this process.

    TVM's ``LocalBuilder``/``LocalRunner`` start worker processes that each import TVM's
    tensor intrinsics (tens of CPU seconds) and kill builds after 30 s, which on a small shared
    machine fails every candidate. Here the built module stays in memory (keyed by a token
    passed as the artifact path) and is timed with ``time_evaluator`` as LocalRunner does.
    A candidate crashing the process would end the build: on CPU with MetaSchedule's own
    post-processors that is not expected.
    """
    import itertools

    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build
    from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner
    from tvm.s_tir.meta_schedule.runner.local_runner import (
        LocalRunnerFuture,
        default_alloc_argument,
        default_run_evaluator,
    )

    modules: dict[str, object] = {}
    counter = itertools.count()
    config = EvaluatorConfig(number=number, repeat=repeat, min_repeat_ms=min_repeat_ms,
                             enable_cpu_cache_flush=False)

    @derived_object
    class InProcessBuilder(PyBuilder):
        def build(self, build_inputs):
            results = []
            for inp in build_inputs:
                try:
                    rt_mod = default_build(inp.mod, inp.target, None)
                except Exception as e:  # a candidate the compiler rejects: MetaSchedule skips it
                    results.append(BuilderResult(None, f"InProcessBuilder: {type(e).__name__}: {e}"))
                    continue
                key = f"inproc:{next(counter)}"
                modules[key] = rt_mod
                results.append(BuilderResult(key, None))
            return results

    @derived_object
    class InProcessRunner(PyRunner):
        def run(self, runner_inputs):
            futures = []
            for inp in runner_inputs:
                key = str(inp.artifact_path)
                try:
                    rt_mod = modules.pop(key)
                    device = tvm.runtime.device(str(inp.device_type), 0)
                    args = default_alloc_argument(device, tuple(a.as_json() for a in inp.args_info), 1)
                    costs = default_run_evaluator(rt_mod, device, config, args)
                    futures.append(LocalRunnerFuture(res=costs, error_message=None))
                except Exception as e:
                    futures.append(LocalRunnerFuture(res=None, error_message=f"InProcessRunner: {e}"))
            return futures

    return InProcessBuilder(), InProcessRunner()


TUNED_OPTIONS = frozenset({"target", "trials", "trials_per_task", "db", "retune", "cost_model",
                           "num_trials_per_iter", "seed", "strategy"})


def _safe(name: str) -> str:
    from ios_core.names import file_part

    return file_part(name)


def _write_target_note(db_dir: Path, target) -> None:
    note = db_dir.parent / "target.json"
    if not note.exists():
        try:
            atomic_write_json(note, {"target": str(target)})
        except OSError:
            pass


def _default_cost_model() -> str:
    try:
        import xgboost  # noqa: F401

        return "xgb"
    except Exception:
        return "random"


def _has_records(database, task, target) -> bool:
    mod = task.dispatched[0]
    return bool(database.has_workload(mod) and database.get_top_k(database.commit_workload(mod), 1))


def task_table(database, tasks, target, tuned_now: set[str]) -> list[dict]:
    """One row per task: name, weight (occurrences in the model), trials recorded in the
    database (all measured candidates, failed ones included), best measured latency (ms) and
    whether this build tuned it."""
    records = database.get_all_tuning_records()
    rows = []
    for i, task in enumerate(tasks):
        mod = task.dispatched[0]
        best, trials = None, 0
        if database.has_workload(mod):
            workload = database.commit_workload(mod)
            trials = sum(1 for rec in records if rec.workload.same_as(workload))
            top = database.get_top_k(workload, 1)
            secs = [float(s) for s in top[0].run_secs] if top and top[0].run_secs else []
            best = 1000.0 * sum(secs) / len(secs) if secs else None
        rows.append({"id": i, "task": task.task_name, "weight": int(task.weight), "trials": int(trials),
                     "best_ms": best, "tuned_now": task.task_name in tuned_now})
    return rows


def format_task_table(rows: list[dict]) -> str:
    """The task-scheduler style table: ID | Name | Weight | Trials | Latency (ms) | Weighted."""
    lines = [f"{'ID':>3} | {'Name':<44} | {'Weight':>6} | {'Trials':>6} | {'Latency (ms)':>12} | {'Weighted':>9}",
             "-" * 98]
    for r in rows:
        lat = f"{r['best_ms']:.4f}" if r["best_ms"] is not None else "N/A"
        wl = f"{r['best_ms'] * r['weight']:.4f}" if r["best_ms"] is not None else "N/A"
        lines.append(f"{r['id']:>3} | {r['task'][:44]:<44} | {r['weight']:>6} | {r['trials']:>6} | {lat:>12} | {wl:>9}")
    total = sum(r["best_ms"] * r["weight"] for r in rows if r["best_ms"] is not None)
    lines.append("-" * 98)
    lines.append(f"Estimated total latency: {total:.4f} ms   Trials: {sum(r['trials'] for r in rows)}")
    return "\n".join(lines)


_REQUIRES = ("tvm",)
DEFAULT = TVMAdapter(
    name="tvm",
    description="Apache TVM (Relax), untuned: default llvm pipeline for the host CPU; target cuda on GPUs",
    requires=_REQUIRES,
    devices=("cpu", "cuda"),
    precision_table={"cuda": {"fp16": "relax.transform.ToMixedPrecision(out_dtype='float32') before the cuda "
                                      "pipeline: convolutions and matrix products on fp16 operands, fp32 accumulation "
                                      "(compiled here for target cuda without a GPU; not yet run on a GPU)",
                              "bf16": "not yet: Relax's ToMixedPrecision casts to float16 only"}},
)
CUDNN = TVMAdapter(
    name="tvm-cudnn",
    description="Apache TVM (Relax) for CUDA with convolutions offloaded to cuDNN (the paper's TVM-cuDNN)",
    requires=_REQUIRES,
    devices=("cuda",),
    options={"cudnn": True},
)
TUNED = TunedTVMAdapter(
    name="tvm-tuned",
    description="Apache TVM (Relax) tuned with MetaSchedule; persistent database under runs/tvm_db",
    requires=_REQUIRES,
)
