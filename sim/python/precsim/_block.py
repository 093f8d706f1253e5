"""Block-scaled formats (MX, MXINT8, NVFP4, FP8 tensor/row/tile/block): fake quantization, the packed
form and back. An array of any rank is rows x cols: the last dimension is cols (axis 1, the K of
an activation or weight), the others fold into rows; 0-d and 1-d arrays are one row."""
from dataclasses import dataclass

import numpy as np

from . import _precsim as _c
from ._arrays import float32_values, options, output, values


def _rows_cols(shape):
    if len(shape) == 0:
        return 1, 1
    return int(np.prod(shape[:-1], dtype=np.int64)), int(shape[-1])


def block_quantize(x, scheme, *, axis=None, rounding="nearest-even", sr_bits=32, seed=0, key=(0, 0, 0),
                   tensor_amax=None, out=None, stats=False):
    """dequantize(quantize(x)) under a scheme (any name `precsim analyze` takes: "mxfp8_e4m3",
    "mxfp4:rule=rceil", "mxint8", "nvfp4", "fp8_e4m3:tensor|row|tile128|block128", a plain format).
    axis 1 (default): blocks run along the last dimension; 0: down the columns. Elements of
    block-scaled schemes saturate; `rounding` is the elements' (stochastic: sr_bits, seed, key).
    tensor_amax overrides NVFP4's (and per-tensor scaling's) tensor amax. float32 in and out."""
    a = float32_values(x, "x")
    rows, cols = _rows_cols(a.shape)
    y = np.empty_like(a) if out is None else output(out, a)
    o = options(rounding, "ieee", False, sr_bits, seed, key)
    st = _c.block_fake_quantize(scheme, a, y, rows, cols, axis, o, -1.0 if tensor_amax is None else float(tensor_amax))
    return (y, st) if stats else y


@dataclass
class BlockEncoded:
    """The packed form of a block-scaled array (formats/block_scaling.h, BlockPacked).

    codes: uint8 (stored rows, bytes per stored row). For axis 1 the array's own rows; for axis 0
        its transpose (cols x rows), so that every block is contiguous. FP4 codes two per byte, the
        even element in the low nibble, each stored row padded to a whole byte; other formats one
        code per byte.
    scales: the block scales, (scale_rows, scale_cols) in block order (scale_rows: blocks across
        the axis, scale_cols: blocks along it; transposed for axis 0 as the codes): uint8 codes for
        E8M0 (MX) and E4M3 (NVFP4) scales, float32 decode scales for the FP8 recipes.
    scale_values: the decode value of every scale, float64, same shape.
    tensor_scale: NVFP4's FP32 tensor-level decode scale (1 / s_enc); 1 for other schemes."""
    scheme: str
    shape: tuple
    axis: int
    codes: np.ndarray
    scales: np.ndarray
    scale_values: np.ndarray
    tensor_scale: float
    packed: object


def block_encode(x, scheme, *, axis=None, rounding="nearest-even", sr_bits=32, seed=0, key=(0, 0, 0),
                 tensor_amax=None, stats=False):
    """The codes, block scales and tensor scale of x under a scheme (see BlockEncoded)."""
    a = float32_values(x, "x")
    rows, cols = _rows_cols(a.shape)
    o = options(rounding, "ieee", False, sr_bits, seed, key)
    p, st = _c.block_encode(scheme, a, rows, cols, axis, o, -1.0 if tensor_amax is None else float(tensor_amax))
    raw = p.scale_bytes
    n = p.scale_rows * p.scale_cols
    scales = (raw.view(np.float32) if n and raw.size == 4 * n else raw).reshape(p.scale_rows, p.scale_cols)
    values = np.empty((p.scale_rows, p.scale_cols), np.float64)
    _c.block_scale_values(scheme, p, values)
    enc = BlockEncoded(scheme, a.shape, p.axis, p.codes, scales, values, p.tensor_scale, p)
    return (enc, st) if stats else enc


def block_decode(encoded):
    """The values of a BlockEncoded array, float32 in its original shape (the same bits as
    block_quantize)."""
    out = np.empty(encoded.shape, np.float32)
    _c.block_decode(encoded.scheme, encoded.packed, out)
    return out


def block_scaling_presets():
    """The names a scheme may start with."""
    return list(_c.block_scaling_presets())


def error_stats(x, q):
    """The error of an approximation q of x as `precsim analyze` reports it: signal and noise power,
    MSE, QSNR in dB, largest relative error, flushed values (finite pairs; sums in a fixed order)."""
    a, b = float32_values(x, "x"), float32_values(q, "q")
    return _c.error_stats(a, b)


def analyze(x, schemes, *, rounding="nearest-even", overflow="ieee", flush_subnormals=False, sr_bits=32, seed=0):
    """What each format or scheme does to x: `precsim analyze`'s statistics of one tensor, computed
    and assembled by the same code (sim/analysis/tensor_report.h). `schemes`: a list of names, or
    one string of comma-separated names, as --formats takes them ("all" expands to every preset).
    Returns the report's results.tensors entry without its name: dtype, shape, rows, cols, count,
    zeros, nonfinite, exponent_histogram and per scheme (in the order given) QSNR, MSE, max relative
    error, flushed, clipped blocks, saturated, bits per element, scale histogram (NaN and Inf as
    floats; the report file spells them "nan", "inf", "-inf" because JSON has no such numbers). Like the CLI, float64 and integer inputs are
    rounded to float32 first (float16 and ml_dtypes floats are decoded exactly)."""
    a = np.asarray(x)
    names = schemes.split(",") if isinstance(schemes, str) else list(schemes)
    if not all(isinstance(n, str) for n in names):
        raise TypeError("schemes must be a string or a list of strings")
    dtype = a.dtype.str
    a = a.astype(np.float32) if a.dtype.kind in "biu" else values(a, "x")
    a = np.array(a, dtype=np.float32, order="C", copy=None)  # np.ascontiguousarray makes 0-d arrays 1-d
    o = options(rounding, overflow, flush_subnormals, sr_bits, seed)
    result = _c.analyze(a.reshape(-1), [int(n) for n in a.shape], names, o)
    result = _nonfinite_as_floats(result)
    result.update(dtype=dtype, shape=list(a.shape))
    return result


# The strings JSON reports use for the numbers JSON cannot hold; analyze's values are all numbers,
# so no name or label is among them.
_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _nonfinite_as_floats(v):
    """v with every "nan", "inf", "-inf" string (at any depth) turned back into the float."""
    if isinstance(v, dict):
        return {k: _nonfinite_as_floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_nonfinite_as_floats(x) for x in v]
    return _NONFINITE.get(v, v) if isinstance(v, str) else v
