"""The PyTorch adapter's int8 (``adapters.pytorch``): PyTorch's post-training static quantization in FX
graph mode of the fp32 module the adapter emits, calibrated and kept in the build cache, and what the
record says of it. Moved from ``adapters/pytorch.py`` as it was (that file had grown past 800 lines)."""

from __future__ import annotations

import time

import torch

from .build_cache import open_cache


def quantized_module(module, graph, batch_size: int, samples: int | None = None, cache_dir=None,
                     engine: str | None = None, data=None):
    """``module`` (:func:`to_module`'s fp32 GraphModule) quantized by PyTorch's post-training static
    quantization in FX graph mode (``ios_core.quantize.torch_quantize``: ``prepare_fx``/``convert_fx``
    with the default qconfig mapping of ``engine``, PyTorch's quantized engine: ``x86`` unless given,
    the one PyTorch recommends on x86; ``onednn`` or ``fbgemm`` by the build option
    ``quantized_engine``), calibrated on ``samples`` seeded inputs of the
    harness's generator, the same as every other int8 model's (``ios_core.quantize.calibration_inputs``),
    or on the samples of the ``--calibration-data`` folder ``data`` (``ios_core.quantize.calibration_feeds``);
    returns (converted GraphModule, calibration as the record keeps it).

    The build cache (``torch-int8``) keeps what the calibration found: the observers' state
    (``torch.save`` of plain float tensors, read back with ``weights_only=True``), under a key of the
    traced module's code, its weights, the calibration and the backend. A later round prepares the
    same module, loads that state and converts it, without the calibration pass (the costly part: the
    smoke run's squeezenet at batch 1 built in 7.4 s cold, 1.9 s warm): the same quantized module, bit
    for bit.
    The converted module itself is not stored: its pickle (``torch.save`` of the module) could only
    be read back with ``weights_only=False``, which runs code from the cache folder, and TorchScript
    (``torch.jit``) would run another program than the one built here."""
    import torch

    from ios_core.quantize import (
        CALIBRATION_SAMPLES,
        TORCH_BACKEND,
        TORCH_FORMAT,
        TORCH_METHOD,
        build_key,
        calibration_feeds,
        is_transformer,
        torch_qconfig_settings,
        torch_quantize,
    )

    samples = int(samples or CALIBRATION_SAMPLES)
    engine = engine or TORCH_BACKEND
    t0 = time.perf_counter()
    feeds, note, source = calibration_feeds(graph, batch_size, samples, data)  # the seeded inputs or the folder's
    weights_only = is_transformer(graph)  # a transformer: its convolutions and linear layers only
    cache = open_cache(cache_dir, "torch-int8", torch.__version__)
    path = None
    if cache is not None:
        weights = [x for name, t in sorted(module.state_dict().items()) for x in (name, t.detach().numpy())]
        key = build_key(module.code.encode(), *weights, batch_size, source, engine, TORCH_FORMAT, TORCH_METHOD,
                        torch_qconfig_settings(engine, weights_only), *(("weights only",) if weights_only else ()))
        path = cache.dir / f"{key}.pt"
    if path is not None and path.is_file():
        observers = torch.load(path, weights_only=True)
        out, calib, _ = torch_quantize(module, [[x] for x in feeds], observers=observers, backend=engine,
                                       weights_only=weights_only)
        state = "warm"
    else:
        out, calib, observers = torch_quantize(module, [[x] for x in feeds], backend=engine, weights_only=weights_only)
        state = None
        if path is not None:
            torch.save(observers, path)
            cache.seal()
            state = "cold"
    calib = {**calib, **note, "seconds": round(time.perf_counter() - t0, 3)}
    if state is not None:
        calib["cache"] = state
    return out, calib


def int8_info(module, calibration: dict) -> dict:
    """What a converted module's record says: its calibration, its integer kernels
    (``ios_core.quantize.torch_integer_ops``) and the precision read back from them: int8 only where
    its convolutions are quantized kernels, else fp32 with the reason (the cell then fails on
    precision, never a silent fallback)."""
    from ios_core.quantize import float_heavy, torch_integer_ops

    kernels = torch_integer_ops(module)
    info = {"calibration": calibration, "integer_kernels": kernels, "float_ops": float_heavy(kernels),
            "quantized_engine": torch.backends.quantized.engine,
            "precision": "int8" if kernels["conv"] else "fp32"}
    if not kernels["conv"]:
        info["precision_note"] = (f"no convolution of the converted module is a quantized kernel "
                                  f"({kernels['float_conv']} left in float)")
    return info
