"""benchmarks/_window_records.py: what a window keeps between its calls (its state from the working
folder or a carried archive, a damaged or hostile archive, the report, the archive that leaves out
caches and, past its limit, its largest files, naming them)."""

from __future__ import annotations

import io
import json
import os
import tarfile

from benchmarks import _window_records as wr


def test_the_archive_leaves_out_caches_and_past_its_limit_the_largest_files_naming_them(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "doctor.txt").write_text("ok\n")
    (work / "run" / "cache").mkdir(parents=True)
    (work / "run" / "cache" / "kernel.bin").write_bytes(b"\0" * 100)  # a build cache: never packed
    (work / "run" / "lib.so").write_bytes(b"\0" * 100)
    (work / "profiles.sqlite-wal").write_bytes(b"\0" * 100)
    (work / "run" / "m.npz").write_bytes(os.urandom(int(1.5 * 2**20)))  # heavy weights: not packed, nor their graph
    (work / "run" / "m.json").write_text("{}")
    (work / "run" / "big.bin").write_bytes(os.urandom(2**19))  # incompressible: past a 0.25 MiB limit
    (work / "run" / "results.jsonl").write_text("{}\n")
    archive, left_out = wr.pack(work, out)
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["logs/doctor.txt", "run/big.bin", "run/results.jsonl"]
    assert left_out == [] and [p.name for p in out.iterdir()] == [wr.ARCHIVE]  # no temporary file left
    archive, left_out = wr.pack(work, out, limit_mib=0.25)
    with tarfile.open(archive) as tar:
        assert sorted(tar.getnames()) == ["logs/doctor.txt", "run/results.jsonl"]
    assert left_out == ["run/big.bin (0.5 MiB)"]


def _archive(path, members: dict):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_the_state_comes_from_the_working_folder_else_a_carried_copy_else_new(tmp_path):
    said = []
    work = tmp_path / "work"
    assert wr.load_state(work, None, said.append) == {"calls": [], "steps": {}} and said == []
    state = {"calls": [{"started": "t"}], "steps": {"doctor": {"status": "done"}}}
    carried = _archive(tmp_path / "w.tar.gz", {wr.STATE: json.dumps(state).encode(), "logs/doctor.txt": b"ok",
                                               "../outside.txt": b"no"})
    assert wr.load_state(work, carried, said.append) == state
    assert said == [f"resumed from the carried copy {carried} (the machine was not kept)"]
    assert (work / "logs" / "doctor.txt").read_text() == "ok" and not (tmp_path / "outside.txt").exists()
    said.clear()
    assert wr.load_state(work, carried, said.append) == state  # the machine kept: the working folder wins
    assert said == [f"continuing in {work} (the machine was kept)"]
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(b"not an archive")
    said.clear()
    assert wr.load_state(tmp_path / "fresh", damaged, said.append) == {"calls": [], "steps": {}}
    assert len(said) == 1 and said[0].startswith(f"the carried copy {damaged} could not be unpacked (")
    assert said[0].endswith("starting over")
    truncated = tmp_path / "truncated.tar.gz"  # a copy cut short: gzip raises EOFError, neither OSError nor TarError
    truncated.write_bytes(carried.read_bytes()[:60])
    said.clear()
    assert wr.load_state(tmp_path / "fresh2", truncated, said.append) == {"calls": [], "steps": {}}
    assert len(said) == 1 and said[0].startswith(f"the carried copy {truncated} could not be unpacked (EOFError: ")
    (work / wr.STATE).write_text("[1, 2]")  # not a state
    assert wr.load_state(work, None, said.append) == {"calls": [], "steps": {}}


def test_the_report_has_every_step_in_order_and_each_call(tmp_path):
    state = {"steps": {"search": {"status": "failed", "rc": 1, "seconds": 2.5, "note": "a|b", "log": "logs/s.txt"}},
             "calls": [{"started": "t0", "device": "GPU", "deadline_s": 540, "lines": ["one"], "clocks_note": "alone"}]}
    text = wr.render(state)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    assert [r.split(" | ")[0][2:] for r in rows] == list(wr.STEPS)
    assert "| search | failed | 2.5 | 1 | a/b | logs/s.txt |" in rows
    assert "## Call 1: t0 (GPU, deadline 540 s)" in text and "- one" in text and "- clocks: alone" in text
    said = []
    (tmp_path / "out").write_text("a file where the output folder should be")
    wr.save(state, tmp_path / "work", tmp_path / "out", said.append)  # the archive cannot be written: one line
    assert len(said) == 1 and said[0].startswith(f"the archive could not be written to {tmp_path / 'out'} (")
    assert json.loads((tmp_path / "work" / wr.STATE).read_text()) == state
    assert (tmp_path / "work" / wr.REPORT).read_text() == text
