"""Hostile ONNX files and output paths (issue 24).

Every case of the corpus (``tests/hostile_onnx.py``, built under ``tmp_path``) must end with exit
code 2, exactly one line on stderr, no traceback, nothing written anywhere under the test folder,
and every path the case names unchanged. The slow tests fuzz the ONNX reader with hypothesis:
mutated protobuf bytes and mutated small models give a graph or the one-line refusal, nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("onnx")

from ios_core.frontend import UnsupportedModel  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402
from tests import hostile_onnx as corpus  # noqa: E402
from tests.conftest import ROOT  # noqa: E402


def snapshot(root: Path) -> dict:
    """Every path under ``root``: its kind, size, mtime, and a link's target (not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns,
                           os.readlink(p) if os.path.islink(p) else None)
    return out


def _fingerprint(path: Path):
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    if os.path.islink(path):
        return ("link", os.readlink(path))
    if path.is_dir():
        return ("dir", sorted(os.listdir(path)))
    return ("file", st.st_size, st.st_mtime_ns, path.read_bytes())


@pytest.mark.parametrize("name", sorted(corpus.CASES))
def test_hostile_case_is_one_line_exit_2_nothing_written(name, tmp_path, run_cli):
    folder = tmp_path / "case"
    folder.mkdir()
    case = corpus.CASES[name](folder)
    before = snapshot(folder)
    targets = {p: _fingerprint(p) for p in case.unchanged}
    code, out, err = run_cli(case.argv)
    assert code == 2, (code, out, err)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err + out
    if case.needle:
        assert case.needle in err, err
    assert snapshot(folder) == before, "something was written"
    for p, fp in targets.items():
        assert _fingerprint(p) == fp, f"{p} changed"
    for system in ("/etc/ios-bench-hostile-test.json", "/dev/full.json", "/ios-bench-hostile-test.json",
                   "/etc/ios-bench-hostile-test.onnx", "/etc/ios-bench-hostile-report"):
        assert not os.path.lexists(system)


@pytest.mark.parametrize("name", sorted(corpus.ACCEPTED))
def test_odd_but_harmless_files_import(name, tmp_path, run_cli):
    folder = tmp_path / "case"
    folder.mkdir()
    case = corpus.ACCEPTED[name](folder)
    code, out, err = run_cli(case.argv)
    assert code == 0 and err == "", err
    out_json = Path(case.argv[case.argv.index("-o") + 1])
    from ios_core.ir import Graph

    assert Graph.load(out_json).num_operators() >= 2


def test_corpus_covers_every_class():
    prefixes = {name.split("_")[0] for name in corpus.CASES}
    assert {"external", "weights", "node", "attr", "invalid", "file", "out"} <= prefixes
    assert len(corpus.CASES) >= 50


def test_the_valid_model_imports_and_our_own_outputs_are_replaced(tmp_path, run_cli):
    """The corpus's base model is importable (so each case fails for its own reason), and writing
    over a graph and weights that ios-bench wrote stays allowed."""
    src = corpus.save(corpus.small_model(), tmp_path / "net.onnx")
    for _ in range(2):
        code, out, err = run_cli(["import", str(src), "-o", str(tmp_path / "g.json")])
        assert code == 0, err
    assert (tmp_path / "g.json").is_file() and (tmp_path / "g.npz").is_file()
    graph = frontend.load(src)
    assert graph.num_operators() >= 2


def test_external_data_inside_the_folder_loads(tmp_path):
    """The refusals are narrow: a plain file beside the model (also in a subfolder) is read."""
    for location in ("w.bin", "sub/w.bin"):
        folder = tmp_path / location.replace("/", "_")
        (folder / "sub").mkdir(parents=True)
        inline = corpus.small_model().graph.initializer[0].raw_data
        (folder / location).write_bytes(b"\0" * 8 + inline)
        path = corpus._external(folder, location, offset="8")
        graph = frontend.load(path)
        assert graph.num_operators() >= 2


def test_api_refusals_for_bytes_and_protos():
    with pytest.raises(UnsupportedModel, match="not an ONNX model"):
        frontend.load(b"")
    with pytest.raises(UnsupportedModel, match="external"):
        model = corpus.small_model()
        t = model.graph.initializer[0]
        t.ClearField("raw_data")
        t.data_location = corpus.TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "w.bin"
        frontend.load(model)


def test_subprocess_refusal_has_no_traceback(tmp_path):
    """The real command line, in its own process (warnings, logging of the libraries included)."""
    (tmp_path / "empty.onnx").write_bytes(b"")
    p = subprocess.run([sys.executable, "-m", "ios_bench", "import", str(tmp_path / "empty.onnx")], cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "not an ONNX model" in p.stderr and "Traceback" not in p.stderr
    assert sorted(os.listdir(tmp_path)) == ["empty.onnx"]


def test_git_commit_is_read_without_the_index_lock(tmp_path):
    """envinfo's git queries never refresh the index (which takes .git/index.lock)."""
    from ios_bench.machine import envinfo

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    if subprocess.run([*git, "init", "-q"], capture_output=True).returncode:
        pytest.skip("git is not usable here")
    (tmp_path / "f").write_text("a\n")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "a"], check=True)
    os.utime(tmp_path / "f", ns=(1, 1))  # a stat change a refreshing `git status` would write back
    index = tmp_path / ".git" / "index"
    before = index.stat().st_mtime_ns, index.read_bytes()
    info = envinfo.git_info(tmp_path)
    assert len(info["commit"]) == 40 and info["dirty"] is False
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before
    assert not (tmp_path / ".git" / "index.lock").exists()


# ---- fuzzing the reader (slow) ----------------------------------------------------------------------------
OUTCOMES: dict[str, int] = {}


def _load_or_refuse(source) -> None:
    """The contract: a graph that validates and can be evaluated, or the one-line refusal."""
    import numpy as np

    from ios_core import reference

    try:
        graph = frontend.load(source, name="fuzz")
    except UnsupportedModel as e:
        assert str(e).strip(), "an empty refusal"
        OUTCOMES["refused"] = OUTCOMES.get("refused", 0) + 1
        return
    OUTCOMES["imported"] = OUTCOMES.get("imported", 0) + 1
    graph.validate()
    x = np.zeros((1, *graph.input_shape), np.float32)
    if int(np.prod(graph.input_shape)) <= 1 << 16:
        reference.run(graph, x)


def _richer_model():
    """The small model plus a BatchNormalization, a zero Pad, a channel Concat and a Reshape: more
    operators for the mutations to break."""
    import numpy as np

    model = corpus.small_model()
    g = model.graph
    oh, onh = corpus.oh, corpus.onh
    del g.node[1:]
    c = 4
    g.initializer.extend([onh.from_array(np.ones(c, np.float32), n) for n in ("s", "b", "m", "v")])
    g.initializer.append(onh.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"))
    g.initializer.append(onh.from_array(np.array([-1, 2 * c], np.int64), "shape"))
    g.node.extend([
        oh.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn"),
        oh.make_node("Relu", ["bn"], ["r"], name="relu"),
        oh.make_node("Pad", ["r", "pads"], ["pd"], name="pad"),
        oh.make_node("AveragePool", ["pd"], ["ap"], kernel_shape=[3, 3], name="pool"),
        oh.make_node("Concat", ["ap", "r"], ["cat"], axis=1, name="cat"),
        oh.make_node("GlobalAveragePool", ["cat"], ["p"], name="gap"),
        oh.make_node("Reshape", ["p", "shape"], ["f"], name="flat"),
        oh.make_node("Gemm", ["f", "fc2"], ["y"], transB=1, name="fc"),
    ])
    g.initializer.append(onh.from_array(np.ones((10, 2 * c), np.float32), "fc2"))
    return model


def _hypothesis():
    return pytest.importorskip("hypothesis")


OP_TYPES = sorted(frontend.MAPPED | frontend.FOLDED | {"Loop", "If", "Scan", "LRN", "Hardmax", "Frob"})
ATTR_NAMES = ["pads", "strides", "kernel_shape", "dilations", "group", "auto_pad", "axis", "axes", "perm", "mode",
              "alpha", "beta", "epsilon", "transA", "transB", "ceil_mode", "count_include_pad", "split", "to",
              "value", "body", "mystery"]


@pytest.mark.slow
def test_fuzz_protobuf_bytes():
    """Mutated serialized models (bit flips, overwritten, inserted, deleted bytes, truncation)."""
    hyp = _hypothesis()
    st = hyp.strategies
    bases = [corpus.small_model().SerializeToString(), _richer_model().SerializeToString()]

    @hyp.settings(max_examples=1000, deadline=None, database=None,
                  suppress_health_check=list(hyp.HealthCheck))
    @hyp.given(st.sampled_from(range(len(bases))), st.lists(st.tuples(
        st.sampled_from(["flip", "set", "insert", "delete", "truncate"]), st.floats(0, 1),
        st.binary(min_size=1, max_size=8)), min_size=1, max_size=6))
    def run(which, edits):
        data = bytearray(bases[which])
        for kind, where, blob in edits:
            i = min(int(where * len(data)), max(len(data) - 1, 0))
            if not data:
                break
            if kind == "flip":
                data[i] ^= 1 << (blob[0] % 8)
            elif kind == "set":
                data[i:i + len(blob)] = blob
            elif kind == "insert":
                data[i:i] = blob
            elif kind == "delete":
                del data[i:i + len(blob)]
            else:
                del data[i:]
        _load_or_refuse(bytes(data))

    OUTCOMES.clear()
    run()
    assert OUTCOMES.get("refused", 0) > 0 and OUTCOMES.get("imported", 0) > 0, OUTCOMES  # both sides exercised


@pytest.mark.slow
def test_fuzz_mutated_models():
    """Structured mutations of small models: operator types, inputs and outputs, attributes of
    every kind (non-UTF-8 strings included), initializer dims, types and data, input shapes,
    opset and IR versions, node order."""
    hyp = _hypothesis()
    st = hyp.strategies
    import numpy as np

    oh = corpus.oh
    ints = st.integers(-3, 9) | st.sampled_from([0, 1 << 31, 1 << 62, -(1 << 62)])
    attr_value = st.one_of(ints, st.floats(allow_nan=True, allow_infinity=True, width=32),
                           st.lists(ints, max_size=9), st.binary(max_size=12),
                           st.sampled_from([b"SAME_UPPER", b"VALID", b"NOTSET", b"\xff\xfe", b"nearest", b"linear"]))
    mutation = st.one_of(
        st.tuples(st.just("op_type"), st.integers(0, 20), st.sampled_from(OP_TYPES)),
        st.tuples(st.just("input"), st.integers(0, 20), st.integers(0, 5), st.sampled_from(["", "x", "c", "w", "y",
                                                                                          "zz", "p", "f"])),
        st.tuples(st.just("output"), st.integers(0, 20), st.integers(0, 3), st.sampled_from(["", "c", "y", "x",
                                                                                           "new", "r"])),
        st.tuples(st.just("drop_outputs"), st.integers(0, 20)),
        st.tuples(st.just("attr"), st.integers(0, 20), st.sampled_from(ATTR_NAMES), attr_value),
        st.tuples(st.just("dims"), st.integers(0, 20), st.lists(ints, max_size=5)),
        st.tuples(st.just("dtype"), st.integers(0, 20), st.integers(0, 30)),
        st.tuples(st.just("raw"), st.integers(0, 20), st.binary(max_size=64)),
        st.tuples(st.just("input_shape"), st.lists(ints, max_size=6)),
        st.tuples(st.just("opset"), st.integers(-1, 40) | st.just(99)),
        st.tuples(st.just("ir"), st.integers(-1, 15) | st.just(999)),
        st.tuples(st.just("remove"), st.integers(0, 20)),
        st.tuples(st.just("swap"), st.integers(0, 20), st.integers(0, 20)),
        st.tuples(st.just("name"), st.integers(0, 20), st.text(max_size=12)),
    )

    def apply(model, m) -> None:
        g = model.graph
        kind, *args = m
        nodes, inits = g.node, g.initializer
        node = nodes[args[0] % len(nodes)] if nodes and kind in ("op_type", "input", "output", "drop_outputs", "attr",
                                                                 "remove", "swap", "name") else None
        init = inits[args[0] % len(inits)] if inits and kind in ("dims", "dtype", "raw") else None
        if kind == "op_type" and node is not None:
            node.op_type = args[1]
        elif kind == "input" and node is not None:
            if args[1] < len(node.input):
                node.input[args[1]] = args[2]
            else:
                node.input.append(args[2])
        elif kind == "output" and node is not None:
            if args[1] < len(node.output):
                node.output[args[1]] = args[2]
            else:
                node.output.append(args[2])
        elif kind == "drop_outputs" and node is not None:
            del node.output[:]
            node.name = ""
        elif kind == "attr" and node is not None:
            name, value = args[1], args[2]
            if isinstance(value, float) and not np.isfinite(value):
                value = float(np.float32(value))
            node.attribute.append(oh.make_attribute(name, value) if not (isinstance(value, list) and not value)
                                  else oh.make_attribute(name, [], attr_type=corpus.onnx.AttributeProto.INTS))
        elif kind == "dims" and init is not None:
            del init.dims[:]
            init.dims.extend(args[1])
        elif kind == "dtype" and init is not None:
            init.data_type = args[1]
        elif kind == "raw" and init is not None:
            init.raw_data = args[1]
        elif kind == "input_shape":
            t = g.input[0].type.tensor_type
            t.ClearField("shape")
            for d in args[0]:
                t.shape.dim.add().dim_value = d
        elif kind == "opset":
            model.opset_import[0].version = args[0]
        elif kind == "ir":
            model.ir_version = args[0]
        elif kind == "remove" and node is not None:
            nodes.remove(node)
        elif kind == "swap" and node is not None:
            i, j = args[0] % len(nodes), args[1] % len(nodes)
            a, b = type(node)(), type(node)()
            a.CopyFrom(nodes[i])
            b.CopyFrom(nodes[j])
            nodes[i].CopyFrom(b)
            nodes[j].CopyFrom(a)
        elif kind == "name" and node is not None:
            node.name = args[1]

    @hyp.settings(max_examples=1500, deadline=None, database=None, suppress_health_check=list(hyp.HealthCheck))
    @hyp.given(st.booleans(), st.lists(mutation, min_size=1, max_size=5), st.booleans())
    def run(rich, mutations, via_bytes):
        model = _richer_model() if rich else corpus.small_model()
        for m in mutations:
            try:
                apply(model, m)
            except (ValueError, TypeError, IndexError):  # a mutation the protobuf API itself refuses
                pass
        try:
            data = model.SerializeToString()
        except Exception:
            return
        _load_or_refuse(data if via_bytes else model)

    OUTCOMES.clear()
    run()
    assert OUTCOMES.get("refused", 0) > 0 and OUTCOMES.get("imported", 0) > 0, OUTCOMES


@pytest.mark.slow
def test_fuzz_external_data(tmp_path_factory):
    """Mutated external-data records (location, offset, length) and files, read from disk."""
    hyp = _hypothesis()
    st = hyp.strategies
    counter = [0]
    locations = st.sampled_from(["w.bin", "./w.bin", "sub/w.bin", "../w.bin", "/etc/hostname", "", ".", "sub",
                                 "link.bin", "sub/../w.bin", "w.bin/", "\\w.bin", "C:/w.bin", "nul", "w.bin\x00x",
                                 "fifo", "dir/", "a" * 300])

    w = corpus.W_BYTES
    numbers = st.text("0123456789-x", max_size=6)

    @hyp.settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(hyp.HealthCheck))
    @hyp.given(locations, st.none() | st.sampled_from(["0", "8", "-1", str(w)]) | numbers,
               st.none() | st.sampled_from([str(w), str(w - 4), "0"]) | numbers,
               st.sampled_from([w, w + 8, w - 4, 0, 2 * w]) | st.integers(0, 2 * w))
    def run(location, offset, length, size):
        counter[0] += 1
        folder = tmp_path_factory.mktemp(f"ext{counter[0]}")
        (folder / "m" / "sub").mkdir(parents=True)
        for p in (folder / "w.bin", folder / "m" / "w.bin", folder / "m" / "sub" / "w.bin"):
            corpus._weights_file(p, size)
        os.symlink(folder / "m" / "w.bin", folder / "m" / "link.bin")
        os.mkfifo(folder / "m" / "fifo")
        (folder / "m" / "dir").mkdir()
        path = corpus._external(folder / "m", location, offset=offset, length=length)
        _load_or_refuse(path)

    OUTCOMES.clear()
    run()
    assert OUTCOMES.get("refused", 0) > 0 and OUTCOMES.get("imported", 0) > 0, OUTCOMES


# ---- item 9: a cell whose independent check could not run says so -----------------------------------------
def test_independent_check_field_describe_and_report():
    import pandas as pd

    from ios_bench.planning.cells import describe
    from ios_bench.reporting.report import failures_table
    from ios_bench.results import cell_key, flatten
    from ios_bench.running.task_cell import independent_check
    from ios_core.check import compare

    graph = frontend.load(corpus.small_model())
    assert independent_check(graph, {}, None) is None  # no original file: nothing to say
    graph.source = {"format": "onnx", "path": "/nonexistent/net.onnx"}
    missing = independent_check(graph, {"source_error": "RuntimeError: cannot load opset 27"}, None)
    assert missing["ran"] is False and "cannot load opset 27" in missing["reason"]
    assert independent_check(graph, {}, None)["reason"].endswith("the original ONNX file is gone")
    import numpy as np

    ran = independent_check(graph, {}, compare(np.ones(3), np.ones(3), 1e-4))
    assert ran == {"ran": True, "passed": True}

    record = {"cell": cell_key("net", 1, "onnxruntime", "cpu"), "model": "net", "batch_size": 1,
              "framework": "onnxruntime", "device": "cpu", "status": "ok", "median_ms": 1.0, "std_ms": 0.1,
              "check": {"passed": True, "max_rel_err": 0.0}, "independent_check": missing}
    line = describe(record)
    assert "oracle only" in line and "cannot load opset 27" in line
    table = failures_table(pd.DataFrame([flatten(record)]))
    assert table is not None and any("oracle only" in row[4] and "opset 27" in row[5] for row in table.rows)
    del record["independent_check"]
    assert "oracle only" not in describe(record)
    assert failures_table(pd.DataFrame([flatten(record)])) is None


# ---- item 11: files a run writes outside its folder ---------------------------------------------------------
def test_onnxruntime_writes_nothing_in_home_under_the_quiet_environment(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    code = ("from ios_bench.running.sideeffects import quiet_environment; quiet_environment()\n"
            "import onnxruntime as ort\nfrom tests import hostile_onnx as c\n"
            "s = ort.InferenceSession(c.small_model().SerializeToString(), providers=['CPUExecutionProvider'])\n"
            "import numpy as np; s.run(None, {'x': np.zeros((1, 3, 8, 8), np.float32)})\n")
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode and "No module named 'onnxruntime'" in p.stderr:
        pytest.skip("no onnxruntime")
    assert p.returncode == 0, p.stderr
    assert sorted(str(q.relative_to(home)) for q in home.rglob("*")) == []


def test_quiet_environment_keeps_the_users_choice_and_the_report_lists_outside_writes():
    from ios_bench.reporting.report import outside_writes_table
    from ios_bench.running.sideeffects import QUIET_ENV, quiet_environment

    env = {"ORT_DISABLE_TELEMETRY": "0"}
    assert quiet_environment(env) == {k: v for k, v in QUIET_ENV.items() if k != "ORT_DISABLE_TELEMETRY"}
    assert env["ORT_DISABLE_TELEMETRY"] == "0"
    table = outside_writes_table()
    libraries = {row[0] for row in table.rows}
    assert {"ONNX Runtime", "OpenVINO", "torch.compile (inductor)"} <= libraries
    assert "Files written outside the run folder" in table.md()


def test_sweep_says_when_the_independent_check_could_not_run(tmp_path):
    """End to end: the reference worker cannot run the original file (a test plugin makes
    onnxruntime fail), so every cell says so: record, terminal line, report."""
    import json

    src = corpus.save(corpus.small_model(), tmp_path / "net.onnx")
    env = dict(os.environ, PYTHONPATH=str(ROOT), IOS_BENCH_PLUGINS="tests.plugin_no_source_check")
    p = subprocess.run([sys.executable, "-m", "ios_bench", "run", "--models", str(src), "--batch", "1",
                        "--frameworks", "onnxruntime", "--schedules", "none", "--out", "runs/r", "--warmup", "0",
                        "--repeat", "1", "--min-sample-ms", "0", "--no-progress", "--rounds", "1"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "runs" / "r" / "results.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == "ok" for r in records)
    for r in records:
        assert r["independent_check"]["ran"] is False, r
        assert "onnxruntime cannot run this file" in r["independent_check"]["reason"]
        assert "source" not in r["check"]
    assert "oracle only" in p.stdout + p.stderr  # the terminal line of the cell
    report = (tmp_path / "reports" / "r" / "report.md").read_text()
    assert "oracle only" in report and "onnxruntime cannot run this file" in report


def test_our_own_export_schedule_and_stats_are_replaced(tmp_path, run_cli):
    """The ownership check recognizes what ios-bench wrote: a second export, optimize -o and
    --stats-json over the first ones succeed."""
    for _ in range(2):
        code, _, err = run_cli(["export", "sample", "-o", str(tmp_path / "m.onnx")])
        assert code == 0, err
        code, _, err = run_cli(["optimize", "--model", "sample", "--weights-seed", "0", "-o", str(tmp_path / "s.json"),
                                "--stats-json", str(tmp_path / "stats.json")])
        assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "s.json", "s.npz", "stats.json"]
