"""The ONNX importer's mappings onto the IR's general-tensor operators (issue 56: vision
transformers, ConvNeXt): a mixin of ``ios_core.frontend.onnx._Importer`` beside
:class:`~ios_core.frontend.onnx_ops.OnnxOps`, which hands a tensor that is not a feature map to
these. The IR's batch is always first. torch's ``nn.MultiheadAttention`` works sequence-first:
its Transposes and Reshapes move the batch axis, and merge it with the heads. In a file of batch
1 (or a dynamic batch, read at 1) the importer follows it: ``_Act.bpos`` is the axis of size 1
that is the batch (None: merged into another), the IR shape the other axes; each image is
computed as the file computes its one. With a fixed batch above 1 such a file is refused, and so
is an operation along the batch axis or an output whose batch is not first.

* ``Transpose`` -> ``transpose``; ``Reshape`` (other than a flatten or a channel shuffle) ->
  ``reshape``; ``LayerNormalization`` -> ``layernorm``; ``Softmax`` -> ``softmax``;
* ``MatMul`` of two activations, or an ``Einsum`` that is one (``...ik,...kj->...ij`` or
  ``...ik,...jk->...ij``) -> ``matmul``; of an activation of rank 3 or more (or a
  ``Gemm`` of a 2-D one) by a constant -> ``dense`` (a following constant ``Add`` becomes its bias:
  ``ios_core.ir.rewrite.fold_constant_bias``);
* ``Add``/``Sub``/``Mul``/``Div`` by a constant that is not one number per channel -> ``constant``
  (position embeddings);
* ``Concat`` of constants before an activation along its first axis -> ``prepend`` (a class token,
  ``Expand`` of it folded at import); ``Gather`` of one index along the first axis -> that channel
  slice (reshaped without the axis);
* ``Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5`` (in either order of the last two) -> a
  ``gelu`` activation, fused into the ``dense`` before it; any other ``Erf`` is refused;
* ``ReduceL2 -> Clip(min eps) -> [Expand] -> Div`` of the same tensor (``F.normalize``) -> ``l2norm``;
* ``Slice`` (a step too), ``Concat`` and a zero ``Pad`` along any per-sample axis (Swin's rolls, patch
  merging and window padding, MaxViT's chunks): the IR's first-axis slices and concatenations, the axis
  moved first by ``transpose`` nodes; a step is a ``reshape`` into ``(n, step)``; pad rows are a
  ``prepend`` of zeros.
"""

from __future__ import annotations

import numpy as np

from ios_core.frontend.onnx_ops import _Act
from ios_core.ir import (
    Activation,
    Constant,
    Dense,
    L2Norm,
    LayerNorm,
    MatMul,
    Pool,
    Prepend,
    Reshape,
    Softmax,
    Transpose,
    whole,
)
from ios_core.ir.fields import MAX_RANK


class TensorOps:
    """General-tensor mappings (methods of the importer: ``_act``, ``_const``, ``_add``, ``refuse``)."""

    # ---- helpers -----------------------------------------------------------------------------------------
    def _node_on(self, cls, x: _Act, **attrs) -> _Act:
        """One IR node reading ``x`` (its values concatenated), its output of the same rank and batch
        axis as ``x`` when its IR rank is ``x``'s, else a batch-first tensor."""
        node = self._add(cls, [[v] for v in x.values], self._hint(), **attrs)
        if len(node.output_shape) == len(x.shape):
            return _Act([whole(node)], x.rank, bpos=x.bpos)
        return _Act([whole(node)], len(node.output_shape) + 1)

    def _unflat(self, x: _Act) -> _Act:
        """``x`` with its IR shape equal to its ONNX per-sample dims (a flattened (C, 1, 1) becomes (C,), a
        pending zero pad made real)."""
        if x.pad:
            return self._unpad(x)
        return self._node_on(Reshape, x, shape=(x.shape[0],)) if x.flat else x

    def _unpad(self, x: _Act) -> _Act:
        """A feature map's pending zero pad (``_Act.pad``: left for a following conv or pool to absorb) made
        real where its reader cannot absorb it (an Add, a MaxPool: zeros are not its -inf): ``_pad_any``."""
        top, left, bottom, right = x.pad
        return self._pad_any(_Act(x.values, x.rank), [0, 0, top, left, 0, 0, bottom, right])

    def _ir_axis(self, axis: int, x: _Act) -> int:
        """An ONNX axis of ``x`` as an axis of its IR shape (the batch is ONNX axis ``x.bpos``)."""
        a = int(axis)
        if not -x.rank <= a < x.rank:
            self.refuse(f"axis {axis} of a tensor of rank {x.rank}")
        a %= x.rank
        if x.bpos is None:
            return a
        if a == x.bpos:
            self.refuse("an operation along the batch axis")
        return a - (a > x.bpos)

    def _moving_batch(self, what: str) -> None:
        """A model whose tensors move the batch axis is read at batch 1 (every image is computed
        alike): its batch must be 1 or dynamic."""
        if self.batch != 1:
            self.refuse(f"{what} moves the batch axis; that needs a model exported at batch 1 or with a dynamic "
                        f"batch (this one has batch {self.batch})")

    # ---- mappings called by OnnxOps -----------------------------------------------------------------------
    def _transpose(self, x: _Act, attrs) -> _Act:
        x = self._unflat(x)
        perm = [int(p) for p in attrs.get("perm", range(x.rank - 1, -1, -1))]
        if sorted(perm) != list(range(x.rank)):
            self.refuse(f"perm {perm} for a tensor of rank {x.rank}")
        if x.bpos is None:
            bpos, ir_perm = None, perm
        else:
            bpos = perm.index(x.bpos)
            ir_perm = [p - (p > x.bpos) for p in perm if p != x.bpos]
        if bpos != 0:
            self._moving_batch(f"a transpose (perm {perm})")
        if ir_perm == sorted(ir_perm):
            return _Act(x.values, x.rank, bpos=bpos)
        out = self._node_on(Transpose, x, perm=tuple(ir_perm))
        return _Act(out.values, x.rank, bpos=bpos)

    def _reshape(self, x: _Act, per: list[int]) -> _Act:
        """``x`` (batch first) reshaped to ``per`` per sample, the batch first."""
        return self._reshape_to(x, list(per), 0, len(per) + 1)

    def _reshape_to(self, x: _Act, ir_shape: list[int], bpos: int | None, rank: int) -> _Act:
        if not 1 <= len(ir_shape) <= MAX_RANK:
            self.refuse(f"a reshape to {len(ir_shape)} per-sample axes; the IR holds 1 to {MAX_RANK}")
        x = self._unflat(x)
        if list(x.shape) != list(ir_shape):
            x = _Act(self._node_on(Reshape, x, shape=tuple(ir_shape)).values, rank)
        return _Act(x.values, rank, bpos=bpos)

    def _reshape_any(self, x: _Act, full: list[int]) -> _Act:
        """``x`` reshaped to the ONNX dims ``full`` (batch included, 0s and -1 resolved). At batch 1 the
        batch may be any axis of size 1 (every image is computed alike): the one after as many
        elements as before it in ``x``, else the first, else none (merged into another axis)."""
        if x.bpos == 0 and full[0] == self.batch:
            return self._reshape(x, full[1:])
        self._moving_batch(f"a reshape to {full}")
        before = None if x.bpos is None else int(np.prod(x.full(1)[:x.bpos]))
        ones = [j for j, d in enumerate(full) if d == 1]
        bpos = next((j for j in ones if int(np.prod(full[:j])) == before), ones[0] if ones else None)
        ir_shape = full if bpos is None else full[:bpos] + full[bpos + 1:]
        return self._reshape_to(x, ir_shape, bpos, len(full))

    def _dense(self, x: _Act, weight: np.ndarray, bias: np.ndarray) -> _Act:
        x = self._unflat(x)
        if x.bpos == x.rank - 1:
            self.refuse("a matrix product along the batch axis")
        if weight.ndim != 2 or weight.shape[1] != x.shape[-1]:
            self.refuse(f"weight {weight.shape} does not fit {x.shape[-1]} input features")
        out = self._node_on(Dense, x, out_features=int(weight.shape[0]))
        node = out.values[0].node
        node.weight = np.array(weight, dtype=np.float32)
        node.bias = np.array(np.broadcast_to(np.asarray(bias, np.float32).reshape(-1), (weight.shape[0],)),
                             dtype=np.float32)
        return out

    def _matmul(self, ins) -> _Act:
        a, b = (self._unflat(self._act(v, moved=True)) for v in ins)
        if a.rank != b.rank or a.bpos != b.bpos or len(a.shape) < 2 or (a.bpos or 0) >= a.rank - 2:
            self.refuse(f"a matrix product of activations of shapes {a.full()} and {b.full()}; the IR multiplies "
                        "two of the same rank, the batch among their leading axes")
        node = self._add(MatMul, [[self._single(a)], [self._single(b)]], self._hint())
        return _Act([whole(node)], a.rank, bpos=a.bpos)

    def _constant(self, x: _Act, const: np.ndarray, op: str, first: bool) -> _Act:
        """``x`` (op) a constant broadcast over it: a ``constant`` node."""
        x = self._unflat(x)
        c = np.asarray(const, np.float64)
        if c.ndim > x.rank:
            self.refuse(f"a constant of shape {c.shape} for a tensor of rank {x.rank}")
        if x.bpos is not None and x.bpos >= x.rank - c.ndim:  # it reaches the batch axis: of size 1 there
            axis = x.bpos - (x.rank - c.ndim)
            if c.shape[axis] != 1:
                self.refuse(f"a constant of shape {c.shape} along the batch axis")
            c = np.squeeze(c, axis=axis)
        if c.ndim == 0:
            c = c.reshape(1)
        if op == "Sub":
            if first:
                self.refuse("subtracts an activation from a constant")
            op, c = "Add", -c
        elif op == "Div":
            if first:
                self.refuse("divides a constant by an activation")
            op, c = "Mul", 1.0 / c
        out = self._node_on(Constant, x, op_type="mul" if op == "Mul" else "add", const_shape=tuple(c.shape))
        out.values[0].node.weight = np.ascontiguousarray(c, dtype=np.float32)
        return out

    def _prepend(self, ins, attrs) -> _Act:
        """``Concat`` of constants before one activation, along its first per-sample axis."""
        items = [v for v in ins if v is not None]
        acts = [i for i, v in enumerate(items) if not isinstance(v, np.ndarray)]
        if len(acts) != 1 or acts[0] == 0:
            self.refuse("concatenates constants other than before one activation (a class token)")
        x = self._unflat(self._act(items[acts[0]], moved=True))
        if x.bpos != 0:
            self.refuse("concatenates constants to a tensor whose batch axis is not first")
        if acts[0] != len(items) - 1 or self._ir_axis(int(attrs.get("axis", 1)), x) != 0:
            self.refuse("concatenates constants other than before an activation along its first axis")
        rows = []
        for c in items[:-1]:
            c = np.asarray(c, np.float32)
            if c.ndim != x.rank or c.shape[2:] != x.shape[1:] or np.any(c != c[:1]):
                self.refuse(f"concatenates a constant of shape {c.shape} (not rows of the same features for every "
                            f"image) to an activation of shape {x.dims()}")
            rows.append(c[0])
        weight = np.concatenate(rows, axis=0)
        out = self._node_on(Prepend, x, rows=int(weight.shape[0]))
        out.values[0].node.weight = np.ascontiguousarray(weight)
        return out

    def _slice_any(self, x: _Act, starts, ends, axes, steps) -> _Act:
        """``Slice`` of a general tensor along any per-sample axes (step 1): a slice of the first axis
        is the IR's slice of a value; of another axis, that axis moved first by a ``transpose``,
        sliced, and moved back (a Roll's halves, a window's crop, a chunk of the last axis)."""
        x = self._unflat(x)
        full = x.full(self.batch)
        for start, stop, axis, step in zip(starts, ends, axes, steps):
            axis, step = int(axis) % x.rank, int(step)
            size = full[axis]
            lo = max(0, min(size, start + size if start < 0 else start))
            hi = max(0, min(size, stop + size if stop < 0 else stop))
            if step == 1 and lo == 0 and hi >= size:
                continue  # the whole axis
            if axis == x.bpos:
                if self.input_batch is None and step == 1 and lo == 0:
                    continue  # a dynamic batch read whole
                self.refuse("a slice along the batch axis")
            if step < 1:
                self.refuse(f"a slice with step {step} (along axis {axis})")
            x = self._take(x, self._ir_axis(axis, x), lo, hi, step)
        return x

    def _take(self, x: _Act, axis: int, lo: int, hi: int, step: int = 1) -> _Act:
        """Elements ``lo:hi:step`` of ``x`` along its IR axis ``axis``. A step above 1 (Swin's patch
        merging, ``x[:, 0::2, 1::2]``): the axis (when ``step`` divides it) or ``lo:lo + n * step`` (when
        that fits) split by a ``reshape`` into ``(m, step)``, the offset ``lo % step`` (or the first) of
        each taken, then the ``n`` rows from ``lo // step`` (or all), the axis merged back."""
        if hi <= lo:
            self.refuse("an empty slice")
        if step > 1 and hi - lo <= step:  # one element taken: no step to take
            step, hi = 1, lo + 1
        if step > 1:
            n, shape = -(-(hi - lo) // step), list(x.shape)
            size = shape[axis]
            if size % step == 0:  # the whole axis split into (size / step, step): offset lo % step of each
                q, r = divmod(lo, step)
            elif lo + n * step <= size:  # lo:lo + n * step split into (n, step): the first of each
                x, size, q, r = self._take(x, axis, lo, lo + n * step), n * step, 0, 0
            else:
                self.refuse(f"a slice {lo}:{hi}:{step} of an axis of {size} (the IR takes a step where the axis, "
                            "or the slice with its last step, divides by it)")
            if len(shape) + 1 > MAX_RANK:
                self.refuse(f"a slice with step {step} of a tensor of {len(shape)} axes (the IR holds {MAX_RANK})")
            wide = x.bpos if x.bpos is None or x.bpos <= axis else x.bpos + 1  # the batch's ONNX axis
            split = self._reshape_to(x, shape[:axis] + [size // step, step] + shape[axis + 1:], wide, x.rank + 1)
            part = self._take(self._take(split, axis + 1, r, r + 1), axis, q, q + n)
            return self._reshape_to(part, shape[:axis] + [n] + shape[axis + 1:], x.bpos, x.rank)
        if axis == 0:
            return _Act(self._slice(x.values, lo, hi), x.rank, bpos=x.bpos)
        front, back = _to_front(axis, len(x.shape))
        moved = self._node_on(Transpose, x, perm=front)
        part = _Act(self._slice(moved.values, lo, hi), x.rank, bpos=x.bpos)
        return self._node_on(Transpose, part, perm=back)

    def _concat_any(self, acts: list[_Act], axis: int) -> _Act:
        """``Concat`` of general tensors along any per-sample axis: along the first, the IR's
        concatenation of values; along another, each moved first by a ``transpose``, concatenated,
        and moved back (a Roll's halves joined)."""
        acts = [self._unflat(a) for a in acts]
        x = acts[0]
        if any(a.rank != x.rank or a.bpos != x.bpos for a in acts):
            self.refuse("concatenates tensors of different ranks or batch axes")
        ax = self._ir_axis(axis, x)
        rest = {a.shape[:ax] + a.shape[ax + 1:] for a in acts}
        if len(rest) != 1:
            self.refuse(f"concatenates tensors of shapes {[a.dims() for a in acts]} along axis {axis}")
        if ax == 0:
            return _Act([v for a in acts for v in a.values], x.rank, bpos=x.bpos)
        front, back = _to_front(ax, len(x.shape))
        moved = [v for a in acts for v in self._node_on(Transpose, a, perm=front).values]
        return self._node_on(Transpose, _Act(moved, x.rank, bpos=x.bpos), perm=back)

    def _reduce_any(self, x: _Act, axes, keepdims: bool, pool_type: str) -> _Act:
        """``ReduceMean``/``ReduceMax`` over any per-sample axes (timm's pooling of an (N, H, W, C) token
        map, a mean over tokens): the kept axes first and the reduced ones last (a ``transpose``), reshaped
        to a (kept, reduced, 1) map, its global pool, reshaped to the kept dims (ones where the reduced
        axes were, with ``keepdims``); one kept axis without keepdims is a classifier's (N, C)."""
        x = self._unflat(x)
        if any(not -x.rank <= int(a) < x.rank for a in axes):
            self.refuse(f"a reduction over axes {list(axes)} of a tensor of rank {x.rank}")
        red = sorted({int(a) % x.rank for a in axes})
        if x.bpos in red:
            self.refuse("a reduction over the batch axis")
        full, bpos = list(x.full(self.batch)), x.bpos
        ir_red = [self._ir_axis(a, x) for a in red]
        ir_keep = [a for a in range(len(x.shape)) if a not in ir_red]
        kept, reduced = (int(np.prod([x.shape[a] for a in axs])) for axs in (ir_keep, ir_red))
        if ir_keep + ir_red != sorted(ir_keep + ir_red):
            x = self._node_on(Transpose, x, perm=tuple(ir_keep + ir_red))
        x = self._reshape_to(x, [kept, reduced, 1], 0, 4)
        pooled = _Act([whole(self._add(Pool, [[v] for v in x.values], self._hint(), pool_type=pool_type))], 4)
        if keepdims:
            out = [1 if i in red else d for i, d in enumerate(full)]
        else:
            out = [d for i, d in enumerate(full) if i not in red]
            bpos = None if bpos is None else bpos - sum(r < bpos for r in red)
        if bpos == 0 and len(out) == 2:
            return _Act(pooled.values, 2)  # (N, C), stored (C, 1, 1): a classifier's features
        return self._reshape_to(pooled, out if bpos is None else out[:bpos] + out[bpos + 1:], bpos, len(out))

    def _pad_any(self, x: _Act, pads: list[int], value: float = 0.0) -> _Act:
        """A constant ``Pad`` of a general tensor (ONNX ``pads``: the begins, then the ends, per axis): along
        each axis, rows of ``value`` put before by a ``prepend`` of them, and after as a concatenation with
        the rows of a ``prepend`` (before one row of the tensor) sliced off, the axis moved first by a
        ``transpose`` where it is not."""
        x = self._unflat(x)
        for axis in range(x.rank):
            before, after = int(pads[axis]), int(pads[axis + x.rank])
            if not before and not after:
                continue
            if axis == x.bpos:
                self.refuse("a Pad of the batch axis")
            ax = self._ir_axis(axis, x)
            front, back = _to_front(ax, len(x.shape))
            moved = self._node_on(Transpose, x, perm=front) if ax else x
            for rows, at_end in ((before, False), (after, True)):
                if not rows:
                    continue
                base = _Act(self._slice(moved.values, 0, 1), x.rank, bpos=x.bpos) if at_end else moved
                zeros = self._node_on(Prepend, base, rows=rows)
                zeros.values[0].node.weight = np.full((rows, *moved.shape[1:]), value, np.float32)
                values = moved.values + self._slice(zeros.values, 0, rows) if at_end else zeros.values
                moved = _Act(values, x.rank, bpos=x.bpos)
            x = self._node_on(Transpose, moved, perm=back) if ax else moved
        return x

    # ---- operators -----------------------------------------------------------------------------------------
    def _op_LayerNormalization(self, ins, attrs):
        x = self._unflat(self._act(ins[0], moved=True))
        axis = int(attrs.get("axis", -1)) % x.rank
        if x.bpos is not None and x.bpos >= axis:  # None: merged into another axis, the file read at batch 1
            self.refuse("a layer normalization over the batch axis")
        scale = self._const(ins[1], "scale")
        bias = self._const(ins[2] if len(ins) > 2 else None, "B", optional=True)
        out = self._node_on(LayerNorm, x, axes=x.rank - axis, eps=float(attrs.get("epsilon", 1e-5)))
        node = out.values[0].node
        try:
            node.weight = np.array(np.broadcast_to(np.asarray(scale, np.float32), node.weight_shape))
            node.bias = np.zeros(node.weight_shape, np.float32) if bias is None else \
                np.array(np.broadcast_to(np.asarray(bias, np.float32), node.weight_shape))
        except ValueError:
            self.refuse(f"scale {scale.shape} or bias for normalized axes {node.weight_shape}")
        return [out, None, None]

    def _op_InstanceNormalization(self, ins, attrs):
        """Each channel normalized over its other axes (``GroupNorm`` as exporters write it: Reshape to
        (N, groups, -1), InstanceNormalization with scale 1 and bias 0, Reshape back, Mul, Add; timm's
        PoolFormer, MobileViT V2): a ``layernorm`` over the last rank - 2 axes (weight 1, bias 0), then the
        per-channel scale and bias as an ``affine`` (none when they are 1 and 0)."""
        x = self._unflat(self._act(ins[0], moved=True))
        if x.bpos != 0 or x.rank < 3:
            self.refuse(f"an instance normalization of a tensor of shape {x.full()} (the batch first, then the "
                        "channels and at least one axis)")
        scale, bias = (np.asarray(self._const(v, w), np.float32).reshape(-1) for v, w in zip(ins[1:3], "sB"))
        if scale.size != x.shape[0] or bias.size != x.shape[0]:
            self.refuse(f"scale {scale.shape} or bias {bias.shape} for {x.shape[0]} channels")
        out = self._node_on(LayerNorm, x, axes=x.rank - 2, eps=float(attrs.get("epsilon", 1e-5)))
        node = out.values[0].node
        node.weight, node.bias = np.ones(node.weight_shape, np.float32), np.zeros(node.weight_shape, np.float32)
        if np.all(scale == 1) and np.all(bias == 0):
            return out
        return self._affine(out, scale, bias)

    def _op_Softmax(self, ins, attrs):
        x = self._unflat(self._act(ins[0], moved=True))
        axis = int(attrs.get("axis", -1 if self.opset >= 13 else 1))
        if self.opset < 13 and axis % x.rank != x.rank - 1:
            self.refuse(f"Softmax before opset 13 with axis {axis} (it flattens the axes from it on)")
        return self._node_on(Softmax, x, axis=self._ir_axis(axis, x))

    def _op_Gather(self, ins, attrs):
        x = self._unflat(self._act(ins[0], moved=True))
        index = np.asarray(self._const(ins[1], "indices"))
        axis = int(attrs.get("axis", 0)) % x.rank
        if index.size != 1 or self._ir_axis(axis, x) != 0:
            self.refuse("a Gather other than of one index along the first per-sample axis (a class token)")
        i = int(index.reshape(-1)[0]) % x.shape[0]
        part = _Act(self._slice(x.values, i, i + 1), x.rank, bpos=x.bpos)
        if index.ndim == 1:
            return part
        rest = list(x.shape[1:])
        if not rest:
            self.refuse("a Gather that leaves no per-sample axis")
        bpos = None if x.bpos is None else x.bpos - (x.bpos > axis)
        return self._reshape_to(part, rest, bpos, x.rank - 1)

    def _op_Einsum(self, ins, attrs):
        """An Einsum that is a batched matrix product: ``...ik,...kj->...ij``, or with the second
        operand transposed, ``...ik,...jk->...ij`` (MaxViT's attention)."""
        eq = str(attrs.get("equation", "")).replace(" ", "")
        lhs, _, out = eq.partition("->")
        parts = lhs.split(",")
        if len(ins) != 2 or len(parts) != 2 or "." in eq or not out:
            self.refuse(f"Einsum {eq!r}: only a batched matrix product of two operands")
        a, b = parts
        lead, (i, k), j = a[:-2], a[-2:], out[-1:]
        plain = b == lead + k + j
        if not (len(a) == len(b) == len(out) and out == lead + i + j and len(set(a + j)) == len(a) + 1
                and (plain or b == lead + j + k)):
            self.refuse(f"Einsum {eq!r}: only a batched matrix product of two operands")
        x, y = (self._act(v, moved=True) for v in ins)
        if not plain:
            perm = list(range(y.rank))
            perm[-2], perm[-1] = perm[-1], perm[-2]
            y = self._transpose(y, {"perm": perm})
        return self._matmul([x, y])

    def _op_ReduceL2(self, ins, attrs):
        """``F.normalize`` as exporters write it, ``x / Expand(Clip(ReduceL2(x, keepdims), min=eps))``
        (the Expand optional): one ``l2norm`` node (the Clip, Expand and Div are skipped); any other
        ReduceL2 is refused."""
        found = self._l2norm_pattern(attrs)
        if found is None:
            self.refuse("ReduceL2 outside the pattern x / max(ReduceL2(x, one axis, keepdims=1), eps) (F.normalize: "
                        "ReduceL2, Clip, Expand, Div)")
        axis, eps, last, skipped = found
        x = self._unflat(self._act(ins[0], moved=True))
        out = self._node_on(L2Norm, x, axis=self._ir_axis(axis, x), eps=eps)
        self._also(out.values[0].node, skipped)
        self.values[last] = out
        self.skip.update(skipped)
        self._check_shape(last, out)
        return _Consumed()

    def _l2norm_pattern(self, attrs):
        """(axis, eps, the pattern's output, the node indices after the ReduceL2) when the ReduceL2 being
        converted is ``F.normalize``'s; else None."""
        node = self.node
        axes = attrs.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            got = self.values.get(node.input[1])
            axes = None if not isinstance(got, np.ndarray) else got.reshape(-1).tolist()
        if axes is None or len(axes) != 1 or int(attrs.get("keepdims", 1)) != 1:
            return None
        clip = self._sole_consumer(node.output[0], "Clip")
        if clip is None:
            return None
        if "min" in _attr_names(clip[1]):  # before opset 11: attributes
            import onnx.helper as oh

            got = {a.name: oh.get_attribute_value(a) for a in clip[1].attribute}
            eps, top = got.get("min"), got.get("max")
        else:
            ins = list(clip[1].input) + ["", ""]
            eps = self._scalar(ins[1]) if ins[1] else None
            top = self._scalar(ins[2]) if ins[2] else None
        if eps is None or not 0 < eps < 1 or (top is not None and top != np.inf):
            return None
        skipped, last = {clip[0]}, clip[1].output[0]
        expand = self._sole_consumer(last, "Expand")
        if expand is not None:
            skipped.add(expand[0])
            last = expand[1].output[0]
        div = self._sole_consumer(last, "Div")
        if div is None or list(div[1].input) != [node.input[0], last]:
            return None
        skipped.add(div[0])
        return int(axes[0]), float(eps), div[1].output[0], skipped

    def _op_Erf(self, ins, attrs):
        """The erf GELU, ``x * (1 + erf(x / sqrt(2))) / 2``, as exporters write it: one ``gelu`` activation
        (``_gelu_from``)."""
        found = self._gelu_pattern()
        if found is None:
            self.refuse("Erf outside the GELU pattern x * (1 + erf(x / sqrt(2))) / 2 (Div, Erf, Add, Mul, Mul)")
        x_name, last, skipped, dropped = found
        return self._gelu_from(x_name, [self.node.input[0], *dropped], last, skipped, "gelu")

    def _gelu_from(self, x_name: str, before: list[str], last: str, skipped: set[int], act_type: str) -> _Act:
        """A GELU pattern found around the Erf or Tanh being converted: one activation of ``x_name`` for
        the pattern's output ``last``. The IR nodes of the tensors in ``before`` (converted already, read
        by the pattern alone) are removed, so that the activation reads ``x`` alone and is fused into
        the ``dense`` before it; the nodes in ``skipped`` (after it) are not converted."""
        for name in before:
            got = self.values.pop(name, None)
            if isinstance(got, _Act) and len(got.values) == 1 and got.values[0].node in self.ops:
                self.ops.remove(got.values[0].node)
        out = self._node_on(Activation, self._unflat(self._act(self.values[x_name], moved=True)), act_type=act_type)
        # the activation computes the whole pattern: its ONNX nodes before the Erf or Tanh and after it
        earlier = {p[0] for p in (self._producer(n) for n in before) if p is not None}
        self._also(out.values[0].node, skipped | earlier)
        self.values[last] = out
        self.skip.update(skipped)
        self._check_shape(last, out)
        return out

    def _gelu_pattern(self):
        """(x, the pattern's output, the node indices after the Erf, the tensors before it that the pattern
        alone reads) when the Erf being converted is the erf GELU's; else None."""
        node = self.node
        div = self._producer(node.input[0])
        if div is None or div[1].op_type not in ("Div", "Mul") or len(div[1].input) != 2:
            return None
        x_name, k = div[1].input
        want = np.sqrt(2.0) if div[1].op_type == "Div" else np.sqrt(0.5)
        if not self._is_scalar(k, want) or self._sole_consumer(node.input[0], "Erf") is None:
            return None
        tail = self._gelu_tail(x_name, node.output[0])
        return None if tail is None else (x_name, *tail)

    def _gelu_tail(self, x_name: str, name: str):
        """(the output, the node indices, the tensors before read by them alone) of ``x * (1 + t) / 2``
        after ``t`` (tensor ``name``, an Erf's or a Tanh's): ``Add 1 -> Mul x -> Mul 0.5``, or
        ``(x * 0.5) * (1 + t)`` (``x * 0.5`` converted before); else None."""
        add = self._sole_consumer(name, "Add")
        if add is None or not self._is_scalar(_other(add[1], name), 1.0):
            return None
        mul = self._sole_consumer(add[1].output[0], "Mul")
        if mul is None:
            return None
        other = _other(mul[1], add[1].output[0])
        if other == x_name:  # (x * (1 + t)) * 0.5
            half = self._sole_consumer(mul[1].output[0], "Mul")
            if half is None or not self._is_scalar(_other(half[1], mul[1].output[0]), 0.5):
                return None
            return half[1].output[0], {add[0], mul[0], half[0]}, []
        pre = self._producer(other)  # (x * 0.5) * (1 + t)
        if pre is not None and pre[1].op_type == "Mul" and x_name in pre[1].input and \
                self._is_scalar(_other(pre[1], x_name), 0.5):
            alone = len(self._graph_maps()[1].get(other, [])) == 1
            return mul[1].output[0], {add[0], mul[0]}, [other] if alone else []
        return None

    def _gelu_tanh(self) -> _Act | None:
        """The tanh GELU, ``x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) / 2``, as the TorchScript
        exporter writes it (``Mul(x, x)``, ``Mul`` by x, ``Mul 0.044715``, ``Add x``, ``Mul sqrt(2 / pi)``,
        ``Tanh``, then the erf GELU's tail; operands in either order): one ``gelu_tanh`` activation
        (``_gelu_from``). None when the Tanh being converted is not one (a plain ``tanh``)."""
        found = self._gelu_tanh_pattern()
        if found is None:
            return None
        x_name, before, last, skipped, dropped = found
        return self._gelu_from(x_name, before + dropped, last, skipped, "gelu_tanh")

    def _gelu_tanh_pattern(self):
        """(x, the tensors before the Tanh, the pattern's output, the node indices after the Tanh) when the
        Tanh being converted is the tanh GELU's; else None."""
        node = self.node
        inner = node.input[0]
        s = self._times(inner, np.sqrt(2.0 / np.pi))
        add = None if s is None else self._producer(s)
        if add is None or add[1].op_type != "Add" or len(add[1].input) != 2:
            return None
        for x_name, k in (tuple(add[1].input), tuple(add[1].input)[::-1]):
            cube = self._times(k, 0.044715)
            made = None if cube is None else self._producer(cube)
            if made is None or made[1].op_type != "Mul" or x_name not in made[1].input:
                continue
            sq = _other(made[1], x_name)
            sq_made = self._producer(sq)
            if sq_made is None or sq_made[1].op_type != "Mul" or list(sq_made[1].input) != [x_name, x_name]:
                continue
            before = [sq, cube, k, s, inner]
            if any(len(self._graph_maps()[1].get(t, [])) != 1 for t in before):
                return None  # an intermediate read elsewhere too
            tail = self._gelu_tail(x_name, node.output[0])
            return None if tail is None else (x_name, before, *tail)
        return None

    def _times(self, name: str, value: float) -> str | None:
        """The other input when tensor ``name`` is a ``Mul`` by the constant ``value``; else None."""
        made = self._producer(name)
        if made is None or made[1].op_type != "Mul" or len(made[1].input) != 2:
            return None
        a, b = made[1].input
        if self._is_scalar(b, value):
            return a
        return b if self._is_scalar(a, value) else None

    # ---- the ONNX graph around the node being converted ------------------------------------------------------
    def _graph_maps(self):
        if getattr(self, "_producers", None) is None:
            self._producers, self._consumers = {}, {}
            for i, n in enumerate(self.g.node):
                for o in n.output:
                    self._producers[o] = (i, n)
                for t in n.input:
                    self._consumers.setdefault(t, []).append((i, n))
            for o in self.g.output:
                self._consumers.setdefault(o.name, []).append((len(self.g.node), None))
        return self._producers, self._consumers

    def _producer(self, name: str):
        return self._graph_maps()[0].get(name)

    def _sole_consumer(self, name: str, op_type: str):
        users = self._graph_maps()[1].get(name, [])
        if len(users) != 1 or users[0][1] is None or users[0][1].op_type != op_type:
            return None
        return users[0]

    def _scalar(self, name: str) -> float | None:
        """The one number of constant tensor ``name`` (an initializer, a folded value or a ``Constant``
        node's), or None."""
        arr = self.values.get(name)
        if not isinstance(arr, np.ndarray):
            made = self._producer(name)
            if made is None or made[1].op_type != "Constant":
                return None
            import onnx.numpy_helper as onh

            attr = next((a for a in made[1].attribute if a.name == "value"), None)
            if attr is None:
                return None
            arr = onh.to_array(attr.t)
        return float(arr.reshape(-1)[0]) if arr.size == 1 else None

    def _is_scalar(self, name: str, value: float) -> bool:
        """Whether tensor ``name`` is a constant of one element equal to ``value`` (to float32 precision)."""
        got = self._scalar(name)
        return got is not None and abs(got - value) <= 1e-6 * max(1.0, abs(value))


class _Consumed:
    """The value of an ONNX tensor read only inside a pattern mapped as a whole (a ReduceL2's, whose
    Div gets the IR node): nothing else may read it (the pattern checks its sole consumer)."""


def _attr_names(node) -> set[str]:
    return {a.name for a in node.attribute}


def _to_front(axis: int, rank: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The permutation that moves ``axis`` first (the others in order), and its inverse."""
    front = (axis, *(a for a in range(rank) if a != axis))
    return front, tuple(front.index(a) for a in range(rank))


def _other(node, name: str) -> str:
    """The other input of a two-input node."""
    a, b = node.input[0], node.input[1]
    return b if a == name else a
