"""The ONNX importer's general-tensor mappings (ios_core/frontend/onnx_tensor_ops.py) on small
modules exported by torch (opset 17, the TorchScript exporter, dynamic batch): torchvision's
ConvNeXt (two stages of one block), a batch-first transformer encoder (class token, position
embeddings, multi-head attention, layer norms, the erf GELU), and what is still refused, in one
line naming the operator."""

from __future__ import annotations

import numpy as np
import pytest

import tests.torchvision_models as tv

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

from ios_core import reference  # noqa: E402
from ios_core.frontend import UnsupportedModel  # noqa: E402
from ios_core.frontend import onnx as frontend  # noqa: E402
from tests.lively_weights import lively  # noqa: E402

nn = torch.nn


class Encoder(nn.Module):
    """A ViT in miniature, batch first throughout (as the IR keeps it): patches, a class token,
    position embeddings, one pre-norm layer (multi-head attention written out, GELU MLP), the head."""

    def __init__(self, dim=8, heads=2, image=8, patch=4, classes=5):
        super().__init__()
        self.heads, self.tokens = heads, (image // patch) ** 2
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, self.tokens + 1, dim))
        self.ln1, self.ln2, self.ln = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)  # N, tokens, dim
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        n, t, d = x.shape
        h = self.ln1(x)

        def split(y):
            return y.reshape(n, t, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(n, t, d))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln(x)[:, 0])


def _export(net, image: int) -> bytes:
    return tv.export(net.eval(), image)


def _check(net, image: int, name: str, batch: int | None = None):
    graph = frontend.load(tv.export(net.eval(), image, batch=batch), name=name)
    x = np.random.default_rng(0).standard_normal((2, 3, image, image), dtype=np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    got = reference.run(graph, x).reshape(want.shape)
    err = float(np.abs(got - want).max() / np.abs(want).max())
    assert err <= 1e-5, f"{name}: max relative error {err:.2e}"
    return graph


def _randomize(net):
    """Weights where every branch counts (:func:`tests.lively_weights.lively`), the relative position
    tables (torchvision's std of 0.02) drawn at 0.5 first, so that a misread bias shows."""
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "relative_position_bias_table" in name:
                p.normal_(0, 0.5)
    return lively(net)


def test_torchvision_convnext_imports_and_matches_torch():
    models = tv.models()
    from torchvision.models.convnext import CNBlockConfig

    torch.manual_seed(0)
    net = models.convnext.ConvNeXt([CNBlockConfig(8, 16, 1), CNBlockConfig(16, None, 1)], num_classes=5)
    graph = _check(_randomize(net), 32, "convnext_small")  # its layer scale of 1e-6 moved: each block counts
    kinds = {op.TYPE for op in graph.operators()}
    assert {"layernorm", "transpose", "dense"} <= kinds
    assert "activation" not in kinds  # the erf GELU became one activation, fused into its dense
    assert {op.act for op in graph.operators() if op.TYPE == "dense"} == {"gelu", "identity"}
    assert "constant" not in kinds  # each MatMul's bias Add folded into its dense


def test_a_batch_first_transformer_encoder_imports_and_matches_torch():
    torch.manual_seed(0)
    graph = _check(_randomize(Encoder()), 8, "encoder")
    kinds = {op.TYPE for op in graph.operators()}
    assert {"matmul", "softmax", "layernorm", "dense", "reshape", "transpose", "prepend", "constant"} <= kinds
    prepend = next(op for op in graph.operators() if op.TYPE == "prepend")
    assert prepend.output_shape == (5, 8)  # the class token before 4 patch tokens


def _torchvision_vit():
    models = tv.models()
    torch.manual_seed(0)
    net = models.vision_transformer.VisionTransformer(image_size=16, patch_size=8, num_layers=2, num_heads=2,
                                                      hidden_dim=8, mlp_dim=16, num_classes=5)
    return _randomize(net)  # torchvision zeroes the head: random, so that the output says something


def test_torchvisions_vision_transformer_imports_and_matches_torch():
    # nn.MultiheadAttention works sequence-first: its Transposes and Reshapes move the batch axis (and
    # merge it with the heads); in a file exported at batch 1 the importer follows it. (Exported with a
    # dynamic batch from a dummy batch of 2, the file bakes batch * heads into its reshapes: the importer,
    # reading it at batch 1, finds the shapes disagree with ONNX's and refuses.)
    graph = _check(_torchvision_vit(), 16, "vit", batch=1)
    kinds = {op.TYPE for op in graph.operators()}
    assert {"matmul", "softmax", "layernorm", "dense", "prepend", "constant"} <= kinds
    assert graph.output_shape == (5,)


def test_a_model_moving_the_batch_axis_at_a_fixed_batch_above_1_is_refused():
    data = tv.export(_torchvision_vit().eval(), 16, batch=2)
    with pytest.raises(UnsupportedModel) as e:
        frontend.load(data, name="vit2")
    message = str(e.value)
    assert "\n" not in message and "moves the batch axis" in message and "batch 2" in message


class _Erf(nn.Module):
    def forward(self, x):
        return torch.erf(x)


def test_an_erf_outside_the_gelu_is_refused_in_one_line():
    with pytest.raises(UnsupportedModel, match=r"^cannot import 'erf': Erf node .*outside the GELU pattern"):
        frontend.load(_export(_Erf(), 4), name="erf")


class _Einsums(nn.Module):
    """MaxViT's attention products, written as Einsums (batch, heads, tokens, features)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Conv2d(3, 4, 1)
        self.q, self.k, self.v = (nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        t = self.embed(x).flatten(2).transpose(1, 2).reshape(x.shape[0], 2, 8, 4)  # N, 2 heads, 8 tokens, 4
        q, k, v = self.q(t), self.k(t), self.v(t)
        att = torch.softmax(torch.einsum("b h i d, b h j d -> b h i j", q, k), dim=-1)
        return torch.einsum("bhij,bhjd->bhid", att, v).reshape(x.shape[0], 8, 4, 2)


def test_an_einsum_that_is_a_batched_matmul_imports_and_one_that_is_not_is_refused():
    torch.manual_seed(0)
    graph = _check(_Einsums(), 4, "einsums")
    assert sum(op.TYPE == "matmul" for op in graph.operators()) == 2

    class Trace(nn.Module):
        def forward(self, x):
            return torch.einsum("bcij->bcj", x)[:, :, None, :]

    with pytest.raises(UnsupportedModel, match=r"Einsum 'bcij->bcj': only a batched matrix product"):
        frontend.load(_export(Trace(), 4), name="trace")


class _SequenceFirst(nn.Module):
    """Tokens moved before the batch, reshaped with their own shape read at run time (Shape of a
    tensor whose batch axis is not first), then the batch first again."""

    def forward(self, x):
        y = x.flatten(2).permute(2, 0, 1)  # tokens, N, C
        z = torch.relu(y.reshape(y.shape[0], -1))  # tokens, N * C: the shape read from y (Shape in ONNX)
        return z.reshape(y.shape[0], y.shape[1], -1).permute(1, 0, 2) * 2.0


def test_the_shape_of_a_tensor_whose_batch_moved_is_read_where_its_batch_is():
    graph = _check(_SequenceFirst(), 4, "sequence_first")  # a dynamic batch: Shape ops, read at batch 1
    assert graph.output_shape == (16, 3)


def test_a_pad_that_pads_nothing_is_nothing_on_a_token_map():
    from tests.test_frontend_onnx import Net, check

    n = Net()
    y = n.op("Transpose", [n.input], perm=[0, 2, 3, 1])  # N, H, W, C (Swin's layout)
    y = n.op("Pad", [y, n.c([0] * 8)])  # Swin pads H, W to its window: nothing at these sizes
    graph = check(n.model(n.op("Relu", [y])))
    assert [op.TYPE for op in graph.operators()] == ["transpose", "activation"]


# ---- windowed attention: torchvision's Swin, Swin V2 and MaxViT in miniature --------------------------
def _swin(v2: bool, image: int, window: int):
    models = tv.models()
    sw = models.swin_transformer
    torch.manual_seed(0)
    extra = {"block": sw.SwinTransformerBlockV2, "downsample_layer": sw.PatchMergingV2} if v2 else {}
    net = sw.SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2], num_heads=[1, 2], window_size=[window] * 2,
                             stochastic_depth_prob=0.0, num_classes=5, **extra)
    return _randomize(net)


def test_torchvisions_swin_imports_and_matches_torch():
    # 8x8 tokens in windows of 2, shifted by 1 (torch.roll: Slice + Concat along H and W, the mask's
    # arithmetic folded), then patch merging (x[:, 0::2, 1::2]: slices with a step)
    graph = _check(_swin(False, 32, 2), 32, "swin", batch=1)
    kinds = {op.TYPE for op in graph.operators()}
    assert {"matmul", "softmax", "layernorm", "dense", "transpose", "constant"} <= kinds
    assert graph.output_shape[0] == 5


def test_torchvisions_swin_v2_imports_and_matches_torch():
    # cosine attention (F.normalize: ReduceL2 -> Clip -> Expand -> Div, one l2norm each for q and k; the
    # clamped, exponentiated logit scale folded), the continuous position bias MLP folded; 6x6 tokens
    # padded to windows of 4 (a zero Pad of a token map)
    graph = _check(_swin(True, 24, 4), 24, "swin_v2", batch=1)
    kinds = [op.TYPE for op in graph.operators()]
    assert kinds.count("l2norm") == 2 * 4  # q and k of 4 blocks
    assert "prepend" in kinds  # the Pad's zeros


def test_torchvisions_maxvit_imports_and_matches_torch():
    models = tv.models()
    torch.manual_seed(0)
    net = models.maxvit.MaxVit(input_size=(32, 32), stem_channels=8, partition_size=2, block_channels=[8, 16],
                               block_layers=[1, 1], head_dim=4, stochastic_depth_prob=0.0, num_classes=5).eval()
    graph = _check(_randomize(net), 32, "maxvit", batch=1)  # block and grid attention: chunks of the last axis
    kinds = {op.TYPE for op in graph.operators()}
    assert {"conv", "matmul", "softmax", "layernorm", "dense", "transpose"} <= kinds


class _Windows(nn.Module):
    """What windowed attention does to a token map (N, H, W, C), one at a time."""

    def forward(self, x):
        t = x.permute(0, 2, 3, 1)  # N, 6, 6, 3
        r = torch.roll(t, shifts=(-1, 2), dims=(1, 2))  # Slice + Concat along H and W
        s = torch.cat([r[:, 1::2, 0::3], r[:, 0::2, 1::3]], dim=-1)  # steps at offsets: N, 3, 2, 6
        p = nn.functional.pad(s, (0, 0, 1, 2, 2, 0))  # zeros before and after W and H: N, 5, 5, 6
        one = p[:, 3::4, :, :3]  # a step that takes one row (3 of 5): N, 1, 5, 3
        return torch.cat([p[:, :4, 1:, 2:5], one[:, :, 1:]], dim=1).reshape(x.shape[0], -1)


def test_rolls_strided_slices_and_pads_of_a_token_map_match_torch():
    graph = _check(_Windows(), 6, "windows")
    assert graph.output_shape[0] == 5 * 4 * 3
    assert {op.TYPE for op in graph.operators()} <= {"transpose", "reshape", "prepend", "flatten"}


class _Norms(nn.Module):
    def __init__(self, divide: bool):
        super().__init__()
        self.divide = divide

    def forward(self, x):
        t = x.flatten(2).transpose(1, 2)  # N, tokens, C
        return nn.functional.normalize(t, dim=-1) if self.divide else torch.linalg.vector_norm(t, dim=-1)


def test_f_normalize_is_one_l2norm_and_another_reducel2_is_refused():
    graph = _check(_Norms(True), 4, "normalize")
    assert [op.TYPE for op in graph.operators()] == ["reshape", "transpose", "l2norm"]
    with pytest.raises(UnsupportedModel, match=r"^cannot import 'norm': ReduceL2 node .*outside the pattern"):
        frontend.load(_export(_Norms(False), 4), name="norm")


class _Strided(nn.Module):
    def forward(self, x):
        return x.flatten(2).transpose(1, 2)[:, 46::2]  # 49 tokens: neither 49 nor 46:50 divides by 2


def test_a_step_that_divides_neither_the_axis_nor_the_slice_is_refused_in_one_line():
    with pytest.raises(UnsupportedModel) as e:
        frontend.load(tv.export(_Strided().eval(), 7, batch=1), name="strided")
    assert "\n" not in str(e.value) and "a slice 46:49:2 of an axis of 49" in str(e.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swin_t", "swin_v2_t", "maxvit_t"])
def test_torchvisions_full_windowed_transformers_import_and_match_torch(name):
    """The real architectures at 224x224 (random weights, exported at batch 1), a few seconds each."""
    torch.manual_seed(0)
    net = _randomize(getattr(tv.models(), name)(weights=None).eval())
    graph = _check(net, 224, name, batch=1)
    assert graph.output_shape[0] == 1000


# ---- the forms timm writes (tests/test_import_timm.py imports timm's own networks) ----------------------
class _TanhMlp(nn.Module):
    """An MLP with the tanh GELU: ``nn.GELU(approximate="tanh")`` ("torch": Mul, Mul, Mul, Add, Mul, Tanh,
    Add, Mul, Mul in the file), written out ("written": ``x * 0.5`` first, other operand orders), written
    out with ``x * x`` read again after ("shared"), or with 0.05 for 0.044715 ("kappa": not the GELU)."""

    def __init__(self, form: str = "torch"):
        super().__init__()
        self.form = form
        self.fc1, self.fc2 = nn.Linear(3, 8), nn.Linear(8, 4)

    def forward(self, x):
        y = self.fc1(x.flatten(2).transpose(1, 2))
        if self.form == "torch":
            return self.fc2(nn.functional.gelu(y, approximate="tanh"))
        square = y * y
        kappa = 0.05 if self.form == "kappa" else 0.044715
        g = y * 0.5 * (1.0 + torch.tanh((y + kappa * (square * y)) * 0.7978845608))
        return self.fc2(g) + self.fc2(square) if self.form == "shared" else self.fc2(g)


@pytest.mark.parametrize("form", ["torch", "written"])
def test_the_tanh_gelu_is_one_activation_fused_into_its_dense(form):
    torch.manual_seed(0)
    graph = _check(_TanhMlp(form), 4, f"gelu_tanh_{form}")
    assert [(op.TYPE, getattr(op, "act", None)) for op in graph.operators()] == \
        [("reshape", None), ("transpose", None), ("dense", "gelu_tanh"), ("dense", "identity")]


@pytest.mark.parametrize("form", ["shared", "kappa"])
def test_a_tanh_that_is_not_the_gelu_is_computed_as_written(form):
    torch.manual_seed(0)
    graph = _check(_TanhMlp(form), 4, f"not_gelu_{form}")
    assert "gelu_tanh" not in {getattr(op, "act", None) for op in graph.operators()}
    assert "tanh" in {getattr(op, "act", None) or getattr(op, "act_type", None) for op in graph.operators()}


class _StackedQkv(nn.Module):
    """timm's attention: one projection to q, k and v, reshaped (N, T, 3, heads, d), permuted (3, N, heads,
    T, d) and unbound (a Split of the first axis, the batch second), then ``scaled_dot_product_attention``."""

    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.embed = nn.Conv2d(3, dim, 2, 2)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        n, t, d = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        y = nn.functional.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(n, t, d))


def test_unbinding_a_stacked_qkv_splits_its_first_axis():
    torch.manual_seed(0)
    graph = _check(_StackedQkv(), 8, "stacked_qkv")
    kinds = [op.TYPE for op in graph.operators()]
    assert kinds.count("matmul") == 2 and "softmax" in kinds


class _Splits(nn.Module):
    def forward(self, x):
        top, bottom = torch.split(x, [1, 3], dim=2)  # a Split along a feature map's height
        return torch.cat([torch.relu(bottom), top], dim=2)


def test_a_split_along_another_axis_than_channels_is_slices_of_that_axis():
    graph = _check(_Splits(), 4, "splits")
    assert graph.output_shape == (3, 4, 4) and "activation" in [op.TYPE for op in graph.operators()]


class _Means(nn.Module):
    """Reductions over other axes than a feature map's height and width: timm's pooling of a token map
    (N, H, W, C), a mean over tokens, a max over features kept as an axis of one."""

    def __init__(self, which: str):
        super().__init__()
        self.which, self.fc = which, nn.Linear(3, 5)

    def forward(self, x):
        t = x.permute(0, 2, 3, 1)  # N, H, W, C
        if self.which == "hw":
            return self.fc(t.mean((1, 2)))
        if self.which == "tokens":
            return t.flatten(1, 2).amax(1) * 2.0
        return t.flatten(1, 2) - t.flatten(1, 2).mean(-1, keepdim=True)


@pytest.mark.parametrize("which", ["hw", "tokens", "features"])
def test_a_reduction_over_any_per_sample_axes_is_a_global_pool(which):
    graph = _check(_Means(which), 4, f"mean_{which}")
    assert sum(op.TYPE == "pool" for op in graph.operators()) == 1


def test_a_reduction_over_the_batch_axis_is_refused_in_one_line():
    class Total(nn.Module):
        def forward(self, x):
            return x.mean(0, keepdim=True)

    with pytest.raises(UnsupportedModel, match=r"^cannot import 'total': ReduceMean node .*over the batch axis"):
        frontend.load(_export(Total(), 4), name="total")


class _Norms2d(nn.Module):
    """GroupNorm (exported as Reshape (N, groups, -1) -> InstanceNormalization -> Reshape back -> Mul, Add)
    and InstanceNorm2d with its own scale and bias (InstanceNormalization alone)."""

    def __init__(self, groups: int | None):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.norm = nn.GroupNorm(groups, 4) if groups else nn.InstanceNorm2d(4, affine=True)
        with torch.no_grad():
            self.norm.weight.normal_()
            self.norm.bias.normal_()

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x)))


@pytest.mark.parametrize("groups", [1, 2, None])
def test_group_and_instance_norms_are_layer_norms_and_a_per_channel_affine(groups):
    torch.manual_seed(0)
    graph = _check(_Norms2d(groups), 4, f"norm_{groups}")
    kinds = [op.TYPE for op in graph.operators()]
    assert kinds.count("layernorm") == 1 and "affine" in kinds


class _StarRelu(nn.Module):
    def __init__(self, exponent: float = 2.0):
        super().__init__()
        self.exponent, self.conv = exponent, nn.Conv2d(3, 4, 1)

    def forward(self, x):
        return 0.8 * torch.relu(self.conv(x)) ** self.exponent - 0.1


def test_an_activation_squared_is_an_element_mul_and_another_power_is_refused():
    torch.manual_seed(0)
    graph = _check(_StarRelu(), 4, "star_relu")
    assert "element" in [op.TYPE for op in graph.operators()]
    with pytest.raises(UnsupportedModel, match=r"^cannot import 'cube': Pow node .*other than its square"):
        frontend.load(_export(_StarRelu(3.0), 4), name="cube")


class _SplitAttention(nn.Module):
    """ResNeSt's split attention in miniature: a conv to radix x C channels viewed as (N, radix, C, H, W)
    (a Reshape to 5-D that is no channel shuffle), summed over the radix (ReduceSum), pooled, attention
    weights (N, radix, C, 1, 1) by a softmax over the radix, multiplied into the branches, summed."""

    def __init__(self, c=4, radix=2):
        super().__init__()
        self.c, self.radix = c, radix
        self.conv, self.fc = nn.Conv2d(3, radix * c, 3, padding=1), nn.Conv2d(c, radix * c, 1)

    def forward(self, x):
        n = x.shape[0]
        branches = self.conv(x).reshape(n, self.radix, self.c, x.shape[2], x.shape[3])
        gap = branches.sum(dim=1).mean((2, 3), keepdim=True)
        att = torch.softmax(self.fc(gap).reshape(n, self.radix, self.c, 1, 1), dim=1)
        return (branches * att).sum(dim=1)


def test_split_attention_sums_and_broadcasts_over_its_radix():
    torch.manual_seed(0)
    graph = _check(_SplitAttention(), 4, "split_attention")
    kinds = [op.TYPE for op in graph.operators()]
    assert graph.output_shape == (4, 4, 4) and "softmax" in kinds and kinds.count("element") == 1


class _Encodings(nn.Module):
    """A sinusoidal position encoding computed in the graph from the input's shape (Range, Sin, Cos,
    CumSum, Tile of constants: folded), and a layer norm of rows of a tensor whose batch is merged into
    its first axis (reshape(-1, W): at batch 1, the file's)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        n, c, h, w = x.shape
        steps = torch.ones(h, w).cumsum(1) * 0.5
        pos = torch.stack([torch.sin(steps), torch.cos(steps), steps], 0)[None, :c].repeat(n, 1, 1, 1)
        y = self.norm((x + pos).reshape(-1, w))
        return y.reshape(n, c, h, w)


def test_encodings_of_constants_fold_and_a_layer_norm_of_merged_rows_matches_torch():
    torch.manual_seed(0)
    graph = _check(_Encodings(), 4, "encodings")
    assert [op.TYPE for op in graph.operators()] == ["constant", "reshape", "layernorm", "reshape"]


class _Broadcasts(nn.Module):
    """A one-channel map over every channel (a spatial attention, FocalNet's modulation: (N, 1, H, W) by
    (N, C, H, W)), a token summary over every token (SwiftFormer: (N, 1, C) by (N, T, C)), or, "outer",
    each tensor broadcast over the other's axes ((N, C, 1, 1) by (N, 1, H, W)): refused."""

    def __init__(self, outer: bool = False):
        super().__init__()
        self.outer, self.conv, self.gate = outer, nn.Conv2d(3, 4, 1), nn.Conv2d(3, 1, 1)

    def forward(self, x):
        y, g = self.conv(x), torch.sigmoid(self.gate(x))
        if self.outer:
            return y.mean((2, 3), keepdim=True) * g
        t = (g * y - y).flatten(2).transpose(1, 2)  # N, T, C
        return t * t.mean(1, keepdim=True) + t.amax(1, keepdim=True)


def test_a_tensor_whose_axes_are_the_others_or_one_is_broadcast_over_it():
    torch.manual_seed(0)
    graph = _check(_Broadcasts(), 4, "broadcasts")
    assert [op.TYPE for op in graph.operators()].count("element") == 4
    with pytest.raises(UnsupportedModel, match=r"^cannot import 'outer': Mul node .*every axis is the other's or 1"):
        frontend.load(_export(_Broadcasts(outer=True), 4), name="outer")
