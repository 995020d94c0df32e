"""benchmarks/mutate_sample.py: ``make mutate SAMPLE=N`` keeps a seeded uniform sample of a cosmic-ray session
(the same mutants for the same seed whatever job ids ``init`` drew, N of them, all when N is at least their
number) and scores it as killed/run with a 95 % Wilson interval."""

from __future__ import annotations

import pytest

from tests.conftest import benchmark_module

ms = benchmark_module("mutate_sample")
work_db = pytest.importorskip("cosmic_ray.work_db")
work_item = pytest.importorskip("cosmic_ray.work_item")


def _session(path, n=30):
    """A cosmic-ray session of ``n`` single-mutation work items, written by cosmic-ray's own WorkDB, with
    fresh random job ids as ``cosmic-ray init`` draws them."""
    import uuid

    items = [work_item.WorkItem.single(
        job_id=uuid.uuid4().hex,
        mutation=work_item.MutationSpec(module_path="pkg/mod.py", operator_name=f"core/Op{i % 3}", occurrence=i,
                                        start_pos=(i + 1, 0), end_pos=(i + 1, 4)))
        for i in range(n)]
    with work_db.use_db(str(path)) as db:
        db.add_work_items(items)
    return path


def _kept(path):
    with work_db.use_db(str(path), work_db.WorkDB.Mode.open) as db:
        return sorted(m.occurrence for w in db.work_items for m in w.mutations)


def test_a_seeded_sample_is_the_same_mutants_whatever_job_ids_init_drew(tmp_path):
    a, b, c = (_session(tmp_path / f"{x}.sqlite") for x in "abc")
    assert ms.sample(a, 10, seed=3) == (10, 30)
    assert ms.sample(b, 10, seed=3) == (10, 30)
    assert ms.sample(c, 10, seed=4) == (10, 30)
    assert len(_kept(a)) == 10 and _kept(a) == _kept(b)
    assert _kept(c) != _kept(a)
    # cosmic-ray still reads the session: exactly the kept items are pending, each with its mutation
    with work_db.use_db(str(a), work_db.WorkDB.Mode.open) as db:
        assert db.num_work_items == 10 and len(db.pending_work_items) == 10
        assert all(len(w.mutations) == 1 for w in db.pending_work_items)


def test_the_sample_is_uniform_not_the_first_mutants(tmp_path):
    """Over many seeds each of 12 mutants is kept about half the time when 6 are kept."""
    import shutil

    base = _session(tmp_path / "base.sqlite", n=12)
    picks = [0] * 12
    for seed in range(120):
        path = shutil.copy(base, tmp_path / "s.sqlite")
        ms.sample(path, 6, seed=seed)
        for occ in _kept(path):
            picks[occ] += 1
    assert all(35 <= p <= 85 for p in picks), picks  # binomial(120, 0.5): 60 +- 25 is beyond 4.5 sd


def test_a_sample_at_least_the_session_keeps_every_mutant(tmp_path):
    path = _session(tmp_path / "s.sqlite", n=7)
    assert ms.sample(path, 7) == (7, 7)
    assert ms.sample(path, 50) == (7, 7)
    assert _kept(path) == list(range(7))


def test_sampling_twice_keeps_the_module_size(tmp_path):
    path = _session(tmp_path / "s.sqlite", n=30)
    ms.sample(path, 12)
    assert ms.sample(path, 5) == (5, 30)
    assert ms.counts(path)["total"] == 30 and ms.counts(path)["sampled"] == 5


def test_wilson_interval_on_known_cases():
    lo, hi = ms.wilson(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    lo, hi = ms.wilson(0, 10)  # upper bound z^2 / (n + z^2)
    assert lo == 0.0 and hi == pytest.approx(3.8415 / 13.8415, abs=1e-4)
    lo, hi = ms.wilson(40, 40)
    assert hi == 1.0 and lo == pytest.approx(40 / (40 + 3.8415), abs=1e-4)


def test_score_counts_killed_and_incompetent_against_survivors_and_leaves_out_skipped_and_pending(tmp_path):
    path = _session(tmp_path / "s.sqlite", n=20)
    ms.sample(path, 8, seed=1)
    with work_db.use_db(str(path), work_db.WorkDB.Mode.open) as db:
        jobs = sorted(w.job_id for w in db.work_items)
        WR, WO, TO = work_item.WorkResult, work_item.WorkerOutcome, work_item.TestOutcome
        outcomes = [TO.KILLED, TO.KILLED, TO.KILLED, TO.INCOMPETENT, TO.SURVIVED, TO.SURVIVED]
        for job, outcome in zip(jobs, outcomes):
            db.set_result(job, WR(worker_outcome=WO.NORMAL, test_outcome=outcome, output="", diff=""))
        db.set_result(jobs[6], WR(worker_outcome=WO.SKIPPED, test_outcome=None, output=None, diff=None))
    c = ms.counts(path)
    assert (c["killed"], c["run"], c["survived"], c["pending"], c["sampled"], c["total"]) == (4, 6, 2, 1, 8, 20)
    line = ms.score_line(path)
    lo, hi = ms.wilson(4, 6)
    assert "killed 4/6" in line and "sample of 8 of 20" in line and "1 not run" in line
    assert f"{lo:.0%}-{hi:.0%}" in line

    assert ms.reset_survivors(path) == 2
    assert ms.counts(path)["pending"] == 3 and ms.counts(path)["killed"] == 4


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert ms.main(["score", str(tmp_path / "missing.sqlite")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no cosmic-ray session" in err
    path = _session(tmp_path / "s.sqlite", n=3)
    assert ms.main(["sample", str(path), "0"]) == 2
    assert "positive" in capsys.readouterr().err
    (tmp_path / "other.sqlite").write_bytes(b"")
    assert ms.main(["score", str(tmp_path / "other.sqlite")]) == 2
    assert "not a cosmic-ray session" in capsys.readouterr().err


def test_an_unsampled_session_scores_every_mutant(tmp_path):
    path = _session(tmp_path / "s.sqlite", n=5)
    c = ms.counts(path)
    assert (c["sampled"], c["total"], c["pending"], c["run"]) == (5, 5, 5, 0)
    assert "all 5 mutants, 5 not run" in ms.score_line(path)
