"""cuBLASLt's FP8 GEMM as mmaemu (PyPI, 0.1.0) reproduces it bit for bit on its validated
profiles (ada, ada-ws0: RTX 4060; hopper, hopper-ws0: H100 PCIe; cuBLASLt 12.8.3.14), against
precsim's presets: fast accumulation (ada-fp8, h100-fp8-fast), without it (ada-fp8-promote,
h100-fp8-promote), split-K (splitk=S:splitk_scheme=serial|pairwise|contiguous, mmaemu's
names) and the output conversion to bf16, fp16, e4m3 and e5m2 (torch._scaled_mm's epilogue).
mmaemu is a test oracle only (scripts/setup.sh pins it); docs/instructions.md counts the cases."""
import itertools

import numpy as np
import pytest

import precsim
from conftest import need

FORMATS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}
# (mmaemu profile, precsim preset with fast accumulation, without it, the profile's split schemes)
PROFILES = {
    "ada": ("ada-fp8", "ada-fp8-promote", ("serial", "pairwise")),
    "ada-ws0": ("ada-fp8", "ada-fp8-promote", ()),
    "hopper": ("h100-fp8-fast", "h100-fp8-promote", ("contiguous",)),
    "hopper-ws0": ("h100-fp8-fast", "h100-fp8-promote", ()),
}
PAIRS = list(itertools.product(FORMATS, FORMATS))


def operands(torch, seed, m, n, k, fa, fb, wide):
    """A (m, k) and B (n, k) as float8 tensors: every finite code equally likely (wide), or
    normal values times 8 (the FP8 GEMM of a scaled activation)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for rows, f in ((m, fa), (n, fb)):
        dt = getattr(torch, FORMATS[f])
        if wide:
            codes = torch.randint(0, 256, (rows, k), generator=g, dtype=torch.uint8)
            x = codes.view(dt)
            x = torch.where(torch.isfinite(x.float()), x.float(), torch.zeros(())).to(dt)
        else:
            x = (torch.randn(rows, k, generator=g) * 8).clamp(-448, 448).to(dt)
        out.append(x)
    return out


def precsim_gemm(x, w, model, fa, fb, **kw):
    a = x.float().numpy()
    b = w.float().numpy()
    return precsim.gemm(a, b, model=model, a_format=fa, b_format=fb, trans_b=True, input_policy="check", **kw)


def bits(c):
    return np.asarray(c, np.float32).view(np.uint32)


def split_cases(profile):
    fast, slow, schemes = PROFILES[profile]
    cases = [(1, "")]
    cases += [(s, sc) for sc in schemes for s in (2, 3, 4, 5, 8)]
    return cases


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("fast", [True, False])
def test_accumulator_bit_for_bit(profile, fast):
    torch = need("torch")
    mmaemu = need("mmaemu")
    preset = PROFILES[profile][0 if fast else 1]
    cases = 0
    for seed, (fa, fb) in enumerate(PAIRS):
        for k in (16, 200, 448, 1000, 1536):
            x, w = operands(torch, 100 * seed + k, 6, 5, k, fa, fb, wide=k % 3 == 0)
            for s, scheme in split_cases(profile):
                split = 1 if s == 1 else (s, scheme)
                want = mmaemu.accumulate(x, w, use_fast_accum=fast, profile=profile, splitk=split)
                model = preset if s == 1 else f"{preset}:splitk={s}:splitk_scheme={scheme}"
                got = precsim_gemm(x, w, model, fa, fb)
                diff = np.flatnonzero(bits(got) != bits(want.numpy()))
                assert diff.size == 0, (f"{model} {fa} x {fb} K={k} vs mmaemu {profile} splitk={split}: "
                                        f"{diff.size} of {got.size} differ, first {got.flat[diff[0]]!r} "
                                        f"!= {want.numpy().flat[diff[0]]!r}")
                cases += 1
    assert cases == len(PAIRS) * 5 * len(split_cases(profile))  # docs/instructions.md counts them


@pytest.mark.parametrize("profile", ["ada", "hopper"])
@pytest.mark.parametrize("out", ["bf16", "fp16", "e4m3", "e5m2"])
def test_output_conversion_bit_for_bit(profile, out):
    torch = need("torch")
    mmaemu = need("mmaemu")
    out_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "e4m3": torch.float8_e4m3fn,
                 "e5m2": torch.float8_e5m2}[out]
    cases = 0
    for seed, (fa, fb) in enumerate(PAIRS):
        if fa == fb == "e5m2" or (out == "e5m2" and fa == fb == "e4m3"):
            # torch._scaled_mm refuses e5m2 x e5m2, and cuBLASLt 12.8.3 e4m3 x e4m3 -> e5m2 on both
            # GPUs: mmaemu raises, as they do
            continue
        for fast, (sa, sb) in itertools.product((True, False), ((1.0, 1.0), (0.375, 3.0), (2.0 ** -7, 0.1))):
            x, w = operands(torch, 7 * seed + int(fast), 16, 16, 256, fa, fb, wide=not fast)
            want = mmaemu.scaled_mm(x, w.t(), torch.tensor(sa), torch.tensor(sb), out_dtype=out_dtype,
                                    use_fast_accum=fast, profile=profile, splitk=1)
            preset = PROFILES[profile][0 if fast else 1]
            alpha = float(np.float32(sa) * np.float32(sb))  # cuBLAS's alpha: RN32(scale_a * scale_b)
            got = precsim_gemm(x, w, preset, fa, fb, out_format=out, alpha=alpha,
                               out_overflow="saturate" if out in ("e4m3", "e5m2") else "ieee")
            ref = want.float().numpy()
            assert np.array_equal(bits(got), bits(ref)), (
                f"{preset} -> {out}, scales {sa} {sb}: {np.count_nonzero(bits(got) != bits(ref))} outputs differ")
            cases += 1
    assert cases == (12 if out == "e5m2" else 18)  # docs/instructions.md counts them


def test_splitk_scheme_names_and_errors():
    m = precsim.accum_model("ada-fp8:splitk=3:splitk_scheme=pairwise")
    assert (m["splitk"], m["splitk_scheme"]) == (3, "pairwise")
    with pytest.raises(ValueError, match="splitk_scheme 'tree' unknown; allowed: compute, output, inplace, "
                                         "contiguous, serial, pairwise"):
        precsim.accum_model("ada-fp8:splitk=2:splitk_scheme=tree")


def test_pairwise_order_differs_from_serial():
    # One value per 64-wide k-tile, tile t in split t mod 5: partials p0..p3 = 2^-25 and p4 = 1.
    # Serial: ((p0 + p1) + p2) + p3 = 2^-23 exactly, + 1 = 1 + 2^-23. Pairwise (S = 5, h = 3):
    # ((p4 + (p0 + p3)) + p1) + p2 = 1 + 2^-24 is a tie to even 1, and the 2^-25 that follow are lost.
    k = 5 * 64
    a = np.zeros((1, k), np.float32)
    for t, v in enumerate([2.0 ** -25] * 4 + [1.0]):
        a[0, 64 * t + 3] = v
    b = np.ones((k, 1), np.float32)

    def run(scheme):
        return precsim.gemm(a, b, model=f"fp32-seq:splitk=5:splitk_scheme={scheme}", a_format="fp32",
                            b_format="fp32", input_policy="check")[0, 0]

    assert run("serial") == 1 + 2.0 ** -23
    assert run("pairwise") == 1.0
    # contiguous: three 128-wide tiles, one per split (q = 1), splits 3 and 4 empty (+0):
    # (2^-24 + 2^-24) + 1, with each tile's two values summed first.
    assert run("contiguous") == 1 + 2.0 ** -23
    # compute (precsim's own): slices of ceil(320 / 5) = 64, the serial sum in increasing k.
    assert run("compute") == 1 + 2.0 ** -23
