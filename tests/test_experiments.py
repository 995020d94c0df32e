"""ios-bench experiment: every registered experiment's quick form end to end, the registry, the
report's content, --resume, bad input, and the sweep's IOS options the recipes rely on."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ios_bench import experiments
from ios_bench.errors import InputError
from ios_bench.experiments.base import Context, Experiment
from ios_bench.planning.plan import Plan, ios_options_problem, ios_options_tag
from ios_bench.running.sweep import Sweep

# a median, its spread (marked unstable where its rounds differ or were disturbed: a loaded machine)
# and a passed check
MEASURED = re.compile(r"\d[\d,]*\.?\d* ±\d[\d,]*\.?\d*(?: \(unstable\))? ✓")
SPREAD = re.compile(r"\d[\d,]*\.?\d* ?±\d")
PAPER_EXPERIMENTS = ("schedules", "frameworks", "spec-batch", "spec-device", "prune", "batchsize")


def _cli(argv) -> int:
    from ios_bench.cli import main

    with pytest.raises(SystemExit) as e:
        main(list(argv))
    return e.value.code


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    """Each registered experiment's --quick form, run once for the module: {name: (exit code, folder)}."""
    root = tmp_path_factory.mktemp("experiments")
    done = {}

    def get(name):
        if name not in done:
            out = root / name
            done[name] = (_cli(["experiment", name, "--quick", "--out", str(out), "--no-progress"]), out)
        return done[name]

    return get


def test_registry_lists_every_experiment():
    names = experiments.names()
    for name in PAPER_EXPERIMENTS:
        assert name in names
    for name, exp in experiments.all_experiments().items():
        assert isinstance(exp, Experiment) and exp.name == name
        assert exp.title and exp.summary and exp.paper
    with pytest.raises(InputError, match="unknown experiment 'nope'"):
        experiments.get("nope")


# quick forms that take minutes even so (TVM tuning): run with -m slow
SLOW_QUICK = {"intra-inter": "tunes TVM kernels: minutes even in its quick form",
              "throughput": "three sweeps, each LoadGen test at least a second: ~10 minutes on 2 cores "
                            "(tests/test_scenarios.py runs every scenario's quick form)"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_QUICK else n
                                  for n in experiments.names()])
def test_quick_form_runs_and_reports_measured_numbers(quick_runs, name):
    code, out = quick_runs(name)
    assert code == 0
    report = (out / "report.md").read_text()
    assert f"experiment: `{name}`" in report
    assert "form: **quick**" in report
    # a real measured figure with its spread in the experiment's own sections (after the header);
    # the paper experiments show each with its passed output check
    body = report.split("## What this form reduced", 1)[1].split("\n\n", 3)[-1]
    assert SPREAD.search(body), report[:3000]
    if name in PAPER_EXPERIMENTS:
        assert MEASURED.search(body), report[:3000]
    assert "## What this form reduced" in report
    if name in PAPER_EXPERIMENTS:
        assert "quick form" in report.split("## What this form reduced", 1)[1]
    env = json.loads((out / "env.json").read_text())
    assert env["cpu"] and env["runs"]
    for rel in env["runs"].values():  # every run's own environment is kept and listed
        assert (out / rel).is_file()
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["experiment"] == name and meta["form"] == "quick" and meta["finished"]
    for run in meta["runs"]:
        lines = (out / run["folder"] / "results.jsonl").read_text().splitlines()
        records = [json.loads(x) for x in lines]
        assert records and all(r["status"] in ("ok", "skipped") for r in records), records
    for fig in re.findall(r"!\[[^]]*\]\(([^)]+)\)", report):  # every figure the report shows exists
        assert (out / fig).is_file()


def test_list_names_every_experiment(run_cli):
    code, out, err = run_cli(["experiment", "list"])
    assert code == 0, err
    for name in experiments.names():
        assert name in out


@pytest.mark.parametrize("argv, message", [
    (["experiment", "nope"], "unknown experiment 'nope'"),
    (["experiment", "schedules", "--quick", "--reference"], "--quick and --reference"),
    (["experiment", "schedules", "--threads", "0"], "--threads"),
    (["experiment", "schedules", "--models", "no_such_model"], "unknown model no_such_model"),
    (["experiment", "schedules", "--device", "tpu"], "tpu"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, argv, message):
    code, out, err = run_cli(argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_out_folder_refused_or_resumed(run_cli, tmp_path):
    code, _, err = run_cli(["experiment", "schedules", "--resume", "--out", str(tmp_path / "none")])
    assert code == 2 and "holds no experiment" in err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file.txt").write_text("x")
    code, _, err = run_cli(["experiment", "schedules", "--quick", "--out", str(busy)])
    assert code == 2 and "not empty" in err
    assert not (busy / "runs").exists()


def test_resume_finishes_an_interrupted_experiment(quick_runs, tmp_path, run_cli):
    code, done = quick_runs("schedules")
    assert code == 0
    out = tmp_path / "schedules"
    shutil.copytree(done, out)
    run = out / "runs" / "schedules"
    lines = (run / "results.jsonl").read_text().splitlines()
    kept = lines[:-2]  # as if the sweep had been killed two cells before its end
    (run / "results.jsonl").write_text("\n".join(kept) + "\n")
    env = json.loads((run / "env.json").read_text())
    env["interrupted"] = "KeyboardInterrupt after 3 cells (resume with --resume)"
    (run / "env.json").write_text(json.dumps(env))
    (out / "report.md").unlink()
    code, _, err = run_cli(["experiment", "schedules", "--resume", "--out", str(out), "--no-progress"])
    assert code == 0, err
    records = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    assert len(records) == len(lines)  # the two missing cells ran, the others were kept
    assert [r["cell"] for r in records[:len(kept)]] == [json.loads(x)["cell"] for x in kept]
    assert MEASURED.search((out / "report.md").read_text())
    # a finished experiment resumes without running anything; other options are refused
    code, _, err = run_cli(["experiment", "schedules", "--resume", "--out", str(out), "--no-progress"])
    assert code == 0 and "finished earlier, kept" in err
    assert len((run / "results.jsonl").read_text().splitlines()) == len(lines)
    code, _, err = run_cli(["experiment", "schedules", "--resume", "--out", str(out), "--threads", "1"])
    assert code == 2 and "--threads" in err
    code, _, err = run_cli(["experiment", "schedules", "--quick", "--out", str(out)])
    assert code == 2 and "already holds an experiment" in err


def test_spec_batch_records_say_what_they_were_optimized_for(quick_runs):
    code, out = quick_runs("spec-batch")
    assert code == 0
    recs = [json.loads(x) for x in (out / "runs" / "optimized-b2" / "results.jsonl").read_text().splitlines()]
    ios = [r for r in recs if r["framework"] == "ios-both"]
    assert {r["batch_size"] for r in ios} == {1, 2}
    for r in ios:
        assert r["optimized_for"]["batch_size"] == 2
        assert r["status"] == "ok"
    # one schedule, optimized for batch 2, executed at both batch sizes: searched once, then reused
    assert len({r["schedule_file"] for r in ios}) == 1
    assert sorted(bool(r.get("schedule_reused")) for r in ios) == [False, True]
    at1 = next(r for r in ios if r["batch_size"] == 1)
    assert "prediction_error" not in at1  # its estimate is for batch 2: no error is claimed


def test_prune_runs_use_their_pruning_and_a_cold_database(quick_runs):
    code, out = quick_runs("prune")
    assert code == 0
    for r_, s_ in ((1, 3), (3, 8)):
        run = out / "runs" / f"r{r_}-s{s_}"
        rec = json.loads((run / "results.jsonl").read_text().splitlines()[-1])
        assert rec["optimized_for"]["max_group_size"] == r_ and rec["optimized_for"]["max_num_groups"] == s_
        assert f"r={r_} s={s_}" in rec["optimize_stats"]
        assert rec["optimize_figures"]["transitions"] >= 0
        assert f"-r{r_}-s{s_}-cprivate" in rec["schedule_file"]


def test_ios_options_are_checked():
    assert ios_options_problem({"optimize_batch": 16, "max_group_size": 2, "cost_cache": "private"}) is None
    assert "unknown IOS option 'batch'" in ios_options_problem({"batch": 1})
    assert "optimize_threads" in ios_options_problem({"optimize_threads": 0})
    assert "cost_cache" in ios_options_problem({"cost_cache": "somewhere"})
    assert "optimize_batch" in ios_options_problem({"optimize_batch": True})
    with pytest.raises(InputError, match="ios_options"):
        Plan.from_dict({"ios_options": {"max_num_groups": -1}})
    with pytest.raises(InputError, match="unknown IOS option"):
        Sweep(Plan(ios_options={"nope": 1}), "/tmp/unused-ios-bench-folder")
    plan = Plan.from_dict(Plan(ios_options={"optimize_threads": 1}).to_dict())
    assert plan.ios_options == {"optimize_threads": 1}
    assert ios_options_tag({}) == ""
    assert ios_options_tag({"optimize_threads": 1, "max_group_size": 2, "max_num_groups": 3}) == "-t1-r2-s3"


def test_reference_form_is_reduced_and_says_so(tmp_path):
    """Every experiment's reference form names what it reduced (the plans only: nothing runs)."""
    for name, exp in experiments.all_experiments().items():
        ctx = Context(out=tmp_path / name, reference=True)
        runs = exp.runs(ctx)
        assert runs and len({r.name for r in runs}) == len(runs)
        if name in PAPER_EXPERIMENTS:
            assert exp.reduced(ctx), name
            for r in runs:
                assert r.plan.repeat < Plan().repeat  # a reduced protocol


def test_measured_search_under_the_sweeps_ios_options(tmp_path):
    """The measured cost model times stages with the thread budget the schedule is optimized for,
    in the run's own profile database (cost_cache private), and the record says so."""
    plan = Plan(models=["sample"], batch_sizes=[1], frameworks=[], schedules=["both"], cost_model="measured",
                warmup=0, repeat=2, min_sample_ms=None, threads=2, rounds=1, ios_providers=["torch"],
                ios_options={"optimize_threads": 1, "cost_cache": "private", "max_num_groups": 2})
    folder = tmp_path / "run"
    stats = Sweep(plan, folder, progress=False).run()
    assert stats["ok"] == 1, (folder / "results.jsonl").read_text()
    rec = json.loads((folder / "results.jsonl").read_text().splitlines()[-1])
    assert rec["optimized_for"] == {"batch_size": 1, "threads": 1, "max_group_size": 3, "max_num_groups": 2,
                                    "cost_cache": "private"}
    assert rec["threads"] == 2  # executed with 2, optimized with 1
    assert rec["cost_model_stats"]["threads"] == 1
    assert Path(rec["cost_model_stats"]["cache"]).resolve() == (folder / "profiles.sqlite").resolve()
    assert (folder / "profiles.sqlite").is_file()
    assert "prediction_error" not in rec  # estimated for 1 thread, measured with 2
    assert json.loads((folder / "plan.json").read_text())["ios_options"]["optimize_threads"] == 1
