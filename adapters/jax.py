"""The ``jax-xla`` adapter: the IOS graph as a JAX function compiled by ``jax.jit`` (XLA: its own
fusion, layout assignment and, on a GPU, its own choice of cuDNN/cuBLAS calls and generated kernels).

The graph is walked once (``ios_core.lowering.lower``) into a function ``forward(params, x)`` of
``jax.numpy``/``jax.lax`` operations: convolutions are ``lax.conv_general_dilated`` (NCHW/OIHW,
explicit padding, groups, dilation), pools ``lax.reduce_window`` (max pads with -inf; averages sum
then divide by the window size, or by the input positions of each window when padding is not
counted), resizes a gather (nearest) or two small matrix products (bilinear), linear layers a
matrix product. The weights are arguments (``params``, placed on the device once at build), not
constants baked into the program, as a JAX user writes a model. Input and output are NCHW
float32, like the oracle; XLA picks the layouts inside.

fp32 strict: ``jax_default_matmul_precision`` is set to ``highest`` and every convolution and
matrix product asks for ``lax.Precision.HIGHEST`` (on a GPU: no TF32), recorded in
``info["matmul_precision"]`` and ``info["tf32"]``. ``precision`` bf16/fp16 (a sweep's reduced-precision
cell): the params and the input in ``jnp.bfloat16``/``jnp.float16``, as a JAX user writes it, each
operation at its default precision; the output comes back as float32. What the program computes in is
read back from the compiled HLO (:func:`hlo_compute_precision`: the element type of its convolutions and
matrix products, cuDNN/cuBLAS calls included), never assumed: XLA's CPU backend turns bf16 convolutions
and dots into f32 ones, so a CPU bf16 build reports fp32 and its table declares bf16 "no" there.
Calls are asynchronous; ``sync`` waits with
``block_until_ready`` on the last output, so the shared measurement times each call to
completion.

Threads on the CPU: XLA's CPU runtime sizes its pool (threads named ``tf_XLAEigen``) from the
process's CPU affinity mask when JAX first creates its backends, and reads ``XLA_FLAGS`` then; so
before any backend exists the budget of N threads is set as ``--xla_cpu_multi_thread_eigen`` and
``intra_op_parallelism_threads=N`` and, where N is below the mask, the mask is narrowed to its
first N cores (JAX's own advice for limiting its threads); recorded in ``info`` (``xla_flags``,
``intra_op_threads``, ``pinned_cores``, ``xla_pool_threads``: the pool as counted). A build in a
process whose backends already exist cannot change them and says so in ``info["threads_note"]``
(the harness runs each cell in its own process). On ``cuda`` JAX's allocator does not preallocate most of the GPU
(``XLA_PYTHON_CLIENT_PREALLOCATE=false`` unless the user set it), so its memory figures are its
own. JAX is imported only when this adapter is checked or built.
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time

import numpy as np

from ios_core.ir import ActivationMap, Graph, Node, OpVisitor
from ios_core.lowering import Primitives, lower
from ios_core.measurement.threads import pool_record, resolve_threads

from .base import Adapter, Compiled, OpTime, ProfilerMissing, median_per_name, per_call_ms, write_chrome_trace
from .build_cache import open_cache

# Every IR activation kind (ios_core.ir.activations) in one table: name -> f(jax, x, alpha, beta);
# alpha/beta parametrize leaky_relu (slope), hardsigmoid (clip(alpha * x + beta, 0, 1)) and clip.
ACTIVATIONS: ActivationMap = ActivationMap("jax", {
    "identity": lambda j, x, a, b: x,
    "relu": lambda j, x, a, b: j.nn.relu(x),
    "sigmoid": lambda j, x, a, b: j.nn.sigmoid(x),
    "tanh": lambda j, x, a, b: j.numpy.tanh(x),
    "relu6": lambda j, x, a, b: j.numpy.clip(x, 0.0, 6.0),
    "hardswish": lambda j, x, a, b: x * j.numpy.clip(x + 3.0, 0.0, 6.0) * (1.0 / 6.0),
    "silu": lambda j, x, a, b: j.nn.silu(x),
    "gelu": lambda j, x, a, b: j.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda j, x, a, b: j.nn.gelu(x, approximate=True),
    "leaky_relu": lambda j, x, a, b: j.numpy.where(x >= 0, x, x * a),
    "hardsigmoid": lambda j, x, a, b: j.numpy.clip(x * a + b, 0.0, 1.0),
    "clip": lambda j, x, a, b: j.numpy.clip(x, a, b),
})

PREALLOCATE_ENV = "XLA_PYTHON_CLIENT_PREALLOCATE"


def _jax():
    import jax

    return jax


def _backends_exist(jax) -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # a private module moved: assume they exist (nothing is then claimed)
        return True


def _configure(threads: int | None) -> dict:
    """Set what XLA reads when its backends are created (thread budget, GPU preallocation), before
    any exists; returns what was set, or why it could not be."""
    jax = _jax()
    info: dict = {}
    if _backends_exist(jax):
        have = os.environ.get("XLA_FLAGS", "")
        info["xla_flags"] = have or "default"
        if threads is not None and f"intra_op_parallelism_threads={threads}" not in have:
            info["threads_note"] = (f"JAX's backends already existed in this process (XLA_FLAGS {have or 'unset'!r}): "
                                    f"the budget of {threads} threads was not applied")
        return info
    if threads is not None:
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
                 if not f.startswith(("--xla_cpu_multi_thread_eigen", "intra_op_parallelism_threads"))]
        flags += [f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'}",
                  f"intra_op_parallelism_threads={threads}"]
        os.environ["XLA_FLAGS"] = " ".join(flags)
        # XLA sizes its CPU pool (threads "tf_XLAEigen") from the affinity mask, whatever the flags
        # say: a budget below the mask is the first N cores of it, for the threads created from here
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if 0 < threads < len(cores):
            os.sched_setaffinity(0, cores[:threads])
            info["pinned_cores"] = cores[:threads]
    os.environ.setdefault(PREALLOCATE_ENV, "false")
    info["xla_flags"] = os.environ.get("XLA_FLAGS") or "default"
    return info


def _pool_threads() -> int | None:
    """How many threads XLA's CPU pool has (Linux: threads named ``tf_XLAEigen``), or None."""
    try:
        tasks = os.listdir("/proc/self/task")
        return sum(1 for t in tasks if open(f"/proc/self/task/{t}/comm").read().strip() == "tf_XLAEigen")
    except OSError:
        return None


def _device(jax, device: str):
    return jax.devices("gpu" if device.startswith("cuda") else "cpu")[0]


class JaxEmitter(OpVisitor):
    """Each operator's JAX operations (``visit(op, x, params)``, NCHW) and the arrays it reads
    (``arrays_<type>(op)``: weights and small constants), one pair of methods per type in one
    class. ``arrays(graph)`` gives them all, once, as numpy; during tracing they come back as
    ``params`` (device arrays)."""

    ACTIVATIONS = ACTIVATIONS

    def __init__(self, jax, strict: bool = True):
        self.jax, self.jnp, self.lax = jax, jax.numpy, jax.lax
        # fp32: HIGHEST (no TF32); a reduced-precision build: each operation's default, as users run it
        self.hi = jax.lax.Precision.HIGHEST if strict else jax.lax.Precision.DEFAULT

    @classmethod
    def arrays(cls, graph: Graph) -> dict[str, tuple]:
        """Each operator's arrays, from its type's ``arrays_<type>`` method (found as ``visit`` finds
        ``visit_<type>``, aliases included); a type without one, or one returning None, has none."""
        out: dict[str, tuple] = {}
        for op in graph.operators():
            method = getattr(cls, "arrays_" + cls.ALIASES.get(op.TYPE, op.TYPE), None)
            got = method(op) if method is not None else None
            if got is not None:
                out[op.name] = tuple(np.ascontiguousarray(a, dtype=np.float32) for a in got)
        return out

    @staticmethod
    def arrays_conv(op: Node):
        return op.weight, op.bias

    @staticmethod
    def arrays_linear(op: Node):
        return np.ascontiguousarray(op.weight.T), op.bias

    @staticmethod
    def arrays_affine(op: Node):
        view = (1, *op.channel_shape)
        return op.weight.reshape(view), op.bias.reshape(view)

    @staticmethod
    def arrays_layernorm(op: Node):
        return op.weight, op.bias

    @staticmethod
    def arrays_dense(op: Node):
        return np.ascontiguousarray(op.weight.T), op.bias

    @staticmethod
    def arrays_constant(op: Node):
        return (op.weight,)

    @staticmethod
    def arrays_prepend(op: Node):
        return (op.weight[None],)

    @staticmethod
    def arrays_resize(op: Node):
        return (op.interpolation(0), op.interpolation(1)) if op.mode == "bilinear" else None

    @staticmethod
    def arrays_pool(op: Node):
        if op.pool_type == "avg" and not op.count_include_pad:  # 1 / input positions of each window
            return ((1.0 / op.input_counts())[None, None],)
        return None

    def _act(self, name: str, x, alpha: float = 0.0, beta: float = 0.0):
        return ACTIVATIONS[name](self.jax, x, alpha, beta)

    def visit_conv(self, op: Node, x, params):
        w, b = params[op.name]
        top, left, bottom, right = op.pads
        y = self.lax.conv_general_dilated(x, w, tuple(op.stride), [(top, bottom), (left, right)],
                                          rhs_dilation=tuple(op.dilation), feature_group_count=op.groups,
                                          dimension_numbers=("NCHW", "OIHW", "NCHW"), precision=self.hi)
        return self._act(op.act, y + b[None, :, None, None])

    def visit_pool(self, op: Node, x, params):
        jnp, lax = self.jnp, self.lax
        if op.pool_type == "global_avg":
            return jnp.mean(x, axis=(2, 3), keepdims=True)
        if op.pool_type == "global_max":
            return jnp.max(x, axis=(2, 3), keepdims=True)
        top, left, bottom, right = op.pads
        window, strides = (1, 1, *op.kernel), (1, 1, *op.stride)
        padding = ((0, 0), (0, 0), (top, bottom), (left, right))
        if op.pool_type == "max":  # padding takes the init value: -inf never wins
            return lax.reduce_window(x, jnp.array(-jnp.inf, x.dtype), lax.max, window, strides, padding)
        sums = lax.reduce_window(x, jnp.array(0.0, x.dtype), lax.add, window, strides, padding)
        if op.count_include_pad:  # the IR's average counts the padding (cuDNN INCLUDE_PADDING)
            return sums * (1.0 / (op.kernel[0] * op.kernel[1]))
        return sums * params[op.name][0]  # over the input positions of each window only

    def visit_identity(self, op: Node, x, params):
        return x

    def visit_relu(self, op: Node, x, params):
        return self._act("relu", x)

    def visit_activation(self, op: Node, x, params):
        return self._act(op.act_type, x, op.alpha, op.beta)

    def visit_affine(self, op: Node, x, params):
        scale, shift = params[op.name]
        return self._act(op.act, x * scale + shift)

    def visit_shuffle(self, op: Node, x, params):
        c, h, w = op.input_shape
        g = op.groups
        return self.jnp.swapaxes(x.reshape(-1, g, c // g, h, w), 1, 2).reshape(-1, c, h, w)

    def visit_resize(self, op: Node, x, params):
        jnp = self.jnp
        if op.mode == "nearest":  # source pixel floor(i * in / out), as PyTorch's nearest
            _, h, w = op.input_shape
            rows = (np.arange(op.size[0]) * h) // op.size[0]
            cols = (np.arange(op.size[1]) * w) // op.size[1]
            return jnp.take(jnp.take(x, rows, axis=2), cols, axis=3)
        a_h, a_w = params[op.name]  # (out, in) bilinear weights per axis
        y = jnp.einsum("ih,nchw->nciw", a_h, x, precision=self.hi)
        return jnp.einsum("jw,nciw->ncij", a_w, y, precision=self.hi)

    def visit_flatten(self, op: Node, x, params):
        return x.reshape(x.shape[0], -1, 1, 1)

    def visit_linear(self, op: Node, x, params):
        w_t, b = params[op.name]
        y = self.jnp.matmul(x.reshape(x.shape[0], -1), w_t, precision=self.hi) + b
        return self._act(op.act, y).reshape(x.shape[0], -1, 1, 1)

    # ---- general tensors (ios_core.ir.tensor_nodes) ---------------------------------------------------
    def visit_matmul(self, op: Node, x, params):
        return self.jnp.matmul(x[0], x[1], precision=self.hi)

    def visit_softmax(self, op: Node, x, params):
        return self.jax.nn.softmax(x, axis=op.dim + 1)

    def visit_l2norm(self, op: Node, x, params):
        jnp = self.jnp
        norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=op.dim + 1, keepdims=True))
        return x / jnp.maximum(norm, op.eps)

    def visit_layernorm(self, op: Node, x, params):
        jnp = self.jnp
        w, b = params[op.name]
        axes = tuple(range(x.ndim - op.axes, x.ndim))
        mean = jnp.mean(x, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
        return (x - mean) * self.lax.rsqrt(var + op.eps) * w + b

    def visit_dense(self, op: Node, x, params):
        w_t, b = params[op.name]
        return self._act(op.act, self.jnp.matmul(x, w_t, precision=self.hi) + b)

    def visit_reshape(self, op: Node, x, params):
        return x.reshape(x.shape[0], *op.shape)

    def visit_transpose(self, op: Node, x, params):
        return self.jnp.transpose(x, (0, *(p + 1 for p in op.perm)))

    def visit_constant(self, op: Node, x, params):
        (c,) = params[op.name]
        return x * c if op.op_type == "mul" else x + c

    def visit_prepend(self, op: Node, x, params):
        (rows,) = params[op.name]
        rows = self.jnp.broadcast_to(rows, (x.shape[0], *rows.shape[1:])).astype(x.dtype)
        return self.jnp.concatenate([rows, x], axis=1)


def to_function(graph: Graph, scopes: bool = False, precision: str = "fp32"):
    """``(forward, params)``: the graph as a pure function ``forward(params, x)`` of NCHW input, and
    its arrays (numpy, in ``precision``'s dtype: :data:`DTYPES`) to pass as ``params``; ``x`` in that
    dtype too. ``jax.jit(forward)`` compiles it.
    ``scopes``: each IR operator's operations (its input composition included) under
    ``jax.named_scope("ios_op<i>")`` (:func:`operator_scopes`), which XLA keeps in each HLO
    instruction's ``op_name`` metadata (a profiling build; the traced program is otherwise the same)."""
    jax = _jax()
    jnp = jax.numpy
    dtype = _dtype(precision)
    emitter = JaxEmitter(jax, strict=precision == "fp32")
    prims = Primitives(
        slice_channels=lambda t, b, e: t[:, b:e],
        add=lambda ts: functools.reduce(jnp.add, ts),  # a 1x1 value broadcasts over a feature map
        mul=lambda ts: functools.reduce(jnp.multiply, ts),
        concat=lambda ts: jnp.concatenate(ts, axis=1),
    )
    names = list(operator_scopes(graph)) if scopes else []
    at = {"i": 0}

    def scoped(fn):  # the walk composes operator i's input, then emits it, in graph.operators() order
        def run(*args):
            with jax.named_scope(names[at["i"]]):
                return fn(*args)
        return run

    if scopes:
        prims = Primitives(scoped(prims.slice_channels), scoped(prims.add), scoped(prims.mul), scoped(prims.concat))

    def emit(op, t, params):
        if not scopes:
            return emitter.visit(op, t, params)
        out = scoped(emitter.visit)(op, t, params)
        at["i"] += 1
        return out

    def forward(params, x):
        at["i"] = 0
        return lower(graph, x, prims, lambda op, t: emit(op, t, params))

    arrays = {k: tuple(a.astype(dtype) for a in v) for k, v in JaxEmitter.arrays(graph).items()}
    return forward, arrays


DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the sweep's precision -> jnp dtype
_HLO_TYPES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "f64": "fp64"}
# an instruction's result type and what it is: a convolution, a dot, or a library call doing either
_HLO_COMPUTE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*\(?(\w+)\[[^\n]*?\s(convolution|dot|custom-call)\(")
_LIBRARY_CALL = re.compile(r'custom_call_target="[^"]*(?:conv|gemm|matmul)[^"]*"', re.IGNORECASE)


def _dtype(precision: str):
    import jax.numpy as jnp

    if precision not in DTYPES:
        raise ValueError(f"precision {precision!r}: jax-xla builds {', '.join(DTYPES)}")
    return np.dtype(getattr(jnp, DTYPES[precision]))


def hlo_compute_precision(hlo_text: str) -> str:
    """What a compiled HLO module computes its convolutions and matrix products in (the engine's own
    view, after XLA's passes): the element type of every ``convolution``/``dot`` instruction and of
    every convolution or GEMM library call (cuDNN, cuBLAS, oneDNN custom calls; the first element of
    a tuple result) -> ``fp32``/``bf16``/``fp16`` when they all agree, ``mixed (...)`` when not,
    ``fp32`` when there is none (nothing to show a reduced precision, so a reduced-precision cell fails)."""
    seen = set()
    for line in hlo_text.splitlines():
        m = _HLO_COMPUTE.match(line)
        if m and (m.group(2) != "custom-call" or _LIBRARY_CALL.search(line)):
            seen.add(_HLO_TYPES.get(m.group(1), m.group(1)))
    if not seen:
        return "fp32"
    return seen.pop() if len(seen) == 1 else f"mixed ({', '.join(sorted(seen))})"


def operator_scopes(graph: Graph) -> dict[str, str]:
    """The name scope of each IR operator under ``to_function(scopes=True)`` -> its name (indices:
    an IR name may hold characters that would break an HLO ``op_name`` path)."""
    return {f"ios_op{i}": op.name for i, op in enumerate(graph.operators())}


CALL = "ios-bench:call"  # the trace annotation around each profiled call
_CALLED = re.compile(r"\b(?:calls|to_apply|body|condition)=%?([\w.\-]+)|branch_computations=\{([^}]*)\}")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s*\(.*\{\s*$")
_OP_NAME = re.compile(r'op_name="([^"]*)"')


def hlo_scopes(hlo_text: str) -> dict[str, set[str]]:
    """Per HLO instruction of the compiled module's text (a thunk runs one, named after it), the
    ``ios_op<i>`` scopes in its ``op_name`` metadata and in the computations it calls (a fusion's
    instructions), so a fused kernel names every operator it holds."""
    own: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    members: dict[str, list[str]] = {}
    comp = None
    for line in hlo_text.splitlines():
        c = _COMPUTATION.match(line)
        if c and "=" not in line.split("(", 1)[0]:
            comp = c.group(1)
            members.setdefault(comp, [])
            continue
        m = _INSTRUCTION.match(line)
        if not m:
            continue
        name = m.group(1)
        if comp is not None:
            members[comp].append(name)
        own[name] = {s for op_name in _OP_NAME.findall(line) for s in re.findall(r"(?:^|/)(ios_op\d+)(?=/|$)", op_name)}
        calls[name] = {g.strip().lstrip("%") for a, b in _CALLED.findall(line) for g in ([a] if a else b.split(","))}

    def scopes(name: str, seen: set[str]) -> set[str]:
        if name in seen:
            return set()
        seen.add(name)
        out = set(own.get(name, ()))
        for comp_name in calls.get(name, ()):
            for member in members.get(comp_name, ()):
                out |= scopes(member, seen)
        return out

    return {name: scopes(name, set()) for name in own}


def trace_events(path: str):
    """Every timed event of a JAX trace file (XSpace): ``(name, plane, line, start_us, duration_us)``,
    for :func:`adapters.base.write_chrome_trace`."""
    data = _jax().profiler.ProfileData.from_file(path)
    for plane in data.planes:
        for line in plane.lines:
            for e in line.events:
                yield e.name, plane.name, line.name, e.start_ns / 1e3, e.duration_ns / 1e3


def trace_rows(path: str, hlo: dict[str, set[str]], scopes: dict[str, str], gpu: bool = False) -> list[OpTime]:
    """Per HLO instruction the trace's thunk events ran (an ``hlo_op`` stat), the median time (ms)
    over the :data:`CALL` annotations they fall in; its sources are the IR operators of its scopes
    (none: counted "fused, unmapped"). A trace without such events: each call's whole time as one
    unmapped row.

    ``gpu`` (a cuda build): an instruction has a host event (its launch, on a host plane) and its
    kernels (on a ``/device:GPU`` plane), both with its ``hlo_op``; one after the other they would
    add the launch to the kernel's time. Only the GPU planes' events count there (refused when
    they have none: the launches are not the instructions' time)."""
    jax = _jax()
    data = jax.profiler.ProfileData.from_file(path)
    events = []
    for plane in data.planes:
        on_gpu = plane.name.startswith("/device:GPU")
        for line in plane.lines:
            for e in line.events:
                events.append((e.name, e.start_ns, e.start_ns + e.duration_ns, dict(e.stats).get("hlo_op"), on_gpu))
    windows = sorted((s, t) for name, s, t, _, _ in events if name == CALL)
    if not windows:
        raise ProfilerMissing(f"JAX's trace has no '{CALL}' annotation")
    timed = [(str(op), s, t) for _, s, t, op, on_gpu in events if op is not None and (on_gpu or not gpu)]
    if gpu and not timed:
        raise ProfilerMissing("JAX's trace has no GPU kernel event with its HLO instruction: the host's launch "
                              "events are not the instructions' time on a GPU")
    # an instruction's thunk events on every plane and thread, its wall time counted once (ns)
    calls = per_call_ms(windows, timed, 1e6)
    if not any(calls):  # no per-thunk events: the compiled program as one unmapped row
        whole = [{"jit(forward)": (t - s) / 1e6} for s, t in windows]
        return [OpTime(n, ms, (), "compiled function") for n, ms in median_per_name(whole).items()]
    return [OpTime(op, ms, tuple(sorted({scopes[s] for s in hlo.get(op, ()) if s in scopes})), "hlo")
            for op, ms in median_per_name(calls).items()]


class JaxCompiled(Compiled):
    def __init__(self, fn, params, device, shape: tuple[int, ...], info: dict, scopes: dict[str, str] | None = None,
                 dtype=np.float32):
        super().__init__(info)
        self.fn, self.params, self.dev, self.shape = fn, params, device, tuple(shape)
        self.dtype = np.dtype(dtype)  # the input's (bf16/fp16 for a reduced-precision build), cast in prepare
        self.scopes = dict(scopes or {})  # name scope -> IR operator (a profiling build)
        self._calls = threading.local()  # each caller thread's last output (requests in flight share the program)
        self.gpu = getattr(device, "platform", "cpu") in ("gpu", "cuda")  # a jax device: "cpu", "gpu"/"cuda"

    def prepare(self, x: np.ndarray):
        jax = _jax()
        if tuple(np.shape(x)) != self.shape:  # jit would silently compile again for another shape
            raise ValueError(f"jax-xla was built for input {self.shape}, got {tuple(np.shape(x))}")
        t = jax.device_put(np.ascontiguousarray(np.asarray(x, np.float32).astype(self.dtype, copy=False)), self.dev)
        t.block_until_ready()
        return t

    @property
    def _last(self):
        return getattr(self._calls, "out", None)

    def execute(self, prepared):
        self._calls.out = out = self.fn(self.params, prepared)
        return out

    def finish(self, out) -> np.ndarray:
        return np.array(out, dtype=np.float32, copy=True)

    def sync(self) -> None:
        if self._last is not None:
            self._last.block_until_ready()

    def profile(self, x, warmup=3, repeat=10, trace=None):
        """JAX's profiler (``jax.profiler`` trace, XSpace): the compiled program's thunk events of
        each timed call (a ``TraceAnnotation`` :data:`CALL`, the call waited on inside it), median
        per HLO instruction over the calls; an instruction whose ``op_name`` metadata (or its fused
        computation's) holds the scope ``ios_op<i>`` (build option ``scopes=True``) has that
        operator as its source, several for a fusion across operators, none for what XLA added
        (a weight's layout change): "fused, unmapped". ``trace``: the trace's events (every plane
        and thread) kept there as a Chrome trace (:func:`trace_events`)."""
        import glob
        import tempfile

        from ios_core.measurement.gpu import time_calls

        jax = _jax()
        prepared = self.prepare(x)
        for _ in range(warmup):
            self.execute(prepared)
        self.sync()
        try:
            hlo = hlo_scopes(self.fn.lower(self.params, prepared).compile().as_text())
        except Exception as e:
            raise ProfilerMissing(f"the compiled HLO could not be read: {type(e).__name__}: {e}") from e

        def call():
            with jax.profiler.TraceAnnotation(CALL):
                out = self.execute(prepared)
                out.block_until_ready()
            return out

        with tempfile.TemporaryDirectory(prefix="ios-bench-jax-profile-") as logdir:
            try:
                jax.profiler.start_trace(logdir)
            except Exception as e:  # another trace running, no profiler in this jaxlib
                raise ProfilerMissing(f"JAX's profiler did not start: {type(e).__name__}: {e}") from e
            try:
                # the clock of the cell's unprofiled calls: the profiler's cost compares one clock with itself
                m = time_calls(call, self.sync, "cuda" if self.gpu else "cpu", warmup=0, repeat=repeat)
            finally:
                jax.profiler.stop_trace()
            files = glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)
            if not files:
                raise ProfilerMissing("JAX's profiler wrote no trace")
            if trace is not None:
                write_chrome_trace(trace, trace_events(files[0]))
            return trace_rows(files[0], hlo, self.scopes, gpu=self.gpu), m

    def device_memory(self) -> dict | None:
        """The JAX allocator's own view of this device (bytes): in use now and at its peak."""
        try:
            stats = self.dev.memory_stats() or {}
        except Exception:
            return None
        out = {k: int(stats[k]) for k in ("peak_bytes_in_use", "bytes_in_use", "bytes_limit") if k in stats}
        return ({"allocator": "jax (XLA BFC)", "peak_bytes": out.get("peak_bytes_in_use"), **out}
                if out else None)


class JaxXLA(Adapter):
    def available(self, device: str = "cpu") -> str | None:
        reason = super().available(device)
        if reason is not None or not device.startswith("cuda"):
            return reason
        try:
            jax = _jax()
            _configure(None)
            jax.devices("gpu")
        except Exception as e:  # no CUDA plugin, no driver, no GPU
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            return f"JAX {jax.__version__} sees no GPU ({first})"
        return None

    def version(self) -> str | None:
        try:
            from importlib.metadata import version

            return version("jax")
        except Exception:
            return None

    def profile_options(self) -> dict:
        return {"scopes": True}

    def _build(self, graph, batch_size, device, threads, cache_dir=None, scopes=False, precision="fp32"):
        """``cache_dir``: XLA's persistent compilation cache kept there across rounds (every
        compilation cached; ``adapters.build_cache``: checked before the build, rebuilt when
        foreign). JAX reads it once per process: set before the process's first compilation.
        ``precision`` bf16/fp16: params and input in that dtype; ``info["precision"]`` is read back
        from the compiled HLO (:func:`hlo_compute_precision`)."""
        on_gpu = device.startswith("cuda")
        n = resolve_threads(threads)
        info = {"threads": n, **_configure(None if on_gpu else n)}
        jax = _jax()
        jax.config.update("jax_default_matmul_precision", "highest")
        dev = _device(jax, device)  # finds the backend, compiles nothing: the cache is set before the first compilation
        # keyed by the versions (jax and jaxlib) and, on a GPU, the GPU's kind
        cache = open_cache(cache_dir, "jax", f"{jax.__version__} jaxlib {_jaxlib_version()}",
                           dev.device_kind if on_gpu else None)
        if cache is not None:
            jax.config.update("jax_compilation_cache_dir", str(cache.dir))
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        strict = precision == "fp32"
        info.update(framework_version=jax.__version__, jaxlib_version=_jaxlib_version(), device_kind=dev.device_kind,
                    platform=dev.platform, layout="NCHW (XLA assigns layouts inside)",
                    matmul_precision="highest" if strict else "default", tf32=False if on_gpu and strict else None)
        if not on_gpu and "threads_note" not in info:
            info["intra_op_threads"] = n
            info["cpu_affinity"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
            info["xla_pool_threads"] = _pool_threads()
            info["thread_pools"] = pool_record(xla_cpu=(info["xla_pool_threads"], "XLA_FLAGS "
                                               "intra_op_parallelism_threads and the affinity mask's first cores; "
                                               "threads named tf_XLAEigen, counted"))
        if on_gpu:
            info[PREALLOCATE_ENV.lower()] = os.environ.get(PREALLOCATE_ENV, "default")
        t0 = time.perf_counter()
        forward, arrays = to_function(graph, scopes=bool(scopes), precision=precision)
        dtype = _dtype(precision)
        params = jax.device_put(arrays, dev)
        fn = jax.jit(forward)
        shape = (batch_size, *graph.input_shape)
        x = jax.device_put(np.zeros(shape, dtype), dev)
        fn(params, x).block_until_ready()  # traces and compiles
        if precision != "fp32":  # what the compiled program computes in, read back from its HLO
            info["precision"] = hlo_compute_precision(fn.lower(params, x).compile().as_text())
        if info.get("precision", "fp32") != precision:
            info["precision_note"] = f"params and input in {dtype.name}; the compiled HLO's convolutions and dots " \
                                     f"are {info['precision']}"
        t1 = time.perf_counter()
        fn(params, x).block_until_ready()  # a second call: no compilation lands in the timed region
        info["compile_seconds"] = t1 - t0
        info["second_call_seconds"] = time.perf_counter() - t1
        if cache is not None:
            cache.seal()
            info.update(cache.info())
        if scopes:
            info["profiling"] = "one jax.named_scope per IR operator"
        return JaxCompiled(fn, params, dev, shape, {k: v for k, v in info.items() if v is not None},
                           operator_scopes(graph) if scopes else None, dtype)


def _jaxlib_version() -> str | None:
    try:
        import jaxlib

        return jaxlib.__version__
    except Exception:
        return None


CPU_BF16 = ("no: XLA's CPU backend computes bf16 convolutions and dot products in f32 (params and input in "
            "jnp.bfloat16 compile to f32 convolutions in the HLO, read back), so bf16 there is storage only")
GPU_HALF = ("params and input as jnp.{} on the GPU, read back from the compiled HLO (written for it, not yet run "
            "on a GPU in this project)")

JAX_XLA = JaxXLA(
    name="jax-xla",
    description="JAX jit (XLA: its own fusion and layouts), NCHW, weights as arguments; fp32 (matmul precision "
                "highest, no TF32 on cuda)",
    requires=("jax",),
    devices=("cpu", "cuda"),
    tolerance=1e-3,
    mode="jax.jit (XLA)",
    precision_table={"cpu": {"bf16": CPU_BF16}, "cuda": {p: GPU_HALF.format(DTYPES[p]) for p in ("fp16", "bf16")}},
    concurrency="shared",
    concurrency_note="one jitted function, N calls in flight on it (JAX dispatches asynchronously)",
)
