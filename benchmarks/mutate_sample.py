"""A seeded sample of a cosmic-ray session, and its score with an interval, for ``make mutate SAMPLE=N``.

A module of a few hundred lines gives cosmic-ray a thousand mutants or more, each one run of the
module's tests: hours. ``sample`` keeps a seeded uniform random sample of N of the session's work items
(after ``cosmic-ray init``, before ``exec``) and deletes the others, so ``exec`` runs only those and
``cr-report`` counts only those. The mutants are ordered by what they are (module, operator, occurrence,
position), not by cosmic-ray's job ids (fresh random ones at every ``init``), so one seed picks the same
mutants every time the same code is initialised. The session's full size is kept in a table of its own
(``ios_bench_sample``) beside cosmic-ray's.

``score`` prints killed/run and a 95 % Wilson interval for the kill rate of the whole module (of the
sample only when every mutant was kept, the interval then says how far the rate of this many runs can be
trusted as well). A mutant counts as killed as cosmic-ray counts it: any test outcome but "survived"
(killed, or incompetent: the mutant did not even import). Jobs not run yet are left out of both counts.

    python benchmarks/mutate_sample.py sample SESSION.sqlite N [--seed S]
    python benchmarks/mutate_sample.py score SESSION.sqlite
    python benchmarks/mutate_sample.py reset SESSION.sqlite   # forget the survivors' results to re-run them
"""

from __future__ import annotations

import argparse
import math
import random
import sqlite3
import sys
from pathlib import Path

Z95 = 1.959963984540054  # two-sided 95 % normal quantile


def _connect(session: str | Path) -> sqlite3.Connection:
    path = Path(session)
    if not path.is_file():
        raise SystemExit(f"mutate_sample: no cosmic-ray session at {path}")
    con = sqlite3.connect(path)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    if not {"work_items", "mutation_specs", "work_results"} <= tables:
        con.close()
        raise SystemExit(f"mutate_sample: {path} is not a cosmic-ray session (run `cosmic-ray init` first)")
    con.execute("pragma foreign_keys=ON")
    return con


def _ordered_jobs(con: sqlite3.Connection) -> list[str]:
    """Every work item's job id, ordered by its mutations (the same order for the same code, any init)."""
    rows = con.execute(
        "select w.job_id, m.module_path, m.operator_name, m.operator_args, m.occurrence,"
        " m.start_pos_row, m.start_pos_col, m.end_pos_row, m.end_pos_col"
        " from work_items w left join mutation_specs m on m.job_id = w.job_id").fetchall()
    keys: dict[str, list] = {}
    for job, *spec in rows:
        keys.setdefault(job, []).append(tuple("" if v is None else str(v) for v in spec))
    return sorted(keys, key=lambda job: (sorted(keys[job]), job))


def sample(session: str | Path, n: int, seed: int = 0) -> tuple[int, int]:
    """Keep a seeded uniform random sample of ``n`` work items of ``session`` (all when ``n`` >= their
    number), delete the rest with their results. Returns (kept, total). Sampling twice keeps the first
    sample's total: the module's size, not the sample's."""
    if n < 1:
        raise SystemExit(f"mutate_sample: SAMPLE must be a positive number of mutants, not {n}")
    con = _connect(session)
    try:
        jobs = _ordered_jobs(con)
        total = _total(con) or len(jobs)
        keep = set(jobs) if n >= len(jobs) else set(random.Random(seed).sample(jobs, n))
        drop = [(j,) for j in jobs if j not in keep]
        with con:
            con.executemany("delete from work_results where job_id = ?", drop)
            con.executemany("delete from mutation_specs where job_id = ?", drop)
            con.executemany("delete from work_items where job_id = ?", drop)
            con.execute("create table if not exists ios_bench_sample (total integer, kept integer, seed integer)")
            con.execute("delete from ios_bench_sample")
            con.execute("insert into ios_bench_sample values (?, ?, ?)", (total, len(keep), seed))
        return len(keep), total
    finally:
        con.close()


def _total(con: sqlite3.Connection) -> int | None:
    try:
        row = con.execute("select total from ios_bench_sample").fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion of ``k`` successes in ``n`` trials."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def counts(session: str | Path) -> dict:
    """killed, run, survived, pending and the module's total mutants of a session."""
    con = _connect(session)
    try:
        outcomes = [r[0] for r in con.execute(
            "select test_outcome from work_results where worker_outcome != 'SKIPPED'")]
        items = con.execute("select count(*) from work_items").fetchone()[0]
        done = con.execute("select count(*) from work_results").fetchone()[0]
        total = _total(con) or items
    finally:
        con.close()
    survived = sum(1 for o in outcomes if o == "SURVIVED")
    return {"killed": len(outcomes) - survived, "run": len(outcomes), "survived": survived,
            "pending": items - done, "sampled": items, "total": total}


def score_line(session: str | Path) -> str:
    c = counts(session)
    lo, hi = wilson(c["killed"], c["run"])
    rate = c["killed"] / c["run"] if c["run"] else float("nan")
    of = (f"a seeded sample of {c['sampled']} of {c['total']} mutants" if c["sampled"] < c["total"]
          else f"all {c['total']} mutants")
    pending = f", {c['pending']} not run" if c["pending"] else ""
    return (f"killed {c['killed']}/{c['run']} ({rate:.0%}), {c['survived']} survived, {of}{pending}; "
            f"95 % Wilson interval of the module's kill rate {lo:.0%}-{hi:.0%}")


def reset_survivors(session: str | Path) -> int:
    """Forget the results of the surviving mutants so that ``cosmic-ray exec`` runs them again (after a
    test was added to kill them). Returns how many."""
    con = _connect(session)
    try:
        with con:
            return con.execute("delete from work_results where test_outcome = 'SURVIVED'").rowcount
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mutate_sample", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="keep a seeded random sample of N work items")
    s.add_argument("session")
    s.add_argument("n", type=int)
    s.add_argument("--seed", type=int, default=0)
    sub.add_parser("score", help="killed/run and the 95 %% Wilson interval").add_argument("session")
    sub.add_parser("reset", help="forget the survivors' results, to run them again").add_argument("session")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "sample":
            kept, total = sample(args.session, args.n, args.seed)
            print(f"{args.session}: kept {kept} of {total} mutants (seed {args.seed})")
        elif args.cmd == "score":
            print(score_line(args.session))
        else:
            print(f"{args.session}: {reset_survivors(args.session)} survivors to run again")
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 2
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
