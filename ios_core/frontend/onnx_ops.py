"""The ONNX importer's operator mappings: one ``_op_<OnnxType>`` method per type of
``ios_core.frontend.onnx.MAPPED`` (a mixin of its ``_Importer``, which owns the driver, the
constants' folding and the helpers these call: ``_act``, ``_const``, ``_add``, ``refuse``). The
importer's tensors while it maps a file: :class:`_Act` (an activation: IR values) and
:class:`_Grouped` (a channel shuffle in progress)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ios_core.ir import (
    Conv,
    Element,
    Flatten,
    Linear,
    Pool,
    Resize,
    Shuffle,
    Transpose,
    Value,
    whole,
)

_FLOAT = 1  # onnx.TensorProto.FLOAT


@dataclass
class _Act:
    """An activation tensor: channel slices concatenated (the IR's native form, no node needed),
    of per-sample rank 3 (``rank`` 4: N, C, H, W), flattened (``rank`` 2: N, C, stored 1x1), or a
    general tensor whose IR shape is its per-sample dims (``rank`` = their number + 1: tokens x
    features, ...; the batch is always the first axis), with a pending zero ``pad`` (top, left,
    bottom, right) a following conv or pool absorbs."""

    values: list[Value]
    rank: int = 4
    pad: tuple[int, int, int, int] | None = None
    # the ONNX axis of the batch: 0, or (a general tensor of a model exported at batch 1, whose
    # sequence-first layout moved it) another axis of size 1, or None (merged into another axis)
    bpos: int | None = 0
    # source names of the ONNX nodes that made this tensor without an IR node (a zero Pad, a channel
    # Concat): the first IR node made from it computes them (ios_core.ir.meta.SOURCE_NODES)
    via: tuple[str, ...] = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The IR shape of the concatenated values."""
        return (sum(v.length for v in self.values), *self.values[0].node.output_shape[1:])

    @property
    def flat(self) -> bool:
        """A flattened (N, C) tensor stored as (C, 1, 1) (a classifier's)."""
        return self.rank == 2 and len(self.values[0].node.output_shape) == 3

    def full(self, batch: int = 1) -> tuple[int, ...]:
        """The dims ONNX sees at ``batch``, the batch axis included (where ``bpos`` says)."""
        dims = self.dims()
        return dims if self.bpos is None else (*dims[:self.bpos], batch, *dims[self.bpos:])

    def dims(self) -> tuple[int, ...]:
        """Per-sample dims as ONNX sees them (padding included; the IR shape of a tensor whose
        batch axis is not first)."""
        shape = self.shape
        if self.flat:
            return (shape[0],)
        if self.pad:
            c, h, w = shape
            t, left, b, r = self.pad
            return (c, h + t + b, w + left + r)
        return shape


@dataclass
class _Grouped:
    """A channel shuffle in progress: ``reshape(N, g, C/g, H, W)``, maybe transposed (0,2,1,3,4)."""

    act: _Act
    groups: int
    transposed: bool = False
    via: tuple[str, ...] = ()  # the shuffle's Reshape and Transpose (source names), for its Shuffle node


class OnnxOps:
    """The operator mappings (``_op_<OnnxType>(ins, attrs)``) and the helpers only they use."""

    def _op_Identity(self, ins, attrs):
        return ins[0]

    def _op_Dropout(self, ins, attrs):
        return [ins[0], None]

    def _op_Cast(self, ins, attrs):
        if attrs.get("to") != _FLOAT:
            self.refuse(f"Cast of an activation to type {attrs.get('to')}; the IR computes in float32")
        return ins[0]

    def _op_Conv(self, ins, attrs):
        x = self._act(ins[0], padded=True)
        w = self._const(ins[1], "weight")
        b = self._const(ins[2] if len(ins) > 2 else None, "bias", optional=True)
        if w.ndim != 4:
            self.refuse(f"a {w.ndim - 2}-D convolution; the IR has 2-D convolutions only")
        kernel = tuple(int(k) for k in attrs.get("kernel_shape", w.shape[2:]))
        if kernel != tuple(w.shape[2:]):
            self.refuse(f"kernel_shape {kernel} != weight shape {w.shape}")
        dilations = tuple(int(d) for d in attrs.get("dilations", (1, 1)))
        groups = int(attrs.get("group", 1))
        cin = x.shape[0]
        if w.shape[1] * groups != cin:
            self.refuse(f"weight {w.shape} with group={groups} does not fit {cin} input channels")
        pads = self._window(attrs, x, kernel, dilations)
        if x.pad:
            pads = tuple(a + b for a, b in zip(pads, x.pad))
        top, left, bottom, right = pads
        node = self._add(Conv, [[v] for v in x.values], self._hint(), out_channels=int(w.shape[0]), kernel=kernel,
                         stride=tuple(attrs.get("strides", (1, 1))), padding=(top, left),
                         padding_end=(bottom, right) if (bottom, right) != (top, left) else (),
                         dilation=dilations, groups=groups)
        node.weight = np.array(w, dtype=np.float32)
        node.bias = np.zeros(w.shape[0], np.float32) if b is None else np.array(b.reshape(-1), dtype=np.float32)
        if node.bias.shape != (w.shape[0],):
            self.refuse(f"bias shape {b.shape} != ({w.shape[0]},)")
        return _Act([whole(node)])

    def _op_BatchNormalization(self, ins, attrs):
        x = self._act(ins[0])
        if attrs.get("training_mode", 0):
            self.refuse("training_mode=1; the IR runs inference only")
        scale, bias, mean, var = (self._const(v, what) for v, what in zip(ins[1:5], ("scale", "B", "mean", "var")))
        eps = float(attrs.get("epsilon", 1e-5))
        a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps))
        b = bias.astype(np.float64) - mean.astype(np.float64) * a
        if a.shape != (x.shape[0],):
            self.refuse(f"parameters of shape {a.shape} for {x.shape[0]} channels")
        return [self._affine(x, a, b), None, None]

    def _op_Relu(self, ins, attrs):
        return self._activation(ins, "relu")

    def _op_Sigmoid(self, ins, attrs):
        return self._activation(ins, "sigmoid")

    def _op_Tanh(self, ins, attrs):
        gelu = self._gelu_tanh()  # the tanh GELU (onnx_tensor_ops), or a plain tanh
        return gelu if gelu is not None else self._activation(ins, "tanh")

    def _op_HardSwish(self, ins, attrs):
        return self._activation(ins, "hardswish")

    def _op_HardSigmoid(self, ins, attrs):
        return self._activation(ins, "hardsigmoid", float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5)))

    def _op_LeakyRelu(self, ins, attrs):
        return self._activation(ins, "leaky_relu", float(attrs.get("alpha", 0.01)))

    def _op_Clip(self, ins, attrs):
        if self.opset < 11:
            lo, hi = attrs.get("min"), attrs.get("max")
        else:
            lo = self._const(ins[1] if len(ins) > 1 else None, "min", optional=True)
            hi = self._const(ins[2] if len(ins) > 2 else None, "max", optional=True)
            lo = None if lo is None else float(lo)
            hi = None if hi is None else float(hi)
        big = float(np.finfo(np.float32).max)
        if lo == 0.0 and hi == 6.0:
            return self._activation(ins, "relu6")
        if lo == 0.0 and (hi is None or hi >= big):
            return self._activation(ins, "relu")
        return self._activation(ins, "clip", -big if lo is None else lo, big if hi is None else hi)

    def _pool(self, ins, attrs, pool_type: str):
        x = self._act(ins[0], padded=True)
        kernel = tuple(int(k) for k in attrs.get("kernel_shape", ()))
        if len(kernel) != 2:
            self.refuse(f"kernel_shape {kernel} is not 2-D")
        if any(d != 1 for d in attrs.get("dilations", (1, 1))):
            self.refuse("dilated pooling")
        strides = tuple(int(s) for s in attrs.get("strides", (1, 1)))
        pads = list(self._window(attrs, x, kernel))
        include = bool(attrs.get("count_include_pad", 0)) if pool_type == "avg" else True
        if x.pad and (pool_type == "max" or (any(pads) and not include)):
            x = self._unpad(x)  # max pooling pads with -inf, this average pool counts only its input: real zeros
        if x.pad:
            pads = [a + b for a, b in zip(pads, x.pad)]
            include = include or any(x.pad)
        _, h, w = x.shape
        if attrs.get("ceil_mode", 0):
            # the last window may start inside the input or the leading padding only
            for dim, (size, k, s) in enumerate(zip((h, w), kernel, strides)):
                begin, end = pads[dim], pads[dim + 2]
                out = -(-(size + begin + end - k) // s) + 1
                if (out - 1) * s >= size + begin:
                    out -= 1
                need = (out - 1) * s + k - size - begin
                if need > end:
                    if pool_type == "avg" and include:
                        self.refuse("ceil_mode=1 with count_include_pad=1 where the ceiling adds a partial window "
                                    "(its divisor differs between runtimes)")
                    pads[dim + 2] = need
        top, left, bottom, right = pads
        node = self._add(Pool, [[v] for v in x.values], self._hint(), pool_type=pool_type, kernel=kernel,
                         stride=strides, padding=(top, left),
                         padding_end=(bottom, right) if (bottom, right) != (top, left) else (),
                         count_include_pad=include)
        return [_Act([whole(node)]), None]

    def _op_MaxPool(self, ins, attrs):
        if attrs.get("storage_order", 0):
            pass  # affects only the Indices output, refused if used
        return self._pool(ins, attrs, "max")

    def _op_AveragePool(self, ins, attrs):
        return self._pool(ins, attrs, "avg")

    def _global(self, ins, pool_type: str, keepdims: bool = True) -> _Act:
        x = self._act(ins[0])
        if x.rank != 4:
            self.refuse("global pooling of a 2-D tensor")
        node = self._add(Pool, [[v] for v in x.values], self._hint(), pool_type=pool_type)
        return _Act([whole(node)], 4 if keepdims else 2)

    def _op_GlobalAveragePool(self, ins, attrs):
        return self._global(ins, "global_avg")

    def _op_GlobalMaxPool(self, ins, attrs):
        return self._global(ins, "global_max")

    def _reduce(self, ins, attrs, pool_type: str):
        x = self._act(ins[0], moved=True)
        axes = attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = self._const(ins[1], "axes").tolist()
        if not axes:
            self.refuse("a reduction over every axis (the batch's too)")
        keepdims = bool(attrs.get("keepdims", 1))
        if x.rank == 4 and x.bpos == 0 and sorted(a % 4 for a in axes) == [2, 3]:
            return self._global(ins, pool_type, keepdims=keepdims)
        return self._reduce_any(x, axes, keepdims, pool_type)  # other axes: a token map's (N, H, W, C)

    def _op_ReduceMean(self, ins, attrs):
        return self._reduce(ins, attrs, "global_avg")

    def _op_ReduceMax(self, ins, attrs):
        return self._reduce(ins, attrs, "global_max")

    def _op_ReduceSum(self, ins, attrs):
        """A sum of an activation (split attention's sum over its radix, SwiftFormer's over its tokens):
        the mean (``_reduce``) times the number of elements summed."""
        x = self._act(ins[0], moved=True)
        if int(attrs.get("noop_with_empty_axes", 0)):
            self.refuse("ReduceSum with noop_with_empty_axes")
        full = x.full(self.batch)
        mean = self._reduce(ins, attrs, "global_avg")
        axes = attrs.get("axes")
        if axes is None:
            axes = self._const(ins[1], "axes").tolist()
        count = float(np.prod([full[int(a) % x.rank] for a in axes]))
        if mean.bpos == 0:
            return self._affine(mean, count, 0.0)
        return self._constant(mean, np.array(count), "Mul", False)

    def _op_Concat(self, ins, attrs):
        if any(isinstance(v, np.ndarray) for v in ins):  # learned rows put first (a class token)
            return self._prepend(ins, attrs)
        acts = [self._act(v, moved=True) for v in ins if v is not None]
        if any(a.bpos != 0 for a in acts) or (int(attrs.get("axis", 1)) % acts[0].rank) != 1:
            return self._concat_any(acts, int(attrs.get("axis", 1)))  # along another axis (a Roll's halves)
        ranks = {a.rank for a in acts}
        if len(ranks) != 1:
            self.refuse("concatenates tensors of different ranks")
        rank = ranks.pop()
        self._channel_axis(int(attrs.get("axis", 1)), rank)
        if len({a.shape[1:] for a in acts}) != 1:
            self.refuse("concatenates tensors of different spatial sizes")
        return _Act([v for a in acts for v in a.values], rank, via=(*(n for a in acts for n in a.via), *self._via()))

    def _op_Split(self, ins, attrs):
        """Channels of a feature map: the IR's channel slices; any other per-sample axis of a general
        tensor (``unbind`` of a stacked q, k, v): its slices (``_slice_any``)."""
        x = self._act(ins[0], moved=True)
        axis = int(attrs.get("axis", 0))
        if not -x.rank <= axis < x.rank:
            self.refuse(f"axis {axis} of a tensor of rank {x.rank}")
        axis %= x.rank
        if axis == x.bpos:
            self.refuse("a split along the batch axis")
        general = x.bpos != 0 or axis != 1
        c = x.full(self.batch)[axis] if general else x.shape[0]
        split = attrs.get("split")
        if split is None and len(ins) > 1 and ins[1] is not None:
            split = self._const(ins[1], "split").tolist()
        n_out = len(self.node.output)
        if split is None:
            n = int(attrs.get("num_outputs", n_out))
            size = -(-c // n)
            split = [min(size, c - i * size) for i in range(n)]
        if sum(split) != c or len(split) != n_out or min(split) <= 0:
            self.refuse(f"split sizes {split} do not divide {c} channels into {n_out} outputs")
        outs, begin = [], 0
        for s in split:
            if general:
                outs.append(self._slice_any(x, [begin], [begin + s], [axis], [1]))
            else:
                outs.append(_Act(self._slice(x.values, begin, begin + s), x.rank))
            begin += s
        return outs

    def _op_Slice(self, ins, attrs):
        x = self._act(ins[0], moved=True)
        if self.opset < 10:
            starts, ends = attrs.get("starts"), attrs.get("ends")
            axes, steps = attrs.get("axes"), None
        else:
            starts, ends = (self._const(v, w).tolist() for v, w in zip(ins[1:3], ("starts", "ends")))
            axes = self._const(ins[3], "axes").tolist() if len(ins) > 3 and ins[3] is not None else None
            steps = self._const(ins[4], "steps").tolist() if len(ins) > 4 and ins[4] is not None else None
        axes = list(range(len(starts))) if axes is None else axes
        steps = [1] * len(starts) if steps is None else steps
        if x.bpos != 0:  # a general tensor whose batch axis moved
            return self._slice_any(x, starts, ends, axes, steps)
        dims = (self.batch, *x.dims())
        begin, end = 0, x.shape[0]
        for start, stop, axis, step in zip(starts, ends, axes, steps):
            axis %= x.rank
            size = dims[axis]
            lo = max(0, min(size, start + size if start < 0 else start))
            hi = max(0, min(size, stop + size if stop < 0 else stop))
            if axis == 1:
                if step != 1:
                    return self._slice_any(x, starts, ends, axes, steps)  # a step: general slices
                begin, end = lo, hi
            elif not (lo == 0 and hi >= size and step == 1) and not (axis == 0 and self.input_batch is None):
                return self._slice_any(x, starts, ends, axes, steps)  # along another axis: general slices
        if end <= begin:
            self.refuse("an empty channel slice")
        return _Act(self._slice(x.values, begin, end), x.rank)

    def _binary(self, ins, op: str):
        a, b = ins
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            act, const = (b, a) if isinstance(a, np.ndarray) else (a, b)
            act = self._act(act, moved=True)
            k = self._per_channel(const, act) if act.bpos == 0 else None
            first = isinstance(a, np.ndarray)
            if k is None:  # a constant over the other axes too: position embeddings, biases of tokens
                return self._constant(act, const, op, first)
            if op == "Add":
                return self._affine(act, 1.0, k)
            if op == "Mul":
                return self._affine(act, k, 0.0)
            if op == "Sub":
                return self._affine(act, -1.0, k) if first else self._affine(act, 1.0, -k)
            if first:
                self.refuse("divides a constant by an activation")
            return self._affine(act, 1.0 / k, 0.0)
        a, b = self._act(a, moved=True), self._act(b, moved=True)
        if op == "Div":
            self.refuse("divides two activations")
        if a.bpos != b.bpos:
            self.refuse(f"combines tensors whose batch axes differ ({a.bpos}, {b.bpos})")
        ones = (1,) * (len(a.shape) - 1)  # (1, 1) for a feature map
        if a.rank != b.rank or a.shape[0] != b.shape[0] or \
                (a.shape[1:] != b.shape[1:] and ones not in (a.shape[1:], b.shape[1:])):
            merged = self._merged_broadcast(a, b, op) if a.rank == b.rank else None
            if merged is not None:
                return merged
            if a.rank != b.rank or a.shape[0] != b.shape[0]:
                self.refuse(f"combines tensors of shapes {a.dims()} and {b.dims()}; the IR broadcasts only a 1x1 "
                            f"per-channel tensor over a feature map of the same channels, or one whose every axis "
                            f"is the other's or 1")
            self.refuse(f"combines tensors of spatial sizes {a.shape[1:]} and {b.shape[1:]}")
        if op == "Sub":
            b = self._affine(b, -1.0, 0.0)
        va, vb = self._single(a), self._single(b)
        if b.shape[1:] != ones and a.shape[1:] == ones:
            va, vb = vb, va  # the full-size value first
        node = self._add(Element, [[va, vb]], self._hint(), op_type="mul" if op == "Mul" else "add")
        return _Act([whole(node)], a.rank, bpos=a.bpos)

    def _merged_broadcast(self, a: _Act, b: _Act, op: str) -> _Act | None:
        """``a (op) b`` where every axis of one is the other's or 1 (split attention's (radix, C, 1, 1)
        weights over its (radix, C, H, W) branches, FocalNet's (1, H, W) modulation over (C, H, W)): the
        broadcast axes moved last (a ``transpose``), the others merged into one axis and those into another
        (a ``reshape``): the IR's one-per-row broadcast, then reshaped and moved back; else None."""
        sa, sb = list(a.shape), list(b.shape)
        if len(sa) != len(sb) or a.flat or b.flat:
            return None
        if all(y in (x, 1) for x, y in zip(sa, sb)):
            big, small = sa, sb
        elif all(x in (y, 1) for x, y in zip(sa, sb)):
            big, small = sb, sa
        else:
            return None
        spread = [i for i, (x, y) in enumerate(zip(big, small)) if y == 1 and x != 1]
        perm = [i for i in range(len(big)) if i not in spread] + spread
        rows = int(np.prod([big[i] for i in perm[:len(perm) - len(spread)]]))

        def merged(x: _Act, shape: list[int]) -> _Act:
            if perm != sorted(perm):
                x = self._node_on(Transpose, x, perm=tuple(perm))
            return self._reshape_to(x, [rows, int(np.prod([shape[i] for i in spread]))], 0, 3)

        out = self._binary([merged(a, sa), merged(b, sb)], op)
        out = self._reshape_to(out, [big[i] for i in perm], 0, a.rank)
        if perm != sorted(perm):
            out = self._node_on(Transpose, out, perm=tuple(perm.index(i) for i in range(len(perm))))
        return _Act(out.values, a.rank, bpos=a.bpos)

    def _op_Add(self, ins, attrs):
        return self._binary(ins, "Add")

    def _op_Sub(self, ins, attrs):
        return self._binary(ins, "Sub")

    def _op_Mul(self, ins, attrs):
        return self._binary(ins, "Mul")

    def _op_Div(self, ins, attrs):
        return self._binary(ins, "Div")

    def _op_Pow(self, ins, attrs):
        """An activation squared (timm's StarReLU, ``relu(x) ** 2``): ``element`` mul of it by itself (a
        constant base, or another exponent, is refused; constants alone are folded)."""
        x, exponent = ins
        if not isinstance(exponent, np.ndarray) or exponent.size != 1 or float(exponent.reshape(-1)[0]) != 2.0:
            self.refuse("a power of an activation other than its square (a constant exponent of 2)")
        return self._binary([x, x], "Mul")

    def _flatten(self, x: _Act) -> _Act:
        if x.rank == 2 or x.shape[1:] == (1, 1):
            return _Act(x.values, 2)
        node = self._add(Flatten, [[v] for v in x.values], self._hint())
        return _Act([whole(node)], 2)

    def _op_Flatten(self, ins, attrs):
        x = self._act(ins[0])
        if int(attrs.get("axis", 1)) % x.rank != 1:
            self.refuse(f"Flatten with axis {attrs.get('axis')}; only axis 1 (keep the batch)")
        return self._flatten(x)

    def _op_Reshape(self, ins, attrs):
        x = ins[0]
        target = [int(d) for d in self._const(ins[1], "shape").tolist()]
        src = x.act if isinstance(x, _Grouped) else self._act(x, moved=True)
        if not isinstance(x, _Grouped):
            full = self._resolve_shape(target, list(src.full(self.batch)), attrs)
            if src.bpos != 0 or len(src.shape) != 3 or full[0] != self.batch:  # a general tensor
                return self._reshape_any(src, full)
        c, h, w = src.shape
        dims = [self.batch, *src.dims()] if not isinstance(x, _Grouped) else \
            [self.batch, x.groups, c // x.groups, h, w]
        if isinstance(x, _Grouped) and x.transposed:
            dims = [self.batch, c // x.groups, x.groups, h, w]
        per = self._reshape_target(target, dims, attrs)
        if isinstance(x, _Grouped):
            if per == [c, h, w]:
                if not x.transposed:
                    return src
                node = self._add(Shuffle, [[v] for v in src.values], self._hint(), groups=x.groups)
                return _Act([whole(node)])
            self.refuse(f"a channel shuffle reshaped back to {per}, not {[c, h, w]}")
        if src.rank == 4:
            if per == [c, h, w]:
                return src
            if per == [c * h * w]:
                return self._flatten(src)
            if per == [c * h * w, 1, 1]:
                return _Act(self._flatten(src).values, 4)
            if len(per) == 4 and per[2:] == [h, w] and per[0] * per[1] == c and per[0] > 1:
                return _Grouped(src, per[0], via=(*src.via, *self._via()))
        elif src.flat and (per == [c] or per == [c, 1, 1]):
            return _Act(src.values, 2 if len(per) == 1 else 4)
        return self._reshape(src, per)

    def _resolve_shape(self, target: list[int], dims: list[int], attrs) -> list[int]:
        """A Reshape's target shape with its 0s and -1 resolved against the input's ``dims``."""
        total = int(np.prod(dims))
        if not attrs.get("allowzero", 0):
            target = [dims[i] if d == 0 and i < len(dims) else d for i, d in enumerate(target)]
        if target.count(-1) == 1:
            known = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = total // known if known else 0
        if int(np.prod(target)) != total:
            self.refuse(f"reshape to {target} moves data across the batch dimension")
        return target

    def _reshape_target(self, target: list[int], dims: list[int], attrs) -> list[int]:
        """A Reshape's per-sample target shape (its 0s and -1 resolved) from the input's ``dims``
        (batch included); refused when it moves data across the batch dimension."""
        target = self._resolve_shape(target, dims, attrs)
        if target[0] != self.batch:
            self.refuse(f"reshape to {target} moves data across the batch dimension")
        return target[1:]

    def _op_Transpose(self, ins, attrs):
        x = ins[0]
        if isinstance(x, _Grouped) and not x.transposed and list(attrs.get("perm", [])) == [0, 2, 1, 3, 4]:
            return _Grouped(x.act, x.groups, True, via=(*x.via, *self._via()))
        return self._transpose(self._act(x, moved=True), attrs)

    def _axes(self, ins, attrs) -> list[int]:
        axes = attrs.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = self._const(ins[1], "axes").tolist()
        return list(axes or [])

    def _op_Squeeze(self, ins, attrs):
        x = self._act(ins[0], moved=True)
        axes = sorted(a % x.rank for a in self._axes(ins, attrs))
        if x.rank == 4 and x.bpos == 0 and axes == [2, 3] and x.shape[1:] == (1, 1):
            return _Act(x.values, 2)
        full = list(x.full(self.batch))
        if not axes or any(full[a] != 1 for a in axes):
            self.refuse(f"a squeeze of axes {axes} of a tensor of shape {tuple(full)}")
        return self._reshape_any(x, [d for i, d in enumerate(full) if i not in axes])

    def _op_Unsqueeze(self, ins, attrs):
        x = self._act(ins[0], moved=True)
        n = len(self._axes(ins, attrs))
        axes = sorted(a % (x.rank + n) for a in self._axes(ins, attrs))
        if x.rank == 2 and x.flat and axes == [2, 3]:
            return _Act(x.values, 4)
        full = list(x.full(self.batch))
        for a in axes:
            full.insert(a, 1)
        return self._reshape_any(x, full)

    def _linear(self, x: _Act, weight: np.ndarray, bias: np.ndarray) -> _Act:
        if x.rank != 2:
            self.refuse("a matrix product of a 4-D tensor; flatten it first")
        if weight.shape[1] != x.shape[0]:
            self.refuse(f"weight {weight.shape} does not fit {x.shape[0]} input features")
        node = self._add(Linear, [[v] for v in x.values], self._hint(), out_features=int(weight.shape[0]))
        node.weight = np.array(weight, dtype=np.float32)
        node.bias = np.array(np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (weight.shape[0],)),
                             dtype=np.float32)
        return _Act([whole(node)], 2)

    def _op_Gemm(self, ins, attrs):
        x = self._act(ins[0], moved=True)
        b = self._const(ins[1], "B")
        c = self._const(ins[2] if len(ins) > 2 else None, "C", optional=True)
        if attrs.get("transA", 0):
            self.refuse("transA=1")
        weight = (b if attrs.get("transB", 0) else b.T) * np.float32(attrs.get("alpha", 1.0))
        bias = np.zeros(weight.shape[0], np.float32) if c is None else \
            np.asarray(c, np.float32) * np.float32(attrs.get("beta", 1.0))
        if bias.size not in (1, weight.shape[0]):
            self.refuse(f"bias C of shape {bias.shape}")
        if x.rank == 2 and not x.flat:  # a general (N, F) tensor: its features
            return self._dense(x, weight, bias)
        return self._linear(x, weight, bias)

    def _op_MatMul(self, ins, attrs):
        if isinstance(ins[1], _Act):
            return self._matmul(ins)
        x = self._act(ins[0], moved=True)
        b = self._const(ins[1], "B")
        if not x.flat and b.ndim == 2:  # a linear layer along the last axis (of each token)
            return self._dense(x, b.T, np.zeros(b.shape[1], np.float32))
        if b.ndim != 2:
            self.refuse(f"a matrix product with a {b.ndim}-D weight")
        return self._linear(x, b.T, np.zeros(b.shape[1], np.float32))

    def _op_Pad(self, ins, attrs):
        x = self._act(ins[0], padded=True, moved=True)
        if attrs.get("mode", "constant") != "constant":
            self.refuse(f"mode={attrs.get('mode')!r}; only zero (constant) padding")
        if self.opset < 11:
            pads, value = attrs.get("pads"), float(attrs.get("value", 0.0))
        else:
            pads = self._const(ins[1], "pads").tolist()
            if not any(pads):  # pads nothing (Swin pads its token map to a multiple of its window)
                return x
            value = float(self._const(ins[2], "constant_value")) if len(ins) > 2 and ins[2] is not None else 0.0
            if len(ins) > 3 and ins[3] is not None:
                axes = [a % x.rank for a in self._const(ins[3], "axes").tolist()]
                full = [0] * 2 * x.rank
                for i, a in enumerate(axes):
                    full[a], full[a + x.rank] = pads[i], pads[i + len(axes)]
                pads = full
        if x.pad and (value != 0.0 or len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5))):
            x = self._unpad(x)  # a pad of a pad that is not one more zero pad of height and width
        if (len(pads) == 2 * x.rank and min(pads) >= 0 and not x.pad
                and (value != 0.0 or x.bpos != 0 or x.rank != 4 or any(pads[i] for i in (0, 1, 4, 5)))):
            return self._pad_any(x, pads, value)  # a general tensor (Swin's token map padded to its windows)
        if value != 0.0 or x.rank != 4 or len(pads) != 8 or any(pads[i] for i in (0, 1, 4, 5)) or min(pads) < 0:
            self.refuse(f"pads {pads} value {value}; only non-negative constant padding")
        add = (pads[2], pads[3], pads[6], pads[7])
        old = x.pad or (0, 0, 0, 0)
        return _Act(x.values, 4, tuple(a + b for a, b in zip(old, add)), via=(*x.via, *self._via()))

    def _op_Resize(self, ins, attrs):
        x = self._act(ins[0])
        if x.rank != 4:
            self.refuse("resizing a 2-D tensor")
        _, h, w = x.shape
        if self.opset < 11:
            scales, sizes = self._const(ins[1], "scales"), None
            coord = "asymmetric"
        else:
            scales = self._const(ins[2], "scales", optional=True) if len(ins) > 2 else None
            sizes = self._const(ins[3], "sizes", optional=True) if len(ins) > 3 else None
            coord = attrs.get("coordinate_transformation_mode", "half_pixel")
        if attrs.get("antialias", 0) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            self.refuse("antialias or keep_aspect_ratio_policy")
        if attrs.get("axes") is not None and sorted(a % 4 for a in attrs["axes"]) != [2, 3]:
            self.refuse(f"axes {attrs['axes']}")
        if sizes is not None and sizes.size:
            size = tuple(int(s) for s in sizes.reshape(-1)[-2:])
            if sizes.size == 4 and int(sizes[1]) != x.shape[0]:
                self.refuse("resizes the channel axis")
        elif scales is not None and scales.size:
            s = [float(v) for v in scales.reshape(-1)]
            if len(s) == 4 and (s[0] != 1.0 or s[1] != 1.0):
                self.refuse(f"scales {s} resize the batch or channel axis")
            sh, sw = s[-2:]
            size = (int(np.floor(h * sh)), int(np.floor(w * sw)))
            if size[0] != h * sh or size[1] != w * sw:
                self.refuse(f"scales {s[-2:]} give a fractional output size from {h}x{w}")
        else:
            self.refuse("neither scales nor sizes")
        mode = attrs.get("mode", "nearest")
        if mode == "nearest":
            nearest = attrs.get("nearest_mode", "round_prefer_floor") if self.opset >= 11 else "floor"
            integer = size[0] % h == 0 and size[1] % w == 0
            ok = (coord == "asymmetric" and nearest == "floor") or (
                integer and coord in ("half_pixel", "pytorch_half_pixel")
                and nearest in ("round_prefer_floor", "round_prefer_ceil"))
            if not ok:
                self.refuse(f"nearest resize with coordinate_transformation_mode={coord!r} and "
                            f"nearest_mode={nearest!r}; the IR's nearest is asymmetric/floor (or half_pixel "
                            f"at an integer scale)")
            node = self._add(Resize, [[v] for v in x.values], self._hint(), size=size, mode="nearest")
        elif mode == "linear":
            if coord in ("half_pixel", "pytorch_half_pixel") and min(size) > 1:
                align = False
            elif coord == "align_corners":
                align = True
            else:
                self.refuse(f"linear resize with coordinate_transformation_mode={coord!r}; the IR's bilinear uses "
                            f"half_pixel or align_corners")
            node = self._add(Resize, [[v] for v in x.values], self._hint(), size=size, mode="bilinear",
                             align_corners=align)
        else:
            self.refuse(f"mode={mode!r}; the IR resizes with nearest or (bi)linear interpolation")
        return _Act([whole(node)])
