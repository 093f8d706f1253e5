"""precsim.torch.ops against a second implementation of precsim's C++ kernels (scalar NumPy float32
loops transcribing sim/src/model/layers.cpp), torch's softmax, normalisations and activations in a
recipe's low opmath, and the embedding table's gradient in the weight-gradient format."""
import math

import numpy as np
import pytest

import precsim
from conftest import need

torch = need("torch")
pt = need("precsim.torch")
F = torch.nn.functional
f32 = np.float32


def _bf16(a):
    return np.asarray(precsim.quantize(np.asarray(a, np.float32), "bf16"))


def _ln_scalar(x, w, b, low=None):
    """layernorm_forward / layernorm_forward_low, one float32 operation at a time."""
    o = low or (lambda v: f32(v))
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        c = x.shape[1]
        s = f32(0)
        for i in range(c):
            s = o(s + x[r, i])
        m = o(s / f32(c))
        v = f32(0)
        for i in range(c):
            d = o(x[r, i] - m)
            v = o(v + o(d * d))
        v = o(v / f32(c))
        rs = o(f32(1.0 / math.sqrt(float(v) + 1e-5))) if low else f32(1.0 / math.sqrt(float(v + f32(1e-5))))
        for i in range(c):
            out[r, i] = o(o(o(x[r, i] - m) * rs) * w[i] + b[i]) if low else ((x[r, i] - m) * rs) * w[i] + b[i]
    return out


def _softmax_scalar(x, low):
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        z = [low(v) for v in x[r]]
        mx = max(z)
        e = [low(f32(math.exp(float(low(v - mx))))) for v in z]
        s = f32(0)
        for v in e:
            s = low(s + v)
        out[r] = [low(v / s) for v in e]
    return out


def _data(rows=7, c=24, seed=3):
    rng = np.random.default_rng(seed)
    x = (rng.normal(0, 2, (rows, c)) + rng.normal(0, 5, (rows, 1))).astype(np.float32)
    return x, rng.normal(1, 0.3, c).astype(np.float32), rng.normal(0, 0.3, c).astype(np.float32)


def test_layer_norm_and_gelu_are_precsims_fp32_arithmetic():
    x, w, b = _data()
    got = pt.ops.layer_norm(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(got.view(np.uint32), _ln_scalar(x, w, b).view(np.uint32))
    # torch's own layer_norm sums in another order: the same to a few ulps, not the same bits.
    ref = F.layer_norm(torch.from_numpy(x), (x.shape[1],), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    assert np.max(np.abs(got - ref)) < 1e-5
    s, c = f32(0.7978845608028654), f32(0.044715)
    g = pt.ops.gelu_tanh(torch.from_numpy(x)).numpy()
    want = np.array([f32(0.5) * v * (f32(1) + f32(math.tanh(float(s * (v + c * v * v * v))))) for v in x.ravel()],
                    np.float32).reshape(x.shape)
    np.testing.assert_array_equal(g.view(np.uint32), want.view(np.uint32))


def test_layer_norm_backward_sums_rows_in_order():
    x, w, b = _data(rows=5, c=6)
    xt, wt, bt = (torch.from_numpy(a.copy()).requires_grad_() for a in (x, w, b))
    dy = np.random.default_rng(4).normal(0, 1, x.shape).astype(np.float32)
    pt.ops.layer_norm(xt, wt, bt).backward(torch.from_numpy(dy))
    db = f32(0) * w
    for r in range(x.shape[0]):
        db = db + dy[r]
    np.testing.assert_array_equal(bt.grad.numpy(), db)
    ref = [t.detach().clone().requires_grad_() for t in (xt, wt, bt)]
    F.layer_norm(ref[0], (6,), ref[1], ref[2]).backward(torch.from_numpy(dy))
    for ours, theirs in zip((xt, wt, bt), ref):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)


LOW = precsim.Recipe.preset("bf16-amp").replace(name="bf16-amp-low-opmath", attention={"opmath": "low"})


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.norm = torch.nn.Linear(24, 24), torch.nn.LayerNorm(24)

    def forward(self, x):
        h = self.norm(self.lin(x))
        return (F.softmax(h, dim=-1), F.gelu(h), F.silu(h), F.rms_norm(h, (24,)), F.log_softmax(h, dim=-1), h)


def test_low_opmath_softmax_norms_and_activations():
    torch.manual_seed(0)
    net, x = _Net(), torch.randn(7, 24)
    seen = []
    hook = net.norm.register_forward_hook(lambda m, args, out: seen.append(args[0].detach().numpy().copy()))
    with pt.emulate(net, LOW) as emu:
        sm, ge, si, rms, lsm, h = net(x)
        cov = emu.coverage()
    hook.remove()
    hn, lin = h.detach().numpy(), seen[0]
    low = lambda v: _bf16(v)
    np.testing.assert_array_equal(hn, _ln_scalar(lin, net.norm.weight.detach().numpy(), net.norm.bias.detach().numpy(),
                                                 low=lambda v: f32(_bf16(f32(v))[()])))
    np.testing.assert_array_equal(sm.detach().numpy(), _softmax_scalar(hn, lambda v: f32(_bf16(f32(v))[()])))
    # GELU, SiLU, RMSNorm: input and output rounded, torch's FP32 in between.
    ht = torch.from_numpy(hn)
    for got, fn in ((ge, F.gelu), (si, F.silu), (rms, lambda t: F.rms_norm(t, (24,)))):
        np.testing.assert_array_equal(got.detach().numpy(), low(fn(torch.from_numpy(low(hn))).numpy()))
    assert not np.array_equal(ge.detach().numpy(), F.gelu(ht).numpy())
    ops = cov.by_op()
    assert ops["softmax"]["calls"] == 1 and ops["gelu"]["calls"] == 1 and ops["layer_norm"]["calls"] == 1
    left = [(r.op, r.reason) for r in cov.not_emulated()]
    assert left == [("log_softmax", "runs in FP32 opmath: not intercepted")]
    # In FP32 opmath they are torch's own functions, bit for bit.
    with pt.emulate(net, "bf16-amp") as emu:
        sm2, ge2, *_, h2 = net(x)
        assert "softmax" not in emu.coverage().by_op()
    np.testing.assert_array_equal(sm2.detach().numpy(), F.softmax(h2, dim=-1).detach().numpy())


def test_embedding_gradient_in_the_weight_gradient_format():
    torch.manual_seed(1)
    emb = torch.nn.Embedding(11, 8)
    idx = torch.randint(0, 11, (40,))
    up = torch.randn(40, 8)
    with pt.emulate(emb, "bf16-amp"):
        (emb(idx) * up).sum().backward()
    g = emb.weight.grad.numpy().copy()
    emb.weight.grad = None
    (F.embedding(idx, emb.weight) * up).sum().backward()
    fp32 = emb.weight.grad.numpy()
    np.testing.assert_array_equal(g, _bf16(fp32))  # torch's FP32 table gradient, rounded into bf16
    assert not np.array_equal(g, fp32)
