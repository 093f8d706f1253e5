"""The NVIDIA GPU presets with `pick=ARCH` take, for each operand pair their architecture has an
instruction for, the instruction MMA-Sim names (the first with FP32 D in its list, not
block-scaled), and compute what MMA-Sim computes for it chained along K, bit for bit. Without
`pick` the presets keep their own parameters (docs/instructions.md says why)."""
import os
import sys

import numpy as np
import pytest

import precsim
from conftest import need

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPUS = [("v100", "volta"), ("t4", "turing"), ("a100", "ampere"), ("ada", "ada-lovelace"), ("h100", "hopper"),
        ("b200", "blackwell")]


def picked(arch):
    """(A format, B format) -> the row the architecture picks for them: the first in table order
    with FP32 D, else the first (FP16 D only)."""
    first, fp32 = {}, {}
    for r in precsim.accum_models():
        ops = r.get("operands")
        if r["group"] != "instruction" or r["arch"] != arch or ops["scale"] or ops["a"] == "fp64":
            continue
        first.setdefault((ops["a"], ops["b"]), r)
        if ops["d"] == "fp32":
            fp32.setdefault((ops["a"], ops["b"]), r)
    return {key: fp32.get(key, r) for key, r in first.items()}


@pytest.mark.parametrize("preset, arch", GPUS)
def test_preset_with_pick_is_mmasims_instruction(preset, arch):
    need("torch")
    need("mmasim")
    sys.path.insert(0, TESTS)
    import instruction_reference as ref  # noqa: E402  (imports mmasim)
    rng = np.random.default_rng([ord(ch) for ch in preset])
    rows = picked(arch)
    assert rows
    for (fa, fb), row in rows.items():
        k = 2 * row["mmasim"]["k"]  # two instructions chained along K
        a = precsim.quantize(rng.standard_normal((4, k)).astype(np.float32), fa)
        b = precsim.quantize(rng.standard_normal((k, 4)).astype(np.float32), fb)
        got = precsim.gemm(a, b, model=f"{preset}:pick={arch}", a_format=fa, b_format=fb, input_policy="check",
                           out_format=row["operands"]["d"])
        same = precsim.gemm(a, b, model=row["name"], a_format=fa, b_format=fb, input_policy="check",
                            out_format=row["operands"]["d"])
        want = ref.run(ref.simulator(row["name"]), a, np.ascontiguousarray(b.T), np.zeros((4, 4), np.float32),
                       None, None).double().numpy().astype(np.float32)
        assert np.array_equal(got.view(np.uint32), same.view(np.uint32)), f"{preset} {fa} x {fb} vs {row['name']}"
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{preset} {fa} x {fb} vs MMA-Sim"


def test_pick_refuses_operands_the_architecture_has_no_instruction_for():
    a = np.ones((2, 2), np.float32)
    with pytest.raises(ValueError, match="volta has no instruction for operands bf16 x bf16; it has: fp16 x fp16"):
        precsim.gemm(a, a, model="v100:pick=volta", a_format="bf16", b_format="bf16")


def test_pairs_counted_in_the_docs():
    assert sum(len(picked(arch)) for _, arch in GPUS) == 47  # docs/instructions.md
