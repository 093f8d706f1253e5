"""Matrix instructions by name (ARCH/INSTRUCTION), the AMD and sm_120 presets, mixed operand
formats, and the model listing (precsim.accum_models(), `precsim models`). The numbers of every
instruction are checked against MMA-Sim in tests/instruction_oracle_test.cpp; these check the
names, the errors and the listing, on values worked out by hand."""
import json
import os
import subprocess

import numpy as np
import pytest

import precsim

# fp16 operands whose one product is 1.5 * 2^-24 added to C = 1: 0.75 of FP32's ulp at 1. Rounded
# to nearest (CDNA1 exact blocks, CDNA2 FP32 adds, CDNA3's final rounding) it is 1 + 2^-23;
# truncated at F = 24 bits below C's exponent and then toward zero (Ampere) it is 1.
A = np.array([1.5 * 2.0 ** -12, 0.0], np.float32)
B = np.array([2.0 ** -12, 0.0], np.float32)


@pytest.mark.parametrize("model, expected", [
    ("ampere/mma.m16n8k16.f32.f16.f16.f32", 1.0),
    ("a100", 1.0),
    ("cdna1/mfma.f32_32x32x8f16", 1 + 2.0 ** -23),
    ("cdna2/mfma.f32_32x32x8f16", 1 + 2.0 ** -23),
    ("cdna3/mfma.f32_16x16x16_f16", 1 + 2.0 ** -23),
    ("mi100", 1 + 2.0 ** -23),
    ("mi250x", 1 + 2.0 ** -23),
    ("mi300x", 1 + 2.0 ** -23),
])
def test_rounding_of_each_generation(model, expected):
    assert precsim.dot(A, B, c=1.0, model=model, a_format="fp16", b_format="fp16") == expected


def test_cdna2_flushes_subnormal_products():
    # 2^-70 * 2^-70 = 2^-140 is an FP32 subnormal: CDNA2 flushes it, CDNA3 keeps it.
    a = np.array([2.0 ** -70, 0, 0, 0], np.float32)
    assert precsim.dot(a, a, model="mi250x", a_format="bf16", b_format="bf16") == 0.0
    assert precsim.dot(a, a, model="mi300x", a_format="bf16", b_format="bf16") == 2.0 ** -140


def test_mixed_operand_formats():
    a = np.array([1.5, 2.0 ** -9], np.float32)  # e4m3 values (2^-9: its smallest subnormal)
    b = np.array([2.0 ** -16, 1.0], np.float32)  # e5m2 values (2^-16: its smallest subnormal)
    got = precsim.dot(a, b, model="hopper/wgmma.m64n8k32.f32.e4m3.e5m2", a_format="e4m3", b_format="e5m2")
    # 1.5 * 2^-16 + 2^-9: aligned at 2^-9 with 13 fraction bits, 1.5 * 2^-16 keeps 0x1.8p-16.
    assert got == 2.0 ** -9 + 1.5 * 2.0 ** -16
    g = precsim.gemm(a.reshape(1, 2), b.reshape(2, 1), model="hopper/wgmma.m64n8k32.f32.e4m3.e5m2",
                     a_format="e4m3", b_format="e5m2", out_format="fp32")
    assert g[0, 0] == got


def test_fnuz_fp8_on_cdna3():
    a = np.array([1.0, 2.0 ** -10], np.float32)  # 2^-10: e4m3fnuz's smallest subnormal (e4m3fn has 2^-9)
    b = np.array([1.0, 1.0], np.float32)
    got = precsim.dot(a, b, model="cdna3/mfma.f32_16x16x32_fp8_fp8", a_format="e4m3fnuz", b_format="e4m3fnuz")
    assert got == 1 + 2.0 ** -10
    with pytest.raises(ValueError, match="takes A in float8_e4m3fnuz and B in float8_e4m3fnuz.*not A in float8_e4m3fn"):
        precsim.dot(b, b, model="cdna3/mfma.f32_16x16x32_fp8_fp8", a_format="e4m3", b_format="e4m3fnuz")


def test_names_refused_with_what_is_allowed():
    with pytest.raises(ValueError, match=r"does not exist on ampere .*valid: .*mma\.m16n8k16\.f32\.bf16\.bf16\.f32"):
        precsim.accum_model("ampere/mma.m16n8k32.f32.e4m3.e4m3.f32")
    with pytest.raises(ValueError, match="unknown architecture 'pascal'; allowed: volta, turing"):
        precsim.accum_model("pascal/mma.m8n8k4.f32.f16.f16.f32")
    with pytest.raises(ValueError, match=r"hopper has this instruction as wgmma\.m64n\{8\.\.256 step 8\}k16"):
        precsim.accum_model("hopper/wgmma.m64n12k16.f32.f16.f16")


def test_instruction_keys_and_kind_names():
    m = precsim.accum_model("blackwell/tcgen05.mma.m128n8k32.kind::f8f6f4.f32.e2m3.e3m2:splitk=2")
    assert m["kind"] == "block" and m["splitk"] == 2 and m["block"]["n"] == 32 and m["block"]["F"] == 25
    assert m["ops"] == "e2m3+e3m2"
    r = precsim.accum_model("rtx-blackwell/mma.block_scale.m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3")
    assert r["block"]["inscale"] and r["block"]["group"] == 16 and r["block"]["sfmt"] == "ue4m3"
    assert precsim.accum_model("cdna3/mfma.f32_32x32x16_bf8_fp8")["block"]["parity"] is True


def test_accum_models_lists_presets_and_every_table_row():
    models = precsim.accum_models()
    presets = {m["name"] for m in models if m["group"] == "preset"}
    assert {"a100", "h100", "mi100", "mi250x", "mi300x", "rtx5090"} <= presets
    rows = [m for m in models if m["group"] == "instruction"]
    # 325 rows: MMA-Sim 2.1.1's lists, NVIDIA grouped over M and N, one row per MFMA suffix.
    assert len(rows) == 325
    assert sum(r["names"] for r in rows) == 4999  # every name mmasim lists
    assert {r["arch"] for r in rows} == {"volta", "turing", "ampere", "ada-lovelace", "hopper", "blackwell",
                                         "rtx-blackwell", "cdna1", "cdna2", "cdna3"}


def test_models_command(cli):
    rows = json.loads(cli("models", "--json", "--arch", "cdna2"))
    assert {r["kind"] for r in rows} == {"ftz", "seq"} and all(r["arch"] == "cdna2" for r in rows)
    table = cli("models")
    assert "mi300x" in table and "hopper/wgmma.m64n{8..256 step 8}k32.f32.e4m3.e5m2" in table
    assert "floor   exponent zeros align at" in table
    p = subprocess.run([os.environ["PRECSIM_CLI"], "models", "--arch", "pascal"], capture_output=True, text=True)
    assert p.returncode == 2 and "--arch 'pascal' unknown; allowed: volta" in p.stderr
