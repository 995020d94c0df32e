"""adapters/tvm_cache.py: the tvm adapter's build kept in the shared build cache. A first build is cold
and writes the entry; a build in a fresh process with the same graph, batch and target loads it
without compiling and gives the same output; a changed weight or batch is another key (cold); a
damaged cache is rejected and rebuilt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import adapters
from adapters import tvm_cache
from adapters.build_cache import MANIFEST
from ios_core import models, reference

TVM = adapters.get("tvm")
pytestmark = pytest.mark.skipif(TVM.available() is not None, reason=f"tvm unavailable: {TVM.available()}")
ROOT = Path(__file__).resolve().parents[1]

# a round's worker, as the harness starts one: a fresh process building the tvm cell. With "forbid",
# the compile function fails the build: a warm build must not call it
WORKER = """
import json, sys
import numpy as np
import adapters
from adapters import tvm as tvm_adapter
from ios_core import models, reference
cache, out, seed, batch, forbid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
calls = []
real = tvm_adapter._compile_default
def counting(*a):
    calls.append(1)
    if forbid:
        raise AssertionError("compiled although the cache holds this build")
    return real(*a)
tvm_adapter._compile_default = counting
graph = models.get("sample", input_shape=(16, 12, 12)).init_weights(seed)
c = adapters.get("tvm").build(graph, batch_size=batch, threads=1, cache_dir=cache)
np.save(out, c.run(reference.random_input(graph, batch, seed=5)))
print(json.dumps({"compiles": len(calls), "info": {k: c.info.get(k) for k in
      ("build_cache", "compile_seconds", "load_seconds", "export_seconds", "build_seconds")}}))
"""


def round_(cache: Path, out: Path, seed: int = 0, batch: int = 1, forbid: bool = False) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("IOS_BENCH_BUILD_CACHE", None)
    p = subprocess.run([sys.executable, "-c", WORKER, str(cache), str(out), str(seed), str(batch), str(int(forbid))],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_later_round_loads_the_build_without_compiling(tmp_path):
    cache = tmp_path / "cache"
    cold = round_(cache, tmp_path / "cold.npy")
    assert cold["compiles"] == 1 and cold["info"]["build_cache"]["state"] == "cold"
    entry = cold["info"]["build_cache"]["entry"]
    assert (cache / "tvm" / entry).is_file() and entry in json.loads((cache / "tvm" / MANIFEST).read_text())["files"]
    assert cold["info"]["compile_seconds"] > 0 and cold["info"]["export_seconds"] > 0

    warm = round_(cache, tmp_path / "warm.npy", forbid=True)  # a fresh process that may not compile
    assert warm["compiles"] == 0
    assert warm["info"]["build_cache"] | {"dir": None} == {"dir": None, "state": "warm", "reused": True, "entry": entry}
    assert warm["info"]["compile_seconds"] is None and warm["info"]["load_seconds"] >= 0
    assert np.array_equal(np.load(tmp_path / "cold.npy"), np.load(tmp_path / "warm.npy"))

    # another weight or another batch is another build: cold, its own entry beside the first
    for seed, batch in ((1, 1), (0, 2)):
        other = round_(cache, tmp_path / f"o{seed}{batch}.npy", seed=seed, batch=batch)
        assert other["compiles"] == 1 and other["info"]["build_cache"]["state"] == "cold"
        assert other["info"]["build_cache"]["entry"] != entry
    assert len(list((cache / "tvm").glob("*.so"))) == 3


def test_a_damaged_entry_is_rejected_and_rebuilt(tmp_path):
    graph = models.get("sample", input_shape=(16, 12, 12)).init_weights(0)
    x = reference.random_input(graph, 1)
    first = TVM.build(graph, batch_size=1, threads=1, cache_dir=tmp_path)
    entry = tmp_path / "tvm" / first.info["build_cache"]["entry"]
    data = entry.read_bytes()
    entry.unlink()  # (this process has it mapped: a new file, not the mapped one cut short)
    entry.write_bytes(data[:1000])  # truncated: the manifest's size and SHA-1 no longer match
    again = TVM.build(graph, batch_size=1, threads=1, cache_dir=tmp_path)
    assert again.info["build_cache"]["state"] == "rejected" and again.info["compile_seconds"] > 0
    np.testing.assert_array_equal(again.run(x), first.run(x))
    assert TVM.build(graph, batch_size=1, threads=1, cache_dir=tmp_path).info["build_cache"]["state"] == "warm"


def test_the_key_changes_with_the_weights_batch_target_precision_and_cudnn():
    from adapters.tvm import to_relax

    graph = models.get("sample", input_shape=(16, 12, 12))
    settings = {"batch_size": 1, "precision": "fp32", "target": "llvm", "cudnn": False, "pipeline": "p"}
    mod = to_relax(graph.init_weights(0), 1)[0]
    key = tvm_cache.build_key(mod, **settings)
    assert tvm_cache.build_key(to_relax(graph.init_weights(0), 1)[0], **settings) == key  # the same build
    changed = graph.init_weights(0)
    op = next(o for o in changed.operators() if getattr(o, "weight", None) is not None)
    op.weight = op.weight.copy()
    op.weight.flat[0] += 1.0  # one weight: the module's text is the same, its constants are not
    assert to_relax(changed, 1)[0].script() == mod.script()
    assert tvm_cache.build_key(to_relax(changed, 1)[0], **settings) != key
    assert tvm_cache.build_key(to_relax(graph.init_weights(0), 2)[0], **{**settings, "batch_size": 2}) != key
    for name, value in (("target", "llvm -mcpu=skylake"), ("precision", "fp16"), ("cudnn", True), ("pipeline", "q")):
        assert tvm_cache.build_key(mod, **{**settings, name: value}) != key, name
