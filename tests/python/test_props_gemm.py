"""Property tests of precsim.gemm and precsim.dot (hypothesis; props_common.py): random operands
with special values, operand and output formats, accumulation models (presets and specs, good and
bad). gemm's C equals `precsim gemm --a --b --output` bit for bit, dot's value `precsim dot`'s, or
both fail with the CLI's message; every output of gemm is dot of its row and column; a transposed
operand gives the same product. (precsim has no mma function: dot is one output's MMA chain.)"""
import json

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import precsim
from props_common import (cli_error, cli_text, float_values, native_c, outcome, props, run_cli, same_bits,
                          same_values, tmpdir)

PRESETS = [m["name"] for m in precsim.accum_models()]
OPERAND_FORMATS = ["fp32", "bf16", "fp16", "tf32", "e4m3", "e5m2"]


@st.composite
def models(draw, good_only=False):
    """A preset or a spec (KIND[:key=value...], PRESET:key=value); unless good_only, maybe a bad one."""
    kind = draw(st.sampled_from(["preset", "preset", "spec"] + ([] if good_only else ["bad"])))
    if kind == "preset":
        return draw(st.sampled_from(PRESETS))
    if kind == "bad":
        return draw(st.sampled_from(["h200", "block:n=0", "seq:acc=fp99", "block:F=-3", "h100:fma=2",
                                     "pairwise:round=upward", "seq:n=", "kahan:splitk=0", "", "block:n=8:n"]))
    base = draw(st.sampled_from(["seq", "pairwise", "kahan", "block", "h100", "a100", "b200", "fp32-fma"]))
    keys = []
    if draw(st.booleans()):
        keys.append(f"acc={draw(st.sampled_from(['fp32', 'bf16', 'fp16', 'fp64']))}")
    if base in ("block", "h100", "a100", "b200") and draw(st.booleans()):
        keys.append(f"n={draw(st.sampled_from([1, 2, 4, 8, 16, 32]))}")
        keys.append(f"F={draw(st.integers(10, 30))}")
    if draw(st.integers(0, 3)) == 0:
        keys.append(f"splitk={draw(st.integers(1, 4))}")
    if draw(st.integers(0, 3)) == 0:
        keys.append(f"round={draw(st.sampled_from(['nearest-even', 'toward-zero', 'odd']))}")
    return ":".join([base] + keys)


@st.composite
def operand(draw, shape, fmt):
    """float32 values of fmt (the CLI's and gemm's default rounds them into it anyway), specials too."""
    n = int(np.prod(shape))
    with np.errstate(over="ignore"):  # float64 beyond float32's range: infinities, as drawn
        v = draw(float_values(n)).astype(np.float32).reshape(shape)
    return precsim.quantize(v, fmt) if draw(st.booleans()) else v



@st.composite
def gemm_cases(draw):
    m, k, n = draw(st.integers(1, 6)), draw(st.integers(1, 70)), draw(st.integers(1, 6))
    af, bf = draw(st.sampled_from(OPERAND_FORMATS)), draw(st.sampled_from(OPERAND_FORMATS))
    return (draw(operand((m, k), af)), draw(operand((k, n), bf)), af, bf,
            draw(st.sampled_from(["fp32", "bf16", "fp16", "fp64"])), draw(models()))


@props(30)
@given(case=gemm_cases())
def test_gemm_equals_the_cli(case):
    a, b, af, bf, cf, model = case
    out_dtype = np.float64 if cf == "fp64" else np.float32
    c, err = outcome(precsim.gemm, a, b, model=model, a_format=af, b_format=bf, out_format=cf, out_dtype=out_dtype)
    with tmpdir() as d:
        np.save(f"{d}/a.npy", a)
        np.save(f"{d}/b.npy", b)
        args = ["gemm", "--a", f"{d}/a.npy", "--b", f"{d}/b.npy", "--model", model, "--a-format", af, "--b-format", bf,
                "--c-format", cf, "--output", f"{d}/c.npy", "--sample", 1]
        if err is not None:
            event(f"refused: {type(err).__name__}")
            assert isinstance(err, ValueError), err
            assert str(err) in cli_error(*args)
            return
        run_cli("-q", *args)
        assert same_bits(c, np.load(f"{d}/c.npy"))


@props(40)
@given(case=gemm_cases(), trans=st.tuples(st.booleans(), st.booleans()))
def test_gemm_outputs_are_dots_and_transposes_change_nothing(case, trans):
    a, b, af, bf, _, model = case
    kw = dict(model=model, a_format=af, b_format=bf)
    c, err = outcome(precsim.gemm, a, b, **kw)
    if err is not None:
        return  # a bad model: its message is test_gemm_equals_the_cli's
    ta, tb = trans
    ct = precsim.gemm(np.ascontiguousarray(a.T) if ta else a, np.ascontiguousarray(b.T) if tb else b,
                      trans_a=ta, trans_b=tb, **kw)
    assert same_bits(c, ct)
    if precsim.accum_model(model)["kind"] in ("unordered", "exact"):
        return  # no order to replay (unordered), or a sum a double may not hold (exact)
    # gemm rounds its operands to nearest-even into their formats; dot takes values of them.
    qa, qb = precsim.quantize(a, af), precsim.quantize(b, bf)
    i, j = a.shape[0] - 1, b.shape[1] - 1
    value = precsim.dot(qa[i], np.ascontiguousarray(qb[:, j]), **kw)
    assert same_values(np.float32(value), c[i, j])  # dot's Python float has no NaN sign to compare


@st.composite
def dot_cases(draw):
    k = draw(st.integers(1, 40))
    fmt = draw(st.sampled_from(OPERAND_FORMATS))
    return (draw(operand((k,), fmt)), draw(operand((k,), fmt)), fmt, draw(models()),
            draw(st.sampled_from([None, "fp32", "fp16", "bf16"])), draw(st.sampled_from([0.0, 1.0, -0.5, 0.1, 3e38])))


def _hex(v):
    """v as C's %a spells it (the CLI's hex_float): Python's float.hex without trailing zeros."""
    h = float(v).hex()
    if "p" not in h:
        return h  # inf, nan
    mant, exp = h.split("p")
    return mant.rstrip("0").rstrip(".") + "p" + exp


@props(30)
@given(case=dot_cases())
def test_dot_equals_the_cli(case):
    a, b, fmt, model, of, c = case
    got, err = outcome(precsim.dot, a, b, model=model, a_format=fmt, b_format=fmt, c=c, out_format=of, status=True)
    args = ["dot", "--model", model, "--input-format", fmt, "--a", ",".join(map(_hex, a)), "--b",
            ",".join(map(_hex, b)), "--c", _hex(c)] + ([] if of is None else ["--output-format", of])
    if err is not None:
        event(f"refused: {type(err).__name__}")
        assert isinstance(err, ValueError), err
        assert cli_text(str(err)) in cli_error(*args)
        return
    _, out, _ = run_cli(*args, "--json", "--deterministic")
    res = json.loads(out)["results"]
    assert (got[0].hex(), got[1]) == (float.fromhex(res["result_hex"]).hex(), res["status"])


def test_dot_refuses_values_outside_its_formats():
    # Python's dot once truncated 1.1 to the bf16 below it (result 11.28125) where the CLI refuses.
    with pytest.raises(ValueError, match=r"a element 0 '0x1.19999ap\+0' is not a value of bf16 \(nearest: 0x1.1ap\+0\)"):
        precsim.dot(np.float32([1.1, 2]), np.float32([3, 4]), model="h100", a_format="bf16", b_format="bf16")
    with pytest.raises(ValueError, match=r"c '0x1.999999999999ap-4' is not a value of the accumulator format fp32"):
        precsim.dot(np.float32([1, 2]), np.float32([3, 4]), model="h100", a_format="fp16", b_format="fp16", c=0.1)
    # NaN is a value of every format with one: the CLI once refused it ("'nan' is not a value of fp32").
    _, out, _ = run_cli("dot", "--model", "fp32-seq", "--a", "1,nan", "--b", "2,3", "--json")
    assert json.loads(out)["results"]["result_hex"] == "nan"
    assert np.isnan(precsim.dot(np.float32([1, np.nan]), np.float32([2, 3])))
