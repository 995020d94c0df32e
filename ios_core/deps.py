"""Optional libraries: why one cannot be used here (for adapters and kernel providers alike)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable


def import_problem(modules: Iterable[str]) -> str | None:
    """None when every module imports, else one line saying which does not and why."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:  # ImportError, or a broken install raising anything
            return f"{module} is not importable ({type(e).__name__}: {str(e).splitlines()[0][:120]})"
    return None
