"""An analytical, deterministic cost model: no device, for tests and for scheduling offline.

The device is modelled as ``units`` identical compute units (SMs, cores) with a shared memory
bandwidth. An operator of ``f`` FLOPs that moves ``m`` bytes and produces ``e`` output elements
fills ``u = clamp(ceil(e / elements_per_unit), 1, units)`` units; alone it takes

    t_op = launch_ms + max(f / (u * unit_gflops), m / bandwidth)

A stage costs ``stage_ms`` (its synchronization) plus:

- parallel stage, groups g (each a chain of operators run in order):
  ``max( max_g sum(t_op in g),                       # the longest group
         launch_ms * #ops + sum(busy(op) * u_op) / units )  # launches are issued by one host
                                                             # thread; the work has to share units
  + group_ms * (#groups - 1)``                        # per extra concurrent group
  where ``busy(op) = t_op - launch_ms``. Small operators that leave units idle gain from
  running side by side; large ones that already fill the device only pay ``group_ms``.
- merge stage: one convolution with the concatenated output channels and the largest kernel
  (zero-padded taps cost real FLOPs), launched once.

So parallel and merge stages are better for some operator sets and worse for others, as on
real hardware. The constants are loosely GPU-like (batch 1 latencies in the ~0.01-1 ms range);
only their ratios matter for scheduling.
"""

from __future__ import annotations

import math

import numpy as np

from ios_core.ir import Conv, Node, leaf_nodes


class SyntheticCostModel:
    def __init__(self, units: int = 80, unit_gflops: float = 100.0, bandwidth_gbs: float = 900.0,
                 elements_per_unit: int = 4096, launch_ms: float = 0.005, stage_ms: float = 0.004,
                 group_ms: float = 0.002):
        self.units = int(units)
        self.unit_gflops = float(unit_gflops)
        self.bandwidth_gbs = float(bandwidth_gbs)
        self.elements_per_unit = int(elements_per_unit)
        self.launch_ms = float(launch_ms)
        self.stage_ms = float(stage_ms)
        self.group_ms = float(group_ms)
        self.calls = 0  # how many times stage_latency was asked (the optimizer should ask once per stage)
        self._ops: dict[int, dict[Node, tuple[float, float]]] = {}  # batch -> op -> (t_op, busy * units)

    def __repr__(self) -> str:
        return (f"SyntheticCostModel(units={self.units}, unit_gflops={self.unit_gflops}, "
                f"bandwidth_gbs={self.bandwidth_gbs}, launch_ms={self.launch_ms}, stage_ms={self.stage_ms})")

    # ---- one operator --------------------------------------------------------------------------
    def _op_time(self, flops: float, nbytes: float, out_elems: int, batch_size: int) -> tuple[float, int]:
        """(busy ms without launch, units used)."""
        u = min(self.units, max(1, math.ceil(out_elems * batch_size / self.elements_per_unit)))
        compute = flops * batch_size / (u * self.unit_gflops * 1e6)  # GFLOP/s -> FLOP per ms: 1e6
        memory = nbytes * batch_size / (self.bandwidth_gbs * 1e6)
        return max(compute, memory), u

    def _leaf(self, op: Node, batch_size: int) -> tuple[float, float]:
        """(t_op including launch, busy time * units used) of a non-Sequential operator."""
        out_elems = int(np.prod(op.output_shape))
        in_elems = 0
        for term in op.inputs:  # each term's values: a slice of the first axis, the other axes whole
            in_elems += term[0].length * len(term) * math.prod(term[0].node.output_shape[1:])
        macs = op.macs()
        flops = 2.0 * macs if macs else float(out_elems + in_elems)
        # weights are read once per batch; spread them over the images
        nbytes = 4.0 * (in_elems + out_elems + op.params() / batch_size)
        busy, u = self._op_time(flops, nbytes, out_elems, batch_size)
        return self.launch_ms + busy, busy * u

    def _node(self, node: Node, batch_size: int) -> tuple[float, float, int]:
        """(time, unit time, operator count) of a schedulable node (a Sequential runs its ops in order)."""
        table = self._ops.setdefault(batch_size, {})
        hit = table.get(node)
        if hit is None:
            t = ut = 0.0
            ops = leaf_nodes(node)
            for op in ops:
                a, b = self._leaf(op, batch_size)
                t += a
                ut += b
            hit = table[node] = (t, ut, len(ops))
        return hit

    def _merged(self, convs: list[Conv], batch_size: int) -> tuple[float, int]:
        cin = convs[0].input_shape[0]
        _, ho, wo = convs[0].output_shape
        cout = sum(c.out_channels for c in convs)
        kh = max(c.kernel[0] for c in convs)
        kw = max(c.kernel[1] for c in convs)
        macs = cout * ho * wo * cin * kh * kw
        in_elems = int(np.prod(convs[0].input_shape))
        out_elems = cout * ho * wo
        nbytes = 4.0 * (in_elems + out_elems + (cout * cin * kh * kw + cout) / batch_size)
        return self._op_time(2.0 * macs, nbytes, out_elems, batch_size)

    # ---- stages ------------------------------------------------------------------------------------
    def stage_latency(self, stage, batch_size: int) -> float:
        self.calls += 1
        if stage.kind == "merge" and len(stage.groups) > 1:
            convs = [n for g in stage.groups for n in g]
            busy, _ = self._merged(convs, batch_size)
            return self.stage_ms + self.launch_ms + busy
        longest = unit_time = 0.0
        n_ops = 0
        for group in stage.groups:
            t = 0.0
            for node in group:
                a, b, k = self._node(node, batch_size)
                t += a
                unit_time += b
                n_ops += k
            if t > longest:
                longest = t
        shared = self.launch_ms * n_ops + unit_time / self.units
        return self.stage_ms + max(longest, shared) + self.group_ms * (len(stage.groups) - 1)
