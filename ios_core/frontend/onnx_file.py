"""Reading an ONNX file safely, whatever bytes it holds (docs/import.md, "Files from anywhere"): the
protobuf parsed within its 2 GiB limit, external data read only from regular files beneath the
model's folder (no symbolic link, no ``..``, no device), every tensor's declared size checked
against what it holds, and the model validated (checker, opset, shape inference) - each failure
one line (:class:`~ios_core.frontend.UnsupportedModel`). The importer's op handlers
(:mod:`ios_core.frontend.onnx`) only ever see a model that passed here."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from ios_core.frontend.errors import UnsupportedModel

# A protobuf message cannot exceed 2 GiB: larger weights live in external data files.
_PROTOBUF_LIMIT = 2 ** 31 - 1


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def _read(source):
    """``(model, path or None)``: the file (or bytes) parsed as an ``onnx.ModelProto``, its
    external data not yet read. Anything that is not an ONNX model is refused in one line."""
    import onnx

    if isinstance(source, onnx.ModelProto):
        return source, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, label, origin = bytes(source), "bytes", None
    else:
        path = Path(source)
        label = origin = str(path)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise UnsupportedModel(f"{label}: no such file") from None
        except (OSError, ValueError) as e:  # a name too long, a NUL byte
            raise UnsupportedModel(f"{label}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
        if not stat.S_ISREG(st.st_mode):
            raise UnsupportedModel(f"{label}: not a regular file")
        if st.st_size > _PROTOBUF_LIMIT:
            raise UnsupportedModel(f"{label}: not an ONNX model ({st.st_size} bytes; an ONNX file is at most 2 GiB, "
                                   f"larger weights live in external data files)")
        try:
            with open(path, "rb") as f:
                data = f.read(_PROTOBUF_LIMIT + 1)
        except OSError as e:
            raise UnsupportedModel(f"{label}: cannot read it ({e.strerror or type(e).__name__})") from None
    if not data:
        raise UnsupportedModel(f"{label}: not an ONNX model (the file is empty)")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as e:  # DecodeError, or whatever the protobuf runtime raises on hostile bytes
        raise UnsupportedModel(f"{label}: not a readable ONNX model ({_first_line(e)})") from None
    if not model.HasField("graph"):
        raise UnsupportedModel(f"{label}: not an ONNX model (it holds no graph)")
    return model, origin


def _tensors(model):
    """Every TensorProto of ``model``: initializers and attribute tensors, in subgraphs and
    functions too (iteratively: nesting depth is the file's to choose)."""
    graphs = [model.graph]
    nodes = [n for f in model.functions for n in f.node]
    while graphs or nodes:
        if graphs:
            g = graphs.pop()
            yield from g.initializer
            for sp in g.sparse_initializer:
                yield sp.values
                yield sp.indices
            nodes.extend(g.node)
            continue
        node = nodes.pop()
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t
            yield from a.tensors
            if a.HasField("sparse_tensor"):
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            if a.HasField("g"):
                graphs.append(a.g)
            graphs.extend(a.graphs)


# bits per element of the sub-byte types: UINT4, INT4, FLOAT4E2M1, UINT2, INT2, FLOAT6E2M3, FLOAT6E3M2
_PACKED_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2, 27: 6, 28: 6}


def _tensor_nbytes(t) -> int | None:
    """The bytes ``t``'s dims and type need as raw data, or None for a type without a fixed size."""
    import onnx.helper as oh

    n = 1
    for d in t.dims:
        if d < 0:
            return None
        n *= d
    bits = _PACKED_BITS.get(t.data_type)
    if bits is not None:  # sub-byte types are packed
        return (n * bits + 7) // 8
    try:
        dtype = np.dtype(oh.tensor_dtype_to_np_dtype(t.data_type))
    except Exception:
        return None
    if dtype.kind in "OSU":
        return None
    return n * dtype.itemsize


def _load_external_data(model, origin: str | None, name: str) -> None:
    """Read every tensor stored in an external file into the model, refusing (one line) what
    would read outside the model's folder or could not be the tensor: an absolute or ``..``
    location, an empty one or ``.``, a symbolic link anywhere on the way (to a file, a folder,
    ``/dev/zero``), something that is not a regular file, a missing file, a file shorter than
    the tensor, a length that is not the tensor's size."""
    import onnx

    external = [t for t in _tensors(model) if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        return
    if origin is None:
        raise UnsupportedModel(f"cannot import {name!r}: tensor {external[0].name!r} keeps its data in an external "
                               f"file; load the model from its .onnx file")
    # Tensors may share one file (or overlap in it): what is read is bounded by what the tensors
    # declare, checked against the machine's memory before any byte is read.
    from ios_core.ir.fields import memory_bytes

    total = sum(_tensor_nbytes(t) or 0 for t in external)
    memory = memory_bytes()
    if memory is not None and total > memory // 2:
        raise UnsupportedModel(f"cannot import {name!r}: its {len(external)} external tensors need {total / 2**30:.3g} "
                               f"GiB, more than half this machine's memory ({memory / 2**30:.3g} GiB)")
    base = os.path.dirname(os.path.abspath(origin))
    for t in external:
        _read_external_tensor(t, base, name)


def _read_external_tensor(t, base: str, name: str) -> None:
    import onnx

    info = {e.key: e.value for e in t.external_data}
    location = info.get("location", "")

    def refuse(why: str):
        raise UnsupportedModel(f"cannot import {name!r}: weight {t.name!r}: external data file {location!r} {why}")

    parts = [p for p in location.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or "\0" in location:
        refuse("names no file")
    if location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
        refuse("is an absolute path; only files in the model's folder are read")
    if ".." in parts:
        refuse("leaves the model's folder; only files in the model's folder are read")
    path = base
    for i, part in enumerate(parts):
        path = os.path.join(path, part)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            refuse("is missing (it should be beside the model)")
        except OSError as e:
            refuse(f"cannot be read ({e.strerror or type(e).__name__})")
        if stat.S_ISLNK(st.st_mode):
            refuse("is or goes through a symbolic link; only plain files in the model's folder are read")
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            refuse(f"goes through {part!r}, which is not a folder")
    if not stat.S_ISREG(st.st_mode):
        refuse("is not a regular file")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else None
    except ValueError:
        refuse(f"has a malformed offset or length ({info.get('offset')!r}, {info.get('length')!r})")
    if offset < 0 or (length is not None and length < 0):
        refuse(f"has a negative offset or length ({offset}, {length})")
    need = _tensor_nbytes(t)
    if need is None:
        refuse(f"holds a tensor of type {t.data_type} with dims {list(t.dims)}, which cannot be read as raw data")
    if length is None:
        length = need
    if length != need:
        refuse(f"gives {length} bytes for a tensor of dims {list(t.dims)} that needs {need}")
    try:
        fd = _open_beneath(base, parts)
    except OSError as e:
        refuse(f"cannot be opened ({e.strerror or type(e).__name__}; did it change while it was read?)")
    with os.fdopen(fd, "rb") as f:
        now = os.fstat(f.fileno())
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            refuse("changed while it was read")
        if offset + length > now.st_size:
            refuse(f"is shorter than the tensor ({now.st_size} bytes; the tensor needs bytes {offset} to "
                   f"{offset + length})")
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        refuse("is shorter than the tensor (it shrank while it was read)")
    t.raw_data = data
    t.data_location = onnx.TensorProto.DEFAULT
    del t.external_data[:]


def _open_beneath(base: str, parts: list[str]) -> int:
    """Open ``base/parts...`` for reading one component at a time, never following a symbolic
    link (``O_NOFOLLOW`` relative to the folder opened before it), nor blocking on a FIFO: what
    was checked is what is read, even if the folder changes meanwhile."""
    nofollow, cloexec = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_CLOEXEC", 0)
    if os.open not in os.supports_dir_fd:  # pragma: no cover - not POSIX
        return os.open(os.path.join(base, *parts), os.O_RDONLY | nofollow | cloexec)
    folder = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | cloexec)
    try:
        for part in parts[:-1]:
            inner = os.open(part, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | nofollow | cloexec, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], os.O_RDONLY | nofollow | getattr(os, "O_NONBLOCK", 0) | cloexec, dir_fd=folder)
    finally:
        os.close(folder)


def _validate(model, origin: str | None, name: str):
    """The model as ``onnx.checker`` (full check: the IR, every node against its operator's
    schema, single assignment, strict shape inference) sees it, with its shapes inferred;
    refused in one line naming the checker's reason. Also refused: an ONNX opset newer than
    the installed onnx library knows (the checker lets it through)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:  # the full check below says why
        inferred = model
    outputs = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in inferred.graph.output]
    shaped = [o for o in outputs if o.type.tensor_type.HasField("shape")]
    if len(shaped) != len(outputs):
        # A graph output whose shape neither the file nor inference gives is accepted (exporters'
        # helpers write them; the importer checks its own output shape): the checker, which
        # requires one, sees the graph without those outputs.
        del inferred.graph.output[:]
        inferred.graph.output.extend(shaped)
    try:
        if inferred.ByteSize() > _PROTOBUF_LIMIT and origin is not None:
            onnx.checker.check_model(origin, full_check=True)  # too large for one message: from its file
        else:
            onnx.checker.check_model(inferred, full_check=True)
    except Exception as e:
        raise UnsupportedModel(f"cannot import {name!r}: not a valid ONNX model: {_first_line(e)}") from None
    finally:
        if len(shaped) != len(outputs):
            del inferred.graph.output[:]
            inferred.graph.output.extend(outputs)
    latest = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and not 1 <= o.version <= latest:
            raise UnsupportedModel(f"cannot import {name!r}: not a valid ONNX model: opset {o.version} of the ONNX "
                                   f"domain does not exist (this onnx library knows 1 to {latest})")
    return inferred
