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

import hostile_onnx as corpus  # noqa: E402
from conftest import ROOT  # noqa: E402

from ios_core.frontend import UnsupportedModel  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402


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
    from ios_bench import envinfo

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
