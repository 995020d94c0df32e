"""A corpus of hostile and malformed ONNX files and output paths, built at test time (issue 24).

Each case is a function ``case(folder) -> Case`` that writes its files under ``folder`` and says
which command line to run, which existing paths must stay unchanged and, optionally, a phrase the
one-line refusal must contain. The classes:

- ``external_*``: external data the importer must refuse (outside the folder, symbolic links,
  devices, FIFOs, missing, empty location, too short, wrong length);
- ``weights_*``: initializers whose data does not fit their dims or type;
- ``node_*`` / ``attr_*``: nameless nodes without outputs, non-UTF-8 strings;
- ``invalid_*``: models ``onnx.checker`` (full check) rejects, and opsets that do not exist;
- ``file_*``: files that are no ONNX model at all (empty, random bytes, truncated, a folder);
- ``out_*``: output paths that must be refused before any work, leaving the target unchanged;
- ``ok_*``: odd files that import all the same (names that are not UTF-8 are shown escaped).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

onnx = __import__("onnx")
from onnx import TensorProto  # noqa: E402
from onnx import helper as oh  # noqa: E402
from onnx import numpy_helper as onh  # noqa: E402


@dataclass
class Case:
    argv: list[str]
    unchanged: list[Path] = field(default_factory=list)  # existing paths that must stay as they are
    needle: str | None = None  # a phrase the one-line refusal contains


def small_model(opset: int = 17, ir_version: int = 8, name_nodes: bool = True):
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm: a valid, importable CNN (3x8x8 -> 10)."""
    rng = np.random.default_rng(0)
    w = onh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = onh.from_array(rng.standard_normal((10, 4)).astype(np.float32), "fc")
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             oh.make_node("Relu", ["c"], ["r"]),
             oh.make_node("GlobalAveragePool", ["r"], ["p"]),
             oh.make_node("Flatten", ["p"], ["f"]),
             oh.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    if name_nodes:
        for i, n in enumerate(nodes):
            n.name = f"{n.op_type}_{i}"
    graph = oh.make_graph(nodes, "small", [oh.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                          [oh.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], initializer=[w, fc])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def save(model, path: Path) -> Path:
    path.write_bytes(model.SerializeToString())
    return path


def _import(folder: Path, model_path: Path) -> list[str]:
    return ["import", str(model_path), "-o", str(_out(folder) / "g.json")]


def _out(folder: Path) -> Path:
    (folder / "out").mkdir(exist_ok=True)
    return folder / "out"


def _external(folder: Path, location: str, offset: str | None = None, length: str | None = None,
              tensor: str = "w"):
    """The small model with ``tensor`` stored externally at ``location`` (files made by the caller)."""
    model = small_model()
    t = next(i for i in model.graph.initializer if i.name == tensor)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            e = t.external_data.add()
            e.key, e.value = key, value
    folder.mkdir(parents=True, exist_ok=True)
    return save(model, folder / "net.onnx")


W_BYTES = 4 * 3 * 3 * 3 * 4  # the conv weight's size in bytes


def _weights_file(path: Path, size: int = W_BYTES) -> Path:
    path.write_bytes(np.arange(size // 4, dtype=np.float32).tobytes()[:size])
    return path


# ---- 1. external data ------------------------------------------------------------------------------
def external_absolute(folder):
    return Case(_import(folder, _external(folder / "m", "/etc/passwd")), needle="absolute")


def external_parent(folder):
    _weights_file(folder / "outside.bin")
    return Case(_import(folder, _external(folder / "m", "../outside.bin")), needle="model's folder")


def external_nested_parent(folder):
    _weights_file(folder / "outside.bin")
    (folder / "m" / "sub").mkdir(parents=True)
    return Case(_import(folder, _external(folder / "m", "sub/../../outside.bin")), needle="model's folder")


def external_symlinked_file(folder):
    _weights_file(folder / "real.bin")
    (folder / "m").mkdir()
    os.symlink(folder / "real.bin", folder / "m" / "w.bin")
    return Case(_import(folder, _external(folder / "m", "w.bin")), needle="symbolic link")


def external_symlinked_folder(folder):
    (folder / "real").mkdir()
    _weights_file(folder / "real" / "w.bin")
    (folder / "m").mkdir()
    os.symlink(folder / "real", folder / "m" / "data")
    return Case(_import(folder, _external(folder / "m", "data/w.bin")), needle="symbolic link")


def external_dev_zero(folder):
    (folder / "m").mkdir()
    os.symlink("/dev/zero", folder / "m" / "zero.bin")
    return Case(_import(folder, _external(folder / "m", "zero.bin")), needle="symbolic link")


def external_missing(folder):
    return Case(_import(folder, _external(folder / "m", "missing.bin")), needle="missing")


def external_dot(folder):
    return Case(_import(folder, _external(folder / "m", ".")), needle="no file")


def external_empty_location(folder):
    return Case(_import(folder, _external(folder / "m", "")), needle="no file")


def external_no_location(folder):
    model_path = _external(folder / "m", "x")
    model = onnx.load(str(model_path), load_external_data=False)
    t = model.graph.initializer[0]
    del t.external_data[:]
    save(model, model_path)
    return Case(_import(folder, model_path), needle="no file")


def external_short(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin", W_BYTES - 8)
    return Case(_import(folder, _external(folder / "m", "w.bin")), needle="shorter")


def external_offset_past_end(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin")
    return Case(_import(folder, _external(folder / "m", "w.bin", offset="64")), needle="shorter")


def external_wrong_length(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin", 4 * W_BYTES)
    return Case(_import(folder, _external(folder / "m", "w.bin", length=str(2 * W_BYTES))), needle="needs")


def external_bad_offset(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin")
    return Case(_import(folder, _external(folder / "m", "w.bin", offset="-1")), needle="negative")


def external_malformed_offset(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin")
    return Case(_import(folder, _external(folder / "m", "w.bin", offset="0x10")), needle="malformed")


def external_shared_file_too_large(folder):
    """Many tensors declaring terabytes, all in one small file: refused before reading a byte."""
    model_path = _external(folder / "m", "w.bin")
    (folder / "m" / "w.bin").write_bytes(b"\0" * 64)
    model = onnx.load(str(model_path), load_external_data=False)
    t = model.graph.initializer[0]
    del t.dims[:]
    t.dims.extend([2 ** 40, 1, 1, 1])
    for i in range(8):
        extra = model.graph.initializer.add()
        extra.CopyFrom(t)
        extra.name = f"extra{i}"
    save(model, model_path)
    return Case(_import(folder, model_path), needle="memory")


def external_folder(folder):
    (folder / "m" / "w.bin").mkdir(parents=True)
    return Case(_import(folder, _external(folder / "m", "w.bin")), needle="not a regular file")


def external_fifo(folder):
    (folder / "m").mkdir()
    os.mkfifo(folder / "m" / "w.bin")  # reading it would block forever
    return Case(_import(folder, _external(folder / "m", "w.bin")), needle="not a regular file")


def external_through_file(folder):
    (folder / "m").mkdir()
    _weights_file(folder / "m" / "w.bin")
    return Case(_import(folder, _external(folder / "m", "w.bin/x")), needle="not a folder")


# ---- 2. weights that do not fit their dims ------------------------------------------------------------
def _with_weight(folder, change) -> list[str]:
    model = small_model()
    change(model.graph.initializer[0])
    _out(folder)
    return _import(folder, save(model, folder / "net.onnx"))


def weights_raw_too_short(folder):
    def change(t):
        t.raw_data = t.raw_data[:-4]
    return Case(_with_weight(folder, change))


def weights_raw_too_long(folder):
    def change(t):
        t.raw_data = t.raw_data + b"\0" * 16
    return Case(_with_weight(folder, change))


def weights_float_data_short(folder):
    def change(t):
        t.ClearField("raw_data")
        t.float_data.extend([1.0] * 5)
    return Case(_with_weight(folder, change))


def weights_huge_dims_no_data(folder):
    def change(t):
        t.ClearField("raw_data")
        del t.dims[:]
        t.dims.extend([2 ** 62, 1, 1, 1])
    return Case(_with_weight(folder, change))


def weights_negative_dims(folder):
    def change(t):
        del t.dims[:]
        t.dims.extend([-4, 3, 3, 3])
    return Case(_with_weight(folder, change))


def weights_string_type(folder):
    def change(t):
        t.ClearField("raw_data")
        t.data_type = TensorProto.STRING
        t.string_data.extend([b"\xff"] * 108)
    return Case(_with_weight(folder, change))


def weights_undefined_type(folder):
    def change(t):
        t.data_type = 0
    return Case(_with_weight(folder, change))


def weights_unknown_type(folder):
    def change(t):
        t.data_type = 999
    return Case(_with_weight(folder, change))


# ---- 3, 4. nodes and attributes ---------------------------------------------------------------------------
def node_loop_without_outputs(folder):
    model = small_model(name_nodes=False)
    body = oh.make_graph([], "body", [], [])
    model.graph.node.append(oh.make_node("Loop", ["", ""], [], body=body))
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")))


def node_custom_without_outputs(folder):
    model = small_model(name_nodes=False)
    model.graph.node.insert(0, oh.make_node("Frobnicate", ["x"], [], domain="example.custom"))
    model.opset_import.append(oh.make_opsetid("example.custom", 1))
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="Frobnicate")


def _replace_bytes(model, placeholder: str, raw: bytes) -> bytes:
    data = model.SerializeToString()
    token = placeholder.encode()
    assert len(raw) == len(token) and data.count(token) == 1
    return data.replace(token, raw)


def attr_auto_pad_not_utf8(folder):
    model = small_model()
    model.graph.node[0].attribute.append(oh.make_attribute("auto_pad", b"SAME\xff\xfe"))
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="UTF-8")


def attr_unknown_not_utf8(folder):
    model = small_model()
    model.graph.node[1].attribute.append(oh.make_attribute("mystery", b"\xc3\x28"))
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")))


def ok_node_name_not_utf8(folder):
    model = small_model()
    model.graph.node[0].name = "NAMEPLACEHOLDER"
    (folder / "net.onnx").write_bytes(_replace_bytes(model, "NAMEPLACEHOLDER", b"\xff" * 15))
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"))


def ok_tensor_name_not_utf8(folder):
    model = small_model()
    model.graph.node[2].output[0] = "TENSORPLACEHOLD"
    model.graph.node[3].input[0] = "TENSORPLACEHOLD"
    data = model.SerializeToString().replace(b"TENSORPLACEHOLD", b"\xfe" * 15)
    (folder / "net.onnx").write_bytes(data)
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"))


# ---- 9. models the checker rejects ---------------------------------------------------------------------------
def invalid_two_writers(folder):
    model = small_model()
    model.graph.node.insert(2, oh.make_node("Relu", ["c"], ["r"], name="again"))
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="not a valid ONNX model")


def invalid_opset_99(folder):
    _out(folder)
    return Case(_import(folder, save(small_model(opset=99), folder / "net.onnx")), needle="opset 99")


def invalid_no_opset(folder):
    model = small_model()
    del model.opset_import[:]
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="not a valid ONNX model")


def invalid_ir_version_999(folder):
    _out(folder)
    return Case(_import(folder, save(small_model(ir_version=999), folder / "net.onnx")), needle="ir_version")


def invalid_undefined_input(folder):
    model = small_model()
    model.graph.node[1].input[0] = "nowhere"
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="not a valid ONNX model")


def invalid_run_sweep(folder):
    """``run --models`` refuses the same model before creating its run folder."""
    return Case(["run", "--models", str(save(small_model(ir_version=999), folder / "net.onnx")), "--out",
                 str(folder / "runs" / "r"), "--no-report", "--no-progress"], needle="ir_version")


# ---- 10. files that are no ONNX model ---------------------------------------------------------------------
def file_empty(folder):
    (folder / "net.onnx").write_bytes(b"")
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"), needle="not an ONNX model")


def file_random_bytes(folder):
    (folder / "net.onnx").write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"))


def file_truncated(folder):
    data = small_model().SerializeToString()
    (folder / "net.onnx").write_bytes(data[: len(data) // 2])
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"))


def file_text(folder):
    (folder / "net.onnx").write_text("ir_version: 8\ngraph { name: 'x' }\n")
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"))


def file_no_graph(folder):
    model = onnx.ModelProto()
    model.ir_version = 8
    model.producer_name = "nothing"
    _out(folder)
    return Case(_import(folder, save(model, folder / "net.onnx")), needle="not an ONNX model")


def file_is_folder(folder):
    (folder / "net.onnx").mkdir()
    _out(folder)
    return Case(_import(folder, folder / "net.onnx"), needle="not a regular file")


def file_name_too_long(folder):
    return Case(_import(folder, folder / ("a" * 5000 + ".onnx")), needle="too long")


def file_run_name_too_long(folder):
    return Case(["run", "--models", str(folder / ("a" * 5000 + ".onnx")), "--out", str(folder / "runs" / "r"),
                 "--no-report", "--no-progress"], needle="too long")


def file_run_empty(folder):
    (folder / "net.onnx").write_bytes(b"")
    return Case(["run", "--models", str(folder / "net.onnx"), "--out", str(folder / "runs" / "r"), "--no-report",
                 "--no-progress"], needle="not an ONNX model")


# ---- 5-8. output paths --------------------------------------------------------------------------------------
def _good(folder) -> Path:
    return save(small_model(), folder / "net.onnx")


def out_is_folder(folder):
    (folder / "out.json").mkdir()
    return Case(["import", str(_good(folder)), "-o", str(folder / "out.json")], [folder / "out.json"], "folder")


def out_npz_is_folder(folder):
    (folder / "g.npz").mkdir()
    return Case(["import", str(_good(folder)), "-o", str(folder / "g.json")], [folder / "g.npz"], "folder")


def out_name_too_long(folder):
    return Case(["import", str(_good(folder)), "-o", str(folder / ("b" * 5000 + ".json"))], needle="too long")


def out_through_a_file(folder):
    (folder / "notes.txt").write_text("a file, not a folder\n")
    return Case(["import", str(_good(folder)), "-o", str(folder / "notes.txt" / "g.json")], [folder / "notes.txt"],
                "Not a directory")


def out_export_name_too_long(folder):
    return Case(["export", "sample", "-o", str(folder / ("b" * 5000 + ".onnx"))], needle="too long")


def out_user_file(folder):
    (folder / "notes.json").write_text("my notes: do not lose\n")
    return Case(["import", str(_good(folder)), "-o", str(folder / "notes.json")], [folder / "notes.json"],
                "not an ios-bench graph")


def out_user_json_object(folder):
    (folder / "cfg.json").write_text('{"name": "mine", "settings": [1, 2]}\n')
    return Case(["import", str(_good(folder)), "-o", str(folder / "cfg.json")], [folder / "cfg.json"],
                "not an ios-bench graph")


def out_user_npz(folder):
    np.savez(folder / "usernpz.npz", a=np.arange(3))
    return Case(["import", str(_good(folder)), "-o", str(folder / "usernpz.json")], [folder / "usernpz.npz"],
                "not an ios-bench weights file")


def out_symlink_outside(folder):
    (folder / "elsewhere").mkdir()
    (folder / "elsewhere" / "target.json").write_text("precious\n")
    (folder / "out").mkdir()
    os.symlink(folder / "elsewhere" / "target.json", folder / "out" / "g.json")
    return Case(["import", str(_good(folder)), "-o", str(folder / "out" / "g.json")],
                [folder / "out" / "g.json", folder / "elsewhere" / "target.json"], "symbolic link")


def out_dangling_symlink(folder):
    (folder / "out").mkdir()
    os.symlink(folder / "nowhere" / "x.json", folder / "out" / "g.json")
    return Case(["import", str(_good(folder)), "-o", str(folder / "out" / "g.json")], [folder / "out" / "g.json"],
                "symbolic link")


def out_system_etc(folder):
    return Case(["import", str(_good(folder)), "-o", "/etc/ios-bench-hostile-test.json"], needle="operating system")


def out_system_dev(folder):
    return Case(["import", str(_good(folder)), "-o", "/dev/full.json"], needle="operating system")


def out_root_folder(folder):
    return Case(["import", str(_good(folder)), "-o", "/ios-bench-hostile-test.json"], needle="operating system")


def out_export_user_file(folder):
    (folder / "model.onnx").write_bytes(b"\x08\x07 user's own model, not ours")
    return Case(["export", "sample", "-o", str(folder / "model.onnx")], [folder / "model.onnx"],
                "not an ONNX model exported by ios-bench")


def out_export_system(folder):
    return Case(["export", "sample", "-o", "/etc/ios-bench-hostile-test.onnx"], needle="operating system")


def out_export_symlink(folder):
    (folder / "mine.onnx").write_bytes(b"mine")
    os.symlink(folder / "mine.onnx", folder / "link.onnx")
    return Case(["export", "sample", "-o", str(folder / "link.onnx")], [folder / "link.onnx", folder / "mine.onnx"],
                "symbolic link")


def out_optimize_user_file(folder):
    (folder / "s.json").write_text("user text\n")
    return Case(["optimize", "--model", "sample", "-o", str(folder / "s.json")], [folder / "s.json"],
                "not an ios-bench graph")


def out_optimize_system(folder):
    return Case(["optimize", "--model", "sample", "-o", "/etc/ios-bench-hostile-test.json"], needle="operating system")


def out_stats_user_file(folder):
    (folder / "stats.json").write_text('{"mine": true}\n')
    return Case(["optimize", "--model", "sample", "--stats-json", str(folder / "stats.json")],
                [folder / "stats.json"], "not an ios-bench statistics file")


def out_stats_system(folder):
    return Case(["optimize", "--model", "sample", "--stats-json", "/dev/full.json"], needle="operating system")


def out_report_system(folder):
    return Case(["report", str(folder / "runs" / "r"), "--out", "/etc/ios-bench-hostile-report"],
                needle="operating system")


def out_report_symlinked_file(folder):
    (folder / "rep").mkdir()
    (folder / "precious.md").write_text("mine\n")
    os.symlink(folder / "precious.md", folder / "rep" / "report.md")
    return Case(["report", str(folder / "runs" / "r"), "--out", str(folder / "rep")],
                [folder / "rep" / "report.md", folder / "precious.md"], "not an ios-bench report folder")


CASES = {name: fn for name, fn in dict(globals()).items()
         if name.split("_")[0] in ("external", "weights", "node", "attr", "invalid", "file", "out") and callable(fn)}
# Odd but harmless: these import (names are escaped wherever they are shown).
ACCEPTED = {name: fn for name, fn in dict(globals()).items() if name.startswith("ok_") and callable(fn)}
