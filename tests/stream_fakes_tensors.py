"""The fake CUDA device's kernels for general tensors (issue 56), mixed into
``tests.stream_fakes.TorchQueueDevice``: the same explicit parameters as ``CupyDevice``'s
``dense``, ``batched_matmul``, ``layernorm``, ``softmax``, ``l2norm``, ``transpose``, ``reshape``,
``constant`` and ``prepend`` (ios_core/runtime/cuda_device.py), implemented here with torch
functions, so a parameter the executor translates wrongly computes another result than the oracle.

The real kernels read every view as per-sample contiguous (``cuda_tensor_kernels.sample_stride``
raises otherwise); the fake asserts the same of every view it is handed, so an executor that hands
a strided view fails here as it would on a GPU. Each kernel computes in float32 on the values at
the device's precision and rounds once when it stores, as the real ones (``ios_ld``/``ios_st``)."""

from __future__ import annotations


def per_sample_contiguous(*views) -> None:
    """What ``cuda_tensor_kernels.sample_stride`` requires: each sample's image row-major."""
    for v in views:
        want = 1
        for d in range(v.dim() - 1, 0, -1):
            assert v.shape[d] == 1 or v.stride(d) == want, (
                f"a view of shape {tuple(v.shape)} and strides {v.stride()} is not contiguous within a sample")
            want *= v.shape[d]


class TensorKernelsFake:
    """The general tensors' kernels of the fake device (see the module)."""

    def dense(self, x, out, stream, weight, bias, act):
        import torch

        from tests.stream_fakes import _act

        per_sample_contiguous(x, out)
        w, b = self.upload(weight), self.upload(bias)
        fn = _act(act)

        def run():
            out.copy_(fn(torch.matmul(x.float(), w.float().t()) + b.float()))
        return self._kinds(run, "ios_matmul", reads=(x, w, b), writes=(out,))

    def batched_matmul(self, a, b, out):
        import torch

        per_sample_contiguous(a, b, out)
        return self._kinds(lambda: out.copy_(torch.matmul(a.float(), b.float())), "ios_matmul", reads=(a, b),
                           writes=(out,))

    def layernorm(self, x, out, weight, bias, axes, eps):
        per_sample_contiguous(x, out)
        w, b = self.upload(weight), self.upload(bias)
        dims = tuple(range(x.dim() - axes, x.dim()))

        def run():
            v = x.float()
            mean = v.mean(dims, keepdim=True)
            var = ((v - mean) ** 2).mean(dims, keepdim=True)
            out.copy_((v - mean) / (var + eps).sqrt() * w.float() + b.float())
        return self._kinds(run, "ios_layernorm", reads=(x, w, b), writes=(out,))

    def softmax(self, x, out, axis):
        import torch

        per_sample_contiguous(x, out)
        assert axis >= 1, f"softmax along axis {axis} of the batched shape (the batch is axis 0)"
        return self._kinds(lambda: out.copy_(torch.softmax(x.float(), axis)), "ios_rownorm", reads=(x,),
                           writes=(out,))

    def l2norm(self, x, out, axis, eps):
        per_sample_contiguous(x, out)
        assert axis >= 1, f"l2norm along axis {axis} of the batched shape (the batch is axis 0)"

        def run():
            v = x.float()
            out.copy_(v / (v * v).sum(axis, keepdim=True).sqrt().clamp_min(eps))
        return self._kinds(run, "ios_rownorm", reads=(x,), writes=(out,))

    def transpose(self, x, out, perm):
        assert sorted(perm) == list(range(x.dim() - 1)), f"perm {perm} for a batched shape {tuple(x.shape)}"
        order = (0, *(1 + p for p in perm))
        return self._kinds(lambda: out.copy_(x.permute(order)), "ios_strided", reads=(x,), writes=(out,))

    def reshape(self, x, out):
        per_sample_contiguous(x, out)
        return self._kinds(lambda: out.copy_(x.reshape(out.shape)), "ios_strided", reads=(x,), writes=(out,))

    def constant(self, x, out, c, how):
        cw = self.upload(c)

        def run():
            v = x.float()
            out.copy_(v * cw.float() if how == "mul" else v + cw.float())  # broadcast from the last axis
        return self._kinds(run, "ios_strided", reads=(x, cw), writes=(out,))

    def prepend(self, x, out, rows):
        rw = self.upload(rows)
        r = rw.shape[0]
        head, tail = out[:, :r], out[:, r:]

        def run():
            head.copy_(rw.expand(out.shape[0], *rw.shape))
            tail.copy_(x)
        return self._kinds(run, "ios_strided", reads=(x, rw), writes=(out,))
