"""How a measured number is written for people: precision by magnitude (``4,580``, ``150.8``,
``78.70``, ``0.350``), ``-`` for none. Experiment reports and the scenario cell line share it."""

from __future__ import annotations

import math


def decimals(v: float) -> int:
    """Decimals for ``v``: none from 1,000 up, then one, two, three as it gets smaller."""
    return 0 if abs(v) >= 1000 else 1 if abs(v) >= 100 else 2 if abs(v) >= 10 else 3


def fmt(v: float | None, digits: int | None = None) -> str:
    """``v`` with thousands separators and :func:`decimals` decimals (or ``digits``); ``-`` for None
    or a non-finite value."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    d = decimals(v) if digits is None else digits
    return f"{v:,.{d}f}"
