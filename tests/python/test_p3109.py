"""IEEE P3109 v4.0 formats in the Python API: the names (case-insensitive, refused outside the
report's range with the range named), decode of every code of K 9..16 formats against the report's
§4.7.2 in exact rationals (fractions), the saturation modes and stochastic variants by name, and
the ml_dtypes dtypes of the two formats that have one."""
from fractions import Fraction

import numpy as np
import pytest

import precsim
from conftest import need


def report_decode(k, p, signed, extended, x):
    """§4.7.2 ωDecode, literally: NaN, the Inf codes, the sign, then T and E_biased."""
    half, top = 2 ** (k - 1), 2 ** k - 1
    if x == (half if signed else top):
        return float("nan")
    if extended and x == (half - 1 if signed else top - 1):
        return float("inf")
    if signed and extended and x == top:
        return float("-inf")
    if signed and x > half:
        return -report_decode(k, p, signed, extended, x - half)
    bias = 2 ** (k - p - 1) if signed else 2 ** (k - p)
    t, e = x % 2 ** (p - 1), x // 2 ** (p - 1)
    frac = Fraction(t, 2 ** (p - 1))
    value = frac * Fraction(2) ** (1 - bias) if e == 0 else (1 + frac) * Fraction(2) ** (e - bias)
    return float(value)  # exact: precsim's formats are those whose values are doubles


WIDE = [(k, p, s, e) for k in range(9, 17) for (p, s, e) in ((k // 2, True, True), (k - 3, False, False))]


@pytest.mark.parametrize("k,p,signed,extended", WIDE)
def test_every_code_of_wide_formats_decodes_as_the_report(k, p, signed, extended):
    name = f"binary{k}p{p}{'s' if signed else 'u'}{'e' if extended else 'f'}"
    codes = np.arange(2 ** k, dtype=np.uint16)
    got = precsim.decode(codes, name, dtype=np.float64)
    want = np.array([report_decode(k, p, signed, extended, int(c)) for c in codes])
    assert np.array_equal(got, want, equal_nan=True)
    finite = codes[np.isfinite(want)]
    assert np.array_equal(precsim.encode(want[np.isfinite(want)], name), finite)


def test_names_are_case_insensitive_and_spelled_as_the_report():
    f = precsim.Format("BINARY8P3SE")
    assert f == precsim.Format("binary8p3se") and f.name == "Binary8p3se"
    assert (f.bias, f.has_inf, f.nonfinite) == (16, True, "fnuz-inf")
    g = precsim.Format("Binary4p2sf")
    assert (g.bias, g.has_inf, g.max) == (2, False, 3.0)
    with pytest.raises(ValueError, match=r"bitwidth K must be 3\.\.16, got 17"):
        precsim.Format("binary17p3se")
    with pytest.raises(ValueError, match=r"signed 8-bit format must be 1\.\.7, got 8"):
        precsim.Format("binary8p8sf")


def test_saturation_modes_and_stochastic_variants_by_name():
    x = np.array([60000.0, -60000.0, 1e9], np.float32)  # above Binary8p3se's largest finite, 49152
    assert list(precsim.quantize(x, "binary8p3se", overflow="SatNone")) == [np.inf, -np.inf, np.inf]
    assert list(precsim.quantize(x, "binary8p3se", overflow="satfinite")) == [49152, -49152, 49152]
    assert list(precsim.quantize(x, "binary8p3sf", overflow="SatNone")) == [57344, -57344, 57344]
    inf = np.array([np.inf, -np.inf], np.float32)
    assert list(precsim.quantize(inf, "binary8p3se", overflow="SatPropagate")) == [np.inf, -np.inf]
    assert list(precsim.quantize(inf, "binary8p3se", overflow="SatFinite")) == [49152, -49152]
    # Unsigned: a negative value is NaN under SatNone, 0 under SatFinite.
    assert np.isnan(precsim.quantize(np.float32([-1.0]), "binary8p3ue", overflow="satnone")[0])
    assert precsim.quantize(np.float32([-1.0]), "binary8p3ue", overflow="satfinite")[0] == 0
    # 1 + 3/8 ulp in Binary8p3se rounds to 1 or 1.25 (ulp 0.25); over many elements the mean is
    # the exact value within a few standard errors, for each variant.
    y = np.full(20000, 1.09375, np.float32)
    for mode in ("stochastic-a", "stochastic-b", "stochastic-c"):
        r = precsim.quantize(y, "binary8p3se", rounding=mode, sr_bits=3, seed=5)
        assert set(np.unique(r)) == {1.0, 1.25}
        assert abs(r.mean() - 1.09375) < 4 * 0.125 / np.sqrt(len(y))
    with pytest.raises(ValueError, match="satnone"):
        precsim.quantize(y, "binary8p3se", overflow="wrap")


def test_ml_dtypes_where_they_exist():
    ml_dtypes = need("ml_dtypes")
    assert precsim.ml_dtype("binary8p4sf") == np.dtype(ml_dtypes.float8_e4m3fnuz)
    assert precsim.ml_dtype("Binary8p3sf") == np.dtype(ml_dtypes.float8_e5m2fnuz)
    codes = np.arange(256, dtype=np.uint8)
    for name in ("binary8p4sf", "binary8p3sf"):
        ours = precsim.decode(codes, name, dtype=np.float64)
        theirs = codes.view(precsim.ml_dtype(name)).astype(np.float64)
        assert np.array_equal(ours, theirs, equal_nan=True)
    with pytest.raises(ValueError, match="has no ml_dtypes dtype"):
        precsim.ml_dtype("binary8p3se")  # ml_dtypes 0.7 has no type with Inf at 0x7f


def test_p3109_elements_in_block_schemes():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 256)).astype(np.float32)
    # Binary8p4sf has float8_e4m3fnuz's codes and values: the same scheme gives the same values.
    assert np.array_equal(precsim.block_quantize(x, "binary8p4sf:tensor"), precsim.block_quantize(x, "e4m3fnuz:tensor"))
    # Binary8p4se's largest finite value is 224 (0x7e; 0x7f is Inf): the tensor's amax maps onto it.
    y = precsim.block_quantize(x, "binary8p4se:tile128")
    assert np.abs(y).max() == np.abs(x).max()
    with pytest.raises(ValueError, match="is not an MX element"):
        precsim.block_quantize(x, "binary8p4se:mx")


def test_binary8p1uf_is_not_e8m0():
    # §3.1: Binary8p1uf has a zero at code 0 and its powers of two one code above E8M0's.
    codes = np.array([0, 1, 127, 128, 254, 255], np.uint8)
    got = precsim.decode(codes, "binary8p1uf", dtype=np.float64)
    assert np.array_equal(got, [0, 2.0 ** -127, 0.5, 1, 2.0 ** 126, np.nan], equal_nan=True)
    e8m0 = precsim.decode(codes[1:5] - 1, "e8m0", dtype=np.float64)
    assert np.array_equal(got[1:5], e8m0)


def test_p3109_formats_in_recipes():
    d = precsim.Recipe.preset("fp32").to_dict()
    d["activations"] = {"format": "binary8p4se", "rounding": "stochastic-c"}
    d["gemm"]["forward"]["a"] = {"block": 0, "format": "Binary8p3se", "rounding": "nearest-even",
                                 "scaling": "tensor-current"}
    r = precsim.Recipe.from_dict(d).to_dict()
    assert r["activations"] == {"format": "binary8p4se", "rounding": "stochastic-c"}
    assert r["gemm"]["forward"]["a"]["format"] == "Binary8p3se"
    d["activations"] = {"format": "binary8p9se"}
    with pytest.raises(ValueError, match=r"activations\.format: .*must be 1\.\.7, got 9"):
        precsim.Recipe.from_dict(d)
