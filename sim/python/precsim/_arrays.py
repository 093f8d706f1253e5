"""Arrays in and out of the engine: which dtypes pass without a copy, which are converted once, and
which are refused; quantize, encode and decode over them; the ml_dtypes view of code arrays."""
import numpy as np

from . import _precsim as _c

# precsim's preset names for the dtypes ml_dtypes (and NumPy, for float16 and int8) share with it:
# the code of each value is the same bits in both (int4 and int8: two's complement; precsim's
# rounding saturates to the symmetric range, -7..7 and -127..127, where casts truncate and wrap).
ML_DTYPES = {
    "bf16": "bfloat16", "fp16": "float16", "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3": "float8_e4m3",
    "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e4m3b11fnuz": "float8_e4m3b11fnuz", "float8_e5m2": "float8_e5m2",
    "float8_e5m2fnuz": "float8_e5m2fnuz", "float8_e3m4": "float8_e3m4", "float6_e2m3fn": "float6_e2m3fn",
    "float6_e3m2fn": "float6_e3m2fn", "float4_e2m1fn": "float4_e2m1fn", "float8_e8m0fnu": "float8_e8m0fnu",
    "int4": "int4", "int8": "int8",
}
_NUMPY_DTYPES = ("float16", "int8")
_CODE_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
ALLOWED = "float32, float64 (C-contiguous: no copy), float16, the ml_dtypes floats, integers, bool"


def ml_dtype(fmt):
    """The NumPy/ml_dtypes dtype whose items are fmt's codes bit for bit."""
    f = _format(fmt)
    # A format with a preset's encoding under another name (P3109's Binary8p4sf is
    # float8_e4m3fnuz, Binary8p3sf float8_e5m2fnuz) has that preset's dtype.
    name = ML_DTYPES.get(f.name) or ML_DTYPES.get(f.same_encoding_preset or "")
    if name is None:
        raise ValueError(f"format '{f.name}' has no ml_dtypes dtype; those with one: {', '.join(ML_DTYPES)}")
    if name in _NUMPY_DTYPES:
        return np.dtype(name)
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name))


def _format_of_dtype(dt):
    """precsim's format for a float16 or ml_dtypes dtype, else None (NumPy's integers are values)."""
    if dt.kind in "biu":
        return None
    for ours, name in ML_DTYPES.items():
        if dt.name == name:
            return _c.Format(ours)
    return None


# Every dtype a format argument may be, by name: ml_dtypes' and NumPy's from the table above, and
# NumPy's two binary floats, whose values precsim's fp32 and fp64 are.
_DTYPE_FORMATS = {**{dt: ours for ours, dt in ML_DTYPES.items()}, "float32": "fp32", "float64": "fp64"}


def format_name(fmt, what="format"):
    """A format argument as the engine takes it: a name or spec (str), a Format, or a NumPy or
    ml_dtypes dtype (np.float16, ml_dtypes.bfloat16, ...) mapped by _DTYPE_FORMATS; any other
    dtype is a ValueError naming it and the accepted ones."""
    if isinstance(fmt, str):
        return fmt
    if isinstance(fmt, _c.Format):
        return fmt.name
    # np.dtype(None) is float64: only dtypes and scalar types (np.float16, ml_dtypes.bfloat16) count.
    try:
        dt = np.dtype(fmt) if isinstance(fmt, (np.dtype, type)) else None
    except TypeError:
        dt = None
    if dt is None:
        raise TypeError(f"{what}: {fmt!r} is not a format; give a name (precsim.formats()), a Format or a dtype "
                        f"({', '.join(_DTYPE_FORMATS)})")
    name = _DTYPE_FORMATS.get(dt.name)
    if name is None:
        raise ValueError(f"{what}: dtype {dt.name} has no precsim format; accepted dtypes: {', '.join(_DTYPE_FORMATS)}")
    return name


def _format(fmt):
    return fmt if isinstance(fmt, _c.Format) else _c.Format(format_name(fmt))


def values(x, what="x"):
    """x as float32 or float64, C-contiguous: the array itself where it already is one, else one
    conversion (float16 and ml_dtypes codes decoded exactly by the engine); TypeError otherwise."""
    a = np.asarray(x)
    # Big-endian items are swapped first: float16's bytes are read as codes below.
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    dt = a.dtype
    if dt.kind == "f" and dt.itemsize in (4, 8):
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)
    f = _format_of_dtype(dt)
    if f is not None:
        out = np.empty(a.shape, np.float32)
        codes = np.ascontiguousarray(a).view(_CODE_DTYPES[dt.itemsize])
        _c.decode_f32(f, codes, out)
        return out
    if dt.kind in "biu":
        # order="C": astype keeps a Fortran-ordered array's layout, which the engine refuses.
        return a.astype(np.float64, order="C")
    raise TypeError(f"{what}: dtype {dt} is not supported; allowed: {ALLOWED}")


def float32_values(x, what):
    """x as C-contiguous float32; float64 is refused rather than rounded silently."""
    a = values(x, what)
    if a.dtype != np.float32:
        raise TypeError(f"{what}: dtype {np.asarray(x).dtype} is not supported here; this function takes float32 "
                        "(or float16 / ml_dtypes floats, decoded exactly): round float64 first, e.g. "
                        "precsim.quantize(x, 'fp32') or x.astype(np.float32)")
    return a


def output(out, like, what="out"):
    """A caller's output array: same dtype and shape as `like`, C-contiguous and writeable."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{what} must be a NumPy array, not {type(out).__name__}")
    if out.dtype != like.dtype or out.shape != like.shape:
        raise ValueError(f"{what} has dtype {out.dtype} and shape {out.shape}; expected {like.dtype} and {like.shape}")
    if not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(f"{what} must be C-contiguous and writeable")
    return out


def options(rounding="nearest-even", overflow="ieee", flush_subnormals=False, sr_bits=32, seed=0, key=(0, 0, 0)):
    return _c.QuantOptions(rounding, overflow, bool(flush_subnormals), int(sr_bits), int(seed), tuple(key))


def quantize(x, fmt, *, rounding="nearest-even", overflow="ieee", flush_subnormals=False, sr_bits=32, seed=0,
             key=(0, 0, 0), out=None, stats=False):
    """x rounded into fmt, as values of x's dtype (float32 or float64; other dtypes give float32 or
    float64, see values()). out=x rounds in place. Stochastic rounding of element i uses the bits of
    (seed, key = (step, tensor, role), i), so any split of an array gives the same result. With
    stats=True returns (values, QuantStats)."""
    f = _format(fmt)
    o = options(rounding, overflow, flush_subnormals, sr_bits, seed, key)
    a = values(x)
    y = np.empty_like(a) if out is None else output(out, a)
    st = (_c.quantize_f32 if a.dtype == np.float32 else _c.quantize_f64)(f, a, y, o)
    return (y, st) if stats else y


def encode(x, fmt, *, rounding="nearest-even", overflow="ieee", flush_subnormals=False, sr_bits=32, seed=0,
           key=(0, 0, 0), stats=False):
    """Codes of x rounded into fmt, one per element (uint8/16/32/64 by the format's width; FP4 and
    FP6 one per byte, see pack_fp4). ml_dtypes views them with codes.view(precsim.ml_dtype(fmt))."""
    f = _format(fmt)
    o = options(rounding, overflow, flush_subnormals, sr_bits, seed, key)
    a = values(x)
    codes = np.empty(a.shape, _CODE_DTYPES[f.code_bytes])
    st = (_c.encode_f32 if a.dtype == np.float32 else _c.encode_f64)(f, a, codes, o)
    return (codes, st) if stats else codes


def decode(codes, fmt, *, dtype=np.float32):
    """The exact values of codes of fmt (any unsigned or ml_dtypes array of fmt's code width)."""
    f = _format(fmt)
    # np.array, not np.ascontiguousarray, which makes a 0-d array 1-d.
    c = np.array(codes, copy=None, order="C")
    if not c.dtype.isnative:
        c = c.astype(c.dtype.newbyteorder("="))
    if c.dtype.itemsize != f.code_bytes or c.dtype.kind not in "uiV" and _format_of_dtype(c.dtype) is None:
        raise TypeError(f"codes: dtype {c.dtype} does not hold {f.code_bytes}-byte codes of {f.name}; "
                        f"expected {np.dtype(_CODE_DTYPES[f.code_bytes])} or {f.name}'s ml_dtypes dtype")
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"dtype {dt} is not supported; allowed: float32, float64")
    out = np.empty(c.shape, dt)
    (_c.decode_f32 if dt == np.float32 else _c.decode_f64)(f, c.view(_CODE_DTYPES[f.code_bytes]), out)
    return out


def pack_fp4(codes):
    """4-bit codes two per byte along the flattened array, element 2i in the low nibble (ml_dtypes,
    PyTorch float4_e2m1fn_x2); an odd count leaves the last high nibble zero."""
    c = np.ascontiguousarray(codes, dtype=np.uint8).reshape(-1)
    packed = np.empty((c.size + 1) // 2, np.uint8)
    _c.pack_nibbles(c, packed)
    return packed


def unpack_fp4(packed, count):
    """The `count` 4-bit codes of pack_fp4's bytes, one per byte."""
    p = np.ascontiguousarray(packed, dtype=np.uint8).reshape(-1)
    codes = np.empty(int(count), np.uint8)
    _c.unpack_nibbles(p, codes)
    return codes
