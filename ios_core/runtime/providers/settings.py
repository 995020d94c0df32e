"""How a provider's library is configured for a piece: the one place that says it.

Every piece is compiled fairly and explicitly, as a careful user would configure the library
for the whole graph: float32 (or the cell's precision, docs/precision.md), the piece's intra-op
thread share, one inter-op thread (the IOS
runtime does the inter-operator parallelism itself), operators in sequence, every graph
optimization on. The spin-wait policy comes from ``ios_core.measurement.threads`` (the project's thread
and spin environment policy) when it states one; otherwise each library keeps its default
(ONNX Runtime spins its intra-op pool between parallel sections).

One setting is structural, not policy: every ONNX Runtime piece has its own session and
intra-op pool, so a pool that kept spinning after its piece returned would steal a core from
the next piece (another session, or the concurrent group on the other worker).
``session.force_spinning_stop=1`` stops spinning when a run ends; spinning *within* a piece
follows the policy. Measured on squeezenet with an ASAP-level schedule (ms, under heavy load):
pools left spinning 881, spinning stopped after each run 207, no spinning 48.
"""

from __future__ import annotations

from ios_core.measurement import threads as _threads


def ort_spin_entries() -> dict[str, str]:
    """ONNX Runtime's spin settings under the project's spin policy
    (``ios_core.measurement.threads.ort_session_config``; none, i.e. ORT's default, where it is absent)."""
    policy = getattr(_threads, "ort_session_config", None)
    return dict(policy()) if callable(policy) else {}


ORT_PRECISION = {"fp32": "f32", "int8": "int8 (QDQ model, ios_core.quantize.ort_quantize)"}
OV_HINT = {"fp32": "f32", "bf16": "bf16", "int8": "f32"}  # int8: NNCF's model, what it leaves unquantized in f32


def provider_settings(provider: str, threads: int, precision: str = "fp32") -> dict:
    """The settings a piece's session gets at the cell's ``precision``, as plain values (recorded
    with the runtime's stats)."""
    if provider == "onnxruntime":
        cfg = {"intra_op_num_threads": threads, "inter_op_num_threads": 1, "execution_mode": "ORT_SEQUENTIAL",
               "graph_optimization_level": "ORT_ENABLE_ALL", "precision": ORT_PRECISION.get(precision, precision),
               "session.force_spinning_stop": "1"}
        cfg.update(ort_spin_entries())
        return cfg
    if provider == "openvino":
        # f32 explicitly (bf16 only for a bf16 cell): the CPU plugin defaults to bf16 on CPUs with
        # AVX512_BF16/AMX. No core pinning: pieces of one stage run concurrently on threads the runtime owns, and a
        # plugin that pinned its threads would put them on the same cores.
        return {"INFERENCE_PRECISION_HINT": OV_HINT[precision], "INFERENCE_NUM_THREADS": str(threads),
                "NUM_STREAMS": "1", "PERFORMANCE_HINT": "LATENCY", "ENABLE_CPU_PINNING": "NO"}
    if provider == "torch":
        return {"intra_op_threads": threads, "precision": "f32" if precision == "fp32" else precision}
    raise ValueError(f"unknown provider {provider!r}")
