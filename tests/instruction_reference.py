#!/usr/bin/env python3
"""The MMA-Sim side of tests/instruction_oracle_test.cpp: every instruction class by precsim's
name (ARCH/INSTRUCTION), run by MMA-Sim (Xie et al., arXiv:2511.10909; pip mmasim, pinned by
scripts/setup.sh) and chained along K one instruction at a time, D of one the C of the next.

Reads DIR/cases.txt, one case a line: ID ARCH/INSTRUCTION, and per case the arrays ID_a.npy
(M x K), ID_b.npy (N x K: B's columns), ID_c.npy (M x N) and, block-scaled, ID_sa.npy (M x K/block)
and ID_sb.npy (N x K/block), all float32 values of the instruction's formats. Writes ID_d.npy
(D = A B + C) and ID_d0.npy (C = 0) as float64. Exit status 3 when mmasim cannot be imported.
"""
import os
import sys
from importlib import metadata

import numpy as np

try:
    import torch
    from mmasim import amd, nv_ptx
except Exception as e:  # the caller turns this into a skipped test
    print(f"mmasim not importable: {e}", file=sys.stderr)
    sys.exit(3)

ARCH = {"volta": "Volta", "turing": "Turing", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace",
        "hopper": "Hopper", "blackwell": "Blackwell", "rtx-blackwell": "RTX Blackwell",
        "cdna1": "CDNA1", "cdna2": "CDNA2", "cdna3": "CDNA3"}
FAMILY = {"mma": nv_ptx.MMA, "mma.block_scale": nv_ptx.MMABlockScale, "wgmma": nv_ptx.WGMMA,
          "tcgen05.mma": nv_ptx.TCGen05MMA, "tcgen05.mma.block_scale": nv_ptx.TCGen05MMABlockScale}
# The FP6/FP4 codes and the scale codes as tests/mmasim_reference.py (beside this file) writes them.
from mmasim_reference import FP6_FP4, codes_of, scales  # noqa: E402


def simulator(spec):
    arch, name = spec.split("/", 1)
    if name.startswith("mfma."):
        return amd.MFMA(ARCH[arch], name[5:])
    tokens = name.split(".")
    shape = next(i for i, t in enumerate(tokens) if t.startswith("m") and "n" in t and "k" in t)
    return FAMILY[".".join(tokens[:shape])](ARCH[arch], ".".join(tokens[shape:]))


def operand(x, dtype, ptx, packed):
    if ptx in FP6_FP4:
        codes = codes_of(x, ptx)
        if packed:  # two e2m1 per byte, the first in the high nibble (MMA-Sim's unpacking)
            return torch.from_numpy(((codes[..., 0::2] << 4) | codes[..., 1::2]).astype(np.uint8))
        shift = 2 if ptx == "e2m1" else 0  # fp6 sits in bits 5:0, fp4 in bits 5:2
        return torch.from_numpy((codes << shift).astype(np.uint8))
    return torch.from_numpy(x.astype(np.float64)).to(dtype)


def run(op, a, b, c, sa, sb):
    m, n = c.shape
    k = op.k
    packed = getattr(op, "packing", 1) == 2
    a_ptx, b_ptx = getattr(op, "a_type_ptx", ""), getattr(op, "b_type_ptx", "")
    d = torch.from_numpy(c.astype(np.float64)).to(op.c_type)
    for i in range(0, a.shape[1], k):
        av = operand(a[:, i:i + k], op.a_type, a_ptx, packed)[:, None, :].expand(m, n, -1)
        bv = operand(b[:, i:i + k], op.b_type, b_ptx, packed)[None, :, :].expand(m, n, -1)
        if sa is None:
            d = op.dpa(av, bv, d)
            continue
        bk = op.block_size
        s_type = "ue8m0" if op.s_type == torch.float8_e8m0fnu else "ue4m3"
        alpha = scales(sa[:, i // bk:(i + k) // bk], s_type)[:, None, :].expand(m, n, -1)
        beta = scales(sb[:, i // bk:(i + k) // bk], s_type)[None, :, :].expand(m, n, -1)
        d = op.dpa(av, bv, d, alpha, beta)
    return d


def main():
    d = sys.argv[1]
    torch.set_num_threads(1)
    count = 0
    with open(os.path.join(d, "cases.txt")) as f:
        for line in f:
            if not line.strip():
                continue
            cid, spec = line.split()
            op = simulator(spec)
            load = lambda s: np.load(os.path.join(d, f"{cid}_{s}.npy"))
            a, b, c = load("a"), load("b"), load("c")
            scaled = os.path.exists(os.path.join(d, f"{cid}_sa.npy"))
            sa, sb = (load("sa"), load("sb")) if scaled else (None, None)
            np.save(os.path.join(d, f"{cid}_d.npy"), run(op, a, b, c, sa, sb).double().numpy())
            np.save(os.path.join(d, f"{cid}_d0.npy"), run(op, a, b, np.zeros_like(c), sa, sb).double().numpy())
            count += 1
    print(f"mmasim {metadata.version('mmasim')} torch {torch.__version__}: {count} cases")


if __name__ == "__main__":
    main()
