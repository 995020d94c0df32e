"""The report's tables (:mod:`ios_bench.reporting.report` renders them with its plots): a small table model
(:class:`Table`, Markdown and HTML) and one builder per table, each from the run's DataFrame
(``ios_bench.results.load_run(...).frame()``): latency and throughput, speedups, memory, across
devices, IOS schedules, rounds, every cell, configuration, failures, environment."""

from __future__ import annotations

import html
import json
import math

from ios_bench.planning.plan import SCHEDULES
from ios_bench.records.record import CellResult
from ios_bench.reporting.escape import md as md_text
from ios_bench.reporting.numbers import fmt, fmt_pm
from ios_core.measurement.stats import geomean, median_or_none

IOS_BOTH = "ios-both"
MAX_COLUMNS = 12  # no table of the report is wider (Table.parts splits a wider one)


# ---- small table model rendered to Markdown and HTML -------------------------------------------

class Table:
    """A titled table with a note; ``keep``: its leading key columns (repeated in every part when
    :meth:`parts` splits it)."""

    def __init__(self, title: str, headers: list[str], rows: list[list[str]], note: str = "", keep: int = 1):
        self.title, self.headers, self.rows, self.note, self.keep = title, headers, rows, note, keep

    def parts(self, max_columns: int = MAX_COLUMNS) -> list[Table]:
        """The table as it is when it has at most ``max_columns`` columns, else split into parts of
        that width, each repeating the key columns (titled "(1/2)", ...; the note under the last)."""
        if len(self.headers) <= max_columns:
            return [self]
        keep = max(1, min(self.keep, max_columns - 1))
        rest = list(range(keep, len(self.headers)))
        step = max_columns - keep
        chunks = [rest[i:i + step] for i in range(0, len(rest), step)]
        out = []
        for i, chunk in enumerate(chunks):
            cols = list(range(keep)) + chunk
            out.append(Table(f"{self.title} ({i + 1}/{len(chunks)})", [self.headers[c] for c in cols],
                             [[row[c] if c < len(row) else "" for c in cols] for row in self.rows],
                             self.note if i == len(chunks) - 1 else "", keep))
        return out

    def md(self) -> str:
        esc = md_text
        lines = [f"**{esc(self.title)}**", "", "| " + " | ".join(map(esc, self.headers)) + " |",
                 "|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.headers))) + "|"]
        lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in self.rows]
        if self.note:
            lines += ["", f"_{esc(self.note)}_"]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        head = "".join(f"<th>{html.escape(str(h))}</th>" for h in self.headers)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in self.rows)
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        return (f"<h4>{html.escape(self.title)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
                f"</table>{note}")


def _label(fw: str) -> str:
    from ios_bench.planning.cells import label

    return label(fw)


def _row_label(r) -> str:
    """A cell's framework label, with its precision (other than fp32) and its LoadGen scenario
    configuration where it has one."""
    from ios_bench.planning.cells import label

    variant, precision = r.get("variant"), r.get("precision")
    return (label(r["framework"], precision if isinstance(precision, str) else None)
            + (f" [{variant}]" if isinstance(variant, str) and variant else ""))


def framework_order(df) -> list[str]:
    """Peers in order of appearance, then IOS schedules in the optimizer's order."""
    seen = list(dict.fromkeys(df["framework"]))
    peers = [f for f in seen if not f.startswith("ios-")]
    ios = [f"ios-{s}" for s in SCHEDULES if f"ios-{s}" in seen] + [f for f in seen if f.startswith("ios-")
                                                                    and f[4:] not in SCHEDULES]
    return peers + ios


# ---- tables -------------------------------------------------------------------------------------

def _ok(df):
    return df[df["status"] == "ok"]


def _spread(r) -> str:
    """A cell's figure with its spread (:meth:`ios_bench.records.record.CellResult.figure_text`)."""
    return CellResult(_plain(r)).figure_text()


def _plain(r) -> dict:
    """A DataFrame row as a record dict (NaN: absent)."""
    items = r.items() if hasattr(r, "items") else dict(r).items()
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in items}


def _status_text(row) -> str:
    if row["status"] == "capped":  # its one round's figure, said to be capped (CellResult.figure_text)
        return _spread(row)
    return "failed" if row["status"] == "failed" else "skipped"


TIMED = ("ok", "wrong")  # statuses that carry timings (a wrong cell is shown, never aggregated)


def _grid(sub, text, title: str, note: str, empty: str = "-", total=None, total_label: str = "GeoMean") -> Table:
    """The models x frameworks grid every per-cell table shows: ``text(record, model, framework)``
    per cell (``empty`` where the run has no such cell) and, with ``total(framework)``, a GeoMean per
    framework. Models are the rows and frameworks the columns; the table turns (frameworks as rows,
    models as columns, the GeoMean a column) whenever there are more frameworks than models, so
    that a sweep of many frameworks over few models stays narrow."""
    fws = framework_order(sub)
    models = list(dict.fromkeys(sub["model"]))
    cells = {}
    for m in models:
        for fw in fws:
            cell = sub[(sub["model"] == m) & (sub["framework"] == fw)]
            cells[m, fw] = empty if cell.empty else text(cell.iloc[0], m, fw)
    totals = {fw: total(fw) for fw in fws} if total is not None else None
    if len(fws) > len(models):
        headers = ["framework"] + models + ([total_label] if totals else [])
        rows = [[_label(fw)] + [cells[m, fw] for m in models] + ([totals[fw]] if totals else []) for fw in fws]
        note = (note + "; " if note else "") + "frameworks as rows (more frameworks than models)"
    else:
        headers = ["model"] + [_label(fw) for fw in fws]
        rows = [[m] + [cells[m, fw] for fw in fws] for m in models]
        if totals:
            rows.append([total_label] + [totals[fw] for fw in fws])
    return Table(title, headers, rows, note)


def metric_table(df, device: str, bs: int, metric: str) -> Table:
    """Latency ('latency', ms) or throughput ('throughput', images/s): models x frameworks."""
    sub = df[(df["device"] == device) & (df["batch_size"] == bs)]
    models = list(dict.fromkeys(sub["model"]))
    per_fw: dict[str, dict] = {}

    def text(r, m, fw) -> str:
        if r["status"] not in TIMED:
            return _status_text(r)
        good = r["status"] == "ok" and r["check_passed"] == True  # noqa: E712
        bad = "" if good else " (wrong output)"
        if metric == "latency":
            val = r["median_ms"]
            same = f" (= {r['same_schedule_as']})" if isinstance(r.get("same_schedule_as"), str) else ""
            out = f"{_spread(r)}{same}{bad}"
        else:
            val = r["throughput"]
            out = f"{fmt(val)} [{fmt(r['throughput_p10'])}-{fmt(r['throughput_p90'])}]{bad}"
        if good:
            per_fw.setdefault(fw, {})[m] = val
        return out

    def total(fw) -> str:
        vals = per_fw.get(fw, {})
        return fmt(geomean(list(vals.values()))) if vals and len(vals) == len(models) else "-"

    if metric == "latency":
        title = f"Latency (ms), batch {bs}, {device}"
        note = ("median of the undisturbed rounds' medians ± the between-round spread (coefficient of variation "
                "of the round medians; each round a fresh process); (unstable): its interval is wider than +/-5 % "
                "or it has fewer than 2 undisturbed rounds (the 'Unstable cells' table says which); (= X): the "
                "same schedule as X, one measurement; GeoMean over models, only where "
                "every model ran with a correct output; capped (Nx the best): one round only, too slow against the "
                "best peer to change the answer (docs/harness.md), in no GeoMean")
    else:
        title = f"Throughput (images/s), batch {bs}, {device}"
        note = "median [p10-p90] of the timing samples; GeoMean over models where every model ran correctly"
    return _grid(sub, text, title, note, empty="", total=total)


def speedup_table(df, device: str, bs: int) -> Table | None:
    """IOS at its best (the fastest correct IOS cell of each model: any schedule, any kernel
    provider) against each peer and against the best peer; peers as rows (models as columns) when
    there are more of them than models."""
    sub = _correct(df[(df["device"] == device) & (df["batch_size"] == bs)])
    is_ios = sub["framework"].str.startswith("ios-")
    if not is_ios.any():
        return None
    peers = [f for f in framework_order(sub) if not f.startswith("ios-")]
    cols = peers + ["best peer"]
    models = list(dict.fromkeys(sub["model"]))
    per: dict[str, list] = {p: [] for p in cols}
    ios_text, cell = {}, {}
    for m in models:
        ios = sub[(sub["model"] == m) & is_ios]
        if ios.empty:
            ios_text[m] = "-"
            cell.update({(m, p): "-" for p in cols})
            continue
        best = ios.loc[ios["median_ms"].idxmin()]
        ios_text[m] = f"{_label(best['framework'])} {fmt(best['median_ms'])}"
        peer_rows = sub[(sub["model"] == m) & ~is_ios]
        for p in peers:
            peer = peer_rows[peer_rows["framework"] == p]
            if peer.empty:
                cell[m, p] = "-"
                continue
            s = peer.iloc[0]["median_ms"] / best["median_ms"]
            per[p].append(s)
            cell[m, p] = f"{s:.2f}x"
        if peer_rows.empty:
            cell[m, "best peer"] = "-"
        else:
            top = peer_rows.loc[peer_rows["median_ms"].idxmin()]
            s = top["median_ms"] / best["median_ms"]
            per["best peer"].append(s)
            cell[m, "best peer"] = f"{s:.2f}x ({_label(top['framework'])})"
    geo = {p: f"{geomean(per[p]):.2f}x" if per[p] and len(per[p]) == len(models) else "-" for p in cols}
    note = ("IOS at its best: the fastest correct IOS cell of the model (any schedule, any kernel provider); "
            "peer figure / IOS figure; >1 means IOS is faster")
    if len(cols) > len(models):  # turned: peers as rows
        headers = ["peer"] + models + ["GeoMean"]
        rows = [["IOS at its best (ms)"] + [ios_text[m] for m in models] + [""]]
        rows += [[_label(p) if p != "best peer" else p] + [cell[m, p] for m in models] + [geo[p]] for p in cols]
        note += "; peers as rows (more peers than models)"
    else:
        headers = ["model", "IOS at its best (ms)"] + [_label(p) for p in peers] + ["best peer"]
        rows = [[m, ios_text[m]] + [cell[m, p] for p in cols] for m in models]
        rows.append(["GeoMean", ""] + [geo[p] for p in cols])
    if str(device).startswith("cuda"):
        note += "; " + _graph_replay_note(sub[is_ios], peers)
    return Table(f"IOS at its best against the peers (latency ratio), batch {bs}, {device}", headers, rows, note,
                 keep=1 if len(cols) > len(models) else 2)


# ---- paired verdicts from the rounds a cell already has ------------------------------------------

def _rounds_of(r) -> list:
    rounds = r.get("rounds") if r is not None else None
    return rounds if isinstance(rounds, list) else []


def _paired_verdict(a, b, words: tuple[str, str, str]) -> dict:
    """B's figure against A's (``a``, ``b``: the samples of rounds measured in the same pass): the
    change ``B / A - 1`` with its paired interval (``ios_bench.running.rounds.paired_interval``) and
    the paired rule (``ios_bench.reporting.compare.judge_change`` with the floor
    ``ios_bench.running.rounds.MIN_CHANGE``): ``words`` = (B slower, B faster, neither). Fewer than
    two paired rounds: no verdict. A raw difference of two figures is never one."""
    from ios_bench.reporting.compare import judge_change
    from ios_bench.running.rounds import MIN_CHANGE, paired_interval

    n = len(a)
    if n < 2:
        return {"verdict": None, "n": n, "why": f"{n} paired round{'s' * (n != 1)}: no verdict"}
    change, low, high = paired_interval(a, b)
    v, _ = judge_change(change, low, high, MIN_CHANGE, "the floor")
    verdict = {"regression": words[0], "improvement": words[1]}.get(v, words[2])
    return {"verdict": verdict, "n": n, "change": change, "low": low, "high": high}


def against(base, other, words: tuple[str, str, str]) -> dict:
    """``other``'s cell against ``base``'s, paired by the pass of their rounds (cells of one group
    run in the same interleaved passes): :func:`_paired_verdict`."""
    from ios_bench.running.rounds import paired_rounds

    return _paired_verdict(*paired_rounds(_rounds_of(base), _rounds_of(other)), words)


SLOWER_FLAG = "slower than sequential"
FASTER_FLAG = "faster than sequential"
SEQUENTIAL_WORDS = (SLOWER_FLAG, FASTER_FLAG, "no clear difference from sequential")


def sequential_verdict(r, df) -> dict | None:
    """An IOS cell (other than the sequential schedule, and not the same schedule as another)
    against the sequential schedule on the same provider, on the interleaved rounds the cell
    already has: paired by pass with the sequential cell of the sweep, or, where the sweep has
    none, with the sequential schedule timed in each of the cell's own rounds (``sequential_ms``).
    None where it does not apply."""
    from ios_bench.planning.cells import schedule_key
    from ios_bench.running.rounds import good_rounds

    if r.get("status") != "ok" or isinstance(r.get("same_schedule_as"), str):
        return None
    schedule = r.get("schedule")
    if not isinstance(schedule, str) or schedule == "sequential":
        return None
    provider = r.get("provider") if isinstance(r.get("provider"), str) else "torch"
    seq = None
    if isinstance(r.get("cell"), str) and "cell" in df.columns:
        key = r["cell"].replace(r["framework"], schedule_key("sequential", provider))
        found = df[(df["cell"] == key) & (df["status"] == "ok")]
        seq = found.iloc[0] if not found.empty else None
    if seq is not None:
        return against(seq, r, SEQUENTIAL_WORDS)
    own = [g for g in good_rounds(_rounds_of(r)) if isinstance(g.get("sequential_ms"), (int, float))
           and g["sequential_ms"] > 0]
    if not own and _num(r.get("sequential_ms")) is None:
        return None
    return _paired_verdict([[float(g["sequential_ms"])] for g in own], [g["samples_ms"] for g in own],
                           SEQUENTIAL_WORDS)


def verdict_text(v: dict | None) -> str:
    """A paired verdict with its change and interval, e.g. ``slower than sequential +12.0% [+5.1%,
    +19.3%], 5 pairs``."""
    if v is None:
        return ""
    if v.get("verdict") is None:
        return v["why"]
    return f"{v['verdict']} {v['change']:+.1%} [{v['low']:+.1%}, {v['high']:+.1%}], {v['n']} pairs"


def _graph_replay_note(ios, peers: list[str]) -> str:
    """On the GPU: what the IOS cells ran (a CUDA graph replayed, the default, or launches) and
    which peer compares like with like."""
    col = "config_execution"
    forms = sorted({str(v) for v in ios[col].dropna()}) if col in ios.columns else []
    what = ("IOS cells: " + " / ".join(forms)) if forms else \
        "IOS cells replay a CUDA graph unless run with ios:cuda_graph=false"
    if "torch-compile-cudagraphs" in peers:
        return (f"{what}; the {_label('torch-compile-cudagraphs')} column compares graph replay with graph replay, "
                "the other peers launch their kernels at every run")
    return f"{what}; no peer here replays a CUDA graph (torch-compile-cudagraphs is the one that does)"


def memory_table(df, device: str, bs: int) -> Table | None:
    """Peak resident memory of each cell's workers (MiB): models x frameworks."""
    sub = df[(df["device"] == device) & (df["batch_size"] == bs) & df["status"].isin(TIMED)]
    if sub.empty or sub["peak_rss_mib"].isna().all():
        return None
    def text(r, m, fw) -> str:
        v = _num(r["peak_rss_mib"])
        return f"{v:,.0f}" if v is not None else "-"

    return _grid(sub, text, f"Peak memory (MiB), batch {bs}, {device}",
                 "the largest resident set of the cell's worker processes (its rounds), the Python process and "
                 "the framework together")


def build_table(df, device: str, bs: int) -> Table | None:
    """Build time per framework (s): the first round's build (cold, unless the framework keeps no
    cache) and the later rounds' (their median: from the run's build cache, ``adapters.build_cache``),
    models x frameworks. Build time is recorded apart from the timed samples; None when no round
    recorded one."""
    sub = df[(df["device"] == device) & (df["batch_size"] == bs) & df["status"].isin(TIMED)]
    if sub.empty or "first_build_seconds" not in sub.columns or sub["first_build_seconds"].isna().all():
        return None
    def text(r, m, fw) -> str:
        rounds = r.get("rounds") if isinstance(r.get("rounds"), list) else []
        builds = [g.get("build_seconds") for g in rounds if isinstance(g, dict) and g.get("status") in TIMED
                  and isinstance(g.get("build_seconds"), (int, float))]
        first, later = _num(r.get("first_build_seconds")), median_or_none(builds[1:])
        return "-" if first is None else fmt(first) + (f" / {fmt(later)}" if later is not None else "")

    return _grid(sub, text, f"Build time (s), batch {bs}, {device}",
                 "first round / later rounds (median): each round a fresh process; the later rounds reuse what "
                 "the first built where the framework caches it on disk (torch.compile's inductor caches, XLA's "
                 "compilation cache, OpenVINO's model cache: docs/harness.md); not part of the timed samples")


def by_place(df):
    """Cells grouped by where they ran: ``device`` becomes "cpu on NODE" when the run's cells ran on
    more than one node (a fleet sweep), so that no table or plot mixes machines."""
    if "node" not in df.columns or df["node"].nunique(dropna=True) <= 1:
        return df
    out = df.copy()
    out["device"] = [f"{d} on {n}" if isinstance(n, str) and n else d for d, n in zip(df["device"], df["node"])]
    return out


def across_table(df, bs: int) -> Table | None:
    """One cell (model, framework) measured on every device and node of the run, side by side:
    device specialization reads along a row. None when the run measured one place only."""
    sub = _correct(df[df["batch_size"] == bs])
    places = list(dict.fromkeys(sub["device"]))
    if len(places) < 2:
        return None
    rows = []
    for (m, fw), grp in sub.groupby(["model", "framework"], sort=False):
        by = {r["device"]: r for _, r in grp.iterrows()}
        rows.append([m, _label(fw)] + [fmt_pm(by[p]["median_ms"], by[p]["std_ms"]) if p in by else "-"
                                       for p in places])
    return Table(f"Latency (ms) across devices and nodes, batch {bs}", ["model", "framework"] + places, rows,
                 "median ± std; correct outputs only; each column one device kind on one node")


def _num(v, default: float | None = None) -> float | None:
    """A number from a cell, or ``default`` where an older or partial record lacks it."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return default if math.isnan(f) else f


PEER_WORDS = ("IOS faster", "IOS slower", "no clear difference")


def _figure_ci(r) -> str:
    """A cell's figure with its 95% interval (the hierarchical bootstrap over its rounds)."""
    lo, hi = _num(r.get("ci_low_ms")), _num(r.get("ci_high_ms"))
    return fmt(_num(r["median_ms"])) + (f" [{fmt(lo)}-{fmt(hi)}]" if lo is not None and hi is not None else "")


def headline_table(df) -> Table | None:
    """What a reader came for, first: per device, batch and model, IOS at its best (the fastest
    correct IOS cell) against the best peer (the fastest correct peer), each figure with its
    interval, and the peer / IOS ratio with its paired interval and verdict from the rounds the two
    cells ran in the same interleaved passes (:func:`against`). None without a timed cell."""
    timed = df[df["status"].isin(TIMED)]
    if timed.empty:
        return None
    if not df["framework"].str.startswith("ios-").any():  # run --schedules none: what the run can answer
        return fastest_table(df)
    rows = []
    for device in dict.fromkeys(df["device"]):
        at = df[df["device"] == device]
        for bs in sorted(set(at["batch_size"])):
            here = at[at["batch_size"] == bs]
            sub = _correct(here)
            is_ios = sub["framework"].str.startswith("ios-")
            for m in dict.fromkeys(here["model"]):
                ios, peers = sub[(sub["model"] == m) & is_ios], sub[(sub["model"] == m) & ~is_ios]
                best = ios.loc[ios["median_ms"].idxmin()] if not ios.empty else None
                top = peers.loc[peers["median_ms"].idxmin()] if not peers.empty else None
                row = [device, str(bs), m]
                for r in (best, top):
                    row += ["-", "-"] if r is None else [_label(r["framework"]), _figure_ci(r)]
                if best is None or top is None:
                    missing = "IOS cell" if best is None else "peer"
                    side = here[(here["model"] == m) & (here["framework"].str.startswith("ios-") == (best is None))]
                    # a side the run measured, none correct; or a side it never ran (run --schedules none)
                    why = "with a correct output" if not side.empty else "in this run"
                    row += ["-", f"no {missing} {why}"]
                else:
                    row += _ratio_cells(against(best, top, PEER_WORDS), best, top)  # change = peer / IOS - 1
                rows.append(row)
    return Table("IOS at its best against the best peer",
                 ["device", "batch", "model", "IOS at its best", "ms [95% CI]", "best peer", "ms [95% CI]",
                  "peer / IOS [95% CI]", "verdict"], rows,
                 "IOS at its best: the fastest correct IOS cell of the model (any schedule, any kernel provider); "
                 "the best peer: the fastest correct other framework; ms: the median of the undisturbed rounds' "
                 "medians [hierarchical bootstrap interval]; peer / IOS > 1: IOS is faster, its interval from the "
                 "two cells' rounds of the same interleaved passes (paired); a verdict only where that interval "
                 "excludes 1 and the change is at least 2%, never on a raw difference", keep=3)


def _ratio_cells(v: dict, base, other) -> list[str]:
    """The ratio ``other / base`` with its paired interval and the verdict (``v``: :func:`against`'s),
    or the plain ratio and why there is no verdict."""
    if v["verdict"] is None:
        return [f"{other['median_ms'] / base['median_ms']:.2f}x", f"no verdict ({v['why'].split(':')[0]})"]
    return [f"{1 + v['change']:.2f}x [{1 + v['low']:.2f}-{1 + v['high']:.2f}]", f"{v['verdict']} ({v['n']} pairs)"]


# the runner-up against the fastest: change = runner-up / fastest - 1 (> 0: the fastest is faster)
FASTEST_WORDS = ("faster", "slower", "no clear difference")


def fastest_table(df) -> Table:
    """A run without IOS cells (``--schedules none``): per device, batch and model, the fastest correct
    framework, its margin over the next fastest with the paired interval from the rounds the two ran
    in the same interleaved passes (:func:`against`), and the verdict; said once, in the title, that
    no IOS cell ran."""
    rows = []
    for device in dict.fromkeys(df["device"]):
        at = df[df["device"] == device]
        for bs in sorted(set(at["batch_size"])):
            sub = _correct(at[at["batch_size"] == bs])
            for m in dict.fromkeys(at[at["batch_size"] == bs]["model"]):
                ranked = sub[sub["model"] == m].sort_values("median_ms")
                row = [device, str(bs), m]
                if ranked.empty:
                    rows.append(row + ["-", "-", "-", "-", "-", "no framework with a correct output"])
                    continue
                first = ranked.iloc[0]
                row += [_label(first["framework"]), _figure_ci(first)]
                if len(ranked) < 2:
                    rows.append(row + ["-", "-", "-", "one framework with a correct output"])
                    continue
                second = ranked.iloc[1]
                row += [_label(second["framework"]), _figure_ci(second)]
                rows.append(row + _ratio_cells(against(first, second, FASTEST_WORDS), first, second))
    return Table("The fastest framework per model (no IOS cell ran in this run)",
                 ["device", "batch", "model", "fastest", "ms [95% CI]", "next fastest", "ms [95% CI]",
                  "next / fastest [95% CI]", "verdict"], rows,
                 "fastest: the correct framework with the lowest median; ms: the median of the undisturbed rounds' "
                 "medians [hierarchical bootstrap interval]; next / fastest: its margin over the next fastest, the "
                 "interval from the two cells' rounds of the same interleaved passes (paired); 'faster' only where "
                 "that interval excludes 1 and the margin is at least 2%", keep=3)


def cell_counts(df) -> dict[str, int]:
    """The cells by what a reader must know of them: ok (a correct output, stable rounds), wrong
    (a wrong output), unstable (correct, but its interval too wide or its undisturbed rounds too few),
    skipped, failed."""
    out = {"ok": 0, "wrong": 0, "unstable": 0, "skipped": 0, "failed": 0, "capped": 0}
    for _, r in df.iterrows():
        if r["status"] == "wrong" or (r["status"] == "ok" and r.get("check_passed") is False):
            out["wrong"] += 1
        elif r["status"] == "ok":
            out["unstable" if _unstable(r) else "ok"] += 1
        elif r["status"] in ("skipped", "capped"):
            out[r["status"]] += 1
        else:
            out["failed"] += 1
    return out


def _unstable(r) -> str:
    why = r.get("unstable")
    return why if isinstance(why, str) and why else ""


def unstable_table(df) -> Table | None:
    """The cells whose figure should not be trusted as it stands, with why (an interval too wide, or too
    few undisturbed rounds: ``ios_bench.running.rounds.unstable_reason``)."""
    from ios_bench.running.rounds import who_disturbed

    rows = [[r["model"], r["batch_size"], _row_label(r), r["device"], _unstable(r),
             who_disturbed(r["rounds"] if isinstance(r.get("rounds"), list) else []) or "-"]
            for _, r in df[df["status"].isin(TIMED)].iterrows() if _unstable(r)]
    if not rows:
        return None
    return Table("Unstable cells", ["model", "batch", "framework", "device", "why", "disturbed by"], rows,
                 "their figures are shown, marked (unstable), and still measured; disturbed by: the other processes "
                 "that used the CPUs during its disturbed rounds (name, pid, share of the machine, rounds); the Rounds "
                 "table has each round", keep=3)


def load_note(df) -> str | None:
    """The report's header line on steady load: which cells were measured under which load
    (``load``), and that their figures are not quiet-machine figures; None when every cell was quiet."""
    timed = df[df["status"].isin(TIMED)]
    if "load" not in timed.columns:
        return None
    loads = [v for v in timed["load"] if isinstance(v, str) and v]
    if not loads:
        return None
    kinds = list(dict.fromkeys(v.split(" (")[0] for v in loads))
    text = (f"Measured {'; '.join(kinds)} ({len(loads)} of {len(timed)} timed cells): a co-tenant used about that "
            "share of the machine through the whole run, so these figures (and their comparisons, paired in the same "
            "passes) hold under that condition, not on a quiet machine")
    if len(loads) < len(timed):
        text += ("; the other cells were measured quiet, and the GeoMeans and speedups here mix figures measured "
                 "under load with quiet ones")
    return text


def slower_than_sequential(df) -> list:
    """IOS cells whose paired verdict against the sequential schedule on the same provider, from
    the interleaved rounds they already have, is "slower" (:func:`sequential_verdict`)."""
    return [r for _, r in _ok(df).iterrows() if (sequential_verdict(r, df) or {}).get("verdict") == SLOWER_FLAG]


def ios_table(df, device: str, bs: int) -> Table | None:
    """IOS cells: the optimizer's estimate against the measurement, and against sequential."""
    sub = _ok(df[(df["device"] == device) & (df["batch_size"] == bs)])
    sub = sub[sub["schedule"].notna()] if "schedule" in sub.columns else sub.iloc[0:0]
    if sub.empty:
        return None
    rows, errors = [], []
    for _, r in sub.iterrows():
        med, pred, seq = _num(r["median_ms"]), _num(r.get("predicted_ms")), _num(r.get("sequential_ms"))
        err = (pred - med) / med if pred and med else None
        if err is not None:
            errors.append(abs(err))
        flag = ""
        if isinstance(r.get("same_schedule_as"), str):
            flag = f"same schedule as {r['same_schedule_as']}"
        else:
            flag = verdict_text(sequential_verdict(r, df))
        rows.append([r["model"], _row_label(r), r.get("provider") or "torch", fmt(med),
                     fmt(pred) if pred else "-", f"{err:+.1%}" if err is not None else "-",
                     fmt(seq) if seq else "-", f"{seq / med:.2f}x" if seq and med else "-", flag,
                     fmt(_num(r.get("optimize_seconds"))) if _num(r.get("optimize_seconds")) is not None else "-"])
    note = ("predicted: the optimizer's estimate (cost model, an estimate, not a measurement); error = "
            "(predicted - measured) / measured; sequential: the sequential schedule on the same provider, measured "
            "in the same interleaved rounds; vs sequential > 1 means the schedule is faster; against sequential: the "
            "paired verdict on those rounds (the change of the schedule's round against the sequential one of the same "
            "pass, its 95% interval and the pairs; slower or faster only where the interval excludes zero and the "
            "change is at least 2%), never a raw difference")
    if errors:
        note += f". Mean absolute prediction error: {sum(errors) / len(errors):.1%} over {len(errors)} cells"
    return Table(f"IOS schedules: prediction and validation, batch {bs}, {device}",
                 ["model", "schedule", "provider", "measured ms", "predicted ms (estimate)", "prediction error",
                  "sequential ms", "vs sequential", "against sequential", "optimize s"], rows, note)


def rounds_table(df) -> Table | None:
    """Every timed cell's rounds: the figure's interval, the spread between rounds, the rounds used,
    the disturbed ones and why, and whether the figure is stable."""
    ran = df[df["status"].isin(TIMED)]
    if ran.empty or ran["rounds_used"].isna().all():
        return None
    rows = []
    for _, r in ran.iterrows():
        rounds = r.get("rounds") if isinstance(r.get("rounds"), list) else []
        why = "; ".join(dict.fromkeys(str(g.get("disturbed")) for g in rounds
                                      if isinstance(g, dict) and g.get("disturbed")))
        lo, hi = _num(r.get("ci_low_ms")), _num(r.get("ci_high_ms"))
        cv = _num(r.get("between_round_cv"))
        meds = r.get("round_medians_ms") if isinstance(r.get("round_medians_ms"), list) else []
        rows.append([r["model"], r["batch_size"], _row_label(r), fmt(r["median_ms"]),
                     f"{fmt(lo)}-{fmt(hi)}" if lo is not None else "-", f"{cv:.1%}" if cv is not None else "-",
                     " ".join(fmt(m) for m in meds) or "-",
                     f"{_int(r.get('rounds_used'))}/{_int(r.get('rounds_measured'))}",
                     f"{_int(r.get('rounds_disturbed'))}" + (f" ({why})" if why else ""),
                     r["unstable"] if isinstance(r.get("unstable"), str) and r["unstable"] else "stable"])
    return Table("Rounds", ["model", "batch", "framework", "figure ms", "95% CI ms", "between rounds",
                            "round medians ms", "rounds used/measured", "disturbed", "verdict"], rows,
                 "each round a fresh worker process; the figure is the median of the undisturbed rounds' medians, its "
                 "interval a hierarchical bootstrap (rounds, then samples); a disturbed round (other processes' CPU "
                 "time, steal, or a slow canary) is measured again and never pooled; docs/harness.md explains "
                 "'unstable' and 'disturbed'")


def _int(v) -> str:
    n = _num(v)
    return str(int(n)) if n is not None else "?"


def cells_table(df) -> Table:
    rows = []
    for _, r in df.sort_values(["device", "model", "batch_size"], kind="stable").iterrows():
        if r["status"] in TIMED:
            check = "ok" if r["status"] == "ok" else "WRONG"
            check += f" ({r['check_max_rel_err']:.1e})" if _num(r["check_max_rel_err"], None) is not None else ""
            check += "; oracle only" if _oracle_only(r) else ""
            rows.append([r["model"], r["batch_size"], _row_label(r), r["device"], r["status"],
                         fmt_pm(r["median_ms"], r["std_ms"]), f"{fmt(r['p10_ms'])}-{fmt(r['p90_ms'])}",
                         fmt(r["throughput"]), check, fmt(r["build_seconds"]), r.get("precision") or "",
                         _node(r)])
        else:
            rows.append([r["model"], r["batch_size"], _row_label(r), r["device"], r["status"],
                         "", "", "", "", "", "", _node(r)])
    return Table("Every cell", ["model", "batch", "framework", "device", "status", "median ± std ms",
                                "p10-p90 ms", "images/s", "output check (max rel err)", "build s", "precision",
                                "node"],
                 rows, "output check: the cell's output against the oracle (ios_core.reference) at the adapter's "
                 "tolerance (and, for an imported model, against onnxruntime on the original file; 'oracle only': "
                 "that independent check could not run, see Failures)")


def config_table(df) -> Table | None:
    """Each framework's configuration as it ran (from its build info): thread budget, the threads
    it used, precision, execution mode and tuning budget, so that no peer's setup is hidden."""
    ran = df[df["status"].isin(TIMED)]
    if ran.empty:
        return None
    rows = []

    def distinct(d, col) -> str:
        vals = [str(v) for v in d[col] if v is not None and not (isinstance(v, float) and math.isnan(v))] \
            if col in d.columns else []
        return ", ".join(dict.fromkeys(vals)) or "-"

    for (device, fw), d in ran.groupby(["device", "framework"], sort=False):
        def values(col, d=d):
            return distinct(d, col)

        threads = values("threads")
        used = values("config_threads")
        split = f"{values('config_intra_op_threads')} intra x {values('config_inter_op_threads')} inter" \
            if values("config_inter_op_threads") != "-" else ""
        rows.append([_label(fw), device, threads, used + (f" ({split})" if split else ""), values("precision"),
                     values("config_execution_mode"), values("config_tuning")])
    return Table("Configuration of each framework", ["framework", "device", "thread budget", "threads used",
                                                     "precision", "execution mode", "tuning budget"], rows,
                 "as each framework's build reported it; every cell gets the same thread budget and fp32 unless "
                 "a row says otherwise")


def _node(r) -> str:
    n = r.get("node")
    return n if isinstance(n, str) else ""


def _oracle_only(r) -> bool:
    """An imported model's cell whose independent check (onnxruntime on the original file) could
    not run (the record's ``independent_check``)."""
    ind = r.get("independent_check")
    return isinstance(ind, dict) and ind.get("ran") is False


def failures_table(df) -> Table | None:
    bad = df[~df["status"].isin(TIMED)]
    wrong = df[df["status"] == "wrong"]
    unchecked = [r for _, r in df[df["status"].isin(TIMED)].iterrows() if _oracle_only(r)]
    if bad.empty and wrong.empty and not unchecked:
        return None
    rows = [[r["model"], r["batch_size"], _row_label(r), r["device"], r["status"], r["reason"] or ""]
            for _, r in bad.iterrows()]
    rows += [[r["model"], r["batch_size"], _row_label(r), r["device"], "wrong output",
              r.get("check_reason") or ""] for _, r in wrong.iterrows()]
    rows += [[r["model"], r["batch_size"], _row_label(r), r["device"], f"{r['status']}, oracle only",
              r["independent_check"].get("reason") or ""] for r in unchecked]
    return Table("Failures", ["model", "batch", "framework", "device", "status", "reason"], rows,
                 "stderr tails are in the HTML report and in the run folder's logs/")


def _plan_threads(env: dict):
    plan = env.get("plan")
    return plan.get("threads", "?") if isinstance(plan, dict) else "?"


def _policy_text(env: dict) -> str:
    """The run's spin/wait policy (ios_core.measurement.threads), as the header and environment table show it."""
    pol = env.get("spin_policy") if isinstance(env.get("spin_policy"), dict) else {}
    if not pol:
        return "not recorded (a run from before the policy existed: library defaults)"
    tenv = env.get("thread_env") if isinstance(env.get("thread_env"), dict) else {}
    vars_ = ", ".join(f"{k}={v}" for k, v in tenv.items() if k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"))
    return f"{pol.get('name')}: {pol.get('description', '')}" + (f" ({vars_})" if vars_ else "")


def outside_writes_table() -> Table:
    """What the frameworks write outside the run folder during a run, and the switch for each
    (ios_bench.running.sideeffects)."""
    from ios_bench.running.sideeffects import OUTSIDE_WRITES

    return Table("Files written outside the run folder", ["library", "writes", "switch"],
                 [list(row) for row in OUTSIDE_WRITES],
                 "where a library gives a switch that stops the write, ios-bench sets it; the others are listed "
                 "here")


def env_table(env: dict) -> Table:
    def part(key) -> dict:  # a hand-edited env.json may hold anything: show '?' rather than fail
        value = env.get(key)
        return value if isinstance(value, dict) else {}

    cpu, mem, osi, py = part("cpu"), part("memory"), part("os"), part("python")
    fw = part("frameworks")
    fw_text = []
    for _dev, adapters in fw.items():
        for name, info in (adapters if isinstance(adapters, dict) else {}).items():
            if isinstance(info, dict):
                fw_text.append(f"{name} {info.get('version') or ''}".strip() + ("" if not info.get("reason") else
                                                                                 " (unavailable)"))
    plan = part("plan")
    rows = [
        ["CPU", f"{cpu.get('model', '?')}, {cpu.get('physical_cores', '?')} cores / {cpu.get('logical_cores', '?')} "
                f"threads"],
        ["memory", f"{mem.get('total_gib', '?')} GiB"],
        ["OS", osi.get("distribution") or osi.get("platform", "?")],
        ["Python", py.get("version", "?")],
        ["packages", ", ".join(f"{k} {v}" for k, v in part("packages").items())],
        ["frameworks", ", ".join(sorted(set(fw_text)))],
        ["GPU", json.dumps(env.get("gpu")) if isinstance(env.get("gpu"), list) else str(env.get("gpu", "?"))],
        ["clocks", str(env.get("clocks", "?"))],
        ["threads per cell", str(plan.get("threads", "?"))],
        ["spin/wait policy", _policy_text(env)],
        ["protocol", f"{plan.get('rounds', 1)} round(s) per cell, each a fresh process, interleaved (round seed "
                     f"{plan.get('round_seed', '-')}); per round warmup {plan.get('warmup')}, repeat "
                     f"{plan.get('repeat')} samples of number {plan.get('number')} (min {plan.get('min_sample_ms')} "
                     "ms per sample)"],
        ["git commit", str(part("git").get("commit", "?")) + (" (dirty)" if part("git").get("dirty") else "")],
        ["command line", " ".join(map(str, env.get("command_line") or [])) if isinstance(env.get("command_line"),
                                                                                           list) else "?"],
        ["captured", str(env.get("captured", "?"))],
    ]
    return Table("Environment", ["", ""], rows)


def _correct(df):
    """Cells that ran and computed the right output (the only ones plotted)."""
    ok = _ok(df)
    return ok[ok["check_passed"] == True]  # noqa: E712 - pandas


def protocol_note(df) -> str | None:
    """One sentence on how the run's rounds were timed (each record's ``protocol``): time-bounded or fixed
    counts, the budget, and the samples and warmup calls the rounds really took; None where no record
    says (records from before the field)."""
    per = [p for p in (df["protocol"] if "protocol" in df.columns else []) if isinstance(p, dict)]
    rounds = [r for p in per for r in p.get("rounds") or [] if isinstance(r, dict)]
    if not rounds:
        return None
    modes = sorted({p.get("mode") for p in per if p.get("mode")})
    samples = [r["samples"] for r in rounds if isinstance(r.get("samples"), int)]
    warm = [r["warmup_calls"] for r in rounds if isinstance(r.get("warmup_calls"), int)]
    text = f"Rounds timed with {' and '.join(modes)} counts" if modes == ["fixed"] else \
        f"Rounds timed {' / '.join(modes)}"
    budget = next((p for p in per if p.get("sample_s") is not None), None)
    if budget:
        text += (f" (samples for about {budget['sample_s']:g} s, at least {budget.get('min_repeat')}, the count "
                 f"chosen before the first timed sample; warmup until {budget.get('warmup_s'):g} s of calls)")
    if samples:
        text += f": {len(rounds)} rounds took {min(samples)} to {max(samples)} samples"
    if warm:
        text += f" after {min(warm)} to {max(warm)} warmup calls"
    few = sum(1 for p in per if any((r.get("samples") or 0) < max(samples or [0]) for r in p.get("rounds") or []))
    if few and budget:
        text += f"; {few} cell(s) took fewer than the most, their calls being long (each round's record says why)"
    return text + "."
