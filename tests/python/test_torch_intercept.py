"""precsim.torch.emulate intercepting products below the module level: each intercepted op's output
and gradients equal the same products done on the same operands directly (precsim.gemm with the
operands quantized by precsim.quantize / block_quantize, or the recipe engine's own product where
the recipe has no other path), under fp32, bf16-amp and mxfp8; fp32 against torch within float32
rounding bounds."""
import numpy as np
import pytest

import precsim
from conftest import need

torch = need("torch")
pt = need("precsim.torch")
nn, F = torch.nn, torch.nn.functional
pytestmark = pytest.mark.usefixtures("one_engine_thread")

G = torch.Generator().manual_seed(7)
EPS32 = 2.0 ** -24


def randn(*shape):
    return torch.randn(*shape, generator=G)


class Call(nn.Module):
    """A module whose forward is fn(self, *inputs): the products issue from this module."""

    def __init__(self, fn, **params):
        super().__init__()
        self.fn = fn
        for name, t in params.items():
            setattr(self, name, nn.Parameter(t))

    def forward(self, *xs):
        return self.fn(self, *xs)


def engine(recipe, layer=0):
    return precsim._precsim.RecipeLinear(precsim.Recipe.preset(recipe)._typed, 0, layer)


def ref_linear(recipe, x, w, b=None):
    """The recipe's linear layer run by the engine itself: y = x w^T + b."""
    e, x = engine(recipe), np.ascontiguousarray(x, np.float32)
    wc = np.array(w, np.float32, order="C")
    e.cast_weights(wc, 0, 0)
    bc = np.empty(0, np.float32)
    if b is not None:
        bc = np.array(b, np.float32, order="C")
        e.cast_weights(bc, 1, 0)
    y = np.empty((x.shape[0], wc.shape[0]), np.float32)
    e.forward(x, wc, bc, y, x.shape[0], wc.shape[1], wc.shape[0], 0)
    return y


def ref_product(recipe, a, b):
    """a @ b as the recipe's forward GEMM on its own: bf16-amp and fp32 by precsim.gemm on operands
    rounded by precsim.quantize, mxfp8 on operands MX-quantized along K by precsim.block_quantize."""
    a, b = np.ascontiguousarray(a, np.float32), np.ascontiguousarray(b, np.float32)
    if recipe == "mxfp8":
        qa = precsim.block_quantize(a, "mxfp8_e4m3:rule=rceil")
        qb = precsim.block_quantize(b, "mxfp8_e4m3:rule=rceil", axis=0)
        return precsim.gemm(qa, qb, model="fp32-seq", a_format="fp32", b_format="fp32")
    fmt = "bf16" if recipe == "bf16-amp" else "fp32"
    return precsim.gemm(precsim.quantize(a, fmt), precsim.quantize(b, fmt), model="fp32-seq", a_format=fmt,
                        b_format=fmt)


def bits(t):
    return t.detach().float().numpy().tobytes()


@pytest.mark.parametrize("recipe", ["fp32", "bf16-amp", "mxfp8"])
def test_linear_and_conv1d_addmm_equal_the_recipes_linear(recipe):
    x = randn(3, 5, 64)
    lin = nn.Linear(64, 24)
    # transformers' Conv1D: weight (in, out), torch.addmm(bias, x, weight).
    conv1d = Call(lambda s, x: torch.addmm(s.bias, x.view(-1, 64), s.weight).view(3, 5, 24), weight=randn(64, 24),
                  bias=randn(24))
    for mod, w, b in [(lin, lin.weight, lin.bias), (conv1d, conv1d.weight.t(), conv1d.bias)]:
        with pt.emulate(mod, recipe):
            y = mod(x)
        ref = ref_linear(recipe, x.reshape(-1, 64).numpy(), w.detach().numpy(), b.detach().numpy())
        assert y.shape == (3, 5, 24) and bits(y) == ref.tobytes()


@pytest.mark.parametrize("recipe", ["fp32", "bf16-amp", "mxfp8"])
def test_matmul_bmm_baddbmm_mm_equal_the_product_alone(recipe):
    a, b = randn(2, 3, 5, 64), randn(3, 64, 6)  # batch dimensions broadcast
    m = Call(lambda s, a, b: (a @ b, torch.bmm(a[0], b), torch.baddbmm(b[:, :5, :], a[1], b, alpha=0.5),
                              torch.mm(a[0, 0], b[0]), torch.matmul(a[0, 0, 0], b[0])))
    with pt.emulate(m, recipe) as e:
        mat, bmm, badd, mm, vec = m(a, b)
    for i in range(2):
        for j in range(3):
            assert bits(mat[i, j]) == ref_product(recipe, a[i, j].numpy(), b[j].numpy()).tobytes()
    for j in range(3):
        assert bits(bmm[j]) == ref_product(recipe, a[0, j].numpy(), b[j].numpy()).tobytes()
        assert bits(badd[j]) == (0.5 * ref_product(recipe, a[1, j].numpy(), b[j].numpy()) + b[j, :5].numpy()).tobytes()
    assert bits(mm) == ref_product(recipe, a[0, 0].numpy(), b[0].numpy()).tobytes()
    assert bits(vec) == ref_product(recipe, a[0, 0, :1].numpy(), b[0].numpy())[0].tobytes()
    assert e.coverage().fraction == 1.0 and set(e.coverage().by_op()) == {"matmul", "bmm", "baddbmm", "mm"}


def test_bmm_gradients_are_the_dgrad_and_wgrad_products():
    a, b, g = randn(2, 5, 32).requires_grad_(), randn(2, 32, 6).requires_grad_(), randn(2, 5, 6)
    m = Call(lambda s, a, b: torch.bmm(a, b))
    with pt.emulate(m, "bf16-amp"):
        m(a, b).backward(g)
    q = lambda t: precsim.quantize(t.detach().numpy(), "bf16")
    for i in range(2):
        da = precsim.gemm(q(g[i]), q(b[i]), model="fp32-seq", trans_b=True)
        db = precsim.gemm(q(a[i]), q(g[i]), model="fp32-seq", trans_a=True)
        assert bits(a.grad[i]) == da.tobytes() and bits(b.grad[i]) == db.tobytes()


@pytest.mark.parametrize("recipe", ["fp32", "mxfp8"])
def test_conv2d_is_im2col_and_the_recipes_linear(recipe):
    x, conv = randn(2, 4, 9, 9), nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=2, groups=2)
    with pt.emulate(conv, recipe):
        y = conv(x)
    cols = F.unfold(x, 3, dilation=2, padding=1, stride=2)  # torch's own im2col: (N, C*9, L)
    n, _, L = cols.shape
    ho = wo = int(L ** 0.5)
    parts = []
    for g in range(2):
        cg = cols.reshape(n, 2, 18, L)[:, g].permute(0, 2, 1).reshape(n * L, 18)
        yg = ref_linear(recipe, cg.numpy(), conv.weight[3 * g:3 * g + 3].reshape(3, 18).detach().numpy(),
                        conv.bias[3 * g:3 * g + 3].detach().numpy())
        parts.append(torch.from_numpy(yg).reshape(n, L, 3))
    ref = torch.cat(parts, -1).permute(0, 2, 1).reshape(n, 6, ho, wo)
    assert y.shape == ref.shape and bits(y) == bits(ref)


def _within_fp32_bound(ours, theirs, bound):
    err = (ours.double() - theirs.double()).abs()
    assert torch.all(err <= bound), float((err - bound).max())


def test_fp32_recipe_against_torch_within_float32_rounding():
    """Under fp32 (fp32-seq accumulation) each product is torch's up to summation order: both
    within gamma_k |A||B| of the exact product, so within twice that of each other."""
    x1, x2, x3 = randn(2, 3, 50), randn(2, 3, 12, 12), randn(1, 2, 6, 7, 8)
    mods = [nn.Conv1d(3, 5, 5, padding="same"), nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.Conv3d(2, 3, 2, dilation=2)]
    for mod, x in zip(mods, (x1, x2, x3)):
        xg = x.clone().requires_grad_()
        ref = mod(xg)
        ref.sum().backward()
        ref_grad, ref_wgrad = xg.grad.clone(), mod.weight.grad.clone()
        mod.weight.grad = None
        xg.grad = None
        with pt.emulate(mod, "fp32"):
            ours = mod(xg)
            ours.sum().backward()
        k = mod.weight[0].numel()
        absw = F.conv1d if isinstance(mod, nn.Conv1d) else F.conv2d if isinstance(mod, nn.Conv2d) else F.conv3d
        bound = 2 * k * EPS32 * absw(x.abs(), mod.weight.detach().abs(), None, mod.stride, mod.padding, mod.dilation)
        _within_fp32_bound(ours - mod.bias.detach().view(-1, *[1] * (x.dim() - 2)),
                           ref.detach() - mod.bias.detach().view(-1, *[1] * (x.dim() - 2)), bound + 1e-30)
        assert torch.allclose(xg.grad, ref_grad, rtol=1e-5, atol=1e-6)
        assert torch.allclose(mod.weight.grad, ref_wgrad, rtol=1e-5, atol=1e-5)


def test_transposed_convolutions():
    """conv_transpose is the direct convolution of the stride-spread input with the flipped kernel:
    under mxfp8 the same bits as the intercepted conv2d on that input; under fp32 torch's result
    within rounding."""
    x, up = randn(2, 4, 5, 6), nn.ConvTranspose2d(4, 6, 3, stride=1, padding=0)
    with pt.emulate(up, "mxfp8"):
        y = up(x)
    direct = nn.Conv2d(4, 6, 3, padding=2)
    with torch.no_grad():
        direct.weight.copy_(up.weight.transpose(0, 1).flip(2, 3))
        direct.bias.copy_(up.bias)
    with pt.emulate(direct, "mxfp8"):
        assert bits(y) == bits(direct(x))
    mods = [nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=2),
            nn.ConvTranspose2d(4, 6, 3, stride=2, padding=2), nn.ConvTranspose3d(2, 3, 2, stride=(1, 2, 1))]
    for mod, x in zip(mods, (randn(2, 4, 7), randn(2, 4, 5, 6), randn(1, 2, 3, 4, 5))):
        xg = x.clone().requires_grad_()
        ref = mod(xg)
        ref.sum().backward()
        ref_grad, ref_wgrad = xg.grad.clone(), mod.weight.grad.clone()
        mod.weight.grad = xg.grad = None
        with pt.emulate(mod, "fp32") as e:
            ours = mod(xg)
            ours.sum().backward()
        assert ours.shape == ref.shape and torch.allclose(ours, ref, rtol=1e-5, atol=1e-6)
        assert torch.allclose(xg.grad, ref_grad, rtol=1e-5, atol=1e-6)
        assert torch.allclose(mod.weight.grad, ref_wgrad, rtol=1e-5, atol=1e-5)
        assert e.coverage().fraction == 1.0


def _ref_attention(q, k, v, mask, scale):
    """bf16-amp attention: Q K^T and P V with operands in BF16 (attention.products high), scores and
    probabilities rounded to BF16, softmax in FP32."""
    q16 = lambda t: precsim.quantize(t.numpy(), "bf16")
    out = np.empty((*q.shape[:-1], v.shape[-1]), np.float32)
    for i in np.ndindex(*q.shape[:-2]):
        s = precsim.gemm(q16(q[i]), q16(k[i]), model="fp32-seq", trans_b=True) * np.float32(scale)
        s = torch.from_numpy(precsim.quantize(s, "bf16")).masked_fill(~mask, float("-inf"))
        p = precsim.quantize(torch.softmax(s, -1).numpy(), "bf16")
        out[i] = precsim.gemm(p, q16(v[i]), model="fp32-seq")
    return out


def test_sdpa_causal_grouped_heads_and_masks():
    q, k, v = randn(2, 4, 8, 16), randn(2, 2, 8, 16), randn(2, 2, 8, 16)
    m = Call(lambda s, q, k, v, mask: (F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                                       F.scaled_dot_product_attention(q[:, :2], k, v, attn_mask=mask)))
    mask = randn(8, 8) > -0.5
    mask[:, 0] = True
    with pt.emulate(m, "bf16-amp") as e:
        causal, masked = m(q, k, v, mask)
    kk, vv = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    tril = torch.ones(8, 8, dtype=torch.bool).tril()
    assert bits(causal) == _ref_attention(q, kk, vv, tril, 0.25).tobytes()
    assert bits(masked) == _ref_attention(q[:, :2], k, v, mask, 0.25).tobytes()
    assert e.coverage().by_op()["sdpa"]["emulated"] == 2 * (2 * 4 + 2 * 2) * 8 * 8 * 32
    with pt.emulate(m, "fp32"):
        ours = m(q, k, v, mask)
    theirs = m(q, k, v, mask)
    for a, b in zip(ours, theirs):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


def test_embedding_takes_the_weights_format():
    emb = nn.Embedding(10, 8)
    idx = torch.tensor([[1, 3, 3], [9, 0, 1]])
    with pt.emulate(emb, "bf16-amp"):
        out = emb(idx)
        out.sum().backward()
    w16 = precsim.quantize(emb.weight.detach().numpy(), "bf16")
    assert bits(out) == w16[idx.numpy()].tobytes()
    assert emb.weight.grad[3].tolist() == [2.0] * 8 and emb.weight.grad[2].tolist() == [0.0] * 8
