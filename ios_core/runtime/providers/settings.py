"""How a provider's library is configured for a piece: the one place that says it.

Every piece is compiled fairly and explicitly, as a careful user would configure the library
for the whole graph: float32, the piece's intra-op thread share, one inter-op thread (the IOS
runtime does the inter-operator parallelism itself), operators in sequence, every graph
optimization on. The spin-wait policy comes from ``ios_core.threads`` (the project's thread
and spin environment policy) when it states one; otherwise each library keeps its default
(ONNX Runtime spins its intra-op pool between parallel sections).
"""

from __future__ import annotations

from ... import threads as _threads


def spin_wait() -> bool | None:
    """Whether libraries' worker threads may spin-wait (True/False), or None: the library's
    default. Read from ``ios_core.threads.spin_wait()`` when the thread policy defines it."""
    policy = getattr(_threads, "spin_wait", None)
    return policy() if callable(policy) else None


def provider_settings(provider: str, threads: int) -> dict:
    """The settings a piece's session gets, as plain values (recorded with the runtime's stats)."""
    spin = spin_wait()
    if provider == "onnxruntime":
        cfg = {"intra_op_num_threads": threads, "inter_op_num_threads": 1, "execution_mode": "ORT_SEQUENTIAL",
               "graph_optimization_level": "ORT_ENABLE_ALL", "precision": "f32"}
        if spin is not None:
            cfg["session.intra_op.allow_spinning"] = "1" if spin else "0"
            cfg["session.inter_op.allow_spinning"] = "1" if spin else "0"
        return cfg
    if provider == "openvino":
        # f32 explicitly: the CPU plugin defaults to bf16 on CPUs with AVX512_BF16/AMX. No core
        # pinning: pieces of one stage run concurrently on threads the runtime owns, and a
        # plugin that pinned its threads would put them on the same cores.
        return {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": str(threads), "NUM_STREAMS": "1",
                "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": "NO"}
    if provider == "torch":
        return {"intra_op_threads": threads, "precision": "f32"}
    raise ValueError(f"unknown provider {provider!r}")
