"""The CUDA executor: the device-independent plan (:mod:`ios_core.runtime.plan`) run on CuPy
streams with cuDNN Frontend convolutions and CuPy kernels.

    rt = make_runtime(graph, batch_size, device="cuda")                  # streams + events
    rt = make_runtime(graph, batch_size, device="cuda", cuda_graph=True)   # one CUDA graph, replayed

How a plan becomes a GPU program:

* **Memory.** Every buffer of the plan (each operator's output, each concatenation) lives in
  one preallocated device arena, placed by the plan's arena pass over all buffer kinds; the
  input has its own buffer. A producer whose output is a term of a concatenation writes
  straight into its channel slice (the plan's ``into`` mode), so concatenations cost nothing
  at run time. Composed inputs that no kernel can read as a strided view (a sum of slices
  feeding a convolution) are built in a per-stream scratch buffer. Nothing is allocated
  while running, so a run can be captured.
* **Kernels** (:mod:`ios_core.runtime.cuda_kernels`), built once at construction: a cuDNN
  Frontend graph per convolution (fused conv+bias+activation where cuDNN has the activation,
  or the convolution alone and our bias+activation kernel; every plan built, timed, the
  fastest kept, cached per geometry on the device; recorded in ``stats``), our CUDA C kernels
  for the rest; per-stream cuDNN handles and workspaces. :class:`CudaLaunchers` translates
  every attribute of a node into the device's explicit parameters (:class:`ConvSpec`,
  :class:`PoolSpec`, activation parameters); every IR op type runs. The general tensors of
  vision transformers and ConvNeXt (dense, matmul between activations, layer norm, softmax,
  transpose, reshape, constants, the class token: :mod:`ios_core.runtime.cuda_tensor_kernels`)
  read and write per-sample contiguous views; a matrix product's two operands are two views
  (a sum of values composed into the stream's scratch first). Those kernels ran on the tests'
  fake device and were compiled by NVRTC; not yet on a GPU.
* **Alignment.** cuDNN's tensors are declared 16-byte aligned. A convolution whose input is a
  channel slice at a misaligned offset reads a copy in the stream's scratch; one whose output
  slice is misaligned writes into an aligned buffer of its own, copied into the slice
  (``stats["aligned_copies"]``). Offsets come from the plan (:meth:`CudaProgram.offset_bytes`).
* **Ordering.** Weights are uploaded on the legacy stream, which non-blocking streams do not
  wait for: the device is synchronized once the program is built.
* **Streams** (:mod:`ios_core.runtime.streams`): one stream per concurrent group; a task
  waits on an event only for a dependency on another stream (data produced there, or arena
  storage still being read there); no device-wide synchronisation inside a run. Stream 0
  forks the run and joins it.
* **CUDA graph** (``cuda_graph=True``): the command list runs once and the device is
  synchronized (kernel compilation and loading, cuBLAS and cuDNN initialization happen then),
  then it is captured from stream 0 (``Stream.begin_capture``/``end_capture``, other streams
  joining through the fork events) and each run is one ``Graph.launch`` -- the technique of
  Nimble and Opara. An error inside the capture is raised as itself.

The executor is written once over a small device interface (:class:`CupyDevice`); the tests
run the same executor on a fake device (torch CPU kernels, streams as queues executed in
random CUDA-legal orders) against the oracle. The CuPy device ran once, on an H200
(docs/results/gpu-h200-2026-11-26/: every doctor path against the oracle, CUDA graph included).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ios_core.ir import NODE_TYPES, OpVisitor
from ios_core.runtime.base import check_graph, check_input
from ios_core.runtime.cuda_kernels import ACT_CODES
from ios_core.runtime.passes import make_plan
from ios_core.runtime.plan import CONCAT, F32, RuntimePlan, ValueRef
from ios_core.runtime.program import graph_stages
from ios_core.runtime.streams import JOIN, START, Region, StreamTask, bind, plan_streams

ARENA, INPUT, SCRATCH0 = 0, 1, 2  # storage ids for the stream plan (scratch: one per stream)
ALIGNMENT = 16  # bytes: every pointer handed to cuDNN (its tensors are declared 16-byte aligned)


@dataclass(frozen=True)
class ConvSpec:
    """A convolution as the device runs it: ``pads`` (top, left, bottom, right)."""

    out_channels: int
    kernel: tuple
    stride: tuple
    pads: tuple
    dilation: tuple
    groups: int
    act: str


@dataclass(frozen=True)
class PoolSpec:
    """A pool as the device runs it: ``kind`` max/avg/global_max/global_avg, ``pads`` (top,
    left, bottom, right), ``count_include_pad`` for averages."""

    kind: str
    kernel: tuple
    stride: tuple
    pads: tuple
    count_include_pad: bool


class CudaProgram:
    """A plan turned into launches on ``device``'s streams (see the module docstring)."""

    def __init__(self, plan: RuntimePlan, device, cuda_graph: bool = False, random_weights: bool = False,
                 seed: int = 0, weights: RandomWeights | None = None, task_marks: bool = False):
        """``task_marks``: a timing event recorded on its stream before and after every task, inside
        the replay too (``device.task_marks``; read with :meth:`task_times`): where each task ran
        in the whole program (benchmarks/gpu_fidelity.py). Off in every cell and stage program."""
        self.plan = plan
        self.dev = device
        # bytes per element of the device's buffers (fp32 4, fp16/bf16 2): the plan places buffers in
        # elements (its byte offsets / F32), the device's precision sets their size in memory
        self.itemsize = int(getattr(device, "itemsize", F32))
        self._random_weights = random_weights
        # random weights come from a bank shared by every program built with it (the measured cost
        # model's stage programs: drawn once per graph, not once per stage); else a bank of our own
        self._weights = weights if weights is not None else (RandomWeights(seed) if random_weights else None)
        self.arena = device.empty(max(plan.arena_bytes // F32, 1))
        self.inputs: dict[str, int] = {}
        self._views: dict[int, object] = {}
        for b in plan.buffers:
            if b.kind == "input":
                self.inputs[b.node.name] = b.index
                self._views[b.index] = device.empty_shaped(b.shape)
            else:
                if b.offset is None:
                    raise ValueError(f"buffer {b.index} ({b.kind}) was not placed in the arena")
                self._views[b.index] = device.view(self.arena, b.offset // F32, b.shape)
        # 1. the tasks and the memory each touches; 2. streams and events for them
        steps = [[[st for st in g.steps if st.runs] for g in stage.groups] for stage in plan.stages]
        stages = [[[StreamTask(st.op.name, *self._regions(st, si, gi), payload=st) for st in g]
                   for gi, g in enumerate(grs)] for si, grs in enumerate(steps)]
        in_regions = [self._region(plan.values[x.name]) for x in plan.externals]
        out_regions = [self._region(plan.value(o)) for o in plan.outputs]
        sp = self.streams = plan_streams(stages, in_regions, out_regions)
        # 3. per-stream scratch (composed inputs), handles, workspaces; 4. the kernels
        need = [0] * sp.streams
        for i, task in enumerate(sp.tasks):
            need[sp.stream_of[i]] = max(need[sp.stream_of[i]], self._scratch_elems(task.payload))
        self.scratch = [device.empty(max(1, k)) for k in need]
        self.stream_objs = [device.stream(s) for s in range(sp.streams)]
        self.events = [device.event() for _ in range(sp.events)]
        device.bind_streams(self.stream_objs)
        self.launchers = CudaLaunchers(device, self._weight)
        self._private: list = []  # aligned output buffers of convolutions writing into misaligned slices
        self.aligned_copies = 0  # convolutions whose output goes through an aligned buffer (then copied)
        self.kernels = [self._kernel(task.payload, sp.stream_of[i]) for i, task in enumerate(sp.tasks)]
        self._owned = device.finalize(sp.streams)  # workspaces; what the kernels reference stays alive with us
        device.sync_device()  # weight uploads (legacy stream) complete before any kernel on our non-blocking streams
        self.marks = device.task_marks(len(sp.tasks), self.stream_objs) if task_marks else None
        self.calls = bind(sp, self.stream_objs, self.events, self._launch)
        self.stats = {**sp.stats, **device.stats(), "arena_bytes": self.device_bytes(plan.arena_bytes),
                      "cuda_graph": bool(cuda_graph),
                      "scratch_bytes": sum(need) * self.itemsize, "aligned_copies": self.aligned_copies}
        self.graph = None
        if cuda_graph:
            # run once first: lazy compilation, module loading and library initialization must not
            # fall inside the capture
            for call in self.calls:
                call()
            device.sync_device()
            self.graph = device.capture(self.stream_objs[0], self.calls)

    # ---- running -------------------------------------------------------------------------------
    def input_view(self, name: str):
        return self._views[self.inputs[name]]

    def value_view(self, ref: ValueRef):
        v = self._views[ref.buffer]
        return v if ref.whole else self.dev.narrow(v, ref.begin, ref.end)

    def run(self) -> None:
        """Enqueue one run (asynchronous; complete when stream 0 is)."""
        if self.graph is not None:
            self.dev.replay(self.graph, self.stream_objs[0])
            return
        for call in self.calls:
            call()

    def _launch(self, s: int, ti: int):
        if ti in (START, JOIN):
            return None
        launch = self.dev.launcher(self.stream_objs[s], s, self.kernels[ti], self.streams.tasks[ti].name)
        if self.marks is None:
            return launch
        begin, end = self.marks.begin(s, ti), self.marks.end(s, ti)

        def marked():
            begin()
            launch()
            end()
        return marked

    def task_times(self) -> list[tuple[float, float]]:
        """After a run (stream 0 synchronized): each task's (begin, end) in ms from the first task's
        begin, on the device's clock (needs ``task_marks=True``)."""
        if self.marks is None:
            raise ValueError("this program was built without task_marks")
        return self.marks.read()

    # ---- memory ---------------------------------------------------------------------------------
    def device_bytes(self, plan_bytes: int) -> int:
        """A size the plan gives in bytes of fp32 elements (its offsets and sizes count 4 bytes an
        element) as bytes of the device's buffers (fp16/bf16: 2 an element)."""
        return int(plan_bytes) // F32 * self.itemsize

    def _region(self, ref: ValueRef) -> Region:
        b = self.plan.buffers[ref.buffer]
        storage, start = (INPUT + 1000 * ref.buffer, 0) if b.kind == "input" else (ARENA, b.offset // F32)
        size = int(np.prod(b.shape))
        return Region(storage, start, start + size, view=(storage, start, b.shape), c0=ref.begin, c1=ref.end)

    def offset_bytes(self, ref: ValueRef) -> int:
        """Where ``ref``'s first element lies from the start of its allocation (the arena, or the
        input's own buffer; both start aligned), in bytes at the device's precision: the buffer's
        arena offset plus the channel slice's start."""
        b = self.plan.buffers[ref.buffer]
        base = 0 if b.kind == "input" else b.offset // F32
        return (base + ref.begin * int(np.prod(b.shape[2:]))) * self.itemsize

    def _needs_scratch(self, step) -> bool:
        if step.mode == CONCAT or step.op.COMPOSED:
            return False
        if step.op.OPERANDS:  # an operand that is a sum of values is composed first
            return any(len(t.slices) > 1 for t in step.inputs.terms)
        single = step.inputs.single
        if single is None:
            return True
        ref = self.plan.read(single)
        if step.op.TYPE == "linear" and not ref.whole:
            return True
        # cuDNN's input pointer must be aligned: a misaligned channel slice is copied first
        return step.op.TYPE == "conv" and self.offset_bytes(ref) % ALIGNMENT != 0

    def _scratch_elems(self, step) -> int:
        if not self._needs_scratch(step):
            return 0
        if step.op.OPERANDS:
            return sum(self._operand_elems(t) for t in step.inputs.terms if len(t.slices) > 1)
        return self.plan.batch_size * step.inputs.channels * int(np.prod(step.op.input_shape[1:]))

    def _operand_elems(self, term) -> int:
        return self.plan.batch_size * term.channels * int(np.prod(term.slices[0].source.output_shape[1:]))

    def _operands(self, comp, stream: int):
        """An operator of operands (a matrix product): each operand's view, and the launches composing
        those that are sums of values into the stream's scratch, one after another."""
        views, prep, at = [], [], 0
        for t in comp.terms:
            if len(t.slices) == 1:
                views.append(self.value_view(self.plan.read(t.slices[0])))
                continue
            shape = (self.plan.batch_size, t.channels, *t.slices[0].source.output_shape[1:])
            v = self.dev.view(self.scratch[stream], at, shape)
            at += self._operand_elems(t)
            prep.append(self._term_into(t, comp.op, v))
            views.append(v)
        return tuple(views), prep

    def _regions(self, step, si: int, gi: int) -> tuple[tuple[Region, ...], tuple[Region, ...]]:
        reads = [self._region(self.plan.read(sl)) for sl in step.inputs.slices]
        if step.mode == CONCAT:  # only the terms not written in place are read
            reads = [self._region(self.plan.read(sl)) for ti, t in enumerate(step.inputs.terms)
                     if ti not in step.in_place_terms for sl in t.slices]
        writes = [self._region(step.out)]
        if self._needs_scratch(step):
            # private to the group's stream: groups sharing a stream run in order on it
            scratch = Region(SCRATCH0 + 1000 * (si + 1) + gi, 0, self._scratch_elems(step))
            writes.append(scratch)
            reads.append(scratch)
        return tuple(reads), tuple(writes)

    # ---- kernels --------------------------------------------------------------------------------
    def _kernel(self, step, stream: int):
        dev, op, comp = self.dev, step.op, step.inputs
        out = self.value_view(step.out)
        if step.mode == CONCAT:
            full = self._views[step.out.buffer]
            return _seq([self._term_into(t, comp.op, dev.narrow(full, t.offset, t.offset + t.channels))
                         for ti, t in enumerate(comp.terms) if ti not in step.in_place_terms])
        if op.COMPOSED:
            return self._compose_into(comp, out)
        prep = []
        if op.OPERANDS:
            x, prep = self._operands(comp, stream)
        elif self._needs_scratch(step):
            shape = (self.plan.batch_size, comp.channels, *op.input_shape[1:])
            x = dev.view(self.scratch[stream], 0, shape)
            prep.append(self._compose_into(comp, x))
        else:
            x = self.value_view(self.plan.read(comp.single))
        if op.TYPE == "conv" and self.offset_bytes(step.out) % ALIGNMENT != 0:
            # cuDNN writes into an aligned buffer of the step's own; a copy puts it in its slice
            tmp = dev.empty_shaped(tuple(out.shape))
            self._private.append(tmp)
            self.aligned_copies += 1
            return _seq(prep + [self.launchers.visit(op, x, tmp, stream), dev.combine([tmp], "add", out)])
        return _seq(prep + [self.launchers.visit(op, x, out, stream)])

    def _weight(self, op, attr: str, shape) -> np.ndarray:
        if self._random_weights:
            return self._weights(op, attr, shape)
        arr = getattr(op, attr, None)
        if arr is None:
            raise ValueError(f"node {op.name!r} has no weights: call graph.init_weights(seed)")
        return np.ascontiguousarray(arr, dtype=np.float32)

    def _term_into(self, term, how: str, dst):
        return self.dev.combine([self.value_view(self.plan.read(sl)) for sl in term.slices], how, dst)

    def _compose_into(self, comp, dst):
        """Write ``comp`` (terms combined, concatenated on channels) into ``dst``."""
        if len(comp.terms) == 1:
            return self._term_into(comp.terms[0], comp.op, dst)
        return _seq([self._term_into(t, comp.op, self.dev.narrow(dst, t.offset, t.offset + t.channels))
                     for t in comp.terms])


class RandomWeights:
    """Seeded random fp32 weights for programs built to be timed, not to compute anything: each
    (operator name, attribute, shape) is drawn once and the same array is handed to every program
    that asks (the measured cost model builds one program per stage, thousands per graph, and
    drawing each stage's weights anew cost more than timing it). ``draws`` counts the arrays
    drawn."""

    def __init__(self, seed: int = 0, scale: float = 0.05):
        self._rng = np.random.default_rng(seed)
        self.scale = scale
        self._arrays: dict[tuple, np.ndarray] = {}
        self.draws = 0

    def __call__(self, op, attr: str, shape) -> np.ndarray:
        key = (op.name, attr, tuple(int(d) for d in shape))
        arr = self._arrays.get(key)
        if arr is None:
            arr = (self._rng.standard_normal(key[2]) * self.scale).astype(np.float32)
            arr.setflags(write=False)  # shared: a device may upload it once (CupyDevice.upload)
            self._arrays[key] = arr
            self.draws += 1
        return arr


class CudaLaunchers(OpVisitor):
    """The launch of one operator on the device: ``visit(op, x, out, stream)`` with ``x`` its
    input view and ``out`` its output view. Every attribute of the node is translated into the
    device's explicit parameters here (``ConvSpec``, ``PoolSpec``, activation parameters):
    the device never sees the node. Identities and elements are not launched: their composed
    input is written straight into their output (``Node.COMPOSED``)."""

    ALIASES = {"relu": "activation"}
    REFUSES = {t: "composed into its output by the program (CudaProgram._compose_into), never launched"
               for t, cls in NODE_TYPES.items() if cls.COMPOSED}
    ACTIVATIONS = ACT_CODES  # the device's kernels switch on these codes

    def __init__(self, device, weight):
        self.dev, self.weight = device, weight

    def visit_conv(self, op, x, out, stream):
        spec = ConvSpec(op.out_channels, tuple(op.kernel), tuple(op.stride), tuple(op.pads), tuple(op.dilation),
                        op.groups, op.act)
        return self.dev.conv(x, out, stream, self.weight(op, "weight", op.weight_shape),
                             self.weight(op, "bias", (op.out_channels,)), spec)

    def visit_pool(self, op, x, out, stream):
        spec = PoolSpec(op.pool_type, tuple(op.kernel), tuple(op.stride), tuple(op.pads), bool(op.count_include_pad))
        return self.dev.pool(x, out, spec)

    def visit_activation(self, op, x, out, stream):  # any rank: the device takes ios_strided past 4 axes
        return self.dev.activation(x, out, op.act_type, float(getattr(op, "alpha", 0.0)),
                                   float(getattr(op, "beta", 0.0)))

    def visit_affine(self, op, x, out, stream):
        return self.dev.affine(x, out, self.weight(op, "weight", op.weight_shape),
                               self.weight(op, "bias", op.bias_shape), op.act)

    def visit_shuffle(self, op, x, out, stream):
        return self.dev.shuffle(x, out, op.groups)

    def visit_resize(self, op, x, out, stream):
        return self.dev.resize(x, out, op.mode, bool(op.align_corners))

    def visit_flatten(self, op, x, out, stream):
        return self.dev.flatten(x, out)

    def visit_linear(self, op, x, out, stream):
        return self.dev.linear(x, out, stream, self.weight(op, "weight", op.weight_shape),
                               self.weight(op, "bias", (op.out_features,)), op.act)

    # ---- general tensors (issue 56): every view per-sample contiguous (cuda_tensor_kernels) --------------
    def visit_dense(self, op, x, out, stream):
        return self.dev.dense(x, out, stream, self.weight(op, "weight", op.weight_shape),
                              self.weight(op, "bias", (op.out_features,)), op.act)

    def visit_matmul(self, op, x, out, stream):
        a, b = x  # the two operands (CudaProgram._operands)
        return self.dev.batched_matmul(a, b, out)

    def visit_layernorm(self, op, x, out, stream):
        return self.dev.layernorm(x, out, self.weight(op, "weight", op.weight_shape),
                                  self.weight(op, "bias", op.bias_shape), op.axes, op.eps)

    def visit_softmax(self, op, x, out, stream):
        return self.dev.softmax(x, out, 1 + op.dim)  # the axis of the batched shape

    def visit_l2norm(self, op, x, out, stream):
        return self.dev.l2norm(x, out, 1 + op.dim, op.eps)

    def visit_transpose(self, op, x, out, stream):
        return self.dev.transpose(x, out, tuple(op.perm))

    def visit_reshape(self, op, x, out, stream):
        return self.dev.reshape(x, out)

    def visit_constant(self, op, x, out, stream):
        return self.dev.constant(x, out, self.weight(op, "weight", op.weight_shape), op.op_type)

    def visit_prepend(self, op, x, out, stream):
        return self.dev.prepend(x, out, self.weight(op, "weight", op.weight_shape))

    def refuse(self, op, *args, **kwargs):
        why = self.REFUSES.get(op.TYPE, "no visit method for this type")
        raise NotImplementedError(f"the CUDA runtime has no kernel for node type {op.TYPE!r} ({op.name!r}): {why}")


def _seq(fns):
    """One closure running ``fns`` in order; what they declare to a device's launcher is kept: the
    kernel kinds (``fn.kinds``, e.g. to know what a first launch initializes) and the memory read
    and written (``fn.access``, ``(reads, writes)``: the tests' fake device checks stream order)."""
    from ios_core.runtime.program import seq

    fns = [f for f in fns if f is not None]
    run = seq(fns)
    if run in fns:
        return run
    kinds = tuple(k for f in fns for k in getattr(f, "kinds", ()))
    if kinds:
        run.kinds = kinds
    access = [getattr(f, "access", None) for f in fns]
    if any(a is not None for a in access):
        run.access = (tuple(r for a in access if a for r in a[0]), tuple(w for a in access if a for w in a[1]))
    return run


class CudaRuntime:
    """``make_runtime(graph, batch_size, device="cuda", cuda_graph=False)``: the protocol of
    every runtime (:class:`~.base.RuntimeProtocol`: ``prepare``/``execute``/``run``/``measure``/
    ``stats``), on the GPU.

    ``execute`` only enqueues (the output is valid once stream 0 is synchronized: ``sync``);
    ``measure`` times with CUDA events on stream 0 through the one measurement function.
    ``device`` may name the GPU (``"cuda:1"``); ``backend`` replaces the CuPy device (the tests'
    fake device). ``precision`` (fp32, fp16, bf16): what every buffer holds and every kernel reads
    and writes (``CupyDevice``); input and output stay float32 arrays on the host."""

    def __init__(self, graph, batch_size: int = 1, device: str = "cuda", threads: int | None = None, *,
                 cuda_graph: bool = False, backend=None, precision: str = "fp32", **unused):
        check_graph(graph, batch_size)
        ignored = sorted(k for k, v in unused.items() if v is not None and k not in ("provider",))
        if ignored:
            raise ValueError(f"options {ignored} apply to the CPU runtime only")
        if backend is None:
            from ios_core.measurement.gpu import cuda_missing
            from ios_core.runtime.cuda_device import CupyDevice

            missing = cuda_missing()
            if missing is not None:
                raise RuntimeError(f"the IOS CUDA runtime cannot run here: {missing}")
            backend = CupyDevice(int(device.split(":")[1]) if ":" in device else 0, precision=precision)
        elif getattr(backend, "precision", "fp32") != precision:
            raise ValueError(f"the device computes in {getattr(backend, 'precision', 'fp32')}, the runtime was asked "
                             f"for {precision}")
        self.precision = precision
        self.graph, self.batch_size, self.device = graph, batch_size, device
        self.threads = threads
        self.stages = graph_stages(graph)
        self.plan = make_plan(self.stages, [graph.input], [graph.exit_node], batch_size,
                              arena_kinds=("concat", "value"))
        self.dev = backend
        self.program = CudaProgram(self.plan, backend, cuda_graph=cuda_graph)
        self._shape = (batch_size, *graph.input_shape)
        self._in = self.program.input_view(graph.input.name)
        self._out = self.program.value_view(self.plan.value(graph.exit_node))
        self._stream0 = self.program.stream_objs[0]

    @property
    def stats(self) -> dict:
        # the plan's byte figures count fp32 elements; at fp16/bf16 the device's buffers are half that
        plan = self.plan.stats()
        sized = {k: self.program.device_bytes(plan[k]) for k in ("arena_bytes", "naive_activation_bytes")}
        return {**plan, **sized, **self.program.stats, "peak_activation_bytes": self.program.stats["arena_bytes"]}

    def prepare(self, x: np.ndarray):
        x = check_input(x, self._shape)
        self.dev.write(self._in, x, self._stream0)  # waits for a previous run, copies, waits for the copy
        return self._in

    def execute(self, prepared=None):
        """Enqueue one run on the prepared input; returns the output (a device view, valid after
        :meth:`sync` and until the next run)."""
        self.program.run()
        return self._out

    def sync(self) -> None:
        self.dev.sync(self._stream0)

    def run(self, x: np.ndarray) -> np.ndarray:
        self.prepare(x)
        out = self.execute()
        self.sync()
        return self.dev.read(out, self._stream0)

    def timer(self):
        return self.dev.timer(self._stream0)

    def measure(self, warmup: int = 3, number: int = 1, repeat: int = 10, min_sample_ms: float | None = None,
                profile_stages: bool = False, x: np.ndarray | None = None):
        from ios_core.measurement.measure import measure
        from ios_core.reference import random_input

        if profile_stages:
            raise NotImplementedError("per-stage times on CUDA: the measured cost model times each stage as its own "
                                      "program (ios_core.cost.measured, device='cuda')")
        self.prepare(x if x is not None else random_input(self.graph, self.batch_size))
        m = measure(self.program.run, warmup=warmup, number=number, repeat=repeat, min_sample_ms=min_sample_ms,
                    sync=self.sync, timer=self.timer())
        m.meta.update({"batch_size": self.batch_size, "device": self.device, "stages": len(self.stages),
                       **self.stats})
        return m
