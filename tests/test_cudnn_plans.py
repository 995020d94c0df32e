"""cuDNN plan choice and reuse (issue 22), without a GPU: every execution plan cuDNN offers is
built and timed and the fastest kept (not the first heuristic choice: the peers benchmark
theirs), and a convolution geometry is built once per device, so the measured cost model does
not rebuild every plan for each stage it times. The cuDNN graph is a recording stand-in for the
pygraph methods the real one has (tests/test_gpu_api.py checks their names against the
installed cuDNN Frontend)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from ios_core.runtime import cuda_device, cuda_kernels
from ios_core.runtime.cuda import ConvSpec


class FakeGraph:
    """The pygraph calls build_conv makes; plan 1 does not build on this 'GPU'."""

    def __init__(self, plans=3):
        self.plans, self.built = plans, []

    def validate(self):
        pass

    def build_operation_graph(self):
        pass

    def create_execution_plans(self, modes):
        pass

    def deselect_numeric_notes(self, notes):
        self.deselected = notes

    def check_support(self):
        pass

    def get_execution_plan_count(self):
        return self.plans

    def build_plan_at_index(self, i):
        if i == 1:
            raise RuntimeError("cudnnGraphNotSupportedError")
        self.built.append(i)

    def get_workspace_size_plan_at_index(self, i):
        return 1000 * (i + 1)

    def get_plan_name_at_index(self, i):
        return f"eng{i}"


@pytest.fixture
def cudnn(monkeypatch):
    m = types.SimpleNamespace(heur_mode=types.SimpleNamespace(A="A", FALLBACK="FALLBACK"),
                              numerical_note=types.SimpleNamespace(TENSOR_CORE="TC", DOWN_CONVERT_INPUTS="DC",
                                                                   REDUCED_PRECISION_REDUCTION="RPR"))
    monkeypatch.setitem(__import__("sys").modules, "cudnn", m)
    graphs = []

    def conv_graph(fused, handle, **geometry):
        g = FakeGraph()
        graphs.append((fused, g))
        return g, {"x": "x", "w": "w", "y": "y", **({"b": "b"} if fused else {})}

    monkeypatch.setattr(cuda_kernels, "conv_graph", conv_graph)
    return graphs


GEOMETRY = dict(n=1, cin=4, h=5, w=5, cout=4, kernel=(3, 3), stride=(1, 1), pads=(1, 1, 1, 1), dilation=(1, 1),
                groups=1, act="relu", in_stride=None, out_stride=None, out_hw=(5, 5))


def test_every_built_plan_is_timed_and_the_fastest_kept(cudnn):
    timed = []

    def tune(conv):
        timed.append(sorted(conv.plans))
        return {0: 2.5, 2: 0.7}

    conv = cuda_kernels.build_conv("handle", tune=tune, **GEOMETRY)
    assert timed == [[0, 2]]  # plan 1 did not build
    assert conv.plan == 2 and conv.plan_name == "eng2" and conv.workspace_bytes == 3000 and conv.fused
    assert cudnn[0][1].deselected == ["TC", "DC", "RPR"]  # fp32 engines only


def test_activations_cudnn_does_not_fuse_use_the_unfused_graph(cudnn):
    conv = cuda_kernels.build_conv("handle", tune=None, **{**GEOMETRY, "act": "hardswish"})
    assert not conv.fused and [f for f, _ in cudnn] == [False]


class Arr:
    """The few attributes of a CuPy array the device reads."""

    def __init__(self, shape, ptr):
        self.shape, self.itemsize = tuple(shape), 4
        self.strides = tuple(int(np.prod(shape[i + 1:])) * 4 for i in range(len(shape)))
        self.data = types.SimpleNamespace(ptr=ptr)

    def reshape(self, *shape):
        return Arr(shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape, self.data.ptr)


def test_a_geometry_is_built_once_per_device(monkeypatch):
    builds = []

    def build_conv(handle, tune=None, **geometry):
        builds.append(geometry)
        return cuda_kernels.CudnnConv(FakeGraph(), {"x": "x", "w": "w", "y": "y", "b": "b"}, 64, True, plan=0)

    monkeypatch.setattr(cuda_device, "build_conv", build_conv)
    dev = cuda_device.CupyDevice.__new__(cuda_device.CupyDevice)
    dev.precision = "fp32"
    dev.cp = types.SimpleNamespace(asarray=lambda a: Arr(a.shape, 8192))
    dev.device = types.SimpleNamespace(synchronize=lambda: None)
    dev._convs, dev._streams = {}, {}
    dev.plans = cuda_device.ConvPlanBook()
    dev._begin()
    dev.handles, dev.ws_need = ["h0"], [0]
    spec = ConvSpec(4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "relu")
    w, b = np.zeros((4, 4, 3, 3), np.float32), np.zeros(4, np.float32)
    for stage in range(3):  # three stage programs with the same convolution, at other addresses
        dev.conv(Arr((1, 4, 5, 5), 4096 * (stage + 1)), Arr((1, 4, 5, 5), 65536 * (stage + 1)), 0, w, b, spec)
    assert len(builds) == 1
    dev.conv(Arr((1, 4, 5, 5), 4096), Arr((1, 4, 5, 5), 65536), 0, w, b,
             ConvSpec(4, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, "relu"))
    assert len(builds) == 2
    assert dev.ws_need == [64] and dev.fused == 4


class FrontendGraph:
    """The structure of cuDNN Frontend 1.2x's Python ``pygraph`` that ``execute_plan_at_index``
    walks at every call (its barred-plan list, the backend plan behind an index, the variant
    pack), counting the walks; tests/test_gpu_api.py checks these names on the installed
    Frontend."""

    def __init__(self):
        self._planning_done = True
        self._plans = [types.SimpleNamespace(engine_id=3, cpp_index=7), types.SimpleNamespace(engine_id=4, cpp_index=9)]
        self.walks = self.public_calls = 0
        self.backend_calls: list = []
        outer = self

        class Lowered:
            def _execute_plan_at_index(self, var_pack, ws, cpp_index, handle):
                outer.backend_calls.append((dict(var_pack), ws, cpp_index, handle))

        self._lowered_graph = Lowered()

    def _barred_indices(self):
        self.walks += 1
        return set()

    def _materialize_backend_plan(self, index):
        return self._plans[index]

    def _uid_to_data(self, pack):
        return {key.uid: ptr for key, ptr in pack.items()}

    def _native_var_pack(self, uid_to_data, workspace):
        return dict(uid_to_data), 0

    def execute_plan_at_index(self, tensor_dict, workspace=None, index=0, handle=None):
        self.public_calls += 1
        self._barred_indices()


def test_a_plan_is_resolved_once_and_executed_without_walking_the_plan_list(monkeypatch):
    """The measured cost model and the no-graph path execute each convolution thousands of times:
    the Frontend's ``execute_plan_at_index`` re-derived the barred plan list at every call (19 s
    of a 110 s search on an H200). The chosen plan's backend index and the pointers are resolved
    once; each call is the backend's execute."""
    pytest.importorskip("cudnn")  # the handle conversion and engine ids come from the Frontend
    import cudnn._handle

    monkeypatch.setattr(cudnn._handle, "to_backend_handle", lambda h: f"backend-{h}")
    g = FrontendGraph()
    class Tensor:  # the Frontend's tensors key the pack (hashable, with a uid)
        def __init__(self, uid):
            self.uid = uid

    x, w, y = (Tensor(u) for u in (1, 2, 3))
    conv = cuda_kernels.CudnnConv(g, {"x": x, "w": w, "y": y}, 64, False, plan=1)
    run = cuda_kernels.plan_executor(conv, {x: 4096, w: 8192, y: 16384}, "h0")
    for ws in range(100):
        run(ws)
    assert g.walks == 1 and g.public_calls == 0
    assert len(g.backend_calls) == 100
    assert g.backend_calls[5] == ({1: 4096, 2: 8192, 3: 16384}, 5, 9, "backend-h0")


def test_a_frontend_without_that_structure_executes_through_its_public_call():
    g = FakeGraph()
    calls = []
    g.execute_plan_at_index = lambda pack, ws, index, handle=None: calls.append((ws, index, handle))
    conv = cuda_kernels.CudnnConv(g, {}, 64, True, plan=2)
    run = cuda_kernels.plan_executor(conv, {"x": 1}, "h0")
    run(11)
    run(12)
    assert calls == [(11, 2, "h0"), (12, 2, "h0")]


def test_shared_random_weights_are_uploaded_once_per_device():
    """The measured cost model's stage programs share their random weights (read-only arrays of
    ``RandomWeights``): each is copied to the device once, not once per stage program; a
    writable array (a graph's own weights) is copied each time, and a gone array's entry goes."""
    import gc

    from ios_core.runtime.cuda import RandomWeights

    copies = []
    dev = cuda_device.CupyDevice.__new__(cuda_device.CupyDevice)
    dev.precision = "fp32"
    dev.cp = types.SimpleNamespace(asarray=lambda a: copies.append(a.shape) or Arr(a.shape, 4096 * len(copies)))
    dev._shared = {}
    dev._begin()
    bank = RandomWeights(0)
    op = types.SimpleNamespace(name="conv1")
    first = [dev.upload(bank(op, "weight", (8, 4, 3, 3))) for _ in range(3)]
    assert len(copies) == 1 and first[0] is first[1] is first[2]
    own = np.zeros((8,), np.float32)
    dev.upload(own)
    dev.upload(own)
    assert len(copies) == 3
    del bank
    gc.collect()
    assert dev._shared == {}


# ---- the plan cache: the plan chosen per geometry, reused across processes (issue 40) ----------
VERSIONS = {"gpu": "NVIDIA H200", "compute_capability": "9.0", "driver": "575.51.03", "cudnn": "9.19.0",
            "cudnn_frontend": "1.32.0"}


def test_a_stored_plan_is_built_alone_and_none_is_timed(cudnn, tmp_path):
    from ios_core.cost.cache import cudnn_plan_cache
    from ios_core.runtime.cuda_plans import ConvPlanBook

    def book():
        return ConvPlanBook(cudnn_plan_cache(VERSIONS, tmp_path / "p.sqlite"))

    timed = []

    def tune(conv):
        timed.append(sorted(conv.plans))
        return {0: 2.5, 2: 0.7}

    def choose(b, geometry):
        def tuned():
            c = cuda_kernels.build_conv("h", tune=tune, **geometry)
            return c, cuda_kernels.plan_record(c), len(c.plans)
        return b.choose(repr(cuda_kernels.conv_key(geometry)), tuned,
                        lambda rec: cuda_kernels.build_conv("h", known=rec, **geometry))

    first = book()
    conv = choose(first, GEOMETRY)
    assert conv.plan == 2 and timed == [[0, 2]] and first.stats()["plans_built_for_tuning"] == 2
    second = book()  # another process: the same database, a fresh device
    again = choose(second, GEOMETRY)
    assert timed == [[0, 2]]  # nothing timed again
    assert (again.plan, again.plan_name, again.fused, again.workspace_bytes) == (2, "eng2", True, 3000)
    assert cudnn[-1][1].built == [2]  # that plan built alone
    st = second.stats()
    assert st["plans_reused"] == 1 and st["plans_built_for_tuning"] == 0 and st["plans_tuned_geometries"] == 0


def test_a_plan_stored_under_another_cudnn_is_rebuilt_with_a_reason(cudnn, tmp_path):
    """A plan another cuDNN chose is not built: under this cuDNN every plan of the geometry is
    built and timed again, the one chosen now is stored for this cuDNN, and the other's record is
    left to it."""
    from ios_core.cost.cache import cudnn_plan_cache
    from ios_core.runtime.cuda_plans import ConvPlanBook

    db = tmp_path / "p.sqlite"
    key = repr(cuda_kernels.conv_key(GEOMETRY))
    theirs = {"fused": True, "plan": 0, "plan_name": "eng0", "workspace_bytes": 1000}
    old = cudnn_plan_cache({**VERSIONS, "cudnn": "9.18.1"}, db)
    old.put(key, theirs)
    assert old.get(key) == theirs
    new = cudnn_plan_cache(VERSIONS, db)
    timed, known = [], []

    def tuned():
        c = cuda_kernels.build_conv("h", tune=lambda conv: timed.append(sorted(conv.plans)) or {0: 2.5, 2: 0.7},
                                    **GEOMETRY)
        return c, cuda_kernels.plan_record(c), len(c.plans)

    book = ConvPlanBook(new)
    conv = book.choose(key, tuned, lambda rec: known.append(rec) or cuda_kernels.build_conv("h", known=rec, **GEOMETRY))
    # rebuilt: every plan built (plan 1 does not build here) and timed, the fastest kept; 9.18.1's never built
    assert known == [] and timed == [[0, 2]] and [g.built for _, g in cudnn] == [[0, 2]] and conv.plan == 2
    st = book.stats()
    assert st["plans_reused"] == 0 and st["plans_tuned_geometries"] == 1 and st["plans_built_for_tuning"] == 2
    assert st["plan_cache_reasons"] == ["a cuDNN plan stored under other versions (cudnn 9.18.1 (here 9.19.0)) was "
                                        "not used: rebuilt"]
    assert new.stats()["other_versions"] == 1
    assert cudnn_plan_cache(VERSIONS, db).get(key) == cuda_kernels.plan_record(conv)  # stored for this cuDNN
    assert cudnn_plan_cache({**VERSIONS, "cudnn": "9.18.1"}, db).get(key) == theirs  # and 9.18.1's left as it was
    other_gpu = cudnn_plan_cache({**VERSIONS, "gpu": "NVIDIA H100 80GB HBM3"}, db)
    assert other_gpu.get("geom") is None and other_gpu.stats()["other_versions"] == 0


def test_a_stored_plan_that_no_longer_matches_is_tuned_again_with_a_reason(cudnn):
    from ios_core.runtime.cuda_plans import ConvPlanBook

    class Store:
        reasons: list = []

        def __init__(self):
            self.rows = {"g": {"fused": True, "plan": 0, "plan_name": "an engine of another build"}}

        def get(self, key):
            return self.rows.get(key)

        def put(self, key, rec):
            self.rows[key] = rec

    store = Store()
    b = ConvPlanBook(store)

    def tuned():
        c = cuda_kernels.build_conv("h", tune=lambda conv: {0: 1.0, 2: 0.5}, **GEOMETRY)
        return c, cuda_kernels.plan_record(c), len(c.plans)

    conv = b.choose("g", tuned, lambda rec: cuda_kernels.build_conv("h", known=rec, **GEOMETRY))
    assert conv.plan == 2 and store.rows["g"]["plan_name"] == "eng2"
    st = b.stats()
    assert st["plans_reused"] == 0 and st["plans_tuned_geometries"] == 1
    assert st["plan_cache_reasons"][0].startswith("stored cuDNN plan an engine of another build not usable "
                                                  "(RuntimeError: plan 0 is 'eng0' here")


def test_a_plan_cache_that_cannot_be_read_or_written_is_a_reason(cudnn):
    import sqlite3

    from ios_core.runtime.cuda_plans import ConvPlanBook

    class Broken:
        def get(self, key):
            raise sqlite3.OperationalError("database disk image is malformed")

        def put(self, key, rec):
            raise sqlite3.OperationalError("attempt to write a readonly database")

    b = ConvPlanBook(Broken())

    def tuned():
        c = cuda_kernels.build_conv("h", tune=lambda conv: {0: 1.0, 2: 0.5}, **GEOMETRY)
        return c, cuda_kernels.plan_record(c), len(c.plans)

    conv = b.choose("g", tuned, lambda rec: cuda_kernels.build_conv("h", known=rec, **GEOMETRY))
    assert conv.plan == 2
    assert b.stats()["plan_cache_reasons"] == [
        "cuDNN plan cache not read (OperationalError: database disk image is malformed): plans built and timed",
        "cuDNN plan cache not written (OperationalError: attempt to write a readonly database)"]


def test_a_second_device_builds_the_stored_plan_of_each_geometry(cudnn, tmp_path):
    """CupyDevice.conv through the plan cache: a second device (another process's) on the same
    database builds only the plan the first one chose, and times none."""
    from ios_core.cost.cache import cudnn_plan_cache

    def device():
        dev = cuda_device.CupyDevice.__new__(cuda_device.CupyDevice)
        dev.precision = "fp32"
        dev.cp = types.SimpleNamespace(asarray=lambda a: Arr(a.shape, 8192))
        dev.device = types.SimpleNamespace(synchronize=lambda: None)
        dev._convs, dev._streams, dev._shared = {}, {}, {}
        dev.plans = cuda_device.ConvPlanBook(cudnn_plan_cache(VERSIONS, tmp_path / "p.sqlite"))
        dev._begin()
        dev.handles, dev.ws_need = ["h0"], [0]
        dev._tune = lambda *a: (lambda conv: {0: 2.0, 2: 1.0})
        return dev

    spec = ConvSpec(4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, "relu")
    w, b = np.zeros((4, 4, 3, 3), np.float32), np.zeros(4, np.float32)
    first, second = device(), device()
    first.conv(Arr((1, 4, 5, 5), 4096), Arr((1, 4, 5, 5), 65536), 0, w, b, spec)
    assert first.plans.stats()["plans_built_for_tuning"] == 2 and cudnn[-1][1].built == [0, 2]
    second.conv(Arr((1, 4, 5, 5), 4096), Arr((1, 4, 5, 5), 65536), 0, w, b, spec)
    st = second.plans.stats()
    assert st["plans_reused"] == 1 and st["plans_built_for_tuning"] == 0
    assert cudnn[-1][1].built == [2] and second.conv_plans == ["eng2"]
