"""precsim.analyze against `precsim analyze` on the same .npy: the whole per-tensor entry of the
report (every scheme's statistics, histograms and description), and the CLI's error texts."""
import json
import os
import subprocess

import numpy as np
import pytest

import precsim

# MX under its four scale rules, MXINT8, MXFP6, NVFP4, the FP8 recipes' tensor/row/tile/block
# scaling, and plain formats (one with subnormals flushed by the options below).
SCHEMES = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4", "mxfp4:rule=ceil", "mxfp4:rule=even",
           "mxfp4:rule=rceil", "mxint8", "nvfp4", "fp8_e4m3:tensor", "fp8_e4m3:row", "fp8_e5m2:tile128",
           "fp8_e4m3:block128", "mxfp8_e4m3:axis=0", "bf16", "e4m3"]


def _report(cli, path, schemes, *options):
    rep = json.loads(cli("analyze", "--input", path, "--formats", ",".join(schemes), "--json", "--deterministic",
                         *options))
    (t,) = rep["results"]["tensors"]
    del t["name"]  # the file's stem; Python's array has none
    return _floats(t)


def _floats(v):
    """The report's spellings of the numbers JSON lacks ("nan", "inf", "-inf") as the floats
    precsim.analyze returns."""
    if isinstance(v, dict):
        return {k: _floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_floats(x) for x in v]
    return float(v) if v in ("nan", "inf", "-inf") else v


def _same(a, b):
    """Equal, NaN equal to NaN (json.dumps spells both NaN; == never holds for NaN)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _tensor(shape=(6, 8, 160), seed=5):
    rng = np.random.default_rng(seed)
    x = (rng.standard_t(3, size=shape) * np.exp2(rng.integers(-12, 12, size=shape))).astype(np.float32)
    x.reshape(-1)[::97] = 0
    return x


def test_analyze_equals_the_cli(cli, tmp_path):
    x = _tensor()
    np.save(tmp_path / "t.npy", x)
    got = precsim.analyze(x, SCHEMES)
    assert _same(got, _report(cli, tmp_path / "t.npy", SCHEMES))
    assert [s["scheme"] for s in got["schemes"]] == SCHEMES
    # Real values, not only agreement: rows fold the leading dimensions, MX blocks of 32 along the
    # last one, the histogram counts every finite non-zero input.
    assert (got["rows"], got["cols"], got["count"]) == (48, 160, x.size)
    assert got["zeros"] == int(np.sum(x == 0))
    assert sum(h["count"] for h in got["exponent_histogram"]) == x.size - got["zeros"]
    mx = got["schemes"][0]
    assert mx["blocks"] == 48 * 160 // 32 and mx["bits_per_element"] == 8 + 8 / 32
    q = precsim.block_quantize(x, "mxfp8_e4m3")
    assert mx["qsnr_db"] == precsim.error_stats(x, q)["qsnr_db"]


def test_analyze_options_and_nonfinite_inputs_equal_the_cli(cli, tmp_path):
    x = _tensor((40, 96), seed=8)
    x[2, 5], x[7, 40] = np.nan, -np.inf  # poisons its blocks: the report gains "poisoned"
    np.save(tmp_path / "t.npy", x)
    schemes = ["mxfp4", "nvfp4", "fp8_e4m3:row", "e5m2", "e2m1"]
    opts = dict(rounding="stochastic", sr_bits=8, seed=11, flush_subnormals=True, overflow="saturate")
    got = precsim.analyze(x, ",".join(schemes), **opts)
    want = _report(cli, tmp_path / "t.npy", schemes, "--rounding", "stochastic", "--sr-bits", 8, "--seed", 11,
                   "--flush-subnormals", "--overflow", "saturate")
    assert _same(got, want)
    assert any(isinstance(v, float) and v != v for v in got["schemes"][0].values())  # NaN as a float
    assert got["nonfinite"] == 2 and got["schemes"][0]["poisoned"] > 0
    assert not _same(got, precsim.analyze(x, schemes, **{**opts, "seed": 12}))  # the seed reaches the rounding


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int16])
def test_analyze_converts_as_the_cli(cli, tmp_path, dtype):
    x = (_tensor((4, 64), seed=3) * (100 if dtype == np.int16 else 1)).astype(dtype)
    np.save(tmp_path / "t.npy", x)
    schemes = ["mxfp8_e4m3", "bf16"]
    assert _same(precsim.analyze(x, schemes), _report(cli, tmp_path / "t.npy", schemes))


def _cli_error(path, *args):
    p = subprocess.run([os.environ["PRECSIM_CLI"], "analyze", "--input", str(path), *map(str, args)],
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    return p.stderr.strip()


def test_analyze_errors_carry_the_cli_text(tmp_path):
    x = _tensor((4, 64))
    np.save(tmp_path / "t.npy", x)
    for schemes in ["mxfp9", "mxfp4:rule=floorish", "fp8_e4m3:block0", ""]:
        with pytest.raises(ValueError) as e:
            precsim.analyze(x, schemes)
        assert str(e.value) in _cli_error(tmp_path / "t.npy", "--formats", schemes), schemes
    with pytest.raises(ValueError, match="give at least one format or scheme"):
        precsim.analyze(x, [])
    with pytest.raises(ValueError) as e:
        precsim.analyze(x, "mxfp4", rounding="upward")
    assert str(e.value) in _cli_error(tmp_path / "t.npy", "--formats", "mxfp4", "--rounding", "upward")
    with pytest.raises(ValueError, match="the array is empty"):
        precsim.analyze(np.zeros((0, 4), np.float32), "mxfp4")
    with pytest.raises(TypeError, match="complex64 is not supported"):
        precsim.analyze(x.astype(np.complex64), "mxfp4")
    with pytest.raises(TypeError, match="a string or a list of strings"):
        precsim.analyze(x, [4])
