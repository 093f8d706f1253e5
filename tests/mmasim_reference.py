#!/usr/bin/env python3
"""The MMA-Sim side of tests/mmasim_oracle_test.cpp (MMA-Sim: Xie et al., arXiv:2511.10909,
`pip install mmasim`, bit-accurate models of NVIDIA's mma, wgmma and tcgen05.mma).

Reads DIR/cases.txt, one case a line:
  ID API ARCH INSTRUCTION
with API one of mma, wgmma, tcgen05 (plain), tcgen05bs (block-scaled), promote128 (wgmma results
added to an FP32 sum every 128 products, CUTLASS's promotion), and per case the float32 arrays
ID_a.npy (M x K), ID_b.npy (N x K: B's columns), ID_c.npy (M x N) and, block-scaled,
ID_sa.npy (M x K/block), ID_sb.npy (N x K/block). Writes ID_d.npy: D = A B + C as the instruction
computes it, chained over K in the instruction's k (float64 holding the float16/float32 result),
and ID_d0.npy, the same with C = 0.
Exit status 3 when mmasim (or torch) cannot be imported, so the caller can skip rather than fail.
"""
import os
import sys
from importlib import metadata

import numpy as np

try:
    import torch
    from mmasim import nv_ptx
except Exception as e:  # the caller turns this into a skipped test
    print(f"mmasim not importable: {e}", file=sys.stderr)
    sys.exit(3)

FP6_FP4 = {"e3m2": (3, 2), "e2m3": (2, 3), "e2m1": (2, 1)}
TORCH = {"f16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32, "f32": torch.float32,
         "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def codes_of(x, ptx):
    """FP6/FP4 values as their codes (sign, exponent, mantissa), found in the code table."""
    e_bits, m_bits = FP6_FP4[ptx]
    n = 1 + e_bits + m_bits
    bias = 2 ** (e_bits - 1) - 1
    table = {}
    for code in range(2 ** n):
        mag = code & (2 ** (n - 1) - 1)
        e, m = mag >> m_bits, mag & (2 ** m_bits - 1)
        v = (m + (e > 0) * 2 ** m_bits) * 2.0 ** (max(e, 1) - bias - m_bits)
        table[(code >> (n - 1), v)] = code
    flat = [table[(int(np.signbit(v)), abs(float(v)))] for v in x.reshape(-1)]
    return np.array(flat, dtype=np.int64).reshape(x.shape)


def operand(x, ptx, packed_fp4=False):
    if ptx in FP6_FP4:
        codes = codes_of(x, ptx)
        if packed_fp4:  # two e2m1 per byte, the first in the high nibble (MMA-Sim's unpacking)
            return torch.from_numpy(((codes[..., 0::2] << 4) | codes[..., 1::2]).astype(np.uint8))
        shift = 2 if ptx == "e2m1" else 0  # fp6 sits in bits 5:0, fp4 in bits 5:2
        return torch.from_numpy((codes << shift).astype(np.uint8))
    return torch.from_numpy(x).to(TORCH[ptx])


def scales(x, s_type):
    if s_type == "ue8m0":  # exact powers of two: the biased exponent as the code
        return torch.from_numpy((np.log2(x).astype(np.int64) + 127).astype(np.uint8)).view(torch.float8_e8m0fnu)
    return torch.from_numpy(x).to(torch.float8_e4m3fn)


def plain(op, a, b, c):
    m, n = c.shape
    av = operand(a, op.a_type_ptx)[:, None, :].expand(m, n, -1)
    bv = operand(b, op.b_type_ptx)[None, :, :].expand(m, n, -1)
    return op.dpa(av, bv, torch.from_numpy(c).to(op.d_type))


def promoted(op, a, b, c, every=128):
    out = torch.from_numpy(c).float()
    for g in range(0, a.shape[1], every):
        zero = np.zeros(c.shape, np.float32)
        out = out + plain(op, a[:, g:g + every], b[:, g:g + every], zero).float()  # FP32 add, nearest-even
    return out


def block_scaled(op, a, b, c, sa, sb):
    m, n = c.shape
    k, bk = op.k, op.block_size
    packed = op.kind in ("mxf4", "mxf4nvf4")
    s_type = "ue4m3" if op.s_type == torch.float8_e4m3fn else "ue8m0"
    d = torch.from_numpy(c).float()
    for i in range(0, a.shape[1], k):
        av = operand(a[:, i:i + k], op.a_type_ptx, packed)[:, None, :].expand(m, n, -1)
        bv = operand(b[:, i:i + k], op.b_type_ptx, packed)[None, :, :].expand(m, n, -1)
        alpha = scales(sa[:, i // bk:(i + k) // bk], s_type)[:, None, :].expand(m, n, -1)
        beta = scales(sb[:, i // bk:(i + k) // bk], s_type)[None, :, :].expand(m, n, -1)
        d = op.dpa(av, bv, d, alpha, beta)
    return d


def run(api, arch, instruction, a, b, c, sa, sb):
    if api == "mma":
        return plain(nv_ptx.MMA(arch, instruction), a, b, c)
    if api == "wgmma":
        return plain(nv_ptx.WGMMA(arch, instruction), a, b, c)
    if api == "tcgen05":
        return plain(nv_ptx.TCGen05MMA(arch, instruction), a, b, c)
    if api == "promote128":
        return promoted(nv_ptx.WGMMA(arch, instruction), a, b, c)
    if api == "tcgen05bs":
        return block_scaled(nv_ptx.TCGen05MMABlockScale(arch, instruction), a, b, c, sa, sb)
    raise SystemExit(f"unknown API {api}")


def main():
    d = sys.argv[1]
    torch.set_num_threads(1)
    count = 0
    with open(os.path.join(d, "cases.txt")) as f:
        for line in f:
            if not line.strip():
                continue
            cid, api, arch, instruction = line.split()
            arch = arch.replace("_", " ")
            load = lambda s: np.load(os.path.join(d, f"{cid}_{s}.npy"))
            a, b, c = load("a"), load("b"), load("c")
            sa = load("sa") if api == "tcgen05bs" else None
            sb = load("sb") if api == "tcgen05bs" else None
            out = run(api, arch, instruction, a, b, c, sa, sb)
            out0 = run(api, arch, instruction, a, b, np.zeros_like(c), sa, sb)
            np.save(os.path.join(d, f"{cid}_d.npy"), out.double().numpy())
            np.save(os.path.join(d, f"{cid}_d0.npy"), out0.double().numpy())
            count += 1
    print(f"mmasim {metadata.version('mmasim')} torch {torch.__version__}: {count} cases")


if __name__ == "__main__":
    main()
