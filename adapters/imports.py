"""A worker imports the frameworks its cell runs, and no other (issue 36). Some libraries import
another framework where it happens to be installed: TensorFlow's ``tf.lite`` imports JAX, TVM's
``tvm_ffi`` imports torch (for DLPack), each about a second of every round of a cell that never
runs it. :func:`absent` makes such an import fail while the library is first imported, as if
the other framework were not installed, which those libraries handle (their imports are guarded).
"""

from __future__ import annotations

import contextlib
import sys


@contextlib.contextmanager
def absent(*names: str, unless: str | None = None):
    """While the block runs, ``import NAME`` raises ImportError for each of ``names`` not imported
    yet (the import system's rule for a ``None`` entry in ``sys.modules``). Nothing changes when
    ``unless`` (the library being imported) is imported already: its imports happened."""
    if unless is not None and unless in sys.modules:
        yield
        return
    blocked = [n for n in names if n not in sys.modules]
    for n in blocked:
        sys.modules[n] = None
    try:
        yield
    finally:
        for n in blocked:
            if n in sys.modules and sys.modules[n] is None:
                del sys.modules[n]
