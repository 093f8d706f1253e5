"""The simulated data-parallel all-reduce over one gradient per rank."""
import numpy as np

from . import _precsim as _c
from ._arrays import float32_values, format_name


def allreduce(grads, *, algorithm="ring", format="fp32", average="sum", hook="none"):
    """Every rank's result of reducing grads (a list with one float32 array per rank, all of one
    shape, or an array whose first axis is the rank) as `algorithm` (ring, tree, naive,
    fp32-accumulate) does in a `format` buffer, averaged as `average` says (sum, ddp, nccl-avg,
    post-divide, fsdp), optionally through DDP's bf16/fp16 compression hook.

    Returns a dict: "ranks" (each rank's final buffer, in the gradients' shape), "reduced" (rank
    0's), "ranks_identical", "stats" (QuantStats of every rounding any rank did), "nonzero_inputs",
    "scale" (the per-tensor scale of FP8 buffers, else 1), "error" (rank 0's result against the
    exact sum, or mean when averaging, as `precsim allreduce` reports it: rel_err_norm,
    rel_err_max, mean_rel_bias)."""
    arrays = [float32_values(g, f"grads[{i}]") for i, g in enumerate(grads)]
    if not arrays:
        raise ValueError("grads is empty; give one array per rank")
    shape = arrays[0].shape
    for i, g in enumerate(arrays):
        if g.shape != shape:
            raise ValueError(f"grads[{i}] has shape {g.shape}; grads[0] has {shape}")
    r = _c.allreduce([g.reshape(-1) for g in arrays], algorithm, format_name(format), average, hook)
    ranks = [np.asarray(v).reshape(shape) for v in r["ranks"]]
    return {"ranks": ranks, "reduced": ranks[0], "ranks_identical": r["ranks_identical"], "stats": r["stats"],
            "nonzero_inputs": r["nonzero_inputs"], "scale": r["scale"], "error": r["error"]}
