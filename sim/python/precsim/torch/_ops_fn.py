"""The autograd functions of precsim.torch.ops: each op's forward and backward in precsim's own FP32
arithmetic (_ops_math.py), with the roundings and products an OpNumerics gives: identities and torch's
products in plain torch, the recipe's formats and engine under emulate() (_ops_emulated.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import torch

from . import _ops_math as om


def _same(t: torch.Tensor) -> torch.Tensor:
    return t


def _abt_torch(which: int, pass_: int, a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
    return torch.matmul(a, bt.transpose(-1, -2))


@dataclass
class OpNumerics:
    """What an op rounds and multiplies with. abt(which, pass, A, Bt): stacks C = A Bt^T (A (N, m, k),
    Bt (N, n, k)) of attention's product `which` (0: Q K^T, 1: P V) in GEMM pass `pass` (0 forward,
    1 dgrad, 2 wgrad). cast(w, tensor): a weight in the weights format."""

    opmath: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
    act_grad: Callable[[torch.Tensor], torch.Tensor] = _same
    weight_grad: Callable[[torch.Tensor], torch.Tensor] = _same
    scores: Callable[[torch.Tensor], torch.Tensor] = _same
    abt: Callable[..., torch.Tensor] = _abt_torch
    cast: Callable[[torch.Tensor, int], torch.Tensor] = lambda w, tensor: w
    engine: Any = None   # the head's site (precsim._precsim.RecipeLinear and step), or None: torch


PLAIN = OpNumerics()


@dataclass
class TiedGrad:
    """The head's weight gradient of one forward, unrounded, for the embedding's backward to add its
    rows to (precsim's tied wte: the head's dW, then each token's gradient in order, rounded once)."""

    grad: Optional[torch.Tensor] = field(default=None)


class LayerNormFn(torch.autograd.Function):
    """x (..., c) normalised over its last dimension; w, b (c)."""

    @staticmethod
    def forward(ctx, x, w, b, nums, eps=1e-5):
        x2 = x.detach().float().reshape(-1, x.shape[-1])
        out, m, r = om.layer_norm_forward(x2, w.detach().float(), b.detach().float(), nums.opmath, eps)
        ctx.save_for_backward(x2, w, m, r)
        ctx.meta = (nums, x.shape, x.dtype)
        return out.reshape(x.shape).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        nums, shape, dtype = ctx.meta
        x2, w, m, r = ctx.saved_tensors
        dx, dw, db = om.layer_norm_backward(g.float().reshape(x2.shape), x2, w.detach().float(), m, r)
        return (dx.reshape(shape).to(dtype), nums.weight_grad(dw).to(w.dtype), nums.weight_grad(db).to(w.dtype), None,
                None)


class GeluFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y, t = om.gelu_forward(x.detach().float())
        ctx.save_for_backward(x, t)
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, t = ctx.saved_tensors
        return om.gelu_backward(g.float(), x.float(), t).to(x.dtype)


class AttentionFn(torch.autograd.Function):
    """q, k, v (B, NH, T, hs), valid (B, T): as attention_forward/attention_backward compute it."""

    @staticmethod
    def forward(ctx, q, k, v, valid, nums):
        B, NH, T, hs = q.shape
        flat = lambda t: t.detach().float().reshape(B * NH, T, -1).contiguous()
        Q, K, V = flat(q), flat(k), flat(v)
        allowed = om.allowed_keys(valid, T)[:, None]
        scale = float(np.float32(1.0 / math.sqrt(hs)))
        s = nums.abt(0, 0, Q, K).reshape(B, NH, T, T).masked_fill(~allowed, 0.0)
        s = nums.scores(s)
        p = nums.scores(om.masked_softmax_forward(s, allowed, scale, nums.opmath))
        P = p.reshape(B * NH, T, T)
        y = nums.abt(1, 0, P, V.transpose(1, 2).contiguous())
        ctx.save_for_backward(Q, K, V, P)
        ctx.meta = (nums, scale, q.shape, q.dtype)
        return y.reshape(B, NH, T, hs).to(q.dtype)

    @staticmethod
    def backward(ctx, g):
        nums, scale, shape, dtype = ctx.meta
        Q, K, V, P = ctx.saved_tensors
        dy = g.float().reshape(Q.shape).contiguous()
        t = lambda x: x.transpose(1, 2).contiguous()
        dp = nums.act_grad(nums.abt(1, 1, dy, V))
        dvt = nums.abt(1, 2, t(dy), t(P))
        ds = nums.act_grad(om.masked_softmax_backward(P, dp, scale))
        dq = nums.abt(0, 1, ds, t(K))
        dk = nums.abt(0, 2, t(ds), t(Q))
        out = lambda x: x.reshape(shape).to(dtype)
        return out(dq), out(dk), out(t(dvt)), None, None


class TokenEmbeddingFn(torch.autograd.Function):
    """out[b, t] = wte[tokens[b, t]] + wpe[t]; the backward adds each token's gradient in (b, t) order
    to the head's (tie), then rounds into the weight-gradient format."""

    @staticmethod
    def forward(ctx, tokens, wte, wpe, tie, nums):
        T = tokens.shape[-1]
        e, p = nums.cast(wte.detach().float(), 0), nums.cast(wpe.detach().float(), 1)
        ctx.save_for_backward(tokens)
        ctx.meta = (tie, nums, wte.shape, wpe.shape, wte.dtype)
        return e[tokens] + p[:T]

    @staticmethod
    def backward(ctx, g):
        tie, nums, wte_shape, wpe_shape, dtype = ctx.meta
        (tokens,) = ctx.saved_tensors
        T = tokens.shape[-1]
        d = g.float().reshape(-1, g.shape[-1])
        tok = tokens.reshape(-1).tolist()
        dwte = tie.grad.clone() if tie is not None and tie.grad is not None else torch.zeros(wte_shape)
        dwpe = torch.zeros(wpe_shape)
        for r, i in enumerate(tok):
            dwte[i] += d[r]
            dwpe[r % T] += d[r]
        if tie is not None:
            tie.grad = None
        return None, nums.weight_grad(dwte).to(dtype), nums.weight_grad(dwpe).to(dtype), None, None


class TiedHeadFn(torch.autograd.Function):
    """logits = x wte^T, no bias; the weight's gradient goes to tie (the embedding adds its rows)."""

    @staticmethod
    def forward(ctx, x, wte, tie, nums):
        V, C = wte.shape
        xa = x.detach().float().reshape(-1, C).contiguous()
        wc = nums.cast(wte.detach().float(), 0).contiguous()
        if nums.engine is None:
            y = xa @ wc.t()
        else:
            site = nums.engine
            y = np.zeros((xa.shape[0], V), np.float32)
            site.run(f"m {xa.shape[0]}, n {V}, k {C}", site.engine.forward, xa.numpy(), wc.numpy(),
                     np.empty(0, np.float32), y, xa.shape[0], C, V, site.step)
            y = torch.from_numpy(y)
        ctx.save_for_backward(xa, wc)
        ctx.meta = (tie, nums, x.shape, x.dtype)
        return y.reshape(*x.shape[:-1], V).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        tie, nums, shape, dtype = ctx.meta
        xa, wc = ctx.saved_tensors
        rows, (V, C) = xa.shape[0], wc.shape
        dy = nums.act_grad(g.float().reshape(rows, V)).contiguous()
        if nums.engine is None:
            dw, dx = dy.t() @ xa, dy @ wc
        else:
            site = nums.engine
            dw, dx = np.zeros((V, C), np.float32), np.zeros((rows, C), np.float32)
            site.run(f"m {V}, n {C}, k {rows}, wgrad", site.engine.product, 2, dy.numpy(), True, xa.numpy(), False, dw,
                     V, C, rows, site.step)
            site.run(f"m {rows}, n {C}, k {V}, dgrad", site.engine.product, 1, dy.numpy(), False, wc.numpy(), False,
                     dx, rows, C, V, site.step)
            dw, dx = torch.from_numpy(dw), torch.from_numpy(dx)
        tie.grad = dw if tie.grad is None else tie.grad + dw
        return nums.act_grad(dx).reshape(shape).to(dtype), None, None, None


class RoundFn(torch.autograd.Function):
    """fwd(x) forward, bwd(g) backward (either may be the identity)."""

    @staticmethod
    def forward(ctx, x, fwd, bwd):
        ctx.bwd = bwd
        return x.view_as(x) if fwd is _same else fwd(x.detach()).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return ctx.bwd(g).to(g.dtype), None, None


def rounded(x: torch.Tensor, fwd: Callable[[torch.Tensor], torch.Tensor],
            bwd: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """x through RoundFn, or x itself when both roundings are the identity."""
    return x if fwd is _same and bwd is _same else RoundFn.apply(x, fwd, bwd)


class SoftmaxFn(torch.autograd.Function):
    """Softmax over the last dimension in precsim's order, intermediates rounded by opmath; the
    backward p (dp - sum p dp) in FP32."""

    @staticmethod
    def forward(ctx, x, opmath):
        p = om.softmax_forward(x.detach().float(), opmath)
        ctx.save_for_backward(p)
        return p.to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        (p,) = ctx.saved_tensors
        return om.masked_softmax_backward(p, g.float(), 1.0).to(g.dtype), None
