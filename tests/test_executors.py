"""Executors (ios_bench.running.executors, ios_bench.running.fleet): local and Ray nodes, device matching,
lost nodes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ios_bench import results

ROOT = Path(__file__).resolve().parent.parent


STORE_MB = 100 * 2**20


FAST = ["--warmup", "0", "--repeat", "2", "--min-sample-ms", "0", "--no-progress", "--no-report",
        "--schedules", "none", "--threads", "1", "--rounds", "1"]


def node_args(name: str, device: str) -> dict:
    return {"num_cpus": 1, "object_store_memory": STORE_MB,
            "labels": {"ios-bench/name": name, "ios-bench/device": device}}


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": STORE_MB,
                                                      "include_dashboard": False})
    try:
        c.add_node(**node_args("alpha", "alpha"))
        c.add_node(**node_args("beta", "beta"))
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


def test_devices_are_matched_to_node_resources_and_labels():
    from ios_bench.errors import InputError
    from ios_bench.running.executors import Host, node_offers, parse_device

    cpu = Host("a", "a", cpus=4, labels={"ios-bench/device": "epyc"})
    v100 = Host("b", "b", cpus=8, gpus=2, accelerators=["V100"])
    local = Host("l", "l", cpus=2, labels={"gpu_model": "Tesla V100-SXM2-16GB"}, any_cuda=True)
    assert node_offers(cpu, "cpu") is None and node_offers(cpu, "cpu:epyc") is None
    assert node_offers(cpu, "cuda") == "has no GPU" and node_offers(cpu, "cpu:xeon") == "carries no label 'xeon'"
    assert node_offers(v100, "cuda:V100") is None and node_offers(v100, "cuda:a100") is not None
    assert node_offers(local, "cuda:v100") is None  # a product name matches as a substring
    assert parse_device("cuda:V100") == ("cuda", "V100") and parse_device("cpu") == ("cpu", None)
    for bad in ("tpu", "cuda:", "cuda:a b", "cpu:$(x)"):
        with pytest.raises(InputError):
            parse_device(bad)


def test_an_unreachable_ray_address_is_refused_before_anything_is_written(run_cli, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "run"
    code, _, err = run_cli(["run", "--models", "sample", "--executor", "ray", "--ray-address", "127.0.0.1:1",
                            "--out", str(out), "--no-progress"])
    assert code == 2 and "--ray-address 127.0.0.1:1: cannot reach a Ray cluster there" in err
    assert not out.exists()
    code, _, err = run_cli(["run", "--models", "sample", "--ray-address", "127.0.0.1:1", "--out", str(out)])
    assert code == 2 and "--ray-address needs --executor ray" in err


def _record(model, fw, node, ms, device="cpu"):
    return {"cell": f"{model}|b1|{fw}|{device}", "model": model, "batch_size": 1, "framework": fw, "device": device,
            "status": "ok", "median_ms": ms, "std_ms": 0.1, "p10_ms": ms, "p90_ms": ms, "throughput": 1000 / ms,
            "throughput_p10": 1000 / ms, "throughput_p90": 1000 / ms, "check": {"passed": True}, "node": node}


def test_report_groups_cells_by_device_kind_and_node(tmp_path):
    from ios_bench.reporting.report import write_report

    run = tmp_path / "run"
    run.mkdir()
    recs = [_record("m1", "torch", "alpha", 2.0), _record("m1", "ios-both", "alpha", 1.0),
            _record("m2", "torch", "beta", 4.0), _record("m2", "ios-both", "beta", 3.0),
            _record("m1", "torch", "gpu1", 0.5, "cuda:V100")]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    for place in ("cpu on alpha", "cpu on beta", "cuda:V100 on gpu1"):
        assert f"**Latency (ms), batch 1, {place}**" in md
    alpha = md.split("**Latency (ms), batch 1, cpu on alpha**")[1].split("**")[0]
    # (two frameworks, one model: frameworks as rows)
    assert "| torch | 2.000 ±0.100 |" in alpha and "| IOS-Both | 1.000 ±0.100 |" in alpha
    assert "| m2 |" not in alpha and "| framework | m1 | GeoMean |" in alpha  # no table mixes nodes
    across = md.split("**Latency (ms) across devices and nodes, batch 1**")[1].split("_median")[0]
    assert "| model | framework | cpu on alpha | cpu on beta | cuda:V100 on gpu1 |" in across
    assert "| m1 | torch | 2.000 ±0.100 | - | 0.500 ±0.100 |" in across
    assert "| m1 | 1 | torch | cpu | ok |" in md and "| alpha |" in md.split("## Every cell")[1]


def cli(args, cwd, timeout=240):
    env = dict(os.environ, PYTHONPATH=str(ROOT), IOS_BENCH_PLUGINS="tests.harness_plugin")
    return subprocess.run([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.timeout(300)
def test_ray_and_local_executors_run_the_same_cells_once_with_their_node(cluster, tmp_path):
    sweep = ["--models", "tiny_a,tiny_b", "--batch", "1", "--frameworks", "test-ref,test-ref2", *FAST]
    p = cli(["run", *sweep, "--out", "runs/local"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    p = cli(["run", *sweep, "--device", "cpu,cuda:V100", "--out", "runs/ray", "--executor", "ray",
             "--ray-address", cluster.address], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    local = results.read_records(tmp_path / "runs" / "local")
    fleet = results.read_records(tmp_path / "runs" / "ray")
    ran = [r for r in fleet if r["device"] == "cpu"]
    assert sorted(r["cell"] for r in ran) == sorted(r["cell"] for r in local)
    assert len({r["cell"] for r in ran}) == len(ran) == 4  # each exactly once
    assert all(r["status"] == "ok" and r["check"]["passed"] for r in local + ran), [r.get("reason") for r in ran]
    # node identity: the labelled node names, and each node's own env.json
    assert {r["node"] for r in ran} <= {"alpha", "beta"}
    for r in ran:
        env = json.loads((tmp_path / "runs" / "ray" / r["node_env"]).read_text())
        assert env["node"]["name"] == r["node"] and env["node"]["labels"]["ios-bench/device"] == r["node"]
        assert r["threads"] == 1 and r["affinity"] and len(r["affinity"]) == 1
        assert (tmp_path / "runs" / "ray" / r["log"]).is_file()
    # one (model, batch, device) stays on one node: a table row compares like with like
    for model in ("tiny_a", "tiny_b"):
        assert len({r["node"] for r in ran if r["model"] == model}) == 1
    assert {r["node"] for r in local} == {local[0]["node"]} and local[0]["node_env"] == "env.json"
    # a device no node offers: skipped with the reason, stored before anything ran
    skipped = [r for r in fleet if r["device"] == "cuda:V100"]
    assert len(skipped) == 4 and all(r["status"] == "skipped" for r in skipped)
    assert all("no node offers cuda:V100" in r["reason"] for r in skipped)
    assert [r["device"] for r in fleet[:4]] == ["cuda:V100"] * 4
    assert "plan: cpu -> " in p.stderr and "not on alpha: has no GPU" in p.stderr


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_node_killed_mid_sweep_then_resume_runs_every_cell_once(cluster, tmp_path, monkeypatch):
    """A node dies once a round has finished on it: the sweep stops with the cells it could not
    run left for --resume; the resumed sweep keeps the finished rounds (never measured again)
    and runs the rest on the node that replaced it."""
    monkeypatch.setenv("TEST_SLOW_EXECUTE_S", "0.4")  # inherited by the node's processes only
    gamma = cluster.add_node(**node_args("gamma", "gamma"))
    monkeypatch.delenv("TEST_SLOW_EXECUTE_S")
    run = tmp_path / "runs" / "k"
    # the node dies while its next round runs
    code, err = _fleet_sweep_losing(cluster, tmp_path, "runs/k", "cpu:gamma", "gamma",
                                    lambda: cluster.remove_node(gamma, allow_graceful=False))
    assert code == 1, err[-3000:]
    assert "cells not run" in err and "--resume" in err
    before = results.read_records(run)
    assert len(before) < 4 and all(r["status"] == "ok" for r in before)
    kept = _rounds_on(run, "gamma")

    cluster.add_node(**node_args("gamma2", "gamma"))
    p = cli(["run", "--resume", "--out", "runs/k", "--no-progress", "--no-report"], tmp_path)  # its executor again
    assert p.returncode == 0, p.stderr[-3000:]
    after = results.read_records(run)
    assert after[: len(before)] == before  # finished records untouched
    cells = [r["cell"] for r in after]
    assert sorted(cells) == sorted(f"{m}|b1|{fw}|cpu:gamma" for m in ("tiny_a", "tiny_b")
                                   for fw in ("test-ref", "test-ref2"))
    assert all(r["status"] == "ok" for r in after)
    rounds = [rnd for r in after[len(before):] for rnd in r["rounds"]]
    # the rounds finished on gamma before it died are kept, the rest ran on gamma2
    assert sum(rnd["node"] == "gamma" for rnd in rounds) >= min(kept, 1)
    assert {rnd["node"] for rnd in rounds} <= {"gamma", "gamma2"} and "gamma2" in {rnd["node"] for rnd in rounds}
    assert (run / "nodes" / "gamma2" / "env.json").is_file()


def _fleet_sweep_losing(cluster, cwd, out: str, device: str, node: str, lose) -> tuple[int, str]:
    """A Ray sweep of two tiny models x two test frameworks on ``device``; once a round has
    finished on ``node``, ``lose()`` takes a node away. Returns (exit code, stderr)."""
    args = ["run", "--models", "tiny_a,tiny_b", "--batch", "1", "--frameworks", "test-ref,test-ref2",
            "--device", device, *FAST, "--out", out, "--executor", "ray", "--ray-address", cluster.address]
    env = dict(os.environ, PYTHONPATH=str(ROOT), IOS_BENCH_PLUGINS="tests.harness_plugin")
    proc = subprocess.Popen([sys.executable, "-m", "ios_bench", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.time()
        while not _rounds_on(cwd / out, node):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.time() - t0 < 240, f"no round finished on {node}"
            time.sleep(0.2)
        lose()
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def _rounds_on(run, node: str) -> int:
    """Rounds finished on ``node`` so far (the run folder's rounds/, kept until the cell's record is)."""
    found = 0
    for f in (run / "rounds").glob("*.jsonl") if (run / "rounds").is_dir() else []:
        for line in f.read_text().splitlines():
            try:
                found += json.loads(line).get("node") == node
            except ValueError:
                pass
    return found


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_a_node_lost_mid_cell_costs_that_cell_only_and_it_is_retried_on_another(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_SLOW_EXECUTE_S", "1.0")  # a cell lasts seconds: the kill lands inside one
    doomed = cluster.add_node(**node_args("omega1", "omega"))
    cluster.add_node(**node_args("omega2", "omega"))
    monkeypatch.delenv("TEST_SLOW_EXECUTE_S")
    run = tmp_path / "runs" / "r"

    def lose_omega1():
        time.sleep(2.0)  # omega1's group's next round (its group stays on omega1) is now running
        cluster.remove_node(doomed, allow_graceful=False)

    code, err = _fleet_sweep_losing(cluster, tmp_path, "runs/r", "cpu:omega", "omega1", lose_omega1)
    assert code == 0, err[-3000:]
    recs = results.read_records(run)
    assert sorted(r["cell"] for r in recs) == sorted(f"{m}|b1|{fw}|cpu:omega" for m in ("tiny_a", "tiny_b")
                                                     for fw in ("test-ref", "test-ref2"))
    assert all(r["status"] == "ok" for r in recs)
    assert "node omega1 lost" in err and "retrying" in err, err[-3000:]
    rounds = [rnd for r in recs for rnd in r["rounds"]]
    assert {rnd["node"] for rnd in rounds} == {"omega1", "omega2"}
    assert all(rnd["status"] == "ok" for rnd in rounds)  # the lost round ran again on omega2: no failed one
