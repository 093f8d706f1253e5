"""One matrix instruction by name, D = A B + C with C its accumulator input (precsim.mma and
`precsim mma`): every instruction MMA-Sim lists, at its own shape, against MMA-Sim itself
(tests/instruction_reference.py runs it), bit for bit; the shapes, formats, scales and names it
refuses, with the errors that name them; the CLI's report."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import precsim
from conftest import need

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BF16 = "ampere/mma.m16n8k16.f32.bf16.bf16.f32"


def instructions():
    """(ARCH/first name, row) of every row of the instruction table."""
    return [(r["name"], r) for r in precsim.accum_models() if r["group"] == "instruction"]


def shape_of(name, k):
    nv = re.search(r"\.m(\d+)n(\d+)k(\d+)\.", name)
    if nv:
        return int(nv.group(1)), int(nv.group(2)), int(nv.group(3))
    mf = re.search(r"_(\d+)x(\d+)x(\d+)", name)  # mfma.f32_32x32x8f16: M x N x K
    return int(mf.group(1)), int(mf.group(2)), k


def values(rng, fmt, shape, scale=1.0):
    """Values of fmt: normal values times scale, rounded to nearest-even (float32)."""
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    return precsim.quantize(x, fmt)


def scales_of(rng, fmt, shape):
    if fmt == "e8m0":
        return (2.0 ** rng.integers(-4, 5, shape)).astype(np.float32)
    return precsim.quantize(rng.uniform(0.25, 6.0, shape).astype(np.float32), "e4m3")  # UE4M3: positive e4m3


def case(rng, row):
    m, n, k = shape_of(row["name"], row["mmasim"]["k"])
    ops = row["operands"]
    a = values(rng, ops["a"], (m, k))
    b = values(rng, ops["b"], (k, n))
    c = values(rng, ops["c"], (m, n), 4.0)
    sa = sb = None
    if ops["scale"]:
        blocks = (k // ops["scale_block"],)
        sa, sb = scales_of(rng, ops["scale"], (m,) + blocks), scales_of(rng, ops["scale"], (n,) + blocks)
    return a, b, c, sa, sb


def test_every_instruction_against_mmasim():
    need("torch")
    need("mmasim")
    sys.path.insert(0, TESTS)
    import instruction_reference as ref  # noqa: E402  (imports mmasim)
    rng = np.random.default_rng(31)
    checked = 0
    for name, row in instructions():
        a, b, c, sa, sb = case(rng, row)
        got, info = precsim.mma(a, b, c, model=name, a_scales=sa, b_scales=sb, info=True)
        assert info["instruction"] == name
        want = ref.run(ref.simulator(name), a, np.ascontiguousarray(b.T), c, sa, sb).double().numpy()
        want = want.astype(got.dtype)
        diff = np.flatnonzero(got.view(np.uint64 if got.dtype == np.float64 else np.uint32) !=
                              want.view(np.uint64 if got.dtype == np.float64 else np.uint32))
        assert diff.size == 0, (f"{name}: {diff.size} of {got.size} outputs differ from MMA-Sim, first "
                                f"{got.flat[diff[0]]!r} != {want.flat[diff[0]]!r}")
        checked += 1
    assert checked == len(instructions()) == 325  # every row of the generated table


def test_c_is_the_accumulator_input():
    # One product 1.5 * 2^-24 and C = 1: inside the instruction C is aligned with the product and
    # truncated at 24 fraction bits (D = 1); an FP32 add after the product would give 1 + 2^-23.
    a = np.zeros((16, 16), np.float32)
    b = np.zeros((16, 8), np.float32)
    a[0, 0], b[0, 0] = 1.5 * 2.0 ** -12, 2.0 ** -12
    c = np.ones((16, 8), np.float32)
    d = precsim.mma(a, b, c, model="ampere/mma.m16n8k16.f32.f16.f16.f32")
    assert d[0, 0] == 1.0 and d.dtype == np.float32
    assert np.all(d == 1.0)


def test_fp16_c_of_volta_f32_f16_f16_f16():
    # C in FP16, D in FP32: C must be an fp16 value; 1 + 2^-11 is not (FP16 has 10 fraction bits).
    a = np.zeros((8, 4), np.float32)
    b = np.zeros((4, 8), np.float32)
    c = np.full((8, 8), 1 + 2.0 ** -10, np.float32)
    d, info = precsim.mma(a, b, c, model="volta/mma.m8n8k4.f32.f16.f16.f16", info=True)
    assert (info["c_format"], info["d_format"]) == ("fp16", "fp32") and np.all(d == c)
    c[3, 5] = 1 + 2.0 ** -11
    with pytest.raises(ValueError, match=r"mma: C\[3\]\[5\] = 1.00048.* is not a value of fp16"):
        precsim.mma(a, b, c, model="volta/mma.m8n8k4.f32.f16.f16.f16")


def test_shape_that_is_not_the_instructions_names_both():
    a, b, c = np.zeros((16, 16), np.float32), np.zeros((16, 8), np.float32), np.zeros((16, 8), np.float32)
    with pytest.raises(ValueError, match=rf"instruction {re.escape(BF16)} is m16n8k16: A must be 16 x 16, not 8 x 16"):
        precsim.mma(a[:8], b, c, model=BF16)
    with pytest.raises(ValueError, match="is m16n8k16: C must be 16 x 8, not 16 x 4"):
        precsim.mma(a, b, c[:, :4], model=BF16)


def test_unknown_instruction_lists_the_valid_ones():
    a = np.zeros((16, 16), np.float32)
    with pytest.raises(ValueError, match=r"'mma.m16n8k99.f32.bf16.bf16.f32' does not exist on ampere.*valid: .*"
                                         r"mma.m16n8k16.f32.bf16.bf16.f32"):
        precsim.mma(a, a[:, :8], a[:, :8], model="ampere/mma.m16n8k99.f32.bf16.bf16.f32")
    with pytest.raises(ValueError, match="'h100-fp8-fast' is not one instruction; give ARCH/INSTRUCTION .* or a "
                                         "preset that picks one: mi100, mi250x, mi300x, rtx5090"):
        precsim.mma(a, a[:, :8], a[:, :8], model="h100-fp8-fast")


def test_formats_the_instruction_does_not_take():
    a, b, c = np.zeros((16, 16), np.float32), np.zeros((16, 8), np.float32), np.zeros((16, 8), np.float32)
    with pytest.raises(ValueError, match="takes A in bf16 and B in bf16 .*not A in fp16"):
        precsim.mma(a, b, c, model=BF16, a_format="fp16")
    with pytest.raises(ValueError, match=f"instruction {re.escape(BF16)} writes D in fp32, not fp16"):
        precsim.mma(a, b, c, model=BF16, out_format="fp16")


def test_block_scales_required_refused_and_checked():
    name = "blackwell/tcgen05.mma.block_scale.m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
    a, b, c = np.ones((128, 32), np.float32), np.ones((32, 8), np.float32), np.zeros((128, 8), np.float32)
    sa, sb = np.ones((128, 1), np.float32), np.ones((8, 1), np.float32)
    assert np.all(precsim.mma(a, b, c, model=name, a_scales=sa, b_scales=sb) == 32.0)
    sa[5, 0] = 0.75
    with pytest.raises(ValueError, match=r"a_scales\[5\]\[0\] = 0.75 .* is not a UE8M0"):
        precsim.mma(a, b, c, model=name, a_scales=sa, b_scales=sb)
    with pytest.raises(ValueError, match=r"takes a_scales as 128 x 1 decode scales \(one per 32 k\), not 0 x 0"):
        precsim.mma(a, b, c, model=name)
    with pytest.raises(ValueError, match=f"instruction {re.escape(BF16)} takes no block scales"):
        precsim.mma(a[:16, :16], b[:16], c[:16], model=BF16, a_scales=sa[:16])


def test_fp4_operands_given_as_values():
    name = "blackwell/tcgen05.mma.m128n8k32.kind::f8f6f4.f32.e2m1.e2m1"
    rng = np.random.default_rng(4)
    a = precsim.quantize(rng.standard_normal((128, 32)).astype(np.float32) * 3, "e2m1")
    b = precsim.quantize(rng.standard_normal((32, 8)).astype(np.float32) * 3, "e2m1")
    d = precsim.mma(a, b, np.zeros((128, 8), np.float32), model=name)
    # Products of e2m1 values (multiples of 1/4 up to 36) summed over 32: exact in FP32.
    assert np.array_equal(d, (a.astype(np.float64) @ b).astype(np.float32))
    a[0, 0] = 0.7
    with pytest.raises(ValueError, match=r"A\[0\]\[0\] = 0.7 .* is not a value of float4_e2m1fn"):
        precsim.mma(a, b, np.zeros((128, 8), np.float32), model=name)


def test_picking_preset_takes_the_instruction_of_its_formats():
    rng = np.random.default_rng(5)
    a, b = values(rng, "fp16", (16, 16)), values(rng, "fp16", (16, 16))
    c = values(rng, "fp32", (16, 16))
    d, info = precsim.mma(a, b, c, model="mi300x", a_format="fp16", b_format="fp16", info=True)
    assert info["instruction"] == "cdna3/mfma.f32_16x16x16_f16"  # of its fp16 MFMAs, the one of this shape
    assert np.array_equal(d, precsim.mma(a, b, c, model="cdna3/mfma.f32_16x16x16_f16"))
    # rtx5090 (sm_120): N = 8 of mma.m16n8k32, the first fp32-D instruction for e4m3 x e4m3
    a8, b8 = values(rng, "e4m3", (16, 32)), values(rng, "e4m3", (32, 8))
    _, info = precsim.mma(a8, b8, np.zeros((16, 8), np.float32), model="rtx5090", a_format="e4m3",
                          b_format="e4m3", info=True)
    assert info["instruction"] == "rtx-blackwell/mma.m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32"
    with pytest.raises(ValueError, match="'mi300x' picks its cdna3 instruction by the operand formats: give both"):
        precsim.mma(a, b, c, model="mi300x")


def test_cli_mma_report_and_errors(tmp_path):
    rng = np.random.default_rng(6)
    a, b, c = values(rng, "bf16", (16, 16)), values(rng, "bf16", (16, 8)), values(rng, "fp32", (16, 8))
    for name, x in (("a", a), ("b", b), ("c", c)):
        np.save(tmp_path / f"{name}.npy", x)
    cli = os.environ["PRECSIM_CLI"]
    args = [cli, "mma", "--model", BF16, "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", "--c",
            tmp_path / "c.npy", "--output", tmp_path / "d.npy", "--json"]
    p = subprocess.run(list(map(str, args)), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["kind"] == "mma" and doc["config"]["instruction"] == BF16
    assert doc["config"]["shape"] == {"m": 16, "n": 8, "k": 16}
    d = np.load(tmp_path / "d.npy")
    assert np.array_equal(d, precsim.mma(a, b, c, model=BF16))
    assert doc["results"]["outputs"] == 128 and doc["results"]["nan_outputs"] == 0
    bad = subprocess.run([cli, "mma", "--model", BF16, "--a", str(tmp_path / "b.npy"), "--b", str(tmp_path / "b.npy")],
                         capture_output=True, text=True)
    assert bad.returncode != 0
    assert "is m16n8k16: A must be 16 x 16, not 16 x 8" in bad.stderr
