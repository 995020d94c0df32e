"""benchmarks/_window_wheels.py: the wheels a bare GPU machine needs for the window (a wheel too
large for one transfer beside the working tree split in parts and put together again, a missing
part, a damaged wheel and one built for another Python each one line naming it, how the parts
travel, installing over an older version, the header-only wheels installed apart)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile

import pytest

from benchmarks import _window_wheels as ww

NEED = (("ios_bench_test_absent_module", "fake-pkg", "a test"),)


def _wheel(folder, name="fake_pkg-1.0-py3-none-any.whl", mib=2.5):
    """A real wheel (a zip) of about ``mib`` MiB of incompressible bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("ios_bench_test_absent_module/__init__.py", "X = 1\n")
        z.writestr("ios_bench_test_absent_module/blob.bin", os.urandom(int(mib * 2**20)))
        z.writestr("fake_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                   "Tag: py3-none-any\n")
        z.writestr("fake_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 1.0\n")
        z.writestr("fake_pkg-1.0.dist-info/RECORD", "")
    path = folder / name
    path.write_bytes(buf.getvalue())
    return path


def test_a_large_wheel_travels_in_parts_and_is_put_together_again(tmp_path):
    wheel = _wheel(tmp_path / "whl")
    whole = wheel.read_bytes()
    parts = ww.split_wheel(wheel, part_mib=1)
    assert [p.name for p in parts] == [f"{wheel.name}.part{i}of3" for i in (1, 2, 3)]
    assert not wheel.exists() and all(p.stat().st_size <= 2**20 for p in parts)
    manifest = json.loads((tmp_path / "whl" / f"{wheel.name}.parts.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(whole).hexdigest() and manifest["size"] == len(whole)
    # here (--check): the parts are checked and stay parts
    lines, install, absent = ww.wheel_report(tmp_path / "whl", NEED, join=False)
    assert lines == ["missing: fake-pkg (import ios_bench_test_absent_module; a test): carried in parts, all of "
                     "them here"] and all(p.exists() for p in parts)
    # there: put together, checked, the parts removed, installable
    lines, install, absent = ww.wheel_report(tmp_path / "whl", NEED)
    assert install == [wheel] and wheel.read_bytes() == whole and not any(p.exists() for p in parts)
    assert absent == [] and "carried as fake_pkg-1.0-py3-none-any.whl" in lines[0]
    assert ww.wheel_problem(wheel) is None
    assert ww.install_wheels(install, tmp_path / "site") == []
    assert (tmp_path / "site" / "ios_bench_test_absent_module" / "__init__.py").is_file()
    assert ww.split_wheel(_wheel(tmp_path / "small", mib=0.1), part_mib=1) == []  # one transfer: left whole


def test_a_missing_part_or_a_damaged_wheel_is_one_line_and_the_headline_goes_on(tmp_path):
    folder = tmp_path / "whl"
    parts = ww.split_wheel(_wheel(folder), part_mib=1)
    parts[1].unlink()  # the second call never came
    lines, install, absent = ww.wheel_report(folder, NEED)
    assert install == [] and absent == ["fake-pkg"] and len(lines) == 1 and "\n" not in lines[0]
    assert "part fake_pkg-1.0-py3-none-any.whl.part2of3 not carried (2 of 3 here)" in lines[0]
    assert "the headline goes on without it" in lines[0]
    parts[1].write_bytes(b"\0" * parts[0].stat().st_size)  # a damaged part
    lines, install, _ = ww.wheel_report(folder, NEED)
    assert install == [] and "damaged, not installed" in lines[0] and parts[0].exists()
    bad = _wheel(tmp_path / "b")
    bad.write_bytes(bad.read_bytes()[:1000])  # a truncated wheel
    assert "damaged" in ww.wheel_problem(bad) and bad.name in ww.wheel_problem(bad)
    other = _wheel(tmp_path / "o", name="fake_pkg-1.0-cp27-cp27mu-manylinux1_x86_64.whl", mib=0.01)
    lines, install, _ = ww.wheel_report(tmp_path / "o", NEED)
    assert install == [] and "built for cp27" in lines[0] and other.name in lines[0]
    lines, _, absent = ww.wheel_report(tmp_path / "nothing", NEED)
    assert absent == ["fake-pkg"] and "NOT carried in" in lines[0]


def test_the_parts_travel_in_separate_transfers(tmp_path, monkeypatch):
    monkeypatch.setattr(ww, "CARRY_LIMIT_MIB", 1.5)
    ww.split_wheel(_wheel(tmp_path), part_mib=1)
    text = ww.transfers(tmp_path, tree=0.0)
    assert len(re.findall(r"\.part\dof3", text)) == 3 and "3 transfer(s)" in text and "parts.json" in text


def _git(root, *args):
    import subprocess

    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_wheel_parts_are_sized_from_the_limit_less_the_tree_that_travels_with_them(tmp_path, monkeypatch):
    """The device tool's 64 MiB count the working tree (tracked files, untracked ones git does not
    ignore, the carried paths) with the wheels: a part of the whole limit is refused."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("ignored/\ncarried/\n")
    (root / "tracked.bin").write_bytes(b"\0" * 2**20)
    _git(root, "add", "tracked.bin", ".gitignore")
    (root / "untracked.bin").write_bytes(b"\0" * 2**19)  # travels: not ignored
    (root / "ignored").mkdir()
    (root / "ignored" / "big.bin").write_bytes(b"\0" * 2**21)  # stays here
    (root / "carried").mkdir()
    (root / "carried" / "c.bin").write_bytes(b"\0" * 2**18)  # travels when carried
    assert ww.tree_mib(root) == pytest.approx(1.5, abs=0.01)
    assert ww.tree_mib(root, carry=("carried",)) == pytest.approx(1.75, abs=0.01)
    assert ww.part_mib_for(10.0) == ww.CARRY_LIMIT_MIB - 10.0 - ww.MARGIN_MIB  # 64 MiB less the tree less a margin
    monkeypatch.setattr(ww, "CARRY_LIMIT_MIB", 3.0)
    whl = tmp_path / "whl"
    whl.mkdir()
    (whl / "a.whl.part1of2").write_bytes(b"\0" * int(1.2 * 2**20))
    (whl / "a.whl.part2of2").write_bytes(b"\0" * int(1.2 * 2**20))
    alone = ww.transfers(whl, tree=0.0)
    assert "1 transfer(s)" in alone  # 2.4 MiB fit 3 MiB alone
    beside = ww.transfers(whl, tree=1.5)  # but not beside 1.5 MiB of tree
    assert "2 transfer(s)" in beside and "1.5 MiB of 3 for wheels" in beside
    assert "TOO LARGE" in ww.transfers(whl, tree=2.0) and "a.whl.part1of2" in ww.transfers(whl, tree=2.0)


def test_a_newer_wheel_replaces_an_older_ones_files(tmp_path):
    """``pip install --target`` without ``--upgrade`` keeps what an older wheel installed there."""
    site = tmp_path / "site"
    old = _wheel(tmp_path / "v1", mib=0.01)
    assert ww.install_wheels([old], site) == []
    new = tmp_path / "v2" / "fake_pkg-2.0-py3-none-any.whl"
    new.parent.mkdir()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ios_bench_test_absent_module/__init__.py", "X = 2\n")
        z.writestr("fake_pkg-2.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                   "Tag: py3-none-any\n")
        z.writestr("fake_pkg-2.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: fake-pkg\nVersion: 2.0\n")
        z.writestr("fake_pkg-2.0.dist-info/RECORD", "")
    new.write_bytes(buf.getvalue())
    assert ww.install_wheels([new], site) == []
    assert (site / "ios_bench_test_absent_module" / "__init__.py").read_text() == "X = 2\n"


def _header_wheel(folder, dist, files):
    folder.mkdir(parents=True, exist_ok=True)
    name = dist.replace("-", "_")
    path = folder / f"{name}-13.0.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for f in files:
            z.writestr(f"nvidia/cu13/include/{f}", "")
        z.writestr(f"{name}-13.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                    "Tag: py3-none-any\n")
        z.writestr(f"{name}-13.0.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: 13.0.0\n")
        z.writestr(f"{name}-13.0.0.dist-info/RECORD", "")
    return path


def test_the_carried_header_wheels_are_installed_apart_and_make_tvms_cuda_folder(tmp_path):
    wheels = tmp_path / "whl"
    assert ww.install_header_wheels(wheels, tmp_path / "h") == (None, [])  # none carried
    _header_wheel(wheels, "nvidia-cuda-runtime", ["cuda_runtime.h", "cuda_fp16.h"])
    assert ww.install_header_wheels(wheels, tmp_path / "h")[0] == tmp_path / "h" / "nvidia" / "cu13" / "include"
    _header_wheel(wheels, "nvidia-cuda-cccl", [f"cccl/cuda/std/{h}" for h in ("cstdint", "type_traits", "limits")])
    include, problems = ww.install_header_wheels(wheels, tmp_path / "h")
    assert problems == [] and (include / "cccl" / "cuda" / "std" / "cstdint").is_file()
    from adapters import tvm as tvm_adapter

    made = tvm_adapter.cuda_folder_from(include, tmp_path / "cuda")
    assert tvm_adapter.missing_headers(made, "fp16") == []
