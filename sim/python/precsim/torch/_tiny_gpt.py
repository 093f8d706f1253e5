"""TinyGPT: precsim's transformer (sim/src/model/transformer_block.cpp, GPT-2 shape, llm.c style) as a
torch module, op for op: nn.Linear for the four products of a block (emulate() runs them as the
recipe's linear layer), precsim.torch.ops for the rest, and every rounding point where
transformer_forward and transformer_backward round. Under emulate(model, recipe) and trained with
torch.optim.AdamW from `precsim train`'s initial weights on its batches (from_problem), its losses
are precsim's (tests/python/test_torch_tiny_gpt.py)."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np
import torch
from torch import nn

import precsim

from . import ops
from ._autograd import cross_entropy


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension (eps 1e-5) in precsim's arithmetic (ops.layer_norm)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.round_norm_output(ops.layer_norm(x, self.weight, self.bias))


class Attention(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.heads = heads
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = ops.causal_attention(q, k, v, valid).transpose(1, 2).reshape(B, T, C)
        return self.proj(ops.round_activation(y))


class Mlp(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc, self.proj = nn.Linear(width, hidden), nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(ops.round_activation(ops.gelu_tanh(self.fc(x))))


def _stream(x: torch.Tensor) -> torch.Tensor:
    """A residual stream: rounded into the activations' format, its gradient (the sum over its two
    uses) into the activation gradients'."""
    return ops.round_grad(ops.round_activation(x))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, hidden: int) -> None:
        super().__init__()
        self.ln1, self.attn = LayerNorm(width), Attention(width, heads)
        self.ln2, self.mlp = LayerNorm(width), Mlp(width, hidden)

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        x = _stream(x + self.attn(self.ln1(x), valid))
        return _stream(x + self.mlp(self.ln2(x)))


class TinyGPT(nn.Module):
    """The model of `precsim train` with model.type "transformer" (tied output projection).
    forward(tokens (B, T) int, valid (B, T), 1 for a real token) gives the logits (B, T, vocab)."""

    def __init__(self, vocab: int, context: int, width: int, heads: int, layers: int, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.wte = nn.Parameter(torch.zeros(vocab, width))
        self.wpe = nn.Parameter(torch.zeros(context, width))
        self.blocks = nn.ModuleList(Block(width, heads, mlp_ratio * width) for _ in range(layers))
        self.lnf = LayerNorm(width)

    def forward(self, tokens: torch.Tensor, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
        valid = torch.ones_like(tokens, dtype=torch.uint8) if valid is None else valid
        tie = ops.TiedGrad()
        x = _stream(ops.token_embedding(tokens, self.wte, self.wpe, tie))
        for block in self.blocks:
            x = block(x, valid)
        return ops.tied_head(self.lnf(x), self.wte, tie)

    @classmethod
    def from_problem(cls, problem: Mapping[str, Any]) -> TinyGPT:
        """The model with the initial weights of precsim.torch.transformer_problem(...)."""
        if not problem["tied"] or problem["outlier_scale"] != 1.0:
            raise ValueError("TinyGPT is the tied model without an injected outlier (model.tied true, "
                             "model.outlier_scale 1)")
        m = cls(problem["vocab"], problem["context"], problem["width"], problem["heads"], problem["layers"],
                problem["mlp_ratio"])
        params = dict(m.named_parameters())
        with torch.no_grad():
            for name, value in problem["params"].items():
                params[name].copy_(torch.from_numpy(np.asarray(value)))
        return m


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """The token-mean cross-entropy over the counted targets, as precsim's transformer trainer
    computes it (per-token losses in FP32, the mean in double; float64 scalar)."""
    keep = loss_mask.reshape(-1).bool()
    return cross_entropy(logits.reshape(-1, logits.shape[-1])[keep], targets.reshape(-1)[keep])


def transformer_problem(config: Mapping[str, Any], seed: Optional[int] = None) -> Dict[str, Any]:
    """What `precsim train` trains a transformer config on for one seed (default: the config's): the
    initial weights by TinyGPT's parameter names, the token rows (tokens, targets, valid, loss_mask;
    rows [0, train_rows) for training), the sizes, and batch(step): the rows of a step's batch."""
    cfg = dict(config)
    if seed is None and "seed" not in cfg:
        raise ValueError("transformer_problem: give seed= or a config with a \"seed\"")
    seed = int(cfg["seed"] if seed is None else seed)
    cfg.setdefault("recipes", ["fp32"])  # the problem is the same for every recipe
    p = dict(precsim._precsim.transformer_problem(cfg, seed))
    p["seed"] = seed

    def batch(step: int) -> Tuple[torch.Tensor, ...]:
        idx = precsim._precsim.batch_indices(p["train_rows"], p["batch"], seed, step)
        return tuple(torch.from_numpy(np.asarray(p[k])[idx]) for k in ("tokens", "targets", "valid", "loss_mask"))

    p["batch_of"] = batch
    return p
