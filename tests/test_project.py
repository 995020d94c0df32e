"""The repository itself: one atomic writer, no development-machine paths, docs point at files that exist."""

import json

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def _sources(*folders, suffixes=(".py",)):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in suffixes and ".venv" not in path.parts:
                yield path


def test_one_atomic_writer():
    """Files are put in place only by ios_core.atomic: no other module renames temporary files."""
    offenders = []
    for path in _sources("ios_core", "ios_bench", "adapters"):
        if path.name == "atomic.py":
            continue
        text = path.read_text()
        for needle in ("os.replace(", "os.rename(", ".tmp.npz", ".tmp.npy"):
            if needle in text:
                offenders.append(f"{path.relative_to(ROOT)}: {needle}")
    assert offenders == []


def test_atomic_write_leaves_the_old_file_on_failure(tmp_path):
    from ios_core.atomic import atomic_write, atomic_write_json

    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": 1})

    def boom(f):
        f.write(b"half")
        raise RuntimeError("crash mid-write")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary file left behind


def test_a_file_a_tool_writes_by_name_is_put_in_place_whole_or_not_at_all(tmp_path):
    from ios_core.atomic import atomic_write_path

    target = tmp_path / "lib.so"
    seen = []

    def tool(name):  # a tool that writes only to a path it is given, keeping its suffix (TVM's export_library)
        seen.append(name)
        with open(name, "wb") as f:
            f.write(b"whole")

    atomic_write_path(target, tool)
    assert target.read_bytes() == b"whole" and seen[0].endswith(".so") and seen[0] != str(target)

    def crashes(name):
        with open(name, "wb") as f:
            f.write(b"ha")
        raise RuntimeError("killed while exporting")

    with pytest.raises(RuntimeError):
        atomic_write_path(target, crashes)
    assert target.read_bytes() == b"whole" and [p.name for p in tmp_path.iterdir()] == ["lib.so"]


def test_no_development_machine_paths():
    """Tests, benchmarks, docs (committed records and logs included) and the README name no folder of a
    development machine."""
    bad = ["/" + "work/", "/" + "home/", "/" + "root/", "../" + "shared/"]
    found = []
    for path in [*_sources("tests", "benchmarks", "docs", "ios_bench", "ios_core", "adapters",
                           suffixes=(".py", ".md", ".toml", ".txt", ".json", ".jsonl", ".log", ".csv")),
                 ROOT / "README.md", ROOT / "Makefile"]:
        text = path.read_text(errors="replace")
        found += [f"{path.relative_to(ROOT)}: {b}" for b in bad if b in text]
    assert found == []


def test_readme_and_docs_point_only_at_files_in_the_repository():
    import re

    missing = []
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for ref in re.findall(r"`((?:docs|benchmarks|tests|ios_core|ios_bench|adapters)/[\w./-]+)`", path.read_text()):
            if "*" not in ref and "<" not in ref and not (ROOT / ref.rstrip("/")).exists():
                missing.append(f"{path.name}: {ref}")
    assert missing == []
    assert (ROOT / "docs" / "architecture.md").exists()
