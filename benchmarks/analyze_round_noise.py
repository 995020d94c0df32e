"""Where does a run's between-round variation come from? Reads a run folder's records and prints,
over its cells measured in several rounds:

- the between-round CV of each cell (the std of its round medians over their median:
  ``ios_core.measurement.stats.cv``), as the report shows it;
- how much of it follows the machine's speed as the canary saw it: the rank correlation, over all
  rounds of all cells, of a round's median (relative to its cell's) with its canary (relative to the
  run's usual canary), and the between-round CV after dividing each round's median by its canary
  ratio. A correlation near 0 means the canary does not see what moves the cells (the variation
  is the process's own: thread placement, memory layout), one near 1 that the machine's speed
  moves them;
- the same split by framework.

Nothing here changes a figure the harness reports; it is a diagnostic.

    PYTHONPATH=. python benchmarks/analyze_round_noise.py runs/NAME
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ios_bench.results import read_records  # noqa: E402
from ios_core.measurement import stats  # noqa: E402
from ios_core.measurement.interference import canary_ms  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run folder (runs/NAME)")
    args = ap.parse_args(argv)
    records = [r for r in read_records(Path(args.run)) if r.get("status") in ("ok", "wrong") and r.get("rounds")]
    canaries = [canary_ms(r.get("interference") or {}) for rec in records for r in rec["rounds"]]
    canaries = [c for c in canaries if c]
    if len(canaries) < 3:
        print("too few rounds with a canary to analyse")
        return 1
    usual = stats.median(canaries)
    rel_median, rel_canary, rows = [], [], []
    for rec in records:
        rounds = [r for r in rec["rounds"] if r.get("status") == "ok" and isinstance(r.get("median_ms"), float)
                  and canary_ms(r.get("interference") or {}) and not r.get("disturbed")]
        if len(rounds) < 2:
            continue
        meds = [r["median_ms"] for r in rounds]
        ratios = [canary_ms(r["interference"]) / usual for r in rounds]
        m = stats.median(meds)
        rel_median += [x / m for x in meds]
        rel_canary += ratios
        rows.append((rec.get("label") or rec["framework"], rec["model"], rec["batch_size"], stats.cv(meds),
                     stats.cv([x / c for x, c in zip(meds, ratios)])))
    if not rows:
        print("no cell has two undisturbed rounds with a canary")
        return 1
    rho, p = spearmanr(rel_median, rel_canary)
    print(f"{len(rows)} cells, {len(rel_median)} undisturbed rounds; usual canary {usual:.3f} ms")
    print(f"rank correlation of a round's relative median with its canary ratio: {rho:+.2f} (p={p:.2g})")
    print(f"between-round CV, median over cells: {stats.median(r[3] for r in rows):.1%}; "
          f"after dividing by the canary ratio: {stats.median(r[4] for r in rows):.1%}")
    by_fw: dict[str, list] = {}
    for r in rows:
        by_fw.setdefault(r[0], []).append(r)
    print(f"\n{'framework':32} cells  CV (median)  CV / canary")
    for fw, rs in sorted(by_fw.items()):
        print(f"{fw:32} {len(rs):5}  {stats.median(x[3] for x in rs):10.1%}  "
              f"{stats.median(x[4] for x in rs):10.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
