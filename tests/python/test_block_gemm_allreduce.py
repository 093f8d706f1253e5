"""Block scaling against `precsim analyze`, gemm and dot against `precsim gemm` / `precsim dot`,
and the all-reduce against an independent FP32 fold."""
import json

import numpy as np
import pytest

import precsim

SCHEMES = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxfp4:rule=ceil", "mxfp4:rule=even",
           "mxfp4:rule=rceil", "mxint8", "nvfp4", "fp8_e4m3:tensor", "fp8_e4m3:row", "fp8_e4m3:tile128",
           "fp8_e4m3:block128", "bf16"]


def _tensor():
    rng = np.random.default_rng(5)
    x = rng.standard_t(3, size=(48, 160)).astype(np.float32)
    x[3, 7] = 0
    return x


def test_block_quantize_equals_analyze(cli, tmp_path):
    x = _tensor()
    np.save(tmp_path / "t.npy", x)
    report = json.loads(cli("analyze", "--input", tmp_path / "t.npy", "--formats", ",".join(SCHEMES), "--json",
                            "--deterministic"))
    rows = {s["scheme"]: s for s in report["results"]["tensors"][0]["schemes"]}
    for scheme in SCHEMES:
        q, st = precsim.block_quantize(x, scheme, stats=True)
        e = precsim.error_stats(x, q)
        r = rows[scheme]
        assert (e["qsnr_db"], e["mse"], e["max_rel_error"]) == (r["qsnr_db"], r["mse"], r["max_rel_error"]), scheme
        if scheme != "bf16":
            assert (st["blocks"], st["clipped_blocks"], st["saturated"], st["flushed"]) == (
                r["blocks"], r["clipped_blocks"], r["saturated"], r["flushed"]), scheme
            hist = [{"exponent": k, "count": v} for k, v in sorted(st["scale_log2_histogram"].items())]
            assert hist == r["scale_log2_histogram"], scheme


@pytest.mark.parametrize("scheme", ["mxfp8_e4m3", "mxfp4", "nvfp4", "mxint8", "fp8_e4m3:tile128", "fp8_e5m2:row"])
@pytest.mark.parametrize("axis", [0, 1])
def test_block_encode_decodes_to_block_quantize(scheme, axis):
    x = _tensor()
    enc = precsim.block_encode(x, scheme, axis=axis)
    q = precsim.block_quantize(x, scheme, axis=axis)
    assert precsim.block_decode(enc).tobytes() == q.tobytes()
    info = precsim._precsim.block_scheme(scheme)
    along = x.shape[1] if axis == 1 else x.shape[0]
    across = x.shape[0] if axis == 1 else x.shape[1]
    block = info["block_along"] or along
    assert enc.scales.shape == (-(-across // max(info["block_across"], 1)) if info["block_across"] else 1,
                                -(-along // block))
    if scheme in ("mxfp4", "nvfp4"):  # two codes a byte, rows stored along the axis
        assert enc.codes.shape == (across, (along + 1) // 2)
    if scheme == "nvfp4":
        assert enc.tensor_scale != 1.0
        amax = float(np.max(np.abs(x)))
        assert enc.tensor_scale == np.float32(amax / (6 * 448))  # decode scale = 1 / (6 * 448 / amax)
    if scheme.startswith("mx"):
        # E8M0 codes: 2^(code - 127).
        assert np.array_equal(enc.scale_values, np.exp2(enc.scales.astype(np.float64) - 127))


def test_block_errors():
    x = _tensor()
    with pytest.raises(ValueError, match="mxfp9"):
        precsim.block_quantize(x, "mxfp9")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        precsim.block_quantize(x, "mxfp4", axis=2)
    with pytest.raises(TypeError, match="float64 is not supported here"):
        precsim.block_quantize(x.astype(np.float64), "mxfp4")


def test_gemm_equals_the_cli(cli, gemm_operands):
    a, b, pa, pb = gemm_operands(9, 8, 96, 6)
    models = ["h100", "a100", "fp32-seq", "pairwise", "block:n=32:F=13:promote=128"]
    rep = json.loads(cli("gemm", "--a", pa, "--b", pb, "--model", ",".join(models),
                         "--a-format", "fp32", "--b-format", "fp32", "--json", "--deterministic"))
    exact = precsim.gemm(a, b, model="exact:acc=fp64", a_format="fp32", b_format="fp32", out_format="fp64", out_dtype=np.float64)
    for model, row in zip(models, rep["results"]["sweep"][0]["models"]):
        c = precsim.gemm(a, b, model=model, a_format="fp32", b_format="fp32")
        err = np.abs(c.astype(np.float64) - exact)
        assert err.max() == row["error"]["max_abs_error"], model
        assert (err / np.abs(exact)).max() == pytest.approx(row["error"]["max_rel_error"], rel=1e-14)
    # Each output is the model's dot product of a row and a column (`precsim dot`).
    for i, j in [(0, 0), (7, 5), (3, 2)]:
        d = json.loads(cli("dot", "--model", "h100", "--input-format", "fp32", "--a",
                           ",".join(float(v).hex() for v in a[i]), "--b", ",".join(float(v).hex() for v in b[:, j]),
                           "--json", "--deterministic"))
        c = precsim.gemm(a, b, model="h100", a_format="fp32", b_format="fp32")
        assert float(c[i, j]) == d["results"]["result"]
        assert precsim.dot(a[i], b[:, j], model="h100") == d["results"]["result"]


def test_gemm_formats_scales_and_errors():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(16, 64)).astype(np.float32)
    w = rng.normal(size=(64, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="not a value of float8_e4m3fn"):
        precsim.gemm(x, w, a_format="e4m3", b_format="e4m3", check_inputs=True)
    xa, wa = precsim.quantize(x, "e4m3"), precsim.quantize(w, "e4m3")
    c = precsim.gemm(xa, wa, model="h100-fp8-fast", a_format="e4m3", b_format="e4m3")
    assert c.shape == (16, 8) and np.isfinite(c).all()
    # Block-scaled operands: MX codes and E8M0 scales along K, as a block-scaled GEMM consumes them.
    ea = precsim.block_encode(x, "mxfp8_e4m3")
    eb = precsim.block_encode(w, "mxfp8_e4m3", axis=0)
    va = precsim.decode(ea.codes, "e4m3").reshape(16, 64)
    vb = precsim.decode(eb.codes, "e4m3").reshape(8, 64)  # stored transposed: (N, K)
    cs = precsim.gemm(va, vb, model="exact", a_format="e4m3", b_format="e4m3", trans_b=True,
                      a_scales=ea.scale_values.astype(np.float32), b_scales=eb.scale_values.astype(np.float32),
                      block_k=32, out_format="fp64", out_dtype=np.float64)
    fq = precsim.gemm(precsim.block_quantize(x, "mxfp8_e4m3"), precsim.block_quantize(w, "mxfp8_e4m3", axis=0),
                      model="exact:acc=fp64", a_format="fp32", b_format="fp32", out_format="fp64",
                      out_dtype=np.float64)
    # The scaled GEMM adds each 32-product group times its scales into an FP32 sum (gemm.h), so it
    # differs from the exact product of the fake-quantized operands by FP32 roundings only.
    assert np.allclose(cs, fq, rtol=1e-6, atol=1e-6) and not np.array_equal(cs, fq)
    with pytest.raises(ValueError, match="a_scales must have shape \\(16, 2\\)"):
        precsim.gemm(va, vb, a_format="e4m3", b_format="e4m3", trans_b=True, a_scales=np.ones((16, 3), np.float32), block_k=32)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        precsim.gemm(x, x)
    with pytest.raises(ValueError, match="unknown accumulation model|unknown.*model"):
        precsim.gemm(x, w, model="z80")
    names = [m["name"] for m in precsim.accum_models()]
    assert "h100" in names and "a100" in names


def test_allreduce():
    rng = np.random.default_rng(2)
    grads = [rng.normal(size=(33, 5)).astype(np.float32) for _ in range(4)]
    r = precsim.allreduce(grads, algorithm="naive", format="fp32")
    fold = grads[0].copy()
    for g in grads[1:]:
        fold = fold + g  # FP32 left fold: the naive algorithm's order
    assert r["reduced"].shape == (33, 5) and r["reduced"].tobytes() == fold.tobytes()
    ring = precsim.allreduce(grads, algorithm="ring", format="bf16", average="ddp")
    assert ring["ranks_identical"] and len(ring["ranks"]) == 4
    assert all(x.tobytes() == ring["reduced"].tobytes() for x in ring["ranks"])
    exact = np.sum(np.stack(grads).astype(np.float64), axis=0) / 4
    assert 0 < np.max(np.abs(ring["reduced"] - exact)) < 0.05 and ring["stats"].inexact > 0
    assert np.array_equal(precsim.quantize(ring["reduced"], "bf16"), ring["reduced"])
    # The error statistics against the exact mean (four float32 values sum exactly in float64).
    d = ring["reduced"].astype(np.float64) - exact
    nz = exact != 0
    e = ring["error"]
    assert e["rel_err_norm"] == pytest.approx(np.linalg.norm(d) / np.linalg.norm(exact), rel=1e-12)
    assert e["rel_err_max"] == pytest.approx(np.max(np.abs(d[nz]) / np.abs(exact[nz])), rel=1e-12)
    assert e["mean_rel_bias"] == pytest.approx(np.mean(d[nz] / exact[nz]), rel=1e-9)
    assert r["error"]["rel_err_norm"] < 1e-6  # an FP32 sum: only its own roundings
    with pytest.raises(ValueError, match="grads\\[1\\] has shape"):
        precsim.allreduce([grads[0], grads[1][:3]])
    with pytest.raises(ValueError, match="ring|tree"):
        precsim.allreduce(grads, algorithm="star")
