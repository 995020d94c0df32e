"""The IOS dynamic program over one part of a block, on bitmasks.

Operators of a block are numbered in the block's (topological) order; a set of operators is an
``int`` bitmask. A DP *state* is the set of operators not yet scheduled; it is always closed
under predecessors (within the part). ``cost(S) = min over stages E of cost(S - E) + latency(E)``
where the stage ``E`` is executed *last* among ``S``:

- parallel stage: a set of *heads* ``H`` (at most ``max_num_groups``); the group of head ``h`` is
  ``desc(h) & S`` (``h`` and all its descendants still in ``S``), at most ``max_group_size``
  operators, run in order; groups are pairwise disjoint. ``E`` is their union (an "ending": no
  edge leaves it towards ``S - E``). The heads are exactly the sources of ``E``, so ``E`` alone
  determines the stage.
- merge stage: a set of at least two *sinks* of ``S`` (operators with no successor in ``S``)
  that are convolutions :func:`can_merge` accepts (never the block's exit operator), run as one
  merged convolution. A single operator is the one-group parallel stage.

Endings are enumerated along a chain decomposition of the part (as in the reference
implementation): two heads on one chain would overlap, so each chain contributes at most one
head, and only from its last ``max_group_size`` operators still in ``S``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence

INF = math.inf


def iter_bits(mask: int) -> list[int]:
    """Indices of the set bits of ``mask``, ascending."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def descendants(succ: Sequence[int]) -> list[int]:
    """``desc[i]``: bitmask of i and everything reachable from it (nodes numbered topologically)."""
    n = len(succ)
    desc = [0] * n
    for i in range(n - 1, -1, -1):
        m = 1 << i
        for j in iter_bits(succ[i]):
            m |= desc[j]
        desc[i] = m
    return desc


def chain_decomposition(part: int, desc: Sequence[int]) -> list[list[int]]:
    """Split the operators of ``part`` into chains of the reachability order: repeatedly take a
    longest chain of what is left (each chain listed from its first operator to its last)."""
    chains = []
    left = part
    while left:
        idx = list(iter_bits(left))
        depth: dict[int, int] = {}
        nxt: dict[int, int] = {}
        for u in reversed(idx):
            best, arg = 0, -1
            for v in iter_bits(desc[u] & left & ~(1 << u)):
                if depth[v] > best:
                    best, arg = depth[v], v
            depth[u] = best + 1
            nxt[u] = arg
        u = max(idx, key=lambda k: (depth[k], -k))
        chain = []
        while u != -1:
            chain.append(u)
            u = nxt[u]
        chains.append(chain)
        for u in chain:
            left &= ~(1 << u)
    return chains


def count_states(part: int, desc: Sequence[int]) -> int:
    """How many states the DP of ``part`` solves: its non-empty predecessor-closed subsets
    (every one is reached, since removing a single sink is always a stage). For progress bars."""
    seen = {part}
    todo = [part]
    while todo:
        state = todo.pop()
        for u in iter_bits(state):
            if desc[u] & state == 1 << u:
                rest = state ^ (1 << u)
                if rest and rest not in seen:
                    seen.add(rest)
                    todo.append(rest)
    return len(seen)


class PartSearch:
    """Minimum-cost schedule of one part. ``parallel_cost(mask, groups)`` and
    ``merge_cost(mask, members)`` return stage latencies (the caller memoizes them);
    ``mergeable(mask, members)`` says whether a sink set may merge."""

    def __init__(self, part: int, desc: Sequence[int], *, max_group_size: int, max_num_groups: int,
                 use_parallel: bool, use_merge: bool, merge_class: Sequence[object],
                 parallel_cost: Callable[[int, list[list[int]]], float],
                 merge_cost: Callable[[int, list[int]], float],
                 mergeable: Callable[[int, list[int]], bool],
                 on_state: Callable[[], None] | None = None):
        self.part = part
        self.desc = desc
        self.r = max_group_size
        self.s = max_num_groups
        self.use_parallel = use_parallel
        self.use_merge = use_merge
        self.merge_class = merge_class  # per operator: None (never merges) or a hashable class key
        self.parallel_cost = parallel_cost
        self.merge_cost = merge_cost
        self.mergeable = mergeable
        self.on_state = on_state
        self.chains = chain_decomposition(part, desc) if use_parallel else []
        self.chain_masks = [sum(1 << u for u in c) for c in self.chains]
        self.pred = [0] * len(desc)
        for u, d in enumerate(desc):
            for v in iter_bits(d & ~(1 << u)):
                self.pred[v] |= 1 << u  # all ancestors; enough to find the sources of a mask
        self.value: dict[int, float] = {0: 0.0}
        self.choice: dict[int, tuple[str, int]] = {}
        self.parallel_cache: dict[int, float] = {}
        self.transitions = 0

    @property
    def states(self) -> int:
        return len(self.value) - 1

    # ---- transitions -------------------------------------------------------------------------------
    def endings(self, state: int) -> list[int]:
        """Every parallel stage that can run last among ``state``, as its operator mask (the
        heads are the mask's sources, the groups their descendants in ``state``)."""
        desc, r, s = self.desc, self.r, self.s
        options = []
        for chain, cmask in zip(self.chains, self.chain_masks):
            end = (cmask & state).bit_count()  # the chain's operators in a state form a prefix of it
            if not end:
                continue
            cands = []
            for p in range(end - 1, max(0, end - r) - 1, -1):
                cl = desc[chain[p]] & state
                if cl.bit_count() > r:
                    break  # an earlier head's group only grows
                cands.append(cl)
            if cands:
                options.append(cands)
        if len(options) <= s:  # the group limit cannot bind
            unions = [0]
            for cands in options:
                unions += [u | cl for u in unions for cl in cands if not cl & u]
            return unions[1:]
        partial = [(0, 0)]
        for cands in options:
            partial += [(u | cl, k + 1) for u, k in partial if k < s for cl in cands if not cl & u]
        return [u for u, _ in partial[1:]]

    def groups(self, state: int, mask: int) -> list[list[int]]:
        """The groups of the parallel stage ``mask`` run last among ``state``."""
        pred, desc = self.pred, self.desc
        return [iter_bits(desc[h] & state) for h in iter_bits(mask) if not pred[h] & mask]

    def merges(self, state: int) -> list[tuple[int, list[int]]]:
        """Merge stages (two or more sink convolutions of one merge class) among ``state``."""
        desc, klass = self.desc, self.merge_class
        classes: dict[object, list[int]] = {}
        for u in iter_bits(state):
            if klass[u] is not None and desc[u] & state == 1 << u:
                classes.setdefault(klass[u], []).append(u)
        out = []
        for members in classes.values():
            k = len(members)
            if k < 2:
                continue
            for sub in range(3, 1 << k):
                if sub & (sub - 1) == 0:
                    continue
                chosen = [members[j] for j in iter_bits(sub)]
                mask = sum(1 << u for u in chosen)
                if self.mergeable(mask, chosen):
                    out.append((mask, chosen))
        return out

    def sinks(self, state: int) -> list[int]:
        desc = self.desc
        return [u for u in iter_bits(state) if desc[u] & state == 1 << u]

    # ---- the DP ------------------------------------------------------------------------------------
    def solve(self, state: int | None = None) -> float:
        state = self.part if state is None else state
        limit = sys.getrecursionlimit()
        need = 4 * state.bit_count() + 200
        if limit < need:
            sys.setrecursionlimit(need)
        try:
            return self.value[state] if state in self.value else self._solve(state)
        finally:
            if limit < need:
                sys.setrecursionlimit(limit)

    def _solve(self, state: int) -> float:
        value = self.value
        best, choice = INF, None
        if self.use_parallel:
            cache = self.parallel_cache
            masks = self.endings(state)
            self.transitions += len(masks)
            best_mask = 0
            for mask in masks:
                try:  # the common case: stage costed and sub-state solved already
                    val = cache[mask] + value[state ^ mask]
                except KeyError:
                    cost = cache.get(mask)
                    if cost is None:
                        cost = cache[mask] = self.parallel_cost(mask, self.groups(state, mask))
                    rest = state ^ mask
                    sub = value.get(rest)
                    if sub is None:
                        sub = self._solve(rest)
                    val = cost + sub
                if val < best:
                    best, best_mask = val, mask
            if best_mask:
                choice = ("parallel", best_mask)
        if self.use_merge:
            if not self.use_parallel:
                for u in self.sinks(state):
                    self.transitions += 1
                    mask = 1 << u
                    cost = self.parallel_cost(mask, [[u]])
                    val = cost + (value[state & ~mask] if state & ~mask in value else self._solve(state & ~mask))
                    if val < best:
                        best, choice = val, ("parallel", mask)
            for mask, members in self.merges(state):
                self.transitions += 1
                cost = self.merge_cost(mask, members)
                val = cost + (value[state & ~mask] if state & ~mask in value else self._solve(state & ~mask))
                if val < best:
                    best, choice = val, ("merge", mask)
        if choice is None:  # pragma: no cover - every non-empty state has a sink
            raise AssertionError("no stage can run last in a non-empty state")
        value[state] = best
        self.choice[state] = choice
        if self.on_state is not None:
            self.on_state()
        return best

    def stages(self, state: int | None = None) -> list[tuple[str, list[list[int]]]]:
        """The optimal stages of ``state`` in execution order: (kind, groups of operator indices)."""
        state = self.part if state is None else state
        out = []
        while state:
            kind, mask = self.choice[state]
            groups = self.groups(state, mask) if kind == "parallel" else [[u] for u in iter_bits(mask)]
            out.append((kind, groups))
            state &= ~mask
        out.reverse()
        return out
