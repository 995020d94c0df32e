"""Extract TensorRT's Python API (classes, their methods and properties, enum members, module
attributes) from the pybind11 sources of NVIDIA/TensorRT's Python bindings (``python/src``).

    python tests/tensorrt_manifest.py GIT_DIR TAG [TAG ...] > tests/data/tensorrt_api.json

``GIT_DIR`` is a clone of NVIDIA/TensorRT (a bare one is enough: files are read with
``git show TAG:PATH``). The committed manifest (``tests/data/tensorrt_api.json``, tags v10.16 and
v11.1) is what the TensorRT stand-in (``tests/fake_tensorrt.py``) is checked against: an
attribute the adapter touches that is not in the manifest of a version raises there.

What is read: ``py::class_<Cpp[, Base]...>(m, "Name"`` (and ``... var{m, "Name"}``) starts a
class; the chain's ``.def("x"``, ``.def_property[_readonly]("x"``, ``.def_readwrite("x"``,
``.def_readonly("x"``, ``.def_static("x"`` add members until the next class or enum;
``py::enum_<Cpp>(m|var, "Name"`` starts an enum (nested in ``var``'s class) whose
``.value("X"`` are its members (``.export_values()`` copies them into the enclosing class);
``m.def("f"`` and ``m.attr("f")`` are module functions and attributes. A base class named in
the template arguments passes its members on (resolved by C++ name).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

FILES = ("python/src/infer/pyCore.cpp", "python/src/infer/pyGraph.cpp", "python/src/infer/pyFoundationalTypes.cpp",
         "python/src/infer/pyPlugin.cpp", "python/src/pyTensorRT.cpp")

_START = re.compile(r"py::(class_|enum_)\s*<\s*([\w:]+)\s*(?:,\s*([\w:]+))?[^;{(]*?>\s*(\w+\s*)?[({]\s*(\w+)\s*,\s*"
                    r"\"(\w+)\"")
_MEMBER = re.compile(r"\.(def|def_property|def_property_readonly|def_readwrite|def_readonly|def_static|"
                     r"def_property_static|value)\s*\(\s*\"(\w+)\"")
_VAR_CHAIN = re.compile(r"\b(\w+)\s*\.\s*def\s*\(")
_MODULE = re.compile(r"\bm\s*\.\s*(def|attr)\s*\(\s*\"(\w+)\"")
_EXPORT = re.compile(r"\.export_values\s*\(")


def _strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


def _statement_ends(src: str) -> list[int]:
    """Positions of the ``;`` that end statements: outside parentheses, brackets and string
    literals, and not inside a lambda's body (a brace opened inside parentheses)."""
    ends, depth, i, n = [], 0, 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
        elif c == "'":
            i += 1
            while i < n and src[i] != "'":
                i += 2 if src[i] == "\\" else 1
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            ends.append(i)
        i += 1
    return ends


def extract(sources: list[str]) -> dict:
    classes: dict[str, dict] = {}  # python name -> {"members": set, "bases": [cpp], "cpp": cpp}
    enums: dict[str, dict] = {}  # qualified python name -> {"members": set, "scope": class or None}
    module: set[str] = set()
    cpp_to_py: dict[str, str] = {}
    var_to_class: dict[str, str] = {}
    for src in sources:
        src = _strip_comments(src)
        events = []
        for m in _START.finditer(src):
            events.append((m.start(), "start", m))
        for m in _MEMBER.finditer(src):
            events.append((m.start(), "member", m))
        for m in _MODULE.finditer(src):
            events.append((m.start(), "module", m))
        for m in _VAR_CHAIN.finditer(src):
            events.append((m.start(), "var", m))
        for m in _EXPORT.finditer(src):
            events.append((m.start(), "export", m))
        for pos in _statement_ends(src):
            events.append((pos, "end", None))
        events.sort(key=lambda e: (e[0], e[1] != "start"))
        current = None  # ("class", name) | ("enum", qualified name)
        for _pos, kind, m in events:
            if kind == "start":
                what, cpp, base, var, parent, name = m.groups()
                if what == "class_":
                    entry = classes.setdefault(name, {"members": set(), "bases": [], "cpp": cpp})
                    if base and base not in ("std::unique_ptr", "std::shared_ptr"):
                        entry["bases"].append(base)
                    cpp_to_py[cpp] = name
                    if var:
                        var_to_class[var.strip()] = name
                    current = ("class", name)
                else:
                    scope = None if parent == "m" else var_to_class.get(parent)
                    qual = f"{scope}.{name}" if scope else name
                    enums.setdefault(qual, {"members": set(), "scope": scope})
                    if scope:
                        classes[scope]["members"].add(name)
                    current = ("enum", qual)
            elif kind == "member":
                if current is None:
                    continue
                what, name = m.groups()
                if current[0] == "enum" and what == "value":
                    enums[current[1]]["members"].add(name)
                elif current[0] == "class" and what != "value":
                    classes[current[1]]["members"].add(name)
            elif kind == "export":
                if current and current[0] == "enum" and enums[current[1]]["scope"]:
                    classes[enums[current[1]]["scope"]]["members"].update(enums[current[1]]["members"])
            elif kind == "var":
                var = m.group(1)
                if var in var_to_class:
                    current = ("class", var_to_class[var])
            elif kind == "module":
                module.add(m.group(2))
            elif kind == "end":
                current = None
    # inherited members (bases by C++ name), transitively
    def members(name, seen=()):
        entry = classes[name]
        out = set(entry["members"])
        for base in entry["bases"]:
            py = cpp_to_py.get(base)
            if py and py not in seen:
                out |= members(py, (*seen, name))
        return out

    return {"classes": {n: sorted(members(n)) for n in sorted(classes)},
            "bases": {n: [cpp_to_py[b] for b in classes[n]["bases"] if b in cpp_to_py] for n in sorted(classes)},
            "enums": {n: sorted(e["members"]) for n, e in sorted(enums.items())},
            "module": sorted(module | {n for n in classes} | {n for n, e in enums.items() if e["scope"] is None})}


def read(git_dir: str, tag: str) -> list[str]:
    out = []
    for path in FILES:
        r = subprocess.run(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"], capture_output=True, text=True)
        if r.returncode == 0:
            out.append(r.stdout)
    if not out:
        raise SystemExit(f"no binding sources at {tag} in {git_dir}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    git_dir, tags = argv[0], argv[1:]
    manifest = {"source": "NVIDIA/TensorRT python/src (pybind11 bindings)", "files": list(FILES),
                "versions": {tag.lstrip("v").split(".")[0]: {"tag": tag, **extract(read(git_dir, tag))}
                             for tag in tags}}
    json.dump(manifest, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
