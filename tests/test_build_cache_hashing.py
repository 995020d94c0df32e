"""adapters/build_cache.py reads only what changed (issue 45, item 1b): checking a sealed cache
before a build and sealing it after used to read and hash every file of the shared cache, so a
warm build's time grew with the cache. A file whose size and modification time are the manifest's
keeps its recorded SHA-1; a new or changed file is read; a changed file is still refused."""

from __future__ import annotations

import os

from adapters import build_cache
from adapters.build_cache import BuildCache


def test_a_warm_open_and_seal_read_only_the_new_and_changed_files(tmp_path, monkeypatch):
    cache = BuildCache(tmp_path, "fw", "1.0").open()
    for i in range(5):
        (cache.dir / f"k{i}.bin").write_bytes(os.urandom(1000))
    cache.seal()
    read = []
    real = build_cache._digest
    monkeypatch.setattr(build_cache, "_digest", lambda path: read.append(path.name) or real(path))
    warm = BuildCache(tmp_path, "fw", "1.0").open()
    assert warm.state == "warm" and read == []  # checked by size and time: nothing read
    (warm.dir / "new.bin").write_bytes(b"n" * 10)  # what this build added
    warm.seal()
    assert read == ["new.bin"]
    read.clear()
    again = BuildCache(tmp_path, "fw", "1.0").open()
    assert again.state == "warm" and read == []


def test_a_file_changed_since_the_seal_is_still_refused(tmp_path):
    cache = BuildCache(tmp_path, "fw", "1.0").open()
    blob = cache.dir / "k.bin"
    blob.write_bytes(b"a" * 100)
    cache.seal()
    blob.write_bytes(b"b" * 100)  # same size, other bytes
    st = blob.stat()
    os.utime(blob, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a later modification time
    changed = BuildCache(tmp_path, "fw", "1.0").open()
    assert changed.state == "rejected" and "k.bin changed since it was built" in changed.note
