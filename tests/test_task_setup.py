"""ios_bench.running.task_setup: the probe worker says which frameworks run and times each one's
start (what the sweep's estimate calibrates from), in a real worker process."""

import json
import subprocess
import sys

from tests.harness_helpers import ROOT, env_for


def _probe(tmp_path, names):
    spec = {"task": "probe", "device": "cpu", "names": names, "result_path": str(tmp_path / "probe.json")}
    p = subprocess.run([sys.executable, "-m", "ios_bench.running.worker", json.dumps(spec)], cwd=ROOT,
                       env=env_for(), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads((tmp_path / "probe.json").read_text())


def test_the_probe_times_each_available_frameworks_start(tmp_path):
    got = _probe(tmp_path, ["onnxruntime", "onnxruntime-parallel", "ios"])
    assert 0.0 < got["process_start_s"] < 30.0  # the interpreter and the harness, from the kernel's clock
    ort, par = got["adapters"]["onnxruntime"], got["adapters"]["onnxruntime-parallel"]
    assert ort["reason"] is None and got["process_start_s"] <= ort["start_s"] < 60.0
    # the second adapter on the same library is charged the first one's import too
    assert par["start_s"] >= ort["start_s"] - 0.05
    starts = got["provider_start_s"]
    assert set(starts) == {n for n, why in got["providers"].items() if why is None}
    assert all(got["process_start_s"] <= s < 60.0 for s in starts.values())


def test_a_framework_that_cannot_run_has_no_start(tmp_path):
    got = _probe(tmp_path, ["tensorrt"])  # GPU only
    assert got["adapters"]["tensorrt"]["reason"] and got["adapters"]["tensorrt"].get("start_s") is None
