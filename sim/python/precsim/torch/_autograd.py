"""Fake quantization as autograd functions with a straight-through gradient, optionally rounded into
a second format on the way back (as QPyTorch's quantizer takes a forward and a backward number)."""
import numpy as np
import torch

import precsim

from ._tensors import as_numpy, from_numpy

# Stochastic-rounding role of the gradient's rounding, apart from the forward's (role 0).
_GRAD_ROLE = 1


class _Quantize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, fwd, bwd):
        ctx.bwd = bwd
        return from_numpy(fwd(as_numpy(t, "t")))

    @staticmethod
    def backward(ctx, g):
        if ctx.bwd is None:
            return g, None, None
        return from_numpy(ctx.bwd(as_numpy(g, "grad"))), None, None


def _grad_key(key):
    step, tensor, _ = key
    return (step, tensor, _GRAD_ROLE)


def quantize(t, fmt, *, rounding="nearest-even", overflow="ieee", flush_subnormals=False, sr_bits=32, seed=0,
             key=(0, 0, 0), grad_format=None, grad_rounding="nearest-even"):
    """t rounded into fmt (precsim.quantize) with a straight-through gradient; with grad_format the
    gradient is rounded into it with grad_rounding (stochastic: same seed, another role). float32
    out (float16/bfloat16 inputs are widened exactly first)."""
    precsim.Format(fmt)  # a bad name fails here, before autograd
    fwd = lambda a: precsim.quantize(a, fmt, rounding=rounding, overflow=overflow, flush_subnormals=flush_subnormals,
                                     sr_bits=sr_bits, seed=seed, key=key)
    bwd = None
    if grad_format is not None:
        precsim.Format(grad_format)
        bwd = lambda a: precsim.quantize(a, grad_format, rounding=grad_rounding, overflow=overflow, sr_bits=sr_bits,
                                         seed=seed, key=_grad_key(key))
    return _Quantize.apply(t, fwd, bwd)


def block_quantize(t, scheme, *, axis=None, rounding="nearest-even", sr_bits=32, seed=0, key=(0, 0, 0),
                   grad_scheme=None, grad_axis=None, grad_rounding="nearest-even"):
    """t fake-quantized under a block-scaling scheme (precsim.block_quantize) with a straight-through
    gradient; with grad_scheme the gradient is fake-quantized under it (grad_axis, grad_rounding)."""
    fwd = lambda a: precsim.block_quantize(a, scheme, axis=axis, rounding=rounding, sr_bits=sr_bits, seed=seed, key=key)
    bwd = None
    if grad_scheme is not None:
        bwd = lambda a: precsim.block_quantize(a, grad_scheme, axis=grad_axis, rounding=grad_rounding, sr_bits=sr_bits,
                                               seed=seed, key=_grad_key(key))
    return _Quantize.apply(t, fwd, bwd)


class _CrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target):
        x = as_numpy(logits, "logits")
        if x.ndim != 2:
            raise ValueError(f"logits must be (rows, classes); got shape {tuple(x.shape)}")
        y = np.ascontiguousarray(target.detach().cpu().numpy(), dtype=np.int32)
        probs = np.empty_like(x)
        loss = precsim._precsim.xent_forward(x, y, probs, x.shape[0], x.shape[1])
        ctx.saved = (probs, y)
        return torch.tensor(loss, dtype=torch.float64)

    @staticmethod
    def backward(ctx, g):
        probs, y = ctx.saved
        d = np.empty_like(probs)
        precsim._precsim.xent_backward(probs, y, float(g), d, probs.shape[0], probs.shape[1])
        return from_numpy(d), None


def cross_entropy(logits, target):
    """The mean softmax cross-entropy as `precsim train`'s MLP computes it (per-row losses in FP32,
    the mean in double; gradient (p - onehot) * fl32(1 / rows)), as a float64 scalar tensor."""
    return _CrossEntropy.apply(logits, target)
