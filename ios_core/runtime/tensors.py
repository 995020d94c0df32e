"""What a CPU program's storage and worker pool need from a tensor library, behind one small
interface, so that a program whose kernels are ONNX Runtime's or OpenVINO's never imports torch:

* the **arena**: one preallocated float32 block, views of it, channel slices, copies, the raw
  array a library binds to (:meth:`Tensors.empty` ... :meth:`Tensors.address`);
* **thread control**: the calling thread's intra-op thread count (:meth:`Tensors.threads`,
  :meth:`Tensors.set_threads`) and the thread-local mode kernels run in (:meth:`Tensors.mode`).

Two implementations: :data:`TORCH` (torch tensors; torch's per-thread OpenMP count, inference
mode: the torch provider's kernels read both) and :data:`NUMPY` (numpy arrays; no thread control:
an ONNX Runtime session or an OpenVINO compiled model has its threads fixed when its piece is
compiled, ``providers.settings``). :func:`for_provider` picks one; torch is imported only when
:data:`TORCH` is used.
"""

from __future__ import annotations

import contextlib

import numpy as np


class Tensors:
    """The interface (see the module's docstring); ``name`` says which library."""

    name = ""

    def empty(self, shape: tuple[int, ...]):
        raise NotImplementedError

    def reshape(self, flat, start: int, numel: int, shape: tuple[int, ...]):
        """A view of ``flat[start:start + numel]`` shaped ``shape``."""
        raise NotImplementedError

    def narrow(self, t, begin: int, length: int):
        """Channels ``begin .. begin + length`` of an NCHW tensor (a view)."""
        raise NotImplementedError

    def is_contiguous(self, t) -> bool:
        raise NotImplementedError

    def copy(self, dst, src) -> None:
        raise NotImplementedError

    def array(self, t) -> np.ndarray:
        """The numpy array sharing ``t``'s memory (contiguous ``t`` only)."""
        raise NotImplementedError

    def address(self, t) -> int:
        raise NotImplementedError

    def from_numpy(self, a: np.ndarray):
        raise NotImplementedError

    def to_numpy(self, t) -> np.ndarray:
        """A fresh C-contiguous copy of ``t``."""
        raise NotImplementedError

    def threads(self) -> int | None:
        """The calling thread's intra-op thread count (None: the library has no such setting)."""
        return None

    def set_threads(self, n: int) -> None:
        """Set the calling thread's intra-op thread count (nothing where there is none)."""

    def mode(self):
        """The thread-local mode kernels run in (a context manager)."""
        return contextlib.nullcontext()


class NumpyTensors(Tensors):
    name = "numpy"

    def empty(self, shape):
        return np.empty(shape, np.float32)

    def reshape(self, flat, start, numel, shape):
        return flat[start:start + numel].reshape(shape)

    def narrow(self, t, begin, length):
        return t[:, begin:begin + length]

    def is_contiguous(self, t) -> bool:
        return bool(t.flags.c_contiguous)

    def copy(self, dst, src) -> None:
        np.copyto(dst, src)

    def array(self, t):
        return t

    def address(self, t) -> int:
        return t.__array_interface__["data"][0]

    def from_numpy(self, a):
        return a

    def to_numpy(self, t):
        return np.array(t, dtype=np.float32, order="C", copy=True)


class TorchTensors(Tensors):
    name = "torch"

    @property
    def torch(self):
        import torch

        return torch

    def empty(self, shape):
        return self.torch.empty(shape, dtype=self.torch.float32)

    def reshape(self, flat, start, numel, shape):
        return flat[start:start + numel].view(shape)

    def narrow(self, t, begin, length):
        return t.narrow(1, begin, length)

    def is_contiguous(self, t) -> bool:
        return t.is_contiguous()

    def copy(self, dst, src) -> None:
        dst.copy_(src)

    def array(self, t):
        return t.numpy()

    def address(self, t) -> int:
        return t.data_ptr()

    def from_numpy(self, a):
        return self.torch.from_numpy(a)

    def to_numpy(self, t):
        return t.contiguous().numpy().copy()

    def threads(self) -> int:
        return self.torch.get_num_threads()

    def set_threads(self, n: int) -> None:
        self.torch.set_num_threads(n)

    def mode(self):
        return self.torch.inference_mode()


NUMPY = NumpyTensors()
TORCH = TorchTensors()


def for_provider(provider: str) -> Tensors:
    """The tensors a program on ``provider``'s kernels keeps its values in: torch's for the torch
    provider (its kernels take torch tensors), numpy arrays for every other (they bind arrays)."""
    return TORCH if provider == "torch" else NUMPY


@contextlib.contextmanager
def running(tensors: Tensors, threads: int):
    """The calling thread with ``threads`` intra-op threads and in the kernels' mode, restored after."""
    caller = tensors.threads()
    if caller is not None and caller != threads:
        tensors.set_threads(threads)
    try:
        with tensors.mode():
            yield
    finally:
        if caller is not None and caller != threads:
            tensors.set_threads(caller)
