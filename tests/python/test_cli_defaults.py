"""The Python API takes the CLI's defaults and spells its numbers as Python does: gemm's operands
are rounded into bf16 as `precsim gemm` rounds them, analyze's non-finite numbers are floats, and
precsim.__version__ is what `precsim --version` prints."""
import json
import math

import numpy as np
import pytest

import precsim


def test_gemm_defaults_are_the_clis(cli, tmp_path, gemm_operands):
    # float32 values with more bits than bf16 holds: the default rounds them, as the CLI does.
    a, b, pa, pb = gemm_operands(30, 5, 40, 3)
    for model in ("h100", "fp32-seq"):
        cli("gemm", "--a", pa, "--b", pb, "--model", model, "--output",
            tmp_path / "c.npy", "--json", "--deterministic")
        want = np.load(tmp_path / "c.npy")
        got = precsim.gemm(a, b, model=model)
        assert got.dtype == want.dtype == np.float32
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), model
    # Independently: the same product of operands rounded to bf16 first, checked as bf16 values.
    qa, qb = precsim.quantize(a, "bf16"), precsim.quantize(b, "bf16")
    assert not np.array_equal(qa, a)
    same = precsim.gemm(qa, qb, model="fp32-seq", check_inputs=True)
    assert np.array_equal(same, precsim.gemm(a, b, model="fp32-seq"))
    fp32 = precsim.gemm(a, b, model="fp32-seq", a_format="fp32", b_format="fp32")
    assert not np.array_equal(fp32, same)


def test_gemm_check_inputs_names_the_value_and_format():
    a = np.full((2, 4), 1 + 2.0 ** -20, np.float32)
    with pytest.raises(ValueError, match=r"operand A\[0\]\[0\] = 1\.000001 \(0x1\.00001p\+0\) is not a value of bf16"):
        precsim.gemm(a, a.T, check_inputs=True)


def test_analyze_nonfinite_numbers_are_floats(cli, tmp_path):
    x = np.zeros(64, np.float32)  # no error at all: QSNR is +inf
    got = precsim.analyze(x, ["bf16"])["schemes"][0]["qsnr_db"]
    assert isinstance(got, float) and got == math.inf
    np.save(tmp_path / "x.npy", x)
    rep = json.loads(cli("analyze", "--input", tmp_path / "x.npy", "--formats", "bf16", "--json", "--deterministic"))
    assert rep["results"]["tensors"][0]["schemes"][0]["qsnr_db"] == "inf"  # the file's spelling


def test_version_is_the_clis(cli):
    assert cli("--version").split()[0] == precsim.__version__
    assert precsim.__version__.count(".") == 2
