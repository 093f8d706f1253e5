"""precsim.torch.ops under emulate(): the handlers give each op the OpNumerics of the recipe of the
module that runs it: its rounding points in the recipe's formats (as StepNumerics::round: the
activations, activation gradients, weight gradients, attention scores; none for a LayerNorm output
under autocast), attention.opmath "low", attention's products through the recipe's attention engine
and the head's through its linear layer. Stochastic rounding here keys by the op's step and role,
not by precsim's transformer's running tensor count (docs/torch-coverage.md)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

import precsim

from . import ops
from ._fallback import Fallback
from ._ops_fn import AttentionFn, LayerNormFn, OpNumerics, TiedHeadFn, TokenEmbeddingFn, _same, rounded

# Role numbers of the SR keys (sr_keys.h's roles: activations 1, activation_grads 2, weight_grads 3).
_ROLES = {"activations": 1, "activation_grads": 2, "weight_grads": 3}


def _rounder(spec: Dict[str, Any], seed: int, key: Tuple[int, int, int]) -> Callable[[torch.Tensor], torch.Tensor]:
    fmt, rounding = spec["format"], spec["rounding"]
    if fmt == "fp32":
        return _same

    def r(t: torch.Tensor) -> torch.Tensor:
        a = t.detach().float().contiguous().numpy()
        return torch.from_numpy(precsim.quantize(a, fmt, rounding=rounding, seed=seed, key=key)).reshape(t.shape)
    return r


def _recipe_dict(emu, op: str) -> Dict[str, Any]:
    return emu._derive(emu._recipe_here(op), "dict", lambda r: r.to_dict())


def low_opmath(emu, op: str) -> Optional[Callable[[torch.Tensor], torch.Tensor]]:
    """The running module's opmath rounding when its recipe says attention.opmath "low" (None: FP32
    opmath, or a module left out)."""
    if not emu._stack:
        return None
    try:
        d = _recipe_dict(emu, op)
    except Fallback:
        return None
    if d["attention"]["opmath"] != "low":
        return None
    act = _rounder(d["activations"], emu.seed, (emu._cur_step, 0, _ROLES["activations"]))
    return None if act is _same else act


def _numerics(emu, op: str) -> OpNumerics:
    d = _recipe_dict(emu, op)
    step, seed = emu._cur_step, emu.seed
    key = lambda role: (step, 0, _ROLES[role])
    return OpNumerics(opmath=low_opmath(emu, op),
                      act_grad=_rounder(d["activation_grads"], seed, key("activation_grads")),
                      weight_grad=_rounder(d["weight_grads"], seed, key("weight_grads")),
                      scores=_rounder(d["attention"]["scores"], seed, key("activations")))


def _abt_engine(sites):
    """Stacked C = A Bt^T through the sites' engines, operands as precsim's attention lays them out."""
    def abt(which: int, pass_: int, a: torch.Tensor, bt: torch.Tensor) -> torch.Tensor:
        site = sites[which]
        A, Bt = a.contiguous().numpy(), bt.contiguous().numpy()
        batch, m, k = A.shape
        n = Bt.shape[1]
        C = np.zeros((batch, m, n), np.float32)
        for i in range(batch):
            site.run(f"m {m}, n {n}, k {k}", site.engine.product, pass_, A[i], False, Bt[i], True, C[i], m, n, k,
                     site.step)
        return torch.from_numpy(C)
    return abt


def _cast(site):
    def cast(w: torch.Tensor, tensor: int) -> torch.Tensor:
        wc = w.detach().float().contiguous().numpy().copy()
        site.engine.cast_weights(wc.reshape(-1), tensor, site.step)
        return torch.from_numpy(wc)
    return cast


def h_layer_norm(emu, x, weight, bias):
    return LayerNormFn.apply(x, weight, bias, _numerics(emu, "layer_norm"))


def h_causal_attention(emu, q, k, v, valid):
    nums = _numerics(emu, "attention")
    sites = [emu._site("attention.qk", attention=True), emu._site("attention.pv", attention=True)]
    B, NH, T, hs = q.shape
    emu._count("attention", 4 * B * NH * T * T * hs)
    return AttentionFn.apply(q, k, v, valid, dataclasses.replace(nums, abt=_abt_engine(sites)))


def h_token_embedding(emu, tokens, wte, wpe, tie=None):
    nums = _numerics(emu, "token_embedding")
    site = emu._site("embedding")
    emu._count("embedding", 0)
    return TokenEmbeddingFn.apply(tokens, wte, wpe, tie, dataclasses.replace(nums, cast=_cast(site)))


def h_tied_head(emu, x, wte, tie):
    if not isinstance(tie, ops.TiedGrad):
        raise TypeError(f"tie must be a precsim.torch.ops.TiedGrad shared with token_embedding, not "
                        f"{type(tie).__name__}")
    nums = _numerics(emu, "tied_head")
    site = emu._site("linear")
    emu._count("linear", 2 * (x.numel() // x.shape[-1]) * wte.shape[0] * wte.shape[1])
    return TiedHeadFn.apply(x, wte, tie, dataclasses.replace(nums, cast=_cast(site), engine=site))


def _role(emu, op: str, role: str):
    d = _recipe_dict(emu, op)
    if op == "round_norm_output" and d["autocast"]:
        return _same
    return _rounder(d[role], emu.seed, (emu._cur_step, 0, _ROLES[role]))


def weight_grad_rounder(emu, op: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The recipe's weight-gradient rounding of the running module (an embedding table's gradient)."""
    return _role(emu, op, "weight_grads")


def h_round_activation(emu, x):
    return rounded(x, _role(emu, "round_activation", "activations"), _same)


def h_round_norm_output(emu, x):
    return rounded(x, _role(emu, "round_norm_output", "activations"), _same)


def h_round_grad(emu, x):
    return rounded(x, _same, _role(emu, "round_grad", "activation_grads"))


OPS_HANDLERS = {
    ops.layer_norm: ("layer_norm", h_layer_norm),
    ops.causal_attention: ("attention", h_causal_attention),
    ops.token_embedding: ("embedding", h_token_embedding),
    ops.tied_head: ("linear", h_tied_head),
    ops.round_activation: ("round_activation", h_round_activation),
    ops.round_norm_output: ("round_norm_output", h_round_norm_output),
    ops.round_grad: ("round_grad", h_round_grad),
}
