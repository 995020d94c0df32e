"""Builds reused across rounds (adapters.build_cache, issue 36): a framework's on-disk cache is
reused by the next round's fresh process, and a foreign or damaged one (another version, another
machine, a truncated file, files without a manifest) is ignored with a one-line note and rebuilt;
the output is checked against the oracle after every build. A cache directory a user names that
cannot be written is one line, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adapters.build_cache import MANIFEST, BuildCache, CacheDirError, dir_problem
from tests.harness_helpers import ROOT, cli, env_for


def _filled(root, version="1.0") -> BuildCache:
    cache = BuildCache(root, "fw", version).open()
    (cache.dir / "kernels").mkdir()
    (cache.dir / "kernels" / "a.bin").write_bytes(b"x" * 1000)
    cache.seal()
    return cache


def test_a_sealed_cache_is_reused_and_a_foreign_one_rejected(tmp_path, capsys):
    first = _filled(tmp_path)
    assert first.state == "cold" and (first.dir / MANIFEST).exists()
    again = BuildCache(tmp_path, "fw", "1.0").open()
    assert again.state == "warm" and again.note is None and (again.dir / "kernels" / "a.bin").exists()
    assert again.info() == {"build_cache": {"dir": str(again.dir), "state": "warm", "reused": True}}
    assert first.info()["build_cache"]["reused"] is False

    newer = BuildCache(tmp_path, "fw", "2.0").open()  # another version of the framework
    assert newer.state == "rejected" and "built by fw 1.0, this is fw 2.0" in newer.note
    assert list(newer.dir.iterdir()) == []  # emptied: the build starts from nothing
    assert "\n" not in newer.note and newer.note in capsys.readouterr().err

    _filled(tmp_path)
    blob = tmp_path / "fw" / "kernels" / "a.bin"
    blob.write_bytes(b"x" * 10)  # a truncated file
    truncated = BuildCache(tmp_path, "fw", "1.0").open()
    assert truncated.state == "rejected" and "kernels/a.bin is truncated" in truncated.note

    _filled(tmp_path)
    manifest = tmp_path / "fw" / MANIFEST
    m = json.loads(manifest.read_text())
    m["machine"]["cpu_flags_sha1"] = "0" * 16  # another machine
    manifest.write_text(json.dumps(m))
    assert "another machine" in BuildCache(tmp_path, "fw", "1.0").open().note

    _filled(tmp_path)
    manifest.unlink()  # a build that did not finish
    assert "without a manifest" in BuildCache(tmp_path, "fw", "1.0").open().note
    _filled(tmp_path)
    manifest.write_text("{not json")
    assert "unreadable" in BuildCache(tmp_path, "fw", "1.0").open().note


def test_an_unwritable_cache_dir_is_one_line(tmp_path):
    afile = tmp_path / "file"
    afile.write_text("")
    problem = dir_problem(afile / "cache")
    assert problem and "not writable" in problem and "\n" not in problem
    assert dir_problem(tmp_path / "new" / "cache") is None and not (tmp_path / "new").exists()  # nothing written
    with pytest.raises(CacheDirError, match="not writable"):
        BuildCache(afile / "cache", "fw", "1").open()
    p = cli(["run", "--models", "tiny_a", "--frameworks", "openvino", "--schedules", "none", "--rounds", "1",
             "--adapter-option", f"openvino:cache_dir={afile / 'cache'}", "--out", str(tmp_path / "run")],
            cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "cache_dir" in p.stderr and "not writable" in p.stderr
    assert not (tmp_path / "run").exists()


ROUND = """
import json, sys
import numpy as np
import tests.harness_plugin
import adapters
from ios_core import models
from ios_core.check import compare
from ios_core.reference import random_input, run
g = models.get("tiny_a"); g.init_weights(0)
x = random_input(g, 1)
c = adapters.get("openvino").build(g, 1, "cpu", 1, cache_dir=sys.argv[1])
ok = compare(c.run(x), run(g, x), 1e-3).passed  # the oracle check stays after every build
print(json.dumps({**c.info["build_cache"], "passed": ok}))
"""


def _round(cache_dir) -> dict:
    p = subprocess.run([sys.executable, "-c", ROUND, str(cache_dir)], cwd=ROOT, env=env_for(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return {**json.loads(p.stdout.strip().splitlines()[-1]), "stderr": p.stderr}


def test_openvino_rounds_reuse_the_first_rounds_model_cache(tmp_path):
    pytest.importorskip("openvino")
    first = _round(tmp_path)
    assert first["state"] == "cold" and first["passed"]
    manifest = json.loads((tmp_path / "openvino" / MANIFEST).read_text())
    blobs = {k: v for k, v in manifest["files"].items() if k.endswith(".blob")}
    assert blobs  # OpenVINO wrote its compiled model there
    second = _round(tmp_path)  # a fresh process: the next round
    assert second["state"] == "warm" and second["passed"]
    assert json.loads((tmp_path / "openvino" / MANIFEST).read_text())["files"] == manifest["files"]  # reused as is
    name = next(iter(blobs))
    blob = tmp_path / "openvino" / name
    blob.write_bytes(blob.read_bytes()[: blobs[name][0] // 2])  # truncated
    third = _round(tmp_path)
    assert third["state"] == "rejected" and third["passed"] and "truncated" in third["note"]
    assert f"note: {third['note']}" in third["stderr"]
    rebuilt = json.loads((tmp_path / "openvino" / MANIFEST).read_text())["files"]
    assert rebuilt[name] == blobs[name]  # rebuilt whole, the same compiled model


def test_a_sweeps_rounds_reuse_the_first_rounds_build_in_the_run_scope(tmp_path):
    """``ios-bench run --build-cache run``: each round is a fresh worker; OpenVINO's model cache is
    kept in the run folder's cache/ (IOS_BENCH_BUILD_CACHE, set for every round) and the second
    round reuses it."""
    pytest.importorskip("openvino")
    from ios_bench.results import read_records

    p = cli(["run", "--build-cache", "run", "--models", "tiny_a", "--frameworks", "openvino", "--schedules", "none",
             "--rounds", "2",
             "--warmup", "1", "--repeat", "3", "--min-sample-ms", "0", "--out", str(tmp_path / "run"), "--no-report",
             "--no-progress"], cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    (rec,) = read_records(tmp_path / "run")
    states = [r["info"]["build_cache"]["state"] for r in rec["rounds"] if r.get("status") in ("ok", "wrong")]
    assert states[0] == "cold" and set(states[1:]) == {"warm"} and rec["status"] == "ok"
    assert (tmp_path / "run" / "cache" / "openvino" / MANIFEST).exists()
    assert rec["first_build_seconds"] == rec["rounds"][0]["build_seconds"]


def test_inductor_isa_probes_are_recorded_once_and_trusted_after(tmp_path, monkeypatch):
    """torch-compile on CPU: the first build with a run's cache probes the vector ISAs (as inductor
    would) and records them; every build where all candidates passed tells inductor so (the same
    config, hence the same inductor cache key, in every round); a later round skips the probes. A
    record where one failed changes nothing, nor does a record for other candidates."""
    pytest.importorskip("torch")
    from torch._inductor import config, cpu_vec_isa

    from adapters import pytorch

    # torch's config is restored with its own patch(): monkeypatch's undo of a config entry can delete it
    # ("torch._inductor.config.cpp.vec_isa_ok does not exist" for every later torch-compile in this process)
    with config.patch({"cpp.vec_isa_ok": None}):
        _isa_probes(tmp_path, monkeypatch, config, cpu_vec_isa, pytorch)


def _isa_probes(tmp_path, monkeypatch, config, cpu_vec_isa, pytorch):
    monkeypatch.setattr(pytorch, "_vec_isa_candidates", lambda: ["avx512", "avx2"])
    probed = []
    monkeypatch.setattr(cpu_vec_isa, "valid_vec_isa_list", lambda: probed.append(1) or ["avx512", "avx2"])
    cold = BuildCache(tmp_path, "torch-inductor", "x").open()
    assert cold.state == "cold"
    assert pytorch._trust_vec_isa(cold) == "probed" and probed == [1] and config.cpp.vec_isa_ok is True
    cold.seal()
    config.cpp.vec_isa_ok = None
    warm = BuildCache(tmp_path, "torch-inductor", "x").open()
    assert warm.state == "warm"
    assert pytorch._trust_vec_isa(warm) == "skipped" and probed == [1] and config.cpp.vec_isa_ok is True
    # one ISA failed its probe: inductor probes in every round, as usual
    config.cpp.vec_isa_ok = None
    (warm.dir / pytorch.VEC_ISA_FILE).write_text(json.dumps({"candidates": ["avx512", "avx2"], "passed": ["avx2"]}))
    assert pytorch._trust_vec_isa(warm) is None and config.cpp.vec_isa_ok is None
    assert pytorch._trust_vec_isa(None) is None  # no run cache: nothing recorded, nothing trusted


RUN = ["run", "--schedules", "none", "--warmup", "1", "--repeat", "3", "--min-sample-ms", "0", "--no-report",
       "--no-progress"]


def _build_caches(folder) -> list[dict]:
    from ios_bench.results import read_records

    (rec,) = read_records(folder)
    assert rec["status"] == "ok", rec.get("reason")
    return rec, [r["info"]["build_cache"] for r in rec["rounds"] if r.get("status") == "ok"]


def test_the_user_scope_is_reused_by_a_second_run_and_refused_when_its_versions_differ(tmp_path):
    """``--build-cache user`` (the default): the builds live in the user's cache folder
    (IOS_BENCH_BUILD_CACHE_HOME here), so a second run's first round reuses the first run's build
    (the record says so), and a cache another version sealed is refused with one line and rebuilt."""
    pytest.importorskip("openvino")
    home = tmp_path / "home"
    extra = {"IOS_BENCH_BUILD_CACHE_HOME": str(home)}

    def run(name):
        p = cli([*RUN, "--models", "tiny_a", "--frameworks", "openvino", "--rounds", "1",
                 "--out", str(tmp_path / name)], cwd=tmp_path, extra=extra)
        assert p.returncode == 0, p.stderr[-3000:]
        rec, caches = _build_caches(tmp_path / name)
        cache = caches[0]  # the run's first round (a disturbed one is measured again, from the same cache)
        assert cache["scope"] == "user" and cache["dir"] == str(home / "openvino")
        assert not (tmp_path / name / "cache").exists()  # nothing in the run folder
        assert rec["first_build_seconds"] == rec["rounds"][0]["build_seconds"]  # every run's first build, apart
        log = (tmp_path / name / rec["rounds"][0]["log"]).read_text()
        return cache, log

    first, _ = run("one")
    assert first["state"] == "cold" and first["reused"] is False
    manifest = home / "openvino" / MANIFEST
    blobs = sorted(p for p in (home / "openvino").rglob("*.blob"))
    assert blobs  # OpenVINO exported its compiled model there
    written = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in blobs}
    files = json.loads(manifest.read_text())["files"]
    second, _ = run("two")  # another run folder, the same user scope
    assert second["state"] == "warm" and second["reused"] is True
    # the compile was skipped: OpenVINO imported its compiled model and wrote no file (a compile
    # exports the blob again: a new file or a new modification time, even with the same bytes)
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in blobs} == written
    assert json.loads(manifest.read_text())["files"] == files and sorted((home / "openvino").rglob("*.blob")) == blobs
    m = json.loads(manifest.read_text())
    m["version"] = "0.0-another"
    manifest.write_text(json.dumps(m))
    third, log = run("three")
    assert third["state"] == "rejected" and third["reused"] is False
    assert "built by openvino 0.0-another" in third["note"] and f"note: {third['note']}" in log  # one line
    assert json.loads(manifest.read_text())["version"] != "0.0-another"  # rebuilt and sealed by this version


def _inductor_cache_events(trace_dir) -> dict[int, dict[str, int]]:
    """{process id: {"hit": n, "miss": n}} of inductor's FX graph cache, from torch's structured
    trace (``TORCH_TRACE``: one file per process, each line led by glog's ``<level><date> <time> <pid>``)."""
    out: dict[int, dict[str, int]] = {}
    for f in trace_dir.iterdir():
        text = f.read_text(errors="replace")
        pid = int(text.split(None, 3)[2])
        out[pid] = {k: text.count(f'"name": "fx_graph_cache_{k}"') for k in ("hit", "miss")}
    return out


def test_a_torch_compile_cells_second_round_reuses_the_first_rounds_inductor_cache(tmp_path):
    """torch-compile: round 1 builds into the run's inductor cache (cold), round 2 - a fresh
    process - reuses it, and each round's record says which (``build_cache.reused``). That the
    compile was skipped is inductor's own word: its structured trace (``TORCH_TRACE``) of each
    round's process logs FX graph cache misses in the cold round and only hits in the warm ones."""
    pytest.importorskip("torch")
    import adapters

    why = adapters.get("torch-compile").available("cpu")
    if why:
        pytest.skip(why)
    trace = tmp_path / "trace"
    trace.mkdir()
    p = cli([*RUN, "--build-cache", "run", "--models", "tiny_a", "--frameworks", "torch-compile", "--rounds", "2",
             "--out", str(tmp_path / "run")], cwd=tmp_path, extra={"TORCH_TRACE": str(trace)})
    assert p.returncode == 0, p.stderr[-3000:]
    rec, caches = _build_caches(tmp_path / "run")
    events = _inductor_cache_events(trace)
    cold, *warm = [events[r["pid"]] for r in rec["rounds"] if r.get("status") == "ok"]
    assert cold["miss"] > 0 and cold["hit"] == 0  # compiled
    assert warm and all(e["hit"] > 0 and e["miss"] == 0 for e in warm), events  # every graph from the cache
    # a round that other work disturbed is measured again (a further round, warm too)
    assert len(caches) >= 2 and caches[0]["state"] == "cold" and {c["state"] for c in caches[1:]} == {"warm"}
    assert caches[0]["reused"] is False and all(c["reused"] for c in caches[1:])
    assert all(c["dir"] == str((tmp_path / "run" / "cache" / "torch-inductor").resolve()) or
               c["dir"].endswith("run/cache/torch-inductor") for c in caches)
    assert rec["first_build_seconds"] == rec["rounds"][0]["build_seconds"]


def test_the_scopes_set_where_rounds_keep_builds_and_restore_it(tmp_path, monkeypatch):
    """``--build-cache``: user -> the user's folder (IOS_BENCH_BUILD_CACHE_HOME here), run -> each run
    folder's cache/ (nothing set) or an experiment's shared cache/, off -> none; the environment is
    restored afterwards (an in-process caller keeps its own); a value a user set wins over the
    default scope only; an unwritable user folder is one line."""
    import os

    from adapters.build_cache import ENV, HOME_ENV, SCOPE_ENV
    from ios_bench.commands.run import use_build_cache
    from ios_bench.errors import InputError

    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.delenv(ENV, raising=False)
    with use_build_cache("user") as where:
        assert where == str(tmp_path / "home") == os.environ[ENV] and os.environ[SCOPE_ENV] == "user"
    assert ENV not in os.environ and SCOPE_ENV not in os.environ
    with use_build_cache("run") as where:
        assert where is None and ENV not in os.environ  # launch.py: <run folder>/cache
    with use_build_cache("run", tmp_path / "exp") as where:
        assert where == str((tmp_path / "exp").resolve() / "cache") == os.environ[ENV]
    with use_build_cache("off"):
        assert os.environ[ENV] == "off"
    monkeypatch.setenv(ENV, str(tmp_path / "mine"))
    with use_build_cache("user", explicit=False) as where:  # the default scope: the user's own value wins
        assert where == str(tmp_path / "mine")
    with use_build_cache("off", explicit=True):  # given on the command line: it wins
        assert os.environ[ENV] == "off"
    assert os.environ[ENV] == str(tmp_path / "mine")
    afile = tmp_path / "file"
    afile.write_text("")
    monkeypatch.setenv(HOME_ENV, str(afile / "home"))
    with pytest.raises(InputError, match="--build-cache user: build cache directory .* is not writable"):
        with use_build_cache("user"):
            pass
