"""The seeded input every framework in a sweep receives (numpy only: a worker whose kernels are not
torch's makes it without importing torch; ``ios_core.reference.random_input`` is this one)."""

from __future__ import annotations

import numpy as np

from ios_core.ir import Graph


def random_input(graph: Graph, batch_size: int = 1, seed: int | np.random.SeedSequence = 0) -> np.ndarray:
    """The seeded input every framework in a sweep receives: standard normal, float32 (``seed``: an
    integer; ``ios_core.quantize.calibration_inputs`` gives a spawned ``SeedSequence``)."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch_size, *graph.input_shape), dtype=np.float32)
