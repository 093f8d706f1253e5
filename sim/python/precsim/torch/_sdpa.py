"""scaled_dot_product_attention as its two products through the recipe (QK^T, then PV), the scores
and probabilities rounded into the recipe's attention.scores format, the softmax in FP32 (or the
recipe's low opmath), masks and grouped-query heads as torch takes them."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Tuple

import torch


def _stack(t: torch.Tensor, batch: Tuple[int, ...]) -> torch.Tensor:
    return t.expand(*batch, *t.shape[-2:]).reshape(-1, *t.shape[-2:])


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
         dropout_p: float = 0.0, is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False, *,
         product: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
         round_scores: Callable[[torch.Tensor, int], torch.Tensor],
         softmax: Callable[[torch.Tensor], torch.Tensor]) -> Tuple[torch.Tensor, int]:
    """The attention output and its forward FLOPs. product(a, b, which) multiplies stacks
    (B, m, k) x (B, k, n) (which 0: QK^T, 1: PV); round_scores(t, which) rounds the scores (0) and
    the probabilities (1); softmax(s) over the last dimension (FP32, or the recipe's low opmath)."""
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if enable_gqa and q.dim() >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk:
            raise ValueError(f"scaled_dot_product_attention: {hq} query heads are not a multiple of {hk} key heads")
        k, v = k.repeat_interleave(hq // hk, dim=-3), v.repeat_interleave(hq // hk, dim=-3)
    batch = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
    s = product(_stack(q, batch), _stack(k, batch).transpose(-1, -2).contiguous(), 0).float()
    s = round_scores(s * (1.0 / math.sqrt(E) if scale is None else scale), 0)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        m = _stack(attn_mask, batch)
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m.float()
    p = round_scores(softmax(s), 1)
    if dropout_p > 0:
        p = torch.nn.functional.dropout(p, dropout_p)
    o = product(p, _stack(v, batch), 1)
    flops = 2 * math.prod(batch) * L * S * (E + Ev)
    return o.reshape(*batch, L, Ev).to(q.dtype), flops
