"""What a CPU program's storage and worker pool need from a tensor library, behind one small
interface, so that a program whose kernels are ONNX Runtime's or OpenVINO's never imports torch:

* the **arena**: one preallocated block of the program's element type (float32; bfloat16 for a
  torch program at bf16), views of it, channel slices, copies, the raw array a library binds to
  (:meth:`Tensors.empty` ... :meth:`Tensors.address`);
* **entry and exit**: a caller's float32 input as the program's tensor (:meth:`Tensors.from_numpy`:
  shared memory at float32, converted once at another precision) and a result back as float32 numpy
  (:meth:`Tensors.to_numpy`);
* **thread control**: the calling thread's intra-op thread count (:meth:`Tensors.threads`,
  :meth:`Tensors.set_threads`) and the thread-local mode kernels run in (:meth:`Tensors.mode`).

Two implementations: :data:`TORCH` (torch tensors; torch's per-thread OpenMP count, inference
mode: the torch provider's kernels read both; :data:`TORCH_BF16` the same in ``torch.bfloat16``,
what a torch program at bf16 keeps its activations in) and :data:`NUMPY` (numpy arrays; no thread control:
an ONNX Runtime session or an OpenVINO compiled model has its threads fixed when its piece is
compiled, ``providers.settings``). :func:`for_provider` picks one; torch is imported only when
:data:`TORCH` is used.
"""

from __future__ import annotations

import contextlib

import numpy as np


class Tensors:
    """The interface (see the module's docstring); ``name`` says which library, ``precision`` the
    element type its arrays hold (the sweep's name: fp32, bf16) and ``itemsize`` its bytes."""

    name = ""
    precision = "fp32"
    itemsize = 4

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
        """``a`` (float32) as this library's tensor: sharing its memory, or converted to ``precision``."""
        raise NotImplementedError

    def to_numpy(self, t) -> np.ndarray:
        """A fresh C-contiguous float32 copy of ``t``."""
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
    """Torch tensors of one dtype: ``precision`` fp32 (``torch.float32``) or bf16 (``torch.bfloat16``:
    :meth:`from_numpy` converts the float32 input once, :meth:`to_numpy` converts back to float32, as
    the torch adapter's bf16 cell prepares its input and finishes its output). Every instance has the
    name ``torch``: one worker pool and one thread control for all of them."""

    name = "torch"
    DTYPES = {"fp32": "float32", "bf16": "bfloat16"}  # the sweep's precision -> torch dtype

    def __init__(self, precision: str = "fp32"):
        if precision not in self.DTYPES:
            raise ValueError(f"torch tensors hold {', '.join(self.DTYPES)}, not {precision!r}")
        self.precision = precision
        self.itemsize = 4 if precision == "fp32" else 2
        self._dtype = None  # resolved on first use: torch is imported only when these tensors are

    @property
    def torch(self):
        import torch

        return torch

    @property
    def dtype(self):
        if self._dtype is None:
            self._dtype = getattr(self.torch, self.DTYPES[self.precision])
        return self._dtype

    def empty(self, shape):
        return self.torch.empty(shape, dtype=self.dtype)

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
        t = self.torch.from_numpy(a)
        return t if self.precision == "fp32" else t.to(self.dtype)

    def to_numpy(self, t):
        if self.precision != "fp32":
            return t.to(self.torch.float32, copy=True).contiguous().numpy()  # a fresh float32 copy
        return t.contiguous().numpy().copy()

    def threads(self) -> int:
        return self.torch.get_num_threads()

    def set_threads(self, n: int) -> None:
        self.torch.set_num_threads(n)

    def mode(self):
        return self.torch.inference_mode()


NUMPY = NumpyTensors()
TORCH = TorchTensors()
TORCH_BF16 = TorchTensors("bf16")


def for_provider(provider: str, precision: str = "fp32") -> Tensors:
    """The tensors a program on ``provider``'s kernels keeps its values in: torch's for the torch
    provider (its kernels take torch tensors; at bf16 in ``torch.bfloat16``, :data:`TORCH_BF16`),
    numpy arrays (float32) for every other (they bind arrays; a piece's library converts inside)."""
    if provider != "torch":
        return NUMPY
    return TORCH_BF16 if precision == "bf16" else TORCH


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
