"""What every plot of the harness shares: matplotlib without a screen (Agg), one style per series
(colour, marker, hatch) kept across the plots of a report, and a crash-safe PNG writer."""

from __future__ import annotations

from pathlib import Path

from ios_core.atomic import atomic_write


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h", "8", "d", "H", "1", "2", "3", "4", "+")
_HATCHES = ("", "//", "\\\\", "xx", "..", "oo", "--", "++", "**", "||", "OO")


def series_styles(names: list[str]) -> dict[str, dict]:
    """Every series its own colour and its own marker (bars: its own hatch as well), the same in
    every plot of a report; colours from matplotlib's tab20/tab20b (40 distinct ones)."""
    from matplotlib import colormaps

    colors = [colormaps["tab20"](i) for i in (*range(0, 20, 2), *range(1, 20, 2))] + \
        [colormaps["tab20b"](i) for i in range(20)]
    out = {}
    for i, name in enumerate(dict.fromkeys(names)):
        out[name] = {"color": colors[i % len(colors)], "marker": _MARKERS[i % len(_MARKERS)],
                     "hatch": _HATCHES[i % len(_HATCHES)]}
    return out


def save_png(fig, path: Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG (atomically, the legend kept) and close it; the path."""
    try:
        atomic_write(path, lambda f: fig.savefig(f, dpi=110, format="png", bbox_inches="tight"))  # legend kept
    finally:
        pyplot().close(fig)
    return path
