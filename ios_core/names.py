"""Names from graph files (graph and node names) made safe for use in file names.

A graph's name is whatever its JSON says: ``../../etc/x``, ``[/]``, a thousand characters, a
terminal escape sequence. Every file named after a graph goes through :func:`file_part`, which
keeps plain names unchanged and maps anything else to a short, distinct, harmless name.
"""

from __future__ import annotations

import re
import zlib

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
MAX_PART = 64


def file_part(text: str, default: str = "graph") -> str:
    """``text`` as one path component: only ``[A-Za-z0-9_.-]``, not starting with ``.`` or
    ``-``, at most ~75 characters. A name that had to change gets a hash of the original, so
    two different names never share a file."""
    text = str(text)
    safe = _UNSAFE.sub("_", text).lstrip(".-")[:MAX_PART] or default
    if safe != text:
        safe = f"{safe}-{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"
    return safe
