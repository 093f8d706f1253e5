"""precsim.torch.ops: the non-matrix operations of precsim's transformer, computed as precsim computes
them, for a torch model that wants precsim's bits (precsim.torch.TinyGPT is built from them).

torch's own layer_norm, gelu and softmax sum in another order (vectorised, blocked) and take their
transcendental functions from other libraries, so a torch model differs from `precsim train` by
rounding even where every product is emulated. These functions compute in precsim's FP32 order
(sequential sums, float64 exp/tanh/sqrt rounded once: sim/src/model/layers.cpp); under
precsim.torch.emulate they also take the recipe's rounding points: the activations' and gradients'
formats, attention's scores format, the weight-gradient format of their parameters, attention's
products through the recipe and attention.opmath "low" (every LayerNorm and softmax intermediate
rounded into the activations' format). Outside emulate the roundings are identities and
attention's products torch's."""
from __future__ import annotations

import functools
from typing import Any, Callable, Optional

import torch
from torch.overrides import handle_torch_function, has_torch_function

from ._ops_fn import PLAIN, AttentionFn, GeluFn, LayerNormFn, TiedGrad, TiedHeadFn, TokenEmbeddingFn

__all__ = ["layer_norm", "gelu_tanh", "causal_attention", "token_embedding", "tied_head", "round_activation",
           "round_norm_output", "round_grad", "TiedGrad"]


def _overridable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn as a torch function: under a TorchFunctionMode (emulate's) the mode takes the call."""

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        tensors = tuple(a for a in args if isinstance(a, torch.Tensor))
        if has_torch_function(tensors):
            return handle_torch_function(op, tensors, *args, **kwargs)
        return fn(*args, **kwargs)

    return op


@_overridable
def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """LayerNorm over the last dimension (eps 1e-5) as precsim's layernorm_forward/backward: mean and
    variance summed in index order, 1/sqrt in float64; dweight and dbias summed over rows in order."""
    return LayerNormFn.apply(x, weight, bias, PLAIN)


@_overridable
def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU, tanh form, as precsim's gelu_forward/backward (tanh in float64, rounded once)."""
    return GeluFn.apply(x)


@_overridable
def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Causal self-attention of heads q, k, v (B, NH, T, hs) over the keys that are real tokens
    (valid (B, T), 1 for a token, 0 for padding): precsim's attention_forward/backward (scores
    Q K^T rounded into the scores format, softmax of scores / sqrt(hs), probabilities rounded, P V).
    A query with no real key attends to nothing (output 0)."""
    return AttentionFn.apply(q, k, v, valid, PLAIN)


@_overridable
def token_embedding(tokens: torch.Tensor, wte: torch.Tensor, wpe: torch.Tensor,
                    tie: Optional[TiedGrad] = None) -> torch.Tensor:
    """wte[tokens] + wpe[position] for tokens (B, T). With `tie` (shared with tied_head) the tied
    table's gradient is the head's plus each token's row in (b, t) order, rounded once, as precsim
    sums it."""
    return TokenEmbeddingFn.apply(tokens, wte, wpe, tie, PLAIN)


@_overridable
def tied_head(x: torch.Tensor, wte: torch.Tensor, tie: TiedGrad) -> torch.Tensor:
    """x wte^T (the logits of a tied output projection); wte's gradient goes through `tie` to the
    token_embedding that shares it (call token_embedding with the same tie in the same forward)."""
    if not isinstance(tie, TiedGrad):
        raise TypeError(f"tie must be a precsim.torch.ops.TiedGrad shared with token_embedding, not "
                        f"{type(tie).__name__}")
    return TiedHeadFn.apply(x, wte, tie, PLAIN)


@_overridable
def round_activation(x: torch.Tensor) -> torch.Tensor:
    """x rounded into the recipe's activations format (a rounding point of precsim's model); the
    gradient passes unchanged. The identity outside emulate."""
    return x


@_overridable
def round_norm_output(x: torch.Tensor) -> torch.Tensor:
    """A LayerNorm output's rounding point: the activations' format, none under autocast (layer_norm
    is on autocast's FP32 list). The identity outside emulate."""
    return x


@_overridable
def round_grad(x: torch.Tensor) -> torch.Tensor:
    """The identity forward; the gradient arriving here (the sum over x's uses) rounded into the
    recipe's activation-gradient format. The identity outside emulate."""
    return x
