"""ios-bench list (ios_bench.commands.list): the frameworks' own log output goes to a log file, the
console shows only the project's lines (issue 42)."""

import importlib.util
import os
import subprocess
import sys

from tests.harness_helpers import ROOT

NOISE = ("absl::InitializeLog", "I0000 ", "cudart_stub", "cpu_feature_guard", "oneDNN custom operations")


def _env(tmp_path) -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "250"}


def test_list_frameworks_keeps_the_frameworks_log_lines_off_the_console(tmp_path):
    p = subprocess.run([sys.executable, "-m", "ios_bench", "list", "frameworks"], env=_env(tmp_path),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "Frameworks (device cpu)" in p.stdout.splitlines()[0]
    for word in NOISE:
        assert word not in p.stdout and word not in p.stderr, word
    log = tmp_path / "cache" / "ios-bench" / "logs" / "list-frameworks.log"
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert lines in ([], [f"the frameworks' own log output: {log}"]), lines
    if importlib.util.find_spec("tensorflow") is not None:  # TensorFlow 2.21 logs on import: in the log now
        text = log.read_text()
        assert any(word in text for word in NOISE), text[:2000]
        assert lines == [f"the frameworks' own log output: {log}"]


WRITER = r"""
import os, subprocess, sys
from pathlib import Path
from ios_bench.commands.list import framework_output_to
with framework_output_to(Path(sys.argv[1])) as log:
    os.write(2, b"I0000 from C, fd 2\n")
    os.write(1, b"I0000 from C, fd 1\n")
    subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('I0000 from a child\\n')"])
    print("I0000 from Python", file=sys.stderr)
print("project line")
print("project error line", file=sys.stderr)
"""


def test_framework_output_goes_to_the_log_fds_and_children_included_then_back(tmp_path):
    log = tmp_path / "logs" / "x.log"
    p = subprocess.run([sys.executable, "-c", WRITER, str(log)], env=_env(tmp_path), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "project line\n" and p.stderr == "project error line\n"
    text = log.read_text()
    for line in ("I0000 from C, fd 2", "I0000 from C, fd 1", "I0000 from a child", "I0000 from Python"):
        assert line in text
    # a log folder that cannot be written: a temporary file instead, the console still clean
    (tmp_path / "file").write_text("")
    p = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path / "file" / "x.log")], env=_env(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout == "project line\n" and p.stderr == "project error line\n", p.stderr
