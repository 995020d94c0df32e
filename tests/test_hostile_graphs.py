"""Hostile graph files (issue 16, item 8 and the reader fuzzing of item 18).

Whatever bytes a graph file holds, reading it either gives a graph that can be computed or
raises GraphError, which the CLI prints as one line with exit code 2, writing nothing.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ios_core import reference
from ios_core.ir import Graph, GraphError
from ios_core.ir import fields as ir_fields
from ios_core.ir.fields import parse_json_bytes
from tests.conftest import DATA

TINY = json.loads((DATA / "tiny_schedule.json").read_text())


def _conv(cfg: dict) -> dict:
    """The first conv node of a graph JSON."""
    for block in cfg["blocks"]:
        for node in block["inner_nodes"] + [block["exit_node"]]:
            if node["type"] == "conv":
                return node
    raise AssertionError("no conv")


def _strip_shapes(cfg: dict) -> dict:
    """Drop stored output shapes so that a change of one size is not caught by the shape check."""
    def walk(n):
        if isinstance(n, dict):
            if n.get("type") != "placeholder":
                n.pop("output_shape", None)
            for v in n.values():
                walk(v)
        elif isinstance(n, list):
            for v in n:
                walk(v)
    cfg = copy.deepcopy(cfg)
    walk(cfg)
    return cfg


def _set_input_shape(cfg: dict, shape) -> dict:
    cfg = _strip_shapes(cfg)
    cfg["input"]["output_shape"] = shape
    cfg["blocks"][0]["enter_node"]["output_shape"] = shape
    return cfg


def _with_conv(**attrs) -> dict:
    cfg = _strip_shapes(TINY)
    _conv(cfg).update(attrs)
    return cfg


BAD_GRAPHS = {
    "string channel begin": lambda: _edit(lambda c: _conv(c)["inputs"][0][0].__setitem__(1, "0")),
    "null channel end": lambda: _edit(lambda c: _conv(c)["inputs"][0][0].__setitem__(2, None)),
    "fractional channel end": lambda: _edit(lambda c: _conv(c)["inputs"][0][0].__setitem__(2, 7.5)),
    "bool channel begin": lambda: _edit(lambda c: _conv(c)["inputs"][0][0].__setitem__(1, False)),
    "string in shape": lambda: _set_input_shape(TINY, [8, "6", 6]),
    "null in shape": lambda: _set_input_shape(TINY, [8, None, 6]),
    "fractional shape": lambda: _set_input_shape(TINY, [8, 6.5, 6]),
    "two-dimensional shape": lambda: _set_input_shape(TINY, [8, 6]),
    "blocks not a list": lambda: {**TINY, "blocks": {"0": TINY["blocks"][0]}},
    "blocks a number": lambda: {**TINY, "blocks": 3},
    "no blocks": lambda: {**TINY, "blocks": []},
    "inputs a string": lambda: _edit(lambda c: _conv(c).__setitem__("inputs", "0")),
    "name a number": lambda: {**TINY, "name": 7},
    "node name a list": lambda: _edit(lambda c: _conv(c).__setitem__("name", ["1"])),
    "stages of numbers": lambda: _edit(lambda c: c["blocks"][0].__setitem__("stages", [[[1]]])),
    "stages a string": lambda: _edit(lambda c: c["blocks"][0].__setitem__("stages", "abc")),
    "enter node a list": lambda: _edit(lambda c: (c["blocks"][0].pop("enter_name"),
                                                  c["blocks"][0].__setitem__("enter_node", [1]))),
    "zero kernel": lambda: _with_conv(kernel=[0, 0], padding=[0, 0]),
    "negative kernel": lambda: _with_conv(kernel=[-1, 3]),
    "zero stride": lambda: _with_conv(stride=[0, 1]),
    "negative stride": lambda: _with_conv(stride=-2),
    "zero dilation": lambda: _with_conv(dilation=[0, 0]),
    "negative padding": lambda: _with_conv(padding=[-1, -1]),
    "zero groups": lambda: _with_conv(groups=0),
    "negative groups": lambda: _with_conv(groups=-8),
    "zero out_channels": lambda: _with_conv(out_channels=0),
    "fractional out_channels": lambda: _with_conv(out_channels=8.0),
    "string kernel": lambda: _with_conv(kernel="33"),
    "kernel of three": lambda: _with_conv(kernel=[3, 3, 3]),
    "kernel larger than input": lambda: _with_conv(kernel=[9, 9], padding=[0, 0]),
    "unknown activation": lambda: _with_conv(act=["relu"]),
    "unknown node type": lambda: _edit(lambda c: _conv(c).__setitem__("type", {"conv": 1})),
    "huge input (does not fit in memory)": lambda: _set_input_shape(TINY, [8, 100_000, 100_000]),
    "huge channels (does not fit in memory)": lambda: _with_conv(out_channels=10**12),
    "integer too large for any tensor": lambda: _set_input_shape(TINY, [10**30, 6, 6]),
    "nested sequential": lambda: _nested_sequential(),
    "placeholder inside a block": lambda: _edit(lambda c: c["blocks"][0]["inner_nodes"].insert(
        0, {"type": "placeholder", "name": "p2", "output_shape": [8, 6, 6]})),
}


def _edit(fn) -> dict:
    cfg = copy.deepcopy(TINY)
    fn(cfg)
    return cfg


def _nested_sequential() -> dict:
    cfg = _strip_shapes(TINY)
    block = cfg["blocks"][0]
    first = block["inner_nodes"][0]
    block["inner_nodes"][0] = {"type": "sequential", "name": "s1", "nodes": [
        {"type": "sequential", "name": "s2", "nodes": [first]}]}
    for stage in block.get("stages") or []:
        for group in stage:
            group[:] = ["s1" if n == first["name"] else n for n in group]
    return cfg


def test_the_unmodified_file_loads():
    g = Graph.from_json(copy.deepcopy(TINY))
    assert g.macs() > 0


@pytest.mark.parametrize("case", sorted(BAD_GRAPHS))
def test_graph_that_cannot_be_computed_is_refused(case):
    with pytest.raises(GraphError):
        Graph.from_json(BAD_GRAPHS[case]())


def _graph_file_cases(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:  # sparse: over the limit without writing 64 MiB
        f.truncate(ir_fields.MAX_FILE_BYTES + 1)
    cases = {
        "binary": b"\x00\x01\x02\xff\xfe" * 10,
        "not UTF-8": json.dumps(TINY).replace('"tiny_schedule"', '"tiny\xe9"').encode("latin-1"),
        "NaN": json.dumps(_with_conv()).replace('"out_channels": 8', '"out_channels": NaN').encode(),
        "Infinity": json.dumps(_with_conv()).replace('"out_channels": 8', '"out_channels": Infinity').encode(),
        "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
        "nested 100,000 deep in an object": b'{"name": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}",
        "an integer of 10,000 digits": b'{"name": "x", "input": ' + b"9" * 10_000 + b', "blocks": []}',
        "empty": b"",
        "a JSON list": b"[1, 2, 3]",
    }
    paths = {}
    for name, data in cases.items():
        p = tmp_path / f"{len(paths)}.json"
        p.write_bytes(data)
        paths[name] = p
    paths["larger than the size limit"] = big
    for name, make in BAD_GRAPHS.items():
        p = tmp_path / f"{len(paths)}.json"
        p.write_text(json.dumps(make()))
        paths[name] = p
    return paths


@pytest.mark.parametrize("command", ["show", "export", "optimize", "profile"])
def test_cli_refuses_hostile_graph_files_in_one_line(tmp_path, run_cli, command):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for case, path in _graph_file_cases(tmp_path).items():
        args = {"show": ["show", str(path)],
                "export": ["export", str(path), "-o", str(out_dir / "m.onnx")],
                "optimize": ["optimize", "-m", str(path), "-o", str(out_dir / "s.json")],
                "profile": ["profile", "--model", str(path)]}[command]
        code, out, err = run_cli(args)
        assert code == 2, (case, code, out, err)
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), (case, err)
        assert "Traceback" not in err + out
        assert list(out_dir.iterdir()) == [], case


def test_show_never_prints_negative_macs(tmp_path, run_cli):
    # a conv whose window is larger than its input gave a negative output size (and MACs) before
    path = tmp_path / "g.json"
    path.write_text(json.dumps(_with_conv(kernel=[9, 9], padding=[1, 1])))
    code, out, err = run_cli(["show", str(path)])
    assert code == 2 and "empty" in err and "GMACs" not in out


def test_zoo_models_still_validate():
    from ios_core import models

    for name in ("sample", "squeezenet", "inception_v3"):
        g = models.get(name)
        assert Graph.from_json(json.loads(json.dumps(g.to_json()))).macs() == g.macs() > 0


def test_corrupt_weights_file_is_an_input_error(tmp_path):
    g = Graph.from_json(copy.deepcopy(TINY)).init_weights(0)
    g.save(tmp_path / "g.json")
    (tmp_path / "g.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(GraphError, match="unreadable weights"):
        Graph.load(tmp_path / "g.json")


# ---- fuzzing --------------------------------------------------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6),
                     st.sampled_from(["0", "1", "conv", "relu", "max", "add", "sequential", "placeholder"]))
_json = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                        st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=12)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


def _mutate(cfg, data) -> dict:
    cfg = copy.deepcopy(cfg)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = [p for p in _paths(cfg) if p]
        path = data.draw(st.sampled_from(paths), label="path")
        parent = cfg
        for key in path[:-1]:
            parent = parent[key]
        action = data.draw(st.sampled_from(["replace", "replace", "delete", "nudge"]), label="action")
        old = parent[path[-1]]
        if action == "delete":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
        elif action == "nudge" and isinstance(old, int) and not isinstance(old, bool):
            parent[path[-1]] = old + data.draw(st.sampled_from([-old, -old - 1, -1, 1, 2, 7, old * 1000]))
        else:
            parent[path[-1]] = data.draw(_json, label="value")
    return cfg


def _assert_computable(g: Graph) -> None:
    assert g.macs() >= 0 and g.params() >= 0
    str(g)
    Graph.from_json(json.loads(json.dumps(g.to_json())))
    elements = sum(math.prod(n.output_shape) for n in g.nodes()) + g.params()
    if elements < 2_000_000:
        g.init_weights(0)
        y = reference.run(g, reference.random_input(g, 1))
        assert y.shape == (1, *g.output_shape) and np.isfinite(y).all()


def _reads_or_refuses(cfg) -> None:
    try:
        g = Graph.from_json(cfg)
    except GraphError as e:
        assert "\n" not in str(e)
        return
    _assert_computable(g)


def _fuzz_mutations(data):
    _reads_or_refuses(_mutate(_strip_shapes(TINY) if data.draw(st.booleans()) else TINY, data))


def _fuzz_bytes(raw):
    try:
        cfg = parse_json_bytes(raw, "fuzz.json")
    except GraphError:
        return
    _reads_or_refuses(cfg)


def _fuzz_documents(doc):
    _reads_or_refuses(doc)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_documents = st.fixed_dictionaries({"name": _json, "input": _json, "blocks": _json})
_text_bytes = st.one_of(st.binary(max_size=200), _json.map(lambda d: json.dumps(d).encode()),
                        st.just(json.dumps(TINY)).flatmap(
                            lambda s: st.integers(0, len(s)).map(lambda i: (s[:i] + s[i + 1:]).encode())))


@settings(max_examples=150, **_SETTINGS)
@given(st.data())
def test_fuzz_mutated_graph_files_quick(data):
    _fuzz_mutations(data)


@settings(max_examples=100, **_SETTINGS)
@given(_text_bytes)
def test_fuzz_bytes_quick(raw):
    _fuzz_bytes(raw)


@pytest.mark.slow
@settings(max_examples=4000, **_SETTINGS)
@given(st.data())
def test_fuzz_mutated_graph_files(data):
    _fuzz_mutations(data)


@pytest.mark.slow
@settings(max_examples=2000, **_SETTINGS)
@given(_text_bytes)
def test_fuzz_bytes(raw):
    _fuzz_bytes(raw)


@pytest.mark.slow
@settings(max_examples=2000, **_SETTINGS)
@given(_documents)
def test_fuzz_random_documents(doc):
    _fuzz_documents(doc)


def test_a_folder_or_device_named_like_a_graph_file_is_refused(tmp_path, run_cli):
    (tmp_path / "dir.json").mkdir()
    for spec in (str(tmp_path / "dir.json"), "/dev/zero", "/dev/null.json"):
        code, out, err = run_cli(["show", spec])
        assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error:"), (spec, err)
