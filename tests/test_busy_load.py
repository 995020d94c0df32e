"""Issue 48: a disturbed window names what disturbed it (per-process CPU time from /proc, this
process tree left out), a steady co-tenant is told from a burst on recorded /proc traces
(tests/data/load_traces.json, made by make_load_traces.py) and becomes the condition rounds are
measured under, ab pairs only rounds under the same load, and the console, report, compare and
doctor say so."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ios_core.measurement import interference
from ios_core.measurement.interference import (
    Window,
    judge,
    load_label,
    own_tree,
    quiet_verdict,
    read_process_times,
    steady_load,
    top_others,
    under_load,
)

TRACES = json.loads((Path(__file__).parent / "data" / "load_traces.json").read_text())
STAT = "cpu  {0} 0 {1} {2} 0 0 0 {3} 0 0\ncpu0 1 0 1 1 0 0 0 0 0 0\ncpu1 1 0 1 1 0 0 0 0 0 0\n"


def _write(root: Path, reading: dict) -> None:
    """One /proc reading of a trace as files: /proc/stat and /proc/<pid>/stat."""
    user, system, idle, steal = reading["stat"]
    (root / "stat").write_text(STAT.format(user, system, idle, steal))
    for old in root.iterdir():
        if old.is_dir() and old.name not in reading["procs"]:
            (old / "stat").unlink()
            old.rmdir()
    for pid, (name, ppid, ticks) in reading["procs"].items():
        (root / pid).mkdir(exist_ok=True)
        # pid (comm) state ppid ... utime(14) stime(15) ... starttime(22)
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ticks), "0"] + ["0"] * 6 + ["7"]
        (root / pid / "stat").write_text(f"{pid} ({name}) " + " ".join(fields) + "\n")


def replay(name: str, tmp_path: Path, monkeypatch) -> list[dict]:
    """The windows' figures a :class:`Window` computes from a recorded trace (fake /proc, fake clock)."""
    monkeypatch.setattr(interference, "TICKS_PER_S", 100)
    monkeypatch.setattr(interference, "own_cpu_seconds", lambda: 0.0)
    if os.sysconf("SC_CLK_TCK") != 100:
        pytest.skip("the traces are in ticks of 1/100 s")
    root = tmp_path / name
    root.mkdir()
    out = []
    for before, after in TRACES[name]:
        _write(root, before)
        clock = iter([before["t"], after["t"]])
        monkeypatch.setattr(interference.time, "perf_counter", lambda clock=clock: next(clock))
        w = Window(canary=False, stat_path=str(root / "stat"), proc=str(root))
        with w:
            _write(root, after)
        w.figures["start_unix"] = before["t"]
        out.append(w.figures)
    return out


def test_steady_and_burst_told_apart_on_recorded_traces(tmp_path, monkeypatch):
    steady = replay("steady", tmp_path, monkeypatch)
    assert all(f["others"][0]["name"] == "python3" and f["others"][0]["pid"] == 4242 for f in steady)
    load = steady_load(steady)
    assert [(c["name"], c["pid"]) for c in load] == [("python3", 4242)] and 0.47 < load[0]["share"] < 0.51
    assert load[0]["windows"] == load[0]["of"] == 10
    assert load_label(load) == "under load: python3 pid 4242 49% of the CPUs"
    # without the condition every window is disturbed, naming its co-tenant; under it none is
    assert all("(python3 pid 4242: " in judge(f, None) for f in steady)
    assert all(judge(f, None, load=load) is None and under_load(f, load) for f in steady)

    duty = steady_load(replay("duty50", tmp_path, monkeypatch))
    assert [(c["name"], c["pid"]) for c in duty] == [("python3", 4343)] and 0.22 < duty[0]["share"] < 0.28

    burst = replay("burst", tmp_path, monkeypatch)
    assert steady_load(burst) == []
    hit = [i for i, f in enumerate(burst) if judge(f, None)]
    assert hit == [3, 4] and "other processes used 49% of the CPUs (make pid 4444: 50%)" in judge(burst[3], None)

    comes = replay("comes_and_goes", tmp_path, monkeypatch)
    assert steady_load(comes) == []  # at its share in 7 windows of 10: not a condition, its rounds stay disturbed
    assert [i for i, f in enumerate(comes) if judge(f, None) is None] == [3, 5, 8]

    mixed = replay("steady_with_burst", tmp_path, monkeypatch)
    load = steady_load(mixed)
    assert [(c["name"], c["pid"]) for c in load] == [("python3", 4242)]
    why = [judge(f, None, load=load) for f in mixed]
    assert [i for i, w in enumerate(why) if w] == [5]  # the burst on top of the steady load still disturbs
    assert why[5].startswith("besides the steady load, other processes used 5") and "(make pid 4444: 50%)" in why[5]
    assert "python3" not in why[5]


def test_too_few_windows_or_a_small_share_are_not_a_condition(tmp_path, monkeypatch):
    steady = replay("steady", tmp_path, monkeypatch)
    assert steady_load(steady[:3]) == []  # fewer than MIN_STEADY_WINDOWS
    assert steady_load(steady[:4]) != []
    small = [{**f, "others": [{**o, "share": 0.03} for o in f["others"]]} for f in steady]
    assert steady_load(small) == []  # 3 % all along disturbs nothing: not a condition


def test_a_steady_cotenant_that_leaves_makes_its_windows_quiet_not_loaded(tmp_path, monkeypatch):
    steady = replay("steady", tmp_path, monkeypatch)
    load = steady_load(steady)
    gone = {**steady[0], "other_cpu": 0.01, "others": []}
    assert not under_load(gone, load) and judge(gone, None, load=load) is None
    doubled = {**steady[0], "other_cpu": 0.99, "others": [{"name": "python3", "pid": 4242, "share": 0.99}]}
    assert "besides the steady load" in judge(doubled, None, load=load)  # the co-tenant itself burst


def test_bad_input_is_read_as_nothing(tmp_path):
    root = tmp_path / "proc"
    (root / "12").mkdir(parents=True)
    (root / "12" / "stat").write_text("garbage")
    (root / "13").mkdir()
    (root / "13" / "stat").write_text("13 (a (weird) name) S 1 " + " ".join(["0"] * 9) + " 250 50 "
                                      + " ".join(["0"] * 6) + " 99\n")
    (root / "self").mkdir()
    got = read_process_times(str(root))
    assert list(got) == [13] and got[13][0] == "a (weird) name" and got[13][1] == 99
    assert got[13][2] == pytest.approx(300 / interference.TICKS_PER_S) and got[13][3] == 1
    assert read_process_times(str(tmp_path / "missing")) == {}
    assert top_others({}, got, 0.0, 2) == []  # no capacity: nobody named
    assert steady_load([None, {"others": "x", "other_cpu": 0.5}, {"others": [1, None], "other_cpu": "a"}] * 3) == []
    assert judge({"other_cpu": 0.5, "others": "nonsense"}, None) == "other processes used 50% of the CPUs"
    assert "cannot be read" in quiet_verdict({})


def test_a_real_busy_process_is_named_and_this_process_tree_is_not():
    """On this machine: a busy process outside this process tree (started by a shell that exits, so
    it is nobody's child here) is named with a plausible share; a busy child of this process is not."""
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("needs Linux /proc")
    busy = "import time\nt = time.time()\nwhile time.time() - t < 4: pass\n"
    out = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "{busy}" >/dev/null 2>&1 & echo $!'],
                         capture_output=True, text=True, check=True)
    stranger = int(out.stdout.strip())
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        time.sleep(0.3)
        before = read_process_times()
        with Window(canary=False) as w:
            time.sleep(1.0)
        after = read_process_times()
        cpus = w.figures["cpus"]
        # every process over the window (the window itself keeps the top 3: on a shared machine others may lead)
        named = {o["pid"]: o for o in top_others(before, after, w.figures["window_s"], cpus, own_tree(after), top=100,
                                                 proc="/proc")}
        assert stranger in named, named
        assert named[stranger]["cmd"].startswith(f"{sys.executable} -c import time"), named[stranger]
        assert len(w.figures["others"]) <= 3 and w.figures["others"][0]["share"] >= named[stranger]["share"] - 0.05
        # at most one core of the machine's capacity and what /proc/stat saw of other processes; at least a
        # clear share of it (on a machine shared with other jobs it gets less than a whole core: 0.145 seen)
        share = named[stranger]["share"]
        assert 0.05 <= share <= 1.05 / cpus and share <= w.figures["other_cpu"] + 0.05, (named[stranger], w.figures)
        assert named[stranger]["name"].startswith("python")
        assert child.pid not in named and os.getpid() not in named
        top = w.figures["others"][0]
        assert f"({top['name']} pid {top['pid']}: " in judge(w.figures, None)
        # cheap beside a round's window (seconds): 132-190 ms seen with load average 8 on 2 cores, so not 100
        assert w.figures["others_read_ms"] < 500
    finally:
        child.kill()
        child.wait()
        try:
            os.kill(stranger, 9)
        except ProcessLookupError:
            pass


def test_a_window_too_short_to_judge_does_not_read_the_processes():
    with Window(canary=False) as w:
        pass
    assert "others" not in w.figures and "other_cpu" in w.figures


# ---- rounds: the condition on the rounds, the pairing rule, the wording -------------------------------

def _round(i, level, others=(), other_cpu=None, side_pass=None, status="ok"):
    share = sum(o[2] for o in others)
    figures = {"window_s": 1.0, "start_unix": 100.0 + i, "other_cpu": share if other_cpu is None else other_cpu,
               "others": [{"name": n, "pid": p, "share": s} for n, p, s in others]}
    return {"round": i, "pass": i if side_pass is None else side_pass, "position": 0, "status": status,
            "samples_ms": [level * (1 + 0.002 * j) for j in range(5)], "interference": figures}


LOADED = ("python3", 4242, 0.49)


def test_rounds_under_a_steady_load_are_measured_and_labelled():
    from ios_bench.running.rounds import judge_rounds, run_load, summarize

    rounds = [_round(i, 10.0 + 0.01 * i, [LOADED]) for i in range(6)]
    judge_rounds(rounds, None)  # no condition: every round disturbed, naming its co-tenant
    assert all(r["disturbed"] == "other processes used 49% of the CPUs (python3 pid 4242: 49%)" for r in rounds)
    assert summarize(rounds)["rounds_used"] == 0
    load = run_load(rounds)
    judge_rounds(rounds, None, load)
    assert all(r["disturbed"] is None and r["load"] == "under load: python3 pid 4242 49% of the CPUs" for r in rounds)
    s = summarize(rounds)
    assert s["rounds_used"] == 6 and s["unstable"] is None
    assert s["load"] == "under load: python3 pid 4242 49% of the CPUs"
    # a burst of another process on top still disturbs its round; the others stay measured under load
    rounds[2]["interference"]["others"].append({"name": "make", "pid": 99, "share": 0.4})
    rounds[2]["interference"]["other_cpu"] = 0.89
    judge_rounds(rounds, None, load)
    assert rounds[2]["disturbed"].startswith("besides the steady load, other processes used 40%")
    assert "load" not in rounds[2] and summarize(rounds)["rounds_used"] == 5
    # rounds that disagree among themselves under load are still unstable
    wild = [_round(i, 10.0 * (1 + 0.3 * (i % 2)), [LOADED]) for i in range(6)]
    judge_rounds(wild, None, run_load(wild))
    assert summarize(wild)["unstable"].startswith("interval +/-")


def test_ab_pairs_only_rounds_under_the_same_load():
    from ios_bench.running.rounds import judge_rounds, paired_rounds, run_load

    a = [_round(i, 10.0, [LOADED]) for i in range(5)]
    b = [_round(i, 11.0, [LOADED]) for i in range(5)]
    b[1]["interference"].update(others=[], other_cpu=0.0)  # the co-tenant paused during B's round of pass 1
    b[3]["interference"]["others"].append({"name": "make", "pid": 99, "share": 0.45})  # a burst hits B in pass 3
    b[3]["interference"]["other_cpu"] = 0.94
    load = run_load(a + b)
    assert [(c["name"], c["pid"]) for c in load] == [("python3", 4242)]
    judge_rounds(a, None, load)
    judge_rounds(b, None, load)
    assert b[1]["disturbed"] is None and "load" not in b[1] and b[3]["disturbed"]
    pa, pb = paired_rounds(a, b)
    assert len(pa) == 3 and all(x[0] == 10.0 for x in pa) and all(y[0] == 11.0 for y in pb)  # passes 0, 2, 4
    quiet_a = [_round(i, 10.0) for i in range(3)]
    quiet_b = [_round(i, 11.0) for i in range(3)]
    judge_rounds(quiet_a + quiet_b, None, [])
    assert len(paired_rounds(quiet_a, quiet_b)[0]) == 3  # quiet against quiet pairs as before


def test_a_co_tenant_steady_per_cell_is_a_condition_though_its_share_depends_on_the_cell():
    """Seen beside a busy loop on one core: 49-50 % of the machine beside a one-thread cell, 32-35 %
    beside a two-thread one that takes part of its core. Steady within each cell, not over the run."""
    from ios_bench.running.rounds import judge_rounds, paired_rounds, run_load

    shares = {"torch": 0.50, "openvino": 0.30, "ios": 0.20}
    cells = {k: [_round(i, 10.0, [("python3", 4242, s * (1 + 0.02 * (i % 3)))]) for i in range(5)]
             for k, s in shares.items()}
    flat = [r for rs in cells.values() for r in rs]
    assert run_load(flat) == []  # one band over the run: 0.2 and 0.5 are both far from its median 0.3
    load = run_load(cells)
    assert [(c["name"], c["pid"], c["windows"], c["of"]) for c in load] == [("python3", 4242, 15, 15)]
    assert {k: round(v, 2) for k, v in load[0]["shares"].items()} == {"torch": 0.51, "openvino": 0.31, "ios": 0.2}
    for key, rs in cells.items():
        judge_rounds(rs, None, load, key)
    assert all(r["disturbed"] is None for r in flat)
    assert cells["openvino"][0]["load"] == "under load: python3 pid 4242 31% of the CPUs"
    assert cells["torch"][0]["load"] == "under load: python3 pid 4242 51% of the CPUs"
    # ab's two sides see different shares of the same co-tenant: their rounds still pair
    assert len(paired_rounds(cells["torch"], cells["openvino"])[0]) == 5
    # present in one cell only (a job that ran beside it): not a condition of the run
    alone = {"a": [_round(i, 10.0, [("make", 9, 0.5)]) for i in range(5)], "b": [_round(i, 10.0) for i in range(5)]}
    assert run_load(alone) == []


def test_under_a_steady_load_the_canary_and_slowed_samples_are_judged_against_the_cell():
    """A cell whose process shares the co-tenant's core has a slower canary (2x) and more slowed
    samples in every window: under the load, that is its condition; a window worse than that is not."""
    from ios_bench.running.rounds import judge_rounds, run_load

    rounds = [_round(i, 10.0, [LOADED]) for i in range(6)]
    for r in rounds:
        r["interference"].update(canary_before_ms=7.9, canary_after_ms=7.9, slow_samples=0.4)
    rounds[4]["interference"].update(canary_after_ms=12.0)
    rounds[5]["interference"].update(slow_samples=0.8)
    judge_rounds(rounds, 3.9)  # quiet rule: the usual canary of the session, 3.9 ms
    assert all(r["disturbed"].startswith("other processes used 49%") and "canary 2.03x" in r["disturbed"]
               for r in rounds[:4])
    load = run_load(rounds)
    judge_rounds(rounds, 3.9, load, None)
    assert [r["disturbed"] for r in rounds[:4]] == [None] * 4 and rounds[0]["load_by"] == "python3 pid 4242"
    assert rounds[4]["disturbed"] == "canary 1.52x its usual time"
    assert rounds[5]["disturbed"] == ("80% of its samples over 1.25x its quickest quarter (slowed mid-window; "
                                      "40% usual under the steady load)")
    # too few rounds under the load for a reference of the cell's own: the session's canary judges them
    few = rounds[:2]
    judge_rounds(few, 3.9, load, None)
    assert all("canary 2.03x" in r["disturbed"] for r in few)


def test_who_disturbed_names_processes_with_their_shares():
    from ios_bench.running.rounds import judge_rounds, who_disturbed

    rounds = [_round(0, 10, [("python3", 1234, 0.35)]), _round(1, 10, [("python3", 1234, 0.41), ("make", 7, 0.05)]),
              _round(2, 10, [], other_cpu=0.3), _round(3, 10, [])]
    judge_rounds(rounds, None)
    assert who_disturbed(rounds) == ("python3 pid 1234 35-41% in 2 rounds; make pid 7 5% in 1 round; 1 round with no "
                                     "other process named (steal, the canary, slowed samples or short-lived "
                                     "processes: see the Rounds table)")
    assert who_disturbed(rounds[3:]) == ""


def _loaded_record(model, fw, load=None, disturbed_by=None):
    from tests.test_report import _cell

    rec = _cell(model, fw, 10.0)
    if load:
        rec["load"] = load
        for r in rec["rounds"]:
            r["load"] = load
    if disturbed_by:
        rec.update(rounds_used=1, rounds_disturbed=4, unstable="1 undisturbed round (4 disturbed)")
        for r in rec["rounds"][1:]:
            r["disturbed"] = f"other processes used 41% of the CPUs ({disturbed_by[0]} pid {disturbed_by[1]}: 38%)"
            r["interference"] = {"other_cpu": 0.41, "others": [{"name": disturbed_by[0], "pid": disturbed_by[1],
                                                                 "share": 0.38}]}
    return rec


def test_console_and_report_say_under_load_and_name_what_disturbed(tmp_path):
    from ios_bench.planning.cells import describe
    from ios_bench.reporting.report import write_report
    from ios_bench.results import Store

    label = "under load: python3 pid 4242 49% of the CPUs"
    rec = _loaded_record("m1", "p01", load=label)
    assert describe(rec).endswith(f"output ok [yellow]{label}[/]")
    run = tmp_path / "run"
    for r in (rec, _loaded_record("m1", "p02", load=label), _loaded_record("m2", "p01", disturbed_by=("stress", 77))):
        Store(run).append(r)
    (run / "env.json").write_text(json.dumps({"plan": {"threads": 2}}))
    md = write_report(run, tmp_path / "rep")["md"].read_text()
    glance = md.split("## At a glance")[1].split("\n## ")[0]
    assert ("Measured under load: python3 pid 4242 49% of the CPUs (2 of 3 timed cells)" in glance
            and "mix figures measured under load with quiet ones" in glance)
    unstable = md.split("## Unstable cells")[1].split("\n## ")[0]
    assert "disturbed by" in unstable and "stress pid 77 38% in 4 rounds" in unstable


def test_ab_and_compare_say_the_verdict_holds_under_load(tmp_path):
    from ios_bench.records.runfolder import PLAN_FILE
    from ios_bench.reporting.compare import compare_runs
    from ios_bench.results import Store
    from ios_bench.running.ab import paired_comparison
    from tests.test_ab import _ab_record

    label = "under load: python3 pid 4242 49% of the CPUs"
    folder = tmp_path / "ab"
    for side, level in (("A", 10.0), ("B", 11.0)):
        r = _ab_record("onnxruntime", side, [level * (1 + 0.003 * i) for i in range(6)])
        r["load"] = label
        for g in r["rounds"]:
            g["load"] = label
        Store(folder).append(r)
    ab = {"mode": "options", "a": {"model": "m", "options": {}, "schedule": None},
          "b": {"model": "m", "options": {}, "schedule": None}}
    (folder / PLAN_FILE).write_text(json.dumps({"rounds": 6, "ab": ab}))
    result = paired_comparison(folder)
    c = result.changes[0]
    assert c.verdict == "regression" and c.why.endswith("; " + label)
    assert any(n.startswith("measured " + label) for n in result.notes)
    # compare between a quiet run and a loaded one says so, on the run and on each cell
    quiet, loaded = tmp_path / "quiet", tmp_path / "loaded"
    Store(quiet).append(_loaded_record("m", "p01"))
    Store(loaded).append(_loaded_record("m", "p01", load=label))
    cmp = compare_runs(quiet, loaded)
    assert f"A quiet, B {label}: the change includes the difference in load" in cmp.changes[0].why
    assert any("measured under different loads" in n for n in cmp.notes)
    assert not any("different loads" in n for n in compare_runs(quiet, quiet).notes)


def test_doctor_says_what_uses_the_machine_now():
    f = {"window_s": 1.0, "other_cpu": 0.52, "steal": 0.0, "cpus": 2,
         "others": [{"name": "python3", "pid": 1234, "share": 0.5, "cmd": "python3 indexer.py"}]}
    line = quiet_verdict(f)
    assert line.startswith("machine over 1.0 s: other processes used 52% of the CPUs (python3 pid 1234: 50%) "
                           "[pid 1234: python3 indexer.py]: a sweep now would have its rounds disturbed")
    assert quiet_verdict({**f, "other_cpu": 0.01, "others": []}).endswith(
        ": quiet (a round is disturbed over 10%)")


def test_bench_busy_estimates_its_plan_and_refuses_bad_input(capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_busy

    assert bench_busy.main(["--quick", "--estimate-only"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan: loads quiet, busy, duty50; 2 cell(s) on squeezenet; ab --rounds 5;")
    assert "estimated 7 min" in out
    cells = bench_busy.parse_cells("squeezenet:onnxruntime,squeezenet:ios-sequential[openvino],resnet18:torch")
    assert cells == {"squeezenet": {"peers": ["onnxruntime"], "providers": ["openvino"]},
                     "resnet18": {"peers": ["torch"], "providers": []}}
    for argv, says in ((["--cells", "nonet:onnxruntime"], "unknown network 'nonet'"),
                       (["--cells", "squeezenet"], "is not NETWORK:FRAMEWORK"),
                       (["--cells", "squeezenet:ios-sequential[nope]"], "unknown IOS provider 'nope'"),
                       (["--loads", "noisy"], "--loads: choose from"), (["--ab-rounds", "1"], "at least 2"),
                       (["--cpu", "999"], "--cpu: this machine has CPUs")):
        with pytest.raises(SystemExit) as e:
            bench_busy.main([*argv, "--estimate-only"])
        err = capsys.readouterr().err
        assert e.value.code == 2 and len(err.strip().splitlines()) == 1 and says in err, (argv, err)


def test_bench_busy_counts_each_disturbed_round_under_the_rule_that_disturbed_it(tmp_path, capsys):
    """Only the CPU-time rule can name a process: the goal 'a disturbed round names its co-tenant'
    counts those rounds; rounds the canary or slowed samples disturbed are counted apart."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_busy

    assert bench_busy.disturbance("other processes used 25% of the CPUs (python pid 7: 34%)") == "cpu"
    assert bench_busy.disturbance("besides the steady load, other processes used 40% of the CPUs") == "cpu"
    assert bench_busy.disturbance("canary 1.53x its usual time") == "the canary"
    assert bench_busy.disturbance("40% of its samples over 1.25x its quickest quarter (slowed mid-window)") \
        == "slowed samples"
    assert bench_busy.disturbance("steal 9%") == "steal"
    g = {"AA": {"loads": {"python pid 7": [33, 50]}}, "AB": {"loads": {"python pid 7": [34], "make pid 9": [None]}}}
    assert bench_busy.steady(g) == ("make pid 9, its share unstated (in 1 rounds); "
                                    "python pid 7, 33-50 % of the CPUs per cell (in 3 rounds)")
    with pytest.raises(SystemExit) as e:
        bench_busy.main(["--from", str(tmp_path)])
    assert e.value.code == 2 and "holds no measured load" in capsys.readouterr().err


def test_this_process_tree_is_itself_its_descendants_and_its_ancestors_not_its_siblings():
    procs = {1: ("init", 0, 0.0, 0), 10: ("ios-bench", 0, 0.0, 1), 20: ("worker", 0, 0.0, 10),
             30: ("helper", 0, 0.0, 20), 31: ("helper2", 0, 0.0, 30), 40: ("cotenant", 0, 0.0, 10),
             50: ("stranger", 0, 0.0, 1)}
    assert own_tree(procs, 20) == {1, 10, 20, 30, 31}  # the co-tenant a script started beside the sweep is named
    after = {pid: (name, 0, 1.0, ppid) for pid, (name, _, _, ppid) in procs.items()}
    assert [o["name"] for o in top_others(procs, after, 1.0, 2, own_tree(procs, 20), top=10)] == ["cotenant",
                                                                                                    "stranger"]
