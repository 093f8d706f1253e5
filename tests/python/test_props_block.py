"""Property tests of precsim.block_quantize, block_encode and block_decode (hypothesis;
props_common.py): random arrays, schemes (every preset, <format>:mx|nvfp4|tensor|row|tile128|block128,
with :rule, :block, :axis, :2d, :pow2, :fp32, :eps and :margin, good and bad) and element roundings.
Values, codes and scales equal `precsim quantize -f SCHEME` on the same .npy, or the call fails with
the CLI's message; the packed form decodes to block_quantize's bits; axis 0 is axis 1 transposed."""
import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import precsim
from props_common import arrays, cli_error, native_c, outcome, props, run_cli, same_bits, tmpdir

ELEMENTS = ["e4m3", "e5m2", "e2m1", "e3m2", "e2m3", "int8", "bf16", "e3m4"]


@st.composite
def schemes(draw, good_only=False):
    """A block-scaling scheme as `analyze --formats` and `quantize -f` take it."""
    kind = draw(st.sampled_from(["preset", "preset", "built", "plain"] + ([] if good_only else ["bad"])))
    if kind == "plain":
        return draw(st.sampled_from(["e4m3", "bf16", "e2m1", "int4"]))
    if kind == "bad":
        return draw(st.sampled_from(["mxfp9", "mxfp4:rule=floorish", "fp8_e4m3:block0", "mxfp4:block=0",
                                     "mxfp4:axis=2", "nvfp4:eps=-1", "mxfp4:margin=x", "e4m3:tile7", "mxfp4:",
                                     ":mx", "mxfp4:block=100000000000000000000"]))
    if kind == "preset":
        base = draw(st.sampled_from(precsim.block_scaling_presets()))
    else:
        how = draw(st.sampled_from(["mx", "nvfp4", "tensor", "row", "tile128", "block128"]))
        base = f"{draw(st.sampled_from(ELEMENTS))}:{how}"
    opts = []
    if draw(st.booleans()):
        opts.append(f"rule={draw(st.sampled_from(['floor', 'ceil', 'even', 'rceil']))}")
    if draw(st.integers(0, 3)) == 0:
        opts.append(f"block={draw(st.sampled_from([1, 2, 16, 32, 33, 64]))}")
    if draw(st.integers(0, 3)) == 0:
        opts.append(f"axis={draw(st.integers(0, 1))}")
    for flag in ("2d", "pow2", "fp32"):
        if draw(st.integers(0, 5)) == 0:
            opts.append(flag)
    if draw(st.integers(0, 5)) == 0:
        opts.append(f"eps={draw(st.sampled_from(['0', '1e-30', '0.5']))}")
    if draw(st.integers(0, 5)) == 0:
        opts.append(f"margin={draw(st.integers(0, 3))}")
    return ":".join([base] + opts)


@st.composite
def element_rounding(draw):
    """(keyword arguments, CLI flags) of the elements' rounding."""
    rounding = draw(st.sampled_from(["nearest-even", "toward-zero", "up", "odd", "stochastic"]))
    sr_bits, seed = draw(st.integers(1, 32)), draw(st.integers(0, 2 ** 32))
    return ({"rounding": rounding, "sr_bits": sr_bits, "seed": seed},
            ["--rounding", rounding, "--sr-bits", sr_bits, "--seed", seed])



@props(30)
@given(x=arrays(dtypes=("float32", "float16"), max_size=300, max_dims=2), scheme=schemes(), opt=element_rounding())
def test_block_values_codes_and_scales_equal_the_cli(x, scheme, opt):
    kw, args = opt
    y, err = outcome(precsim.block_quantize, x, scheme, **kw)
    with tmpdir() as d:
        np.save(f"{d}/x.npy", native_c(x))
        if err is not None:
            event(f"refused: {type(err).__name__}")
            assert isinstance(err, ValueError), err
            assert str(err) in cli_error("quantize", "-f", scheme, "--input", f"{d}/x.npy", "--output", f"{d}/y.npy",
                                         *args)
            return
        run_cli("quantize", "-q", "-f", scheme, "--input", f"{d}/x.npy", "--output", f"{d}/y.npy", *args)
        assert same_bits(y, np.load(f"{d}/y.npy"))
        if precsim._precsim.block_scheme(scheme)["block_along"] == 0:
            return  # a plain format: codes are quantize's, tested in test_props_quantize.py
        enc = precsim.block_encode(x, scheme, **kw)
        run_cli("quantize", "-q", "-f", scheme, "--input", f"{d}/x.npy", "--output", f"{d}/c.npy", "--codes",
                "--scales", f"{d}/s.npy", *args)
        assert native_c(enc.codes).tobytes() == np.load(f"{d}/c.npy").tobytes()
        assert native_c(enc.scales).tobytes() == np.load(f"{d}/s.npy").tobytes()


@props(60)
@given(x=arrays(dtypes=("float32", "float16", "bfloat16"), max_size=400), scheme=schemes(good_only=True),
       opt=element_rounding(), axis=st.sampled_from([None, 0, 1]))
def test_packed_form_decodes_to_the_fake_quantized_bits(x, scheme, opt, axis):
    kw, _ = opt
    y, err = outcome(precsim.block_quantize, x, scheme, axis=axis, **kw)
    if err is not None:  # the scheme, not the array, is refused
        with pytest.raises(type(err)):
            precsim.block_quantize(np.zeros(4, np.float32), scheme, axis=axis, **kw)
        return
    assert y.dtype == np.float32 and y.shape == x.shape
    ref = precsim.block_quantize(native_c(x.astype(np.float32)), scheme, axis=axis, **kw)
    assert same_bits(y, ref)
    enc = precsim.block_encode(x, scheme, axis=axis, **kw)
    assert same_bits(precsim.block_decode(enc), y)
    assert enc.shape == x.shape and enc.scale_values.shape == enc.scales.shape


@props(40)
@given(x=arrays(dtypes=("float32",), max_size=400, min_size=1, contiguous=True), scheme=schemes(good_only=True))
def test_axis_zero_is_axis_one_of_the_transpose(x, scheme):
    try:
        precsim._precsim.block_scheme(scheme)
    except ValueError:
        return  # an option this scheme does not take: test_block_values_codes... checks the message
    m = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    down = precsim.block_quantize(m, scheme, axis=0)
    along = precsim.block_quantize(np.ascontiguousarray(m.T), scheme, axis=1)
    assert same_bits(down, np.ascontiguousarray(along.T))


@props(15)
@given(x=arrays(dtypes=("float64", "int16"), max_size=50), scheme=schemes(good_only=True),
       fn=st.sampled_from([precsim.block_quantize, precsim.block_encode]))
def test_other_dtypes_are_type_errors_that_say_what_to_do(x, scheme, fn):
    with pytest.raises(TypeError) as e:
        fn(x, scheme)
    assert f"dtype {x.dtype}" in str(e.value) and "x.astype(np.float32)" in str(e.value)
