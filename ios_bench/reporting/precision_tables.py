"""The report's answer per precision (``run --precision``; docs/precision.md).

Every table of the report's main sections is fp32's: nothing computed at another precision enters
its figures, GeoMeans or plots. For a run with other precisions, this module adds one section:

- per device, batch and precision, IOS at its best against the best peer
  (:func:`ios_bench.reporting.report_tables.headline_table` on that precision's cells);
- each framework's speedup over its own fp32 (the same framework, model, batch and device), its
  paired interval from the rounds the two cells ran in the same interleaved passes, and the error
  against the oracle beside every reduced-precision figure. A framework is one engine at every
  precision (TensorFlow Lite is the ``tflite`` framework, not ``tensorflow``'s int8: issue 57); two cells
  whose records name different execution modes (an older run's ``tensorflow`` int8, TFLite's interpreter,
  against TensorFlow's graph runtime at fp32) get no ratio, with the reason (:func:`engine_change`);
- the combinations no adapter could give, listed once each with the reason.
"""

from __future__ import annotations

from ios_bench.reporting.numbers import fmt
from ios_bench.reporting.report_tables import (
    TIMED,
    Table,
    _correct,
    _label,
    _num,
    against,
    framework_order,
    headline_table,
)

FP32 = "fp32"
SPEED_WORDS = ("slower than its fp32", "faster than its fp32", "no clear difference from its fp32")


def precision_of(df):
    """Each row's asked precision (a record of an older run, without one: fp32)."""
    if "precision" not in df.columns:
        return df["model"].map(lambda _: FP32)
    return df["precision"].map(lambda p: p if isinstance(p, str) and p else FP32)


def fp32_rows(df):
    """The rows of fp32 cells only: what every table outside this section is made of."""
    return df[precision_of(df) == FP32].reset_index(drop=True)


def reduced(df) -> list[str]:
    """The precisions other than fp32 the run asked for, in the order they appear."""
    return [p for p in dict.fromkeys(precision_of(df)) if p != FP32]


def error_text(r) -> str:
    """The output's error against the oracle, beside a reduced-precision figure: ``err 3.1e-03``
    (and the int8 check's RMS error with the bound the oracle's int8 simulation gave it, its arg-max
    agreement where it has one, and the convolutions and matrix products an int8 engine left in float:
    ``in float: 0 conv, 1 matmul``)."""
    err = _num(r.get("check_max_rel_err"))
    text = f"err {err:.1e}" if err is not None else "err ?"
    rms, bound = _num(r.get("check_rms_rel_err")), _num(r.get("check_rms_bound"))
    if rms is not None and bound is not None:
        text += f", RMS {rms:.1e} (bound {bound:.1e})"
    agree = _num(r.get("check_argmax_agreement"))
    if agree is not None:
        text += f", arg-max {agree:.0%}"
    conv, matmul = _num(r.get("float_conv")), _num(r.get("float_matmul"))
    if conv is not None or matmul is not None:  # int8: what the engine left in float, read back
        text += f"; in float: {int(conv or 0)} conv, {int(matmul or 0)} matmul"
    return text


def engine_change(fp32_row, row, precision: str) -> str | None:
    """Why a framework's fp32 cell and its ``precision`` cell are not one engine (their records'
    execution modes differ, as an older run's ``tensorflow`` int8 cell, run by TFLite's interpreter, and
    its fp32 cell, TensorFlow's graph runtime), or None: a ratio of two engines is no precision's gain."""
    a, b = fp32_row.get("config_execution_mode"), row.get("config_execution_mode")
    if isinstance(a, str) and isinstance(b, str) and a and b and a != b:
        return f"another engine at fp32 ({a}) than at {precision} ({b})"
    return None


def speedup_table(df, device: str, bs: int, precision: str) -> Table | None:
    """Each framework's ``precision`` cell against its own fp32 cell, per model: fp32 figure / this
    figure (> 1: faster at ``precision``) with the paired interval, and its error. None where no
    framework has both a correct fp32 and a correct ``precision`` cell."""
    here = df[(df["device"] == device) & (df["batch_size"] == bs)]
    prec = precision_of(here)
    base, other = _correct(here[prec == FP32]), here[prec == precision]
    rows = []
    for fw in framework_order(other):
        for m in dict.fromkeys(other["model"]):
            mine = other[(other["framework"] == fw) & (other["model"] == m)]
            ref = base[(base["framework"] == fw) & (base["model"] == m)]
            if mine.empty or ref.empty or mine.iloc[0]["status"] not in TIMED:
                continue
            r, b = mine.iloc[0], ref.iloc[0]
            changed = engine_change(b, r, precision)
            if changed:
                rows.append([_label(fw), m, fmt(b["median_ms"]), fmt(r["median_ms"]), "-",
                             f"no ratio: {changed}; {error_text(r)}"])
                continue
            if r["status"] != "ok":
                rows.append([_label(fw), m, fmt(b["median_ms"]), fmt(r["median_ms"]), "-",
                             f"wrong output ({error_text(r)})"])
                continue
            v = against(b, r, SPEED_WORDS)  # change = this / fp32 - 1
            if v["verdict"] is None:
                ratio, verdict = f"{b['median_ms'] / r['median_ms']:.2f}x", f"no verdict ({v['why'].split(':')[0]})"
            else:
                ratio = (f"{1 / (1 + v['change']):.2f}x [{1 / (1 + v['high']):.2f}-{1 / (1 + v['low']):.2f}]")
                verdict = f"{v['verdict']} ({v['n']} pairs)"
            rows.append([_label(fw), m, fmt(b["median_ms"]), fmt(r["median_ms"]), ratio,
                         f"{verdict}; {error_text(r)}"])
    if not rows:
        return None
    return Table(f"Speedup over its own fp32 at {precision}, batch {bs}, {device}",
                 ["framework", "model", "fp32 ms", f"{precision} ms", f"fp32 / {precision} [95% CI]",
                  "verdict; error against the oracle"], rows,
                 f"the same framework, model, batch and device at fp32 and at {precision}, measured in the same "
                 "interleaved rounds; > 1: faster at the lower precision; the interval from the two cells' rounds of "
                 "the same passes (paired); err: max |out - oracle| / max |oracle| against the fp32 oracle, checked at "
                 f"{precision}'s stated bound (docs/precision.md)", keep=2)


def unsupported_table(df) -> Table | None:
    """The (framework, device, precision) combinations that were skipped, once each with the reason."""
    prec = precision_of(df)
    skipped = df[(df["status"] == "skipped") & (prec != FP32)]
    seen: dict[tuple, str] = {}
    for (_, r), p in zip(skipped.iterrows(), prec[skipped.index]):
        seen.setdefault((_label(r["framework"]), str(r["device"]), p), str(r.get("reason") or ""))
    if not seen:
        return None
    rows = [[fw, device, p, why] for (fw, device, p), why in seen.items()]
    return Table("Precisions not given", ["framework", "device", "precision", "reason"], rows,
                 "each combination once (its cells are skipped, never run at another precision)", keep=3)


def sections(df) -> list[tuple[str, list]]:
    """The report's per-precision section (none for an fp32-only run)."""
    others = reduced(df)
    if not others:
        return []
    items: list = []
    prec = precision_of(df)
    for p in others:
        sub = df[prec == p].reset_index(drop=True)
        head = headline_table(sub)
        if head is not None:
            head.title = f"IOS at its best against the best peer at {p}"
            items.append(head)
        for device in dict.fromkeys(sub["device"]):
            for bs in sorted(set(sub[sub["device"] == device]["batch_size"])):
                t = speedup_table(df, device, bs, p)
                if t is not None:
                    items.append(t)
    gaps = unsupported_table(df)
    if gaps is not None:
        items.append(gaps)
    items.append(("text", "Every table outside this section is fp32's: no figure computed at another precision "
                          "enters its GeoMeans, speedups or plots. Reduced-precision cells are checked against the "
                          "fp32 oracle at their precision's bound (docs/precision.md)."))
    return [("Precision", items)]
