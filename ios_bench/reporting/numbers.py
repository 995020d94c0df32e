"""How a measured number is written for people, the one rule every table, report, plot label and
cell line uses: precision by magnitude (``4,580``, ``150.8``, ``78.70``, ``0.350``), ``-`` for
none; a figure with its spread at the figure's precision (``12.35 ±0.21``)."""

from __future__ import annotations

import math


def decimals(v: float) -> int:
    """Decimals for ``v``: none from 1,000 up, then one, two, three as it gets smaller."""
    return 0 if abs(v) >= 1000 else 1 if abs(v) >= 100 else 2 if abs(v) >= 10 else 3


def fmt(v: float | None, digits: int | None = None) -> str:
    """``v`` with thousands separators and :func:`decimals` decimals (or ``digits``); ``-`` for None
    or a non-finite value."""
    if v is None or isinstance(v, (bool, str, bytes)):
        return "-"
    try:
        v = float(v)  # numpy scalars too
    except (TypeError, ValueError):
        return "-"
    if not math.isfinite(v):
        return "-"
    d = decimals(v) if digits is None else digits
    return f"{v:,.{d}f}"


def fmt_pm(value: float, spread: float | None) -> str:
    """``value ±spread``, the spread at the value's precision (``value`` alone without a spread)."""
    d = decimals(value)
    if spread is None or not math.isfinite(spread):
        return fmt(value, d)
    return f"{fmt(value, d)} ±{fmt(spread, d)}"
