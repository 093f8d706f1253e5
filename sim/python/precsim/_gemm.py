"""Matrix and dot products as an accumulation model computes them (Tensor Core block FMA,
sequential, pairwise, Kahan, exact, split-K, promotion)."""
import numpy as np

from . import _precsim as _c
from ._arrays import float32_values, format_name


def gemm(a, b, *, model="h100", a_format="bf16", b_format="bf16", out_format="fp32", check_inputs=False, input_policy=None,
         out_rounding="nearest-even", out_overflow="ieee", trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None, a_scales=None,
         b_scales=None, block_k=0, a_block_mn=1, b_block_mn=1, a_tensor_scale=1.0, b_tensor_scale=1.0,
         out_dtype=np.float32):
    """C = alpha op(A) op(B) + beta C, each output's K products summed as `model` says (a preset
    from accum_models() or a spec such as "block:n=32:F=13:promote=128").

    a: (M, K) float32, or (K, M) with trans_a; b: (K, N), or (N, K) with trans_b. As `precsim gemm`
    does, operands are rounded to nearest-even into a_format / b_format (default bf16);
    check_inputs=True raises instead, naming the first value that is not one of the format's
    (input_policy "round", "check" or "trust", which checks nothing, overrides both). Block-scaled operands give
    their decode scales: a_scales (ceil(M / a_block_mn), ceil(K / block_k)), b_scales
    (ceil(N / b_block_mn), ceil(K / block_k)), float32, with NVFP4's tensor scales apart. Returns
    C (M, N) as out_dtype (float32, or float64 for out_format fp64). out_overflow is the rounding
    into out_format's overflow ("ieee", or "saturate" as cuBLASLt's FP8 outputs: Inf and values
    beyond the largest finite one give it)."""
    policy = input_policy if input_policy is not None else "check" if check_inputs else "round"
    A, B = float32_values(a, "a"), float32_values(b, "b")
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"a and b must be 2-D; got shapes {A.shape} and {B.shape}")
    m, k = (A.shape[1], A.shape[0]) if trans_a else A.shape
    kb, n = (B.shape[1], B.shape[0]) if trans_b else B.shape
    if k != kb:
        raise ValueError(f"inner dimensions differ: op(a) is {m} x {k}, op(b) is {kb} x {n}")
    dt = np.dtype(out_dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"out_dtype {dt} is not supported; allowed: float32, float64")
    C = np.zeros((m, n), dt)
    if beta != 0:
        if c is None:
            raise ValueError("beta != 0 needs c")
        C[...] = np.asarray(c, dt).reshape(m, n)
    sa = None if a_scales is None else float32_values(a_scales, "a_scales")
    sb = None if b_scales is None else float32_values(b_scales, "b_scales")
    fn = _c.gemm_f32 if dt == np.float32 else _c.gemm_f64
    a_format, b_format = format_name(a_format, "a_format"), format_name(b_format, "b_format")
    out_format = format_name(out_format, "out_format")
    fn(A, B, C, m, n, k, model, a_format, b_format, out_format, policy, out_rounding, out_overflow, bool(trans_a),
       bool(trans_b), float(alpha), float(beta), sa, sb, int(block_k), int(a_block_mn), int(b_block_mn),
       float(a_tensor_scale), float(b_tensor_scale))
    return C


def mma(a, b, c, *, model, a_format=None, b_format=None, out_format=None, a_scales=None, b_scales=None,
        info=False):
    """D = A B + C by one matrix instruction, C its accumulator input, as `precsim mma` computes it.

    model: ARCH/INSTRUCTION as MMA-Sim names it ("hopper/wgmma.m64n8k32.f32.e4m3.e5m2", see
    accum_models()), or a GPU preset that picks its instruction by a_format and b_format. a (M, K),
    b (K, N) and c (M, N) must have the instruction's shape and hold values of its operand and C
    formats (FP6 and FP4 given as their values); a_format, b_format and out_format (D's) default
    to the instruction's and must be ones it takes. Block-scaled instructions take decode scales
    a_scales (M, K/block) and b_scales (N, K/block). Returns D (M, N) float32 (float64 for an FP64
    D), or (D, a dict of what the instruction resolved to) with info=True. Bad input raises ValueError naming it."""
    A, B, C = (float32_values(x, n) for x, n in ((a, "a"), (b, "b"), (c, "c")))
    for x, n in ((A, "a"), (B, "b"), (C, "c")):
        if x.ndim != 2:
            raise ValueError(f"mma: {n} must be 2-D; got shape {x.shape}")
    sa = None if a_scales is None else float32_values(a_scales, "a_scales")
    sb = None if b_scales is None else float32_values(b_scales, "b_scales")
    names = [None if f is None else format_name(f, n)
             for f, n in ((a_format, "a_format"), (b_format, "b_format"), (out_format, "out_format"))]
    D = np.zeros(C.shape, np.float64)
    got = _c.mma(A, B, C, D, model, *names, sa, sb)
    if got["d_format"] != "fp64":
        D = D.astype(np.float32)  # exact: D is FP32 or FP16
    return (D, got) if info else D


def dot(a, b, *, model="fp32-seq", a_format="fp32", b_format="fp32", c=0.0, out_format=None, status=False):
    """c + sum a[i] b[i] as the model sums it, as a float (exact: every accumulator fits a double);
    with status=True also the rounding status ("inexact|overflow", "exact"). As `precsim dot`: a and b
    must hold values of a_format and b_format and c one of the accumulator format (a ValueError
    names the first that is not, and its nearest value), the model must be ordered, and out_format
    is --output-format: the accumulator's format (fp16 on a Tensor Core preset: its FP16-output
    variant)."""
    A = float32_values(a, "a").reshape(-1)
    B = float32_values(b, "b").reshape(-1)
    of = None if out_format is None else format_name(out_format, "out_format")
    value, st = _c.dot(A, B, float(c), model, format_name(a_format, "a_format"), format_name(b_format, "b_format"), of)
    return (value, st) if status else value


def accum_models() -> list:
    """Every accumulation model preset and matrix instruction (ARCH/INSTRUCTION, one dict per name
    pattern, "group": "instruction"), as `precsim models --json` lists them."""
    return _c.accum_models()


def accum_model(spec: str) -> dict:
    """A model spec resolved to all its parameters (a dict)."""
    return _c.accum_model(spec)
