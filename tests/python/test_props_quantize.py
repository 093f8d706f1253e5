"""Property tests of precsim.quantize, encode and decode (hypothesis; props_common.py): random
arrays of every dtype, shape, layout and special value, random formats (presets, aliases, eXmY specs,
good and bad) and rounding options. Each call agrees bit for bit with `precsim quantize` on the same
.npy, or fails with the CLI's message; and with an independent route where the CLI reads no such
input (integers, bfloat16, strided and big-endian arrays: the same values, C-contiguous float)."""
import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import precsim
from props_common import arrays, cli_error, cli_text, native_c, outcome, props, run_cli, same_bits, same_values, tmpdir

ROUNDINGS = ["nearest-even", "nearest-away", "toward-zero", "up", "down", "odd", "stochastic"]
PRESETS = [f.name for f in precsim.formats()]
ALIASES = ["e4m3", "e5m2", "bf16", "fp16", "half", "e2m1", "fp4", "e3m2", "e2m3", "e8m0", "i8", "i4", "tf32",
           "float", "e4m3fnuz", "e3m4"]


@st.composite
def format_specs(draw, good_only=False):
    """A preset, an alias or an eXmY[:bias=B][:nosub][:kind][:unsigned] spec; unless good_only, a
    spec may be out of range (e0m3, e12m2, a bias the width cannot hold) or misspelt."""
    kind = draw(st.sampled_from(["preset", "alias", "spec", "spec"] + ([] if good_only else ["bad"])))
    if kind == "preset":
        return draw(st.sampled_from(PRESETS))
    if kind == "alias":
        return draw(st.sampled_from(ALIASES))
    if kind == "bad":
        return draw(st.sampled_from(["e0m3", "e12m2", "e4m3:bias=999", "e4m", "fp9", "e4m3:nosubs", "E4M3", "",
                                     "e5m2:ieee:fnuz", "e4m3:bias=-5", "e4m3:unsigned:unsigned", "e2m40"]))
    e, m = draw(st.integers(1, 8)), draw(st.integers(0, 10))
    parts = [f"e{e}m{m}"]
    if draw(st.booleans()):
        parts.append(f"bias={draw(st.integers(-2, 2 ** e))}")
    if draw(st.booleans()):
        parts.append("nosub")
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["ieee", "nanonly", "finite", "fnuz"])))
    if draw(st.integers(0, 4)) == 0:
        parts.append("unsigned")
    return ":".join(parts)


@st.composite
def quant_options(draw, bad=False):
    """(keyword arguments of quantize, the same as CLI flags); with bad, one of them may be out of range."""
    kw = {"rounding": draw(st.sampled_from(ROUNDINGS)), "overflow": draw(st.sampled_from(["ieee", "saturate"])),
          "flush_subnormals": draw(st.booleans()), "sr_bits": draw(st.integers(1, 32)),
          "seed": draw(st.integers(0, 2 ** 64 - 1))}
    if bad and draw(st.booleans()):
        which = draw(st.sampled_from(["rounding", "overflow", "sr_bits"]))
        kw[which] = {"rounding": draw(st.sampled_from(["upward", "Nearest-Even", "rne", ""])),
                     "overflow": draw(st.sampled_from(["clamp", "IEEE", ""])),
                     "sr_bits": draw(st.sampled_from([0, 33, -1, 64]))}[which]
    args = ["--rounding", kw["rounding"], "--overflow", kw["overflow"], "--sr-bits", kw["sr_bits"], "--seed", kw["seed"]]
    return kw, args + (["--flush-subnormals"] if kw["flush_subnormals"] else [])



@st.composite
def format_and_options(draw):
    """A format and options of which at most one is bad: with two, either error is right."""
    if draw(st.booleans()):
        return draw(format_specs()), draw(quant_options())
    return draw(st.sampled_from(PRESETS + ALIASES)), draw(quant_options(bad=True))


@props(30)
@given(x=arrays(dtypes=("float32", "float64", "float16"), max_size=300), case=format_and_options())
def test_quantize_and_encode_equal_the_cli(x, case):
    fmt, (kw, args) = case
    y, err = outcome(precsim.quantize, x, fmt, **kw)
    codes, cerr = outcome(precsim.encode, x, fmt, **kw)
    with tmpdir() as d:
        np.save(f"{d}/x.npy", native_c(x))
        if err is not None:
            event(f"refused: {type(err).__name__}")
            assert cerr is not None and str(cerr) == str(err)
            assert isinstance(err, ValueError), err
            bad = cli_error("quantize", "-f", fmt, "--input", f"{d}/x.npy", "--output", f"{d}/y.npy", *args)
            if cli_text(str(err)) not in bad:
                # -f takes block schemes too and words a bad option for both grammars; a flag that
                # takes formats only words it as Python does.
                bad = cli_error("quantize", "-f", "fp32", "--input-format", fmt, "--input", f"{d}/x.npy")
            assert cli_text(str(err)) in bad
            return
        run_cli("quantize", "-q", "-f", fmt, "--input", f"{d}/x.npy", "--output", f"{d}/y.npy", *args)
        run_cli("quantize", "-q", "-f", fmt, "--input", f"{d}/x.npy", "--output", f"{d}/c.npy", "--codes", *args)
        assert same_bits(y, np.load(f"{d}/y.npy"))
        assert same_bits(codes, np.load(f"{d}/c.npy"))
    assert y.dtype == (np.float64 if x.dtype.itemsize == 8 else np.float32) and y.shape == x.shape


@props(60)
@given(x=arrays(dtypes=("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "uint8", "int64",
                        "bool"), max_size=300),
       fmt=format_specs(good_only=True), opt=quant_options())
def test_quantize_equals_the_same_values_as_contiguous_float(x, fmt, opt):
    kw, _ = opt
    y, err = outcome(precsim.quantize, x, fmt, **kw)
    if err is not None:  # a spec the engine refuses, whatever the array
        with pytest.raises(type(err), match="format"):
            precsim.Format(fmt)
        return
    # The reference route: the values as a C-contiguous native float array (ml_dtypes floats widen
    # exactly to float32, integers and bool to float64) quantized by the same call.
    ref_dtype = np.float64 if x.dtype.kind in "biu" or x.dtype.itemsize == 8 else np.float32
    ref = precsim.quantize(native_c(x.astype(ref_dtype)), fmt, **kw)
    assert same_bits(y, ref)
    # Stats count every element; quantizing again changes nothing (every value is one of fmt's);
    # codes decode to the same values; out= gives the same bits in place.
    _, stats = precsim.quantize(x, fmt, stats=True, **kw)
    assert stats.count == x.size
    assert same_bits(precsim.quantize(y, fmt, **kw), y)
    back = precsim.decode(precsim.encode(x, fmt, **kw), fmt, dtype=y.dtype)
    assert same_values(back, y)
    out = np.empty_like(ref)
    assert precsim.quantize(x, fmt, out=out, **kw) is out and same_bits(out, ref)


@props(25)
@given(fmt=format_specs(good_only=True), seed=st.integers(0, 2 ** 32 - 1), n=st.integers(0, 300))
def test_decode_equals_the_cli(fmt, seed, n):
    try:
        f = precsim.Format(fmt)
    except ValueError:
        return
    rng = np.random.default_rng(seed)
    width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[f.code_bytes]
    codes = rng.integers(0, 2 ** min(f.bits, 63), n, dtype=np.uint64).astype(width)
    got = precsim.decode(codes, fmt)
    with tmpdir() as d:
        np.save(f"{d}/c.npy", codes)
        run_cli("quantize", "-q", "-f", "fp32", "--input-format", fmt, "--input", f"{d}/c.npy", "--output", f"{d}/y.npy")
        want = np.load(f"{d}/y.npy")
    wide = precsim.decode(codes, fmt, dtype=np.float64)
    # The CLI decodes the codes of formats wider than float32 as float64 and keeps that dtype after
    # rounding into fp32; every other format's values are float32's.
    assert same_bits(precsim.quantize(wide, "fp32") if want.dtype == np.float64 else got, want)
    # float64 decoding is exact: float32's is that rounded once to nearest-even.
    assert same_bits(precsim.quantize(wide, "fp32").astype(np.float32), got)


BAD_ARRAYS = [np.array([1 + 2j]), np.array(["1.5"]), np.array([object()]), np.zeros(2, "datetime64[s]"),
              np.zeros(2, [("a", "f4")])]


@props(20)
@given(bad=st.sampled_from(BAD_ARRAYS), fmt=st.sampled_from(["e4m3", "bf16"]),
       fn=st.sampled_from([precsim.quantize, precsim.encode]))
def test_unsupported_dtypes_are_type_errors_naming_them(bad, fmt, fn):
    with pytest.raises(TypeError) as e:
        fn(bad, fmt)
    assert str(bad.dtype) in str(e.value) and "allowed:" in str(e.value)

