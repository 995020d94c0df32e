"""The experiments runner's deadline and resume (any experiment), and the GPU headline as an
experiment (ios_bench.experiments.headline): its CPU quick form stopped by ``--deadline 30`` and
finished by ``--resume`` with nothing measured twice, the same for a paper experiment, the dry run
and its estimate from the committed H200 records, and the headline's rows on those records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ios_bench.experiments import headline as hl
from ios_bench.experiments.base import Context
from ios_bench.planning.plan import Plan
from tests.harness_helpers import cli

SLOW = {"IOS_BENCH_PLUGINS": "tests.harness_plugin,tests.slow_plugin", "TEST_SLOW_WORKER_S": "3"}


def _lines(out: Path) -> dict[str, list[str]]:
    """{run: its results.jsonl lines} of an experiment folder."""
    return {f.parent.name: f.read_text().splitlines() for f in sorted((out / "runs").glob("*/results.jsonl"))}


def _stop_then_resume(tmp_path, name: str, argv: list[str], deadline: str) -> tuple[dict, dict, dict]:
    """Run ``experiment NAME ARGV --deadline D`` with slow workers (3 s each: the deadline falls
    inside it on any machine), check the clean stop, then ``--resume`` it at full speed."""
    out = tmp_path / name
    p = cli(["experiment", name, *argv, "--deadline", deadline, "--out", str(out), "--no-progress"], tmp_path, SLOW)
    assert p.returncode == 3, p.stderr[-3000:]
    assert f"--deadline {deadline} s spent" in p.stderr
    assert f"ios-bench experiment {name} --resume --out {out}" in p.stderr
    assert "Traceback" not in p.stderr
    meta = json.loads((out / "experiment.json").read_text())
    session = meta["sessions"][-1]
    assert session["stopped"].startswith(f"--deadline {deadline} s spent") and "finished" not in meta
    report = (out / "report.md").read_text()  # written whole, saying what is left
    assert "**Not finished.**" in report and "--resume" in report
    before = _lines(out)
    p = cli(["experiment", name, "--resume", "--out", str(out), "--no-progress"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    after = _lines(out)
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["finished"] and len(meta["sessions"]) == 2 and "stopped" not in meta["sessions"][-1]
    assert "Not finished" not in (out / "report.md").read_text()
    for run, lines in before.items():  # what the first session measured is kept as it was
        assert after[run][:len(lines)] == lines
    for run, lines in after.items():  # and nothing was measured twice
        cells = [json.loads(x)["cell"] for x in lines]
        assert len(cells) == len(set(cells)), run
        for x in lines:
            r = json.loads(x)
            assert r["status"] in ("ok", "skipped"), r.get("reason")
            # a disturbed or failed round is re-run as a new one, in a later pass, at most max_reruns times; quick:
            # one round planned. (A round judged disturbed when its pass ended, against the usual canary of the
            # rounds so far, is judged again at the end against the whole session's and may count after all: a
            # quick cell can keep two undisturbed rounds, one of them its re-run.) An "ok" cell has a
            # measured round (its figure comes from one: disturbed rounds too, when the machine stayed loaded,
            # flagged so), a skipped cell none
            rounds = [x["round"] for x in r.get("rounds") or []]
            passes = [x["pass"] for x in r.get("rounds") or []]
            measured = [x for x in r.get("rounds") or [] if x.get("status") == "ok" and x.get("samples_ms")]
            assert len(rounds) == len(set(rounds)) and passes == sorted(set(passes)), r.get("rounds")
            assert len(rounds) <= 1 + Plan().max_reruns, r.get("rounds")
            assert (len(measured) >= 1) == (r["status"] == "ok"), r.get("rounds")
    # once finished, a further --resume keeps every sweep as it is
    p = cli(["experiment", name, "--resume", "--out", str(out), "--no-progress"], tmp_path)
    assert p.returncode == 0 and p.stderr.count("finished earlier, kept") == len(after), p.stderr[-2000:]
    assert _lines(out) == after
    return before, after, meta


def test_the_headline_stops_cleanly_at_its_deadline_and_resume_finishes_it(tmp_path):
    before, after, meta = _stop_then_resume(tmp_path, "headline", ["--device", "cpu", "--quick"], "30")
    assert sum(map(len, before.values())) < sum(map(len, after.values()))  # the deadline cut something
    assert [r["name"] for r in meta["runs"]] == ["b1-full", "b2-full"]
    report = (tmp_path / "headline" / "report.md").read_text()
    assert re.search(r"\| sample \| 1 \| full \| \d", report) and re.search(r"\| sample \| 2 \| full \| \d", report)


def test_a_paper_experiment_stops_at_its_deadline_and_resumes(tmp_path):
    before, after, _ = _stop_then_resume(tmp_path, "schedules", ["--quick"], "8")
    assert sum(map(len, before.values())) < sum(map(len, after.values()))


def test_the_dry_run_prints_the_plan_and_one_estimate_line(run_cli, tmp_path):
    code, out, err = run_cli(["experiment", "headline", "--device", "cuda", "--dry-run", "--out",
                              str(tmp_path / "x")])
    assert code == 0, err
    lines = out.strip().splitlines()
    m = re.fullmatch(r"estimated duration (\d+) s on NVIDIA H200", lines[-1])
    assert m and int(m.group(1)) > 0
    assert sum(1 for x in lines if x.startswith("estimated duration")) == 1
    text = "\n".join(lines)
    for name in ("b1-graph-full", "b1-graph-r1s3", "b1-nograph-full", "b16-32-graph-full"):
        assert name in text
    assert "measured (H200)" in text and "assumed" in text
    assert not (tmp_path / "x").exists()  # a dry run writes nothing
    code, out, _ = run_cli(["experiment", "headline", "--device", "cuda", "--dry-run", "--gpu", "h100"])
    assert code == 0 and out.strip().splitlines()[-1].endswith("on NVIDIA H100")
    code, out, _ = run_cli(["experiment", "headline", "--dry-run", "--quick"])  # on the CPU: the plan only
    assert code == 0 and "b1-full" in out and "estimated duration" not in out


def test_the_estimate_takes_its_costs_from_the_committed_h200_records():
    costs = hl.measured_costs(hl.MEASURED_RUN)  # the first window alone (2026-11-26)
    assert costs["doctor"] == 22.5
    assert round(costs["search"]["inception_v3"]) == 81 and round(costs["search"]["randwire"]) == 49
    assert round(costs["build"]["torch-compile-cudagraphs"]["inception_v3"], 1) == 24.5
    assert "tensorrt" in costs["absent"] and "torch" not in costs["absent"]
    runs = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cuda"]))
    total, lines = hl.estimate(runs, "h200", costs)
    # the same runs without any measured figure: every cost assumed, and said so
    empty = {"build": {}, "overhead": {}, "search": {}, "reference": {}, "sweep_fixed": [], "doctor": None,
             "absent": set(), "ran": set()}
    total2, lines2 = hl.estimate(runs, "h200", empty)
    assert total != total2 and "0 measured" in "\n".join(lines2)
    assert re.search(r"b1-graph-full .* inception_v3 search 81 s measured", "\n".join(lines))


def test_a_later_window_replaces_the_figures_it_measured():
    """Both committed windows, oldest first: 2026-11-28's doctor and searches replace 2026-11-26's, its
    later rounds measure the warm builds the first window could not (one round), and a peer skipped there
    only because its wheels were not carried (tvm) is not taken for one the machine lacks."""
    old, both = hl.measured_costs(hl.MEASURED_RUN), hl.measured_costs()
    assert both["doctor"] == 35.8 and old["doctor"] == 22.5
    assert both["search"]["inception_v3"] != old["search"]["inception_v3"]
    assert both["search"]["randwire"] == old["search"]["randwire"]  # not searched to the end on 11-28: kept
    assert old["warm"] == {} or "torch-compile" not in old["warm"]
    # the later rounds' builds of torch-compile on 11-28: 12.5, 13.0, 14.1 (inception_v3), 12.6, 11.9 (squeezenet)
    assert both["warm"]["torch-compile"] == pytest.approx(12.57, abs=0.05)
    assert "tvm" not in both["absent"] and "tensorrt" in both["absent"]
    runs = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cuda"]))
    _, lines = hl.estimate(runs, "h200", both)
    assert "gpu-h200-2026-11-28" in "\n".join(lines)


def test_the_headline_rows_of_the_committed_h200_run():
    folder = hl.MEASURED_RUN / "runs"
    recs = []
    from ios_bench.experiments import _common as c

    for run in ("graph-full", "graph-r1s3"):
        recs += [{**r, "_run": run} for r in c.records(folder / run)]
    rows = {r["model"]: r for r in hl.headline_rows(recs)}
    assert rows["inception_v3"]["best_peer"] == "torch-compile-cudagraphs"
    assert rows["inception_v3"]["vs_best"] == pytest.approx(4.171 / 2.819, rel=1e-3)
    assert rows["squeezenet"]["vs_best"] == pytest.approx(0.569 / 0.413, rel=2e-3)
    assert "(unstable)" in rows["randwire"]["both"]  # one round: flagged
    assert rows["nasnet"]["both"] == "not run" and rows["nasnet"]["best_peer"] is None
    assert rows["inception_v3"]["sm_both"] == "22"  # NVML's mean SM utilization in the timed loop
    report = hl.EXPERIMENT.report(Context(out=Path("x"), devices=["cuda"]),
                                  {"b1-graph-full": folder / "graph-full", "b1-graph-r1s3": folder / "graph-r1s3"})
    text = "\n".join(body for _, body in report.sections)
    assert "| inception_v3 | 1 | full | 3.858" in text and "| 1.48x |" in text and "1.21x (TVM-cuDNN)" in text
    assert "tensorrt: TensorRT is not installed" in text  # every framework that could not run, with why


@pytest.mark.parametrize("argv,message", [
    (["headline", "--deadline", "0"], "--deadline"),
    (["all", "--dry-run"], "--dry-run plans one experiment"),
])
def test_bad_deadline_and_dry_run_are_one_line(run_cli, argv, message):
    code, _, err = run_cli(["experiment", *argv])
    assert code == 2 and message in err


def test_all_runs_the_papers_experiments_not_the_headline(run_cli, tmp_path, monkeypatch):
    """``experiment all`` is the paper's experiments; the headline (a GPU window) runs on its own."""
    from ios_bench import experiments
    from ios_bench.commands import experiment as command

    ran = []
    monkeypatch.setattr(command, "_run_one", lambda exp, folder, *a, **k: ran.append(exp.name) or folder / "r.md")
    code, _, err = run_cli(["experiment", "all", "--quick", "--out", str(tmp_path / "all")])
    assert code == 0, err
    assert "headline" not in ran and "headline" in experiments.names()
    assert ran == [n for n in experiments.names() if n != "headline"]


def test_the_gpu_plans_are_valid_sweeps_of_registered_frameworks(tmp_path):
    """Each cuda sweep of the headline is a plan the sweep accepts: its frameworks registered, its
    IOS options valid, graph and no-graph forms as adapter options, randwire and nasnet pruned."""
    import adapters
    from ios_bench.planning.plan import Plan, ios_options_problem
    from ios_bench.running.sweep import Sweep

    runs = hl.EXPERIMENT.runs(Context(out=tmp_path, devices=["cuda"]))
    assert [r.name for r in runs][:4] == ["b1-graph-full", "b1-graph-r1s3", "b1-nograph-full", "b1-nograph-r1s3"]
    for run in runs:
        p = run.plan
        assert set(p.frameworks) <= set(adapters.names()) and "tvm" in (p.frameworks or ["tvm"])
        assert ios_options_problem(p.ios_options) is None and p.devices == ["cuda"] and p.rounds == 3
        assert p.adapter_options["ios"]["cuda_graph"] == ("-graph-" in run.name)
        assert ("nasnet" in p.models) == (p.ios_options == {"max_group_size": 1, "max_num_groups": 3})
        assert p.frameworks == [] or "-graph-" in run.name  # the no-graph sweeps: IOS cells only
        assert Plan.from_dict(p.to_dict()) == p
        Sweep(p, tmp_path / run.name)  # accepted (nothing runs until .run())


def test_an_interrupted_experiment_keeps_the_report_of_what_finished(tmp_path):
    """^C (or the window's hard stop: SIGINT) in a sweep: the session says so and the report is
    written whole with what is left, as at a deadline."""
    import signal
    import time

    from tests.harness_helpers import start

    out = tmp_path / "h"
    p = start(["experiment", "headline", "--device", "cpu", "--quick", "--out", str(out), "--no-progress"], tmp_path,
              SLOW)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("runs/*/results.jsonl")):
        time.sleep(0.5)
    time.sleep(2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "interrupted in sweep" in err, err[-2000:]
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["sessions"][-1]["stopped"].startswith("interrupted in sweep") and "finished" not in meta
    report = (out / "report.md").read_text()
    assert "**Not finished.**" in report and "--resume" in report


def test_a_doctor_stopped_at_its_timeout_keeps_its_output_as_text(tmp_path, monkeypatch):
    """``TimeoutExpired`` carries the output as bytes even when the run asked for text: doctor.txt
    holds the lines the doctor printed, not a ``b'...'`` repr."""
    import io

    from rich.console import Console

    script = "import time\nprint('cuda: NVIDIA X', flush=True)\nprint('  ios   yes', flush=True)\ntime.sleep(30)\n"
    monkeypatch.setattr(hl, "doctor_command", lambda: [__import__("sys").executable, "-c", script])
    monkeypatch.setattr(hl, "DOCTOR_MIN_S", 1.0)
    entry = hl.EXPERIMENT.preflight(Context(out=tmp_path, devices=["cuda"]), Console(file=io.StringIO()), 1.0)
    text = (tmp_path / "doctor.txt").read_text()
    assert text.startswith("cuda: NVIDIA X\n  ios   yes\n") and "b'" not in text and "\\n" not in text
    assert "(doctor stopped after 1 s)" in text and entry["rc"] is None and entry["done"] is False


def test_an_interrupt_in_the_preflight_marks_the_session(tmp_path):
    """^C while the doctor runs: the session says where it stopped, the report says what is left,
    and the preflight is not marked done (the next --resume runs it)."""
    import io

    from rich.console import Console

    from ios_bench.experiments.runner import run_experiment

    class Interrupted(hl.Headline):
        def preflight(self, ctx, console, left):
            raise KeyboardInterrupt

    out = tmp_path / "h"
    with pytest.raises(KeyboardInterrupt):
        run_experiment(Interrupted(), Context(out=out, quick=True), console=Console(file=io.StringIO()),
                       progress=False)
    meta = json.loads((out / "experiment.json").read_text())
    assert meta["sessions"][-1]["stopped"] == "interrupted in the preflight" and not meta.get("preflight_done")
    assert meta["sessions"][-1]["steps"] == [{"step": "preflight", "done": False, "interrupted": True}]
    report = (out / "report.md").read_text()
    assert "**Not finished.**" in report and "interrupted in the preflight" in report


def test_the_estimate_costs_a_tvm_cells_first_round_as_its_build_and_the_later_ones_as_a_load(tmp_path):
    """The tvm adapters keep their build in the shared build cache (adapters.tvm_cache): a cell's first
    round pays its build, its later rounds (fresh processes) load it: the assumed warm build, not the
    cold one again."""
    runs = hl.EXPERIMENT.runs(Context(out=tmp_path, devices=["cuda"]))
    b1 = [r for r in runs if max(r.plan.batch_sizes) == 1]
    tvm_cells = sum(1 for r in b1 for fw in ("tvm", "tvm-cudnn") if fw in (r.plan.frameworks or [])
                    for _ in r.plan.models)
    rounds = b1[0].plan.rounds

    def costs(tvm_build):
        built = {m: tvm_build for r in b1 for m in r.plan.models}
        return {"build": {"tvm": built, "tvm-cudnn": built}, "overhead": {}, "search": {},
                "reference": {}, "sweep_fixed": [], "doctor": None, "absent": set(), "ran": set()}

    warm = hl.ASSUMED["warm_build"][0]["tvm"]
    assert warm == hl.ASSUMED["warm_build"][0]["tvm-cudnn"] and warm < 60.0
    with_build, _ = hl.estimate(runs, "h200", costs(60.0))
    without, _ = hl.estimate(runs, "h200", costs(0.0))  # a build of 0 s: its warm one min(0, warm) too
    assert tvm_cells > 0 and rounds == 3
    assert with_build - without == pytest.approx((60.0 + (rounds - 1) * warm) * tvm_cells)
    assert not {"tvm", "tvm-cudnn", "torch-compile"} & hl.NO_BUILD_CACHE and "torch" in hl.NO_BUILD_CACHE


def test_the_gpu_headline_has_an_fp16_step_after_batch_ones_fp32_sweeps():
    """Issue 46: batch 1 again at fp16 (graph form, every peer, IOS searched at fp16), right after batch 1's
    fp32 sweeps and before the later batches; costed in the dry run as fp32's figures, assumed."""
    runs = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cuda"]))
    names = [r.name for r in runs]
    assert names[4:6] == ["b1-fp16-graph-full", "b1-fp16-graph-r1s3"] and names[6].startswith("b16-32")
    for run in runs:
        fp16 = "-fp16-" in run.name
        assert run.plan.precisions == (["fp16"] if fp16 else ["fp32"])
        if fp16:
            assert run.plan.batch_sizes == [1] and run.plan.adapter_options["ios"]["cuda_graph"] is True
            assert "torch" in run.plan.frameworks and run.plan.schedules == ["sequential", "both"]
    cpu = hl.EXPERIMENT.runs(Context(out=Path("x"), devices=["cpu"], quick=True))
    assert all(r.plan.precisions == ["fp32"] for r in cpu)  # no fp16 peer on the CPU
    costs = hl.measured_costs(hl.MEASURED_RUN)
    first, lines = hl.estimate(runs, "h200", costs)
    without, _ = hl.estimate([r for r in runs if "-fp16-" not in r.name], "h200", costs)
    assert first > without  # the fp16 step is in the batch-1 part's cost
    text = "\n".join(lines)
    line = next(x for x in lines if x.strip().startswith("b1-fp16-graph-full"))
    assert "at fp16: every figure is fp32's, assumed alike" in line and "81 s measured at fp32" in line
    assert re.search(r"b1-graph-full .* inception_v3 search 81 s measured;", text)


def test_fp16_rows_are_a_table_of_their_own(monkeypatch, tmp_path):
    """An fp16 cell never pairs with an fp32 one: its row is its own (network, batch, precision), in a section
    of its own, and the fp32 table keeps its figures and the published column."""
    from ios_bench.experiments import _common as c

    folder = hl.MEASURED_RUN / "runs"
    fp32 = [{**r, "_run": "b1-graph-full"} for r in c.records(folder / "graph-full")]
    fp16 = [{**r, "_run": "b1-fp16-graph-full", "precision": "fp16"} for r in fp32]
    rows = hl.headline_rows(fp32 + fp16)
    assert [(r["model"], r["precision"]) for r in rows] == [("inception_v3", "fp32"), ("squeezenet", "fp32"),
                                                            ("inception_v3", "fp16"), ("squeezenet", "fp16")]
    assert rows[0]["vs_best"] == pytest.approx(4.171 / 2.819, rel=1e-3) and rows[2]["published"] == "-"
    for name in ("graph", "fp16"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("")
    monkeypatch.setattr(c, "records", lambda f: fp16 if Path(f).name == "fp16" else fp32)
    report = hl.EXPERIMENT.report(Context(out=tmp_path, devices=["cuda"]),
                                  {"b1-graph-full": tmp_path / "graph", "b1-fp16-graph-full": tmp_path / "fp16"})
    titles = [t for t, _ in report.sections]
    assert titles[:2] == ["Headline (fp32)", "Headline at fp16"]
    main, half = report.sections[0][1], report.sections[1][1]
    assert "1.21x (TVM-cuDNN)" in main and "TVM-cuDNN" not in half and half.count("| inception_v3 | 1 |") == 1
