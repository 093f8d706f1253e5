"""Formats, quantize, encode, decode and the ml_dtypes interop against the CLI and ml_dtypes."""
import json

import numpy as np
import pytest

import precsim
from conftest import need


def test_formats_match_the_cli(cli):
    rows = json.loads(cli("formats", "--json", "--deterministic"))["results"]["formats"]
    ours = precsim.formats()
    assert [f.name for f in ours] == [r["name"] for r in rows]
    for f, r in zip(ours, rows):
        assert (f.bits, f.bias, f.emin, f.emax, f.exponent_bits, f.mantissa_bits) == (
            r["bits"], r["bias"], r["emin"], r["emax"], r["exponent_bits"], r["mantissa_bits"])
        assert (f.max, f.min_normal, f.min_subnormal, f.epsilon) == (
            r["max_finite"], r["min_normal"], r["min_subnormal"], r["epsilon"])
        assert f.nonfinite == r["nonfinite"] and f.aliases == r["aliases"] and f.finite_count == r["finite_values"]
    e4m3 = precsim.Format("e4m3")
    assert e4m3.name == "float8_e4m3fn" and e4m3.max == 448 and e4m3.nonfinite == "nan-only"
    custom = precsim.Format("e3m2:bias=2:finite")
    assert (custom.exponent_bits, custom.mantissa_bits, custom.bias, custom.nonfinite) == (3, 2, 2, "finite-only")


def test_bad_names_give_the_clis_messages():
    with pytest.raises(ValueError, match="unknown format 'fp9'.*fp32.*bf16"):
        precsim.Format("fp9")
    with pytest.raises(ValueError, match="unknown rounding 'sideways'; allowed: nearest-even"):
        precsim.quantize(np.ones(3, np.float32), "bf16", rounding="sideways")
    with pytest.raises(ValueError, match="sr_bits 40 is out of range; allowed: 1..32"):
        precsim.quantize(np.ones(3, np.float32), "bf16", sr_bits=40)
    with pytest.raises(TypeError, match="dtype complex128 is not supported"):
        precsim.quantize(np.ones(3, np.complex128), "bf16")
    with pytest.raises(TypeError, match="dtype <U1 is not supported"):
        precsim.quantize(np.array(["a"]), "bf16")
    with pytest.raises(ValueError, match="out has dtype float64 and shape"):
        precsim.quantize(np.ones(3, np.float32), "bf16", out=np.ones(3))
    with pytest.raises(ValueError, match="C-contiguous"):
        x = np.ones((4, 4), np.float32)
        precsim.quantize(x, "bf16", out=np.empty((4, 8), np.float32)[:, ::2])


def _inputs(dtype):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, 20000) * np.exp2(rng.integers(-30, 30, 20000))
    x[:8] = [0, -0.0, np.inf, -np.inf, np.nan, 1e39, 3.14159, 448]
    return x.astype(dtype).reshape(100, 200)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fmt,opts,args", [
    ("e4m3", {}, []),
    ("bf16", {"rounding": "toward-zero"}, ["--rounding", "toward-zero"]),
    ("fp16", {"overflow": "saturate", "flush_subnormals": True}, ["--overflow", "saturate", "--flush-subnormals"]),
    ("e5m2", {"rounding": "stochastic", "seed": 11, "sr_bits": 8}, ["--rounding", "stochastic", "--seed", "11", "--sr-bits", "8"]),
    ("e2m1", {}, []),
    ("e3m2:bias=5", {"rounding": "odd"}, ["--rounding", "odd"]),
])
def test_quantize_and_encode_equal_the_cli_byte_for_byte(cli, tmp_path, dtype, fmt, opts, args):
    x = _inputs(dtype)
    src = tmp_path / "x.npy"
    np.save(src, x)
    cli("quantize", "-f", fmt, "--input", src, "--output", tmp_path / "y.npy", *args)
    cli("quantize", "-f", fmt, "--input", src, "--output", tmp_path / "c.npy", "--codes", *args)
    y, st = precsim.quantize(x, fmt, stats=True, **opts)
    ref = np.load(tmp_path / "y.npy")
    assert y.dtype == x.dtype and y.tobytes() == ref.tobytes()
    assert st.count == x.size
    codes = precsim.encode(x, fmt, **opts)
    assert codes.tobytes() == np.load(tmp_path / "c.npy").tobytes()
    back = precsim.decode(codes, fmt, dtype=dtype)
    same = (back == y) | (np.isnan(back) & np.isnan(y))
    assert same.all()


def test_in_place_and_zero_copy():
    x = _inputs(np.float32)
    ref = precsim.quantize(x, "e4m3")
    y = precsim.quantize(x, "e4m3", out=x)
    assert y is x and x.tobytes() == ref.tobytes()
    # A strided view is copied once; the input itself is left alone.
    z = _inputs(np.float32)
    before = z.copy()
    w = precsim.quantize(z[:, ::2], "e4m3")
    assert w.tobytes() == ref[:, ::2].copy().tobytes() and z.tobytes() == before.tobytes()


def test_results_do_not_depend_on_the_thread_count():
    x = _inputs(np.float32)
    outs = []
    for n in (1, 2, 3):
        precsim.set_num_threads(n)
        outs.append(precsim.quantize(x, "e4m3", rounding="stochastic", seed=5).tobytes())
    precsim.set_num_threads(2)
    assert outs[0] == outs[1] == outs[2]
    with pytest.raises(ValueError, match="threads 0"):
        precsim.set_num_threads(0)


# Inputs on which ml_dtypes and precsim agree by design (docs/formats.md: NaN into FP6/FP4 and E8M0 below
# 2^-126, at 0 and for negative values differ deliberately, each tested in C++; the integer formats
# round and saturate where a cast truncates and wraps, so they share the integers of their range).
def _shared_inputs(name):
    rng = np.random.default_rng(3)
    if name in ("int4", "int8"):
        top = 7 if name == "int4" else 127
        return rng.integers(-top, top + 1, 50000).astype(np.float32)
    x = (rng.normal(0, 1, 50000) * np.exp2(rng.integers(-20, 20, 50000))).astype(np.float32)
    if name.startswith(("float6", "float4")):
        x = x[np.isfinite(x)]
    if name == "float8_e8m0fnu":
        x = np.abs(x)
        x = x[x >= np.float32(2.0 ** -126)]
    return x


@pytest.mark.parametrize("fmt", list(precsim._arrays.ML_DTYPES))
def test_ml_dtypes_round_trips(fmt):
    ml = need("ml_dtypes")
    assert ml is not None
    dt = precsim.ml_dtype(fmt)
    x = _shared_inputs(dt.name)
    with np.errstate(all="ignore"):
        theirs = x.astype(dt)
    codes = precsim.encode(x, fmt)
    assert codes.view(dt).tobytes() == theirs.tobytes()           # codes view as the dtype bit for bit
    values = precsim.decode(theirs, fmt)                             # ml_dtypes arrays decode
    with np.errstate(all="ignore"):
        expect = theirs.astype(np.float32)
    assert np.array_equal(values, expect, equal_nan=True)
    assert np.array_equal(precsim.quantize(theirs, "fp32"), expect, equal_nan=True)  # accepted as input
    every = np.arange(2 ** min(precsim.Format(fmt).bits, 16), dtype=np.uint32).astype(codes.dtype)
    with np.errstate(all="ignore"):
        assert np.array_equal(precsim.decode(every, fmt, dtype=np.float64), every.view(dt).astype(np.float64),
                              equal_nan=True)


def test_fp4_packing():
    x = np.array([0.5, -6, 1.5, 3, 0], np.float32)
    codes = precsim.encode(x, "fp4")
    packed = precsim.pack_fp4(codes)
    assert packed.tolist() == [codes[0] | codes[1] << 4, codes[2] | codes[3] << 4, codes[4]]
    assert np.array_equal(precsim.unpack_fp4(packed, 5), codes)
    with pytest.raises(ValueError, match="5 codes need 3 bytes"):
        precsim.unpack_fp4(packed[:2], 5)


def test_bad_inputs_raise_never_crash():
    """Wrong types, shapes and values into every entry point: a TypeError or ValueError each."""
    x = np.ones((4, 8), np.float32)
    calls = [
        lambda: precsim.quantize(None, "bf16"), lambda: precsim.quantize(x, None), lambda: precsim.quantize(x, 3),
        lambda: precsim.quantize(x, "bf16", key=(1, 2)), lambda: precsim.quantize(x, "bf16", seed=-1),
        lambda: precsim.encode(x, "e4m3", sr_bits=0), lambda: precsim.decode(np.ones(3, np.float32), "e4m3"),
        lambda: precsim.decode(np.ones(3, np.uint16), "e4m3"), lambda: precsim.decode(np.ones(3, np.uint8), "e4m3", dtype=int),
        lambda: precsim.block_quantize(x, ""), lambda: precsim.block_quantize(x, "mxfp4:rule=up"),
        lambda: precsim.block_encode(np.ones((2, 3), np.int8), "nvfp4:block=0"),
        lambda: precsim.gemm(x, x.T, model="block:n=0"), lambda: precsim.gemm(x, x.T, out_dtype=np.int32),
        lambda: precsim.gemm(x.reshape(-1), x), lambda: precsim.gemm(x, x.T, beta=1.0),
        lambda: precsim.dot(x[0], x[1, :3]), lambda: precsim.allreduce([]), lambda: precsim.allreduce([x, x], format="e9m99"),
        lambda: precsim.allreduce([x, x], average="mean"), lambda: precsim.allreduce([x * np.inf, x]),
        lambda: precsim.train({"steps": -1, "recipes": ["fp32"]}), lambda: precsim.train({"recipes": "fp32"}),
        lambda: precsim.report.validate(7), lambda: precsim.report.load("/nonexistent/report.json"),
        lambda: precsim.set_num_threads(-3), lambda: precsim.pack_fp4(np.array(["x"])),
    ]
    for i, call in enumerate(calls):
        with pytest.raises((TypeError, ValueError)):
            call()
