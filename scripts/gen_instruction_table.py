#!/usr/bin/env python3
"""Writes sim/src/accum/instruction_table.inc from MMA-Sim's own class list (pip mmasim, pinned by
scripts/setup.sh): every matrix instruction MMA-Sim models, with the arithmetic it uses for it
(read from the instantiated object, not restated here), so precsim's instruction models cannot
drift from the oracle. `--check` exits 1 when the committed file differs from what mmasim gives.

One row per instruction name pattern: NVIDIA names share a row across M and N (the numerics do
not depend on them), AMD's MFMA suffixes are one row each. `--classes` prints the numeric classes
(architecture, family, K, operand/accumulator types, scale kind) one a line, for the tests.
"""
import argparse
import os
import sys

os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(os.getcwd(), "build", "torch_extensions"))
try:
    import torch
    from mmasim import amd, nv_ptx
    from mmasim.amd import isa_mfma
    from mmasim.nv_ptx import isa_mma, isa_tcgen05mma, isa_wgmma
    from mmasim.nv_ptx.isa_common import nv_shape_to_mnk
except Exception as e:  # exit 3: the drift test is skipped (or fails where oracles are required)
    print(f"mmasim not importable: {e}", file=sys.stderr)
    sys.exit(1 if os.environ.get("PRECSIM_REQUIRE_ORACLES", "0") not in ("", "0") or os.environ.get("CI") else 3)

ARCH = {"Volta": "volta", "Turing": "turing", "Ampere": "ampere", "Ada Lovelace": "ada-lovelace",
        "Hopper": "hopper", "Blackwell": "blackwell", "RTX Blackwell": "rtx-blackwell",
        "CDNA1": "cdna1", "CDNA2": "cdna2", "CDNA3": "cdna3"}
# MMA-Sim's type names -> precsim format names.
NV_FMT = {"f64": "fp64", "f32": "fp32", "tf32": "tf32", "f16": "fp16", "bf16": "bf16", "e4m3": "e4m3",
          "e5m2": "e5m2", "e3m2": "e3m2", "e2m3": "e2m3", "e2m1": "e2m1", "ue8m0": "e8m0", "ue4m3": "ue4m3"}
TORCH_FMT = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
             torch.float8_e4m3fnuz: "e4m3fnuz", torch.float8_e5m2fnuz: "e5m2fnuz"}
# NVIDIA families: (precsim family, MMA-Sim simulator class, its shape_and_type table).
NV_FAMILIES = [
    ("mma", nv_ptx.MMA, isa_mma.mma_shape_and_type),
    ("mma.block_scale", nv_ptx.MMABlockScale, isa_mma.mma_block_scale_shape_and_type),
    ("wgmma", nv_ptx.WGMMA, isa_wgmma.wgmma_shape_and_type),
    ("tcgen05.mma", nv_ptx.TCGen05MMA, isa_tcgen05mma.tcgen05mma_shape_and_type),
    ("tcgen05.mma.block_scale", nv_ptx.TCGen05MMABlockScale,
     isa_tcgen05mma.tcgen05mma_block_scale_shape_and_type),
]


def arithmetic(op):
    """The arithmetic MMA-Sim uses for op: (kind, L_max, F, F2, e_zero, group, rho)."""
    a = op.arithmetic_op
    kind = type(a).__name__.removeprefix("MMA_").lower()  # fma, t_fdpa, st_fdpa, ...
    return (kind, getattr(a, "L_max", getattr(a, "P", 0)), getattr(a, "F", 0), getattr(a, "F2", 0),
            getattr(a, "e_zero", 0), getattr(a, "G", 0), getattr(a, "rho", ""))


def compact(values):
    """Sorted ints as "a:b:s" when they form a range of step s (at least 3), else "x,y,...". """
    v = sorted(values)
    if len(v) >= 3 and all(v[i + 1] - v[i] == v[1] - v[0] for i in range(len(v) - 1)):
        return f"{v[0]}:{v[-1]}:{v[1] - v[0]}"
    return ",".join(map(str, v))


def nv_rows():
    rows = []
    for family, cls, table in NV_FAMILIES:
        for arch, names in table.items():
            groups = {}
            for s in names:
                shape, rest = s.split(".", 1)
                m, n, k = nv_shape_to_mnk(shape)
                groups.setdefault((k, rest), []).append((m, n, s))
            for (k, rest), mns in groups.items():
                ms, ns = sorted({m for m, _, _ in mns}), sorted({n for _, n, _ in mns})
                assert len(mns) == len(ms) * len(ns), f"{arch} {family} {rest}: M x N not a product"
                op = cls(arch, mns[0][2])
                q = rest.split(".")
                if q[0].startswith("kind::"):
                    q = q[1:]
                block = 0
                if q[0].startswith("block"):
                    block, q = int(q[0][5:]), q[1:]
                d, a, b = q[0], q[1], q[2]
                c = q[3] if family.startswith("mma") and len(q) > 3 and not q[3].startswith("ue") else d
                scale = q[-1] if q[-1].startswith("ue") else ""
                rows.append(dict(arch=ARCH[arch], family=family, ms=compact(ms), ns=compact(ns), k=k, rest=rest,
                                 a=NV_FMT[a], b=NV_FMT[b], c=NV_FMT[c], d=NV_FMT[d],
                                 scale=NV_FMT.get(scale, ""), block=block, op=arithmetic(op)))
    return rows


def amd_rows():
    rows = []
    for arch, suffixes in isa_mfma.arch_mfma_suffix.items():
        for s in suffixes:
            op = amd.MFMA(arch, s)
            a, b, d = TORCH_FMT[op.a_type], TORCH_FMT[op.b_type], TORCH_FMT[op.d_type]
            if s.endswith("xf32"):
                a = b = "tf32"
            rows.append(dict(arch=ARCH[arch], family="mfma", ms=str(op.m), ns=str(op.n), k=op.k, rest=s,
                             a=a, b=b, c=d, d=d, scale="", block=0, op=arithmetic(op)))
    return rows


def class_key(r):
    """A numeric class: what MMA-Sim's result depends on (not M, N or the spelling)."""
    return (r["arch"], r["family"], r["k"], r["a"], r["b"], r["c"], r["d"], r["scale"], r["block"], r["op"])


def emit(rows):
    out = ["// Generated by scripts/gen_instruction_table.py from mmasim " + version() + "; do not edit.",
           "// arch, family, M values, N values (a:b:step or a list), K, the name after the shape (MFMA: the",
           "// suffix), A, B, C, D formats, scale format, k per scale, MMA-Sim arithmetic, L_max (P for",
           "// ftz_mul_add), F, F2, e_zero, G, rho."]
    for r in rows:
        kind, L, F, F2, ez, G, rho = r["op"]
        out.append(f'{{"{r["arch"]}", "{r["family"]}", "{r["ms"]}", "{r["ns"]}", {r["k"]}, "{r["rest"]}", '
                   f'"{r["a"]}", "{r["b"]}", "{r["c"]}", "{r["d"]}", "{r["scale"]}", {r["block"]}, '
                   f'"{kind}", {L}, {F}, {F2}, {ez}, {G}, "{rho}"}},')
    return "\n".join(out) + "\n"


def version():
    from importlib import metadata
    return metadata.version("mmasim")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="sim/src/accum/instruction_table.inc")
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    ap.add_argument("--classes", action="store_true", help="print one numeric class a line")
    args = ap.parse_args()
    rows = nv_rows() + amd_rows()
    if args.classes:
        seen = {}
        for r in rows:
            seen.setdefault(class_key(r), r)
        for r in seen.values():
            name = r["family"] + "." + (r["rest"] if r["family"] == "mfma" else
                                        f'm{r["ms"].split(",")[0].split(":")[0]}n{r["ns"].split(",")[0].split(":")[0]}k{r["k"]}.{r["rest"]}')
            print(f'{r["arch"]}/{name}')
        return 0
    text = emit(rows)
    if args.check:
        with open(args.out) as f:
            if f.read() != text:
                print(f"{args.out} differs from mmasim {version()}; rerun {sys.argv[0]}", file=sys.stderr)
                return 1
        return 0
    with open(args.out, "w") as f:
        f.write(text)
    print(f"{args.out}: {len(rows)} rows, {len({class_key(r) for r in rows})} numeric classes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
