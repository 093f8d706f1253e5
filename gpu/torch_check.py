"""Second ground truth on a GPU machine with PyTorch: the operands precsim saved (`precsim gpu gemm
--save-operands DIR`) multiplied by torch.matmul (FP16, BF16) or torch._scaled_mm (FP8, with and
without fast accumulation), compared bit for bit with the D that precsim's pinned cuBLASLt GEMM gave.

    python3 gpu/torch_check.py DIR TYPE [--fast-accum]     TYPE: fp16 | bf16 | e4m3 | e5m2

Prints one line per operand set and exits 0 (a mismatch is a finding, not a failure: PyTorch may
pick another algorithm); exits 2 on bad input, 3 when torch has no CUDA device.
"""
import glob
import os
import sys

import numpy as np


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    fast = "--fast-accum" in sys.argv
    if len(args) != 2 or args[1] not in ("fp16", "bf16", "e4m3", "e5m2"):
        print(__doc__, file=sys.stderr)
        return 2
    folder, kind = args
    import torch

    if not torch.cuda.is_available():
        print("torch_check: torch sees no CUDA device", file=sys.stderr)
        return 3
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    dt = dtypes[kind]
    # No reduced-precision reductions and no TF32: the GEMM must accumulate in FP32 as cuBLASLt did.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; {kind}{' fast-accum' if fast else ''}")
    sets = sorted(glob.glob(os.path.join(folder, "*_a.npy")))
    if not sets:
        print(f"torch_check: no *_a.npy in {folder}", file=sys.stderr)
        return 2
    for a_path in sets:
        name = os.path.basename(a_path)[: -len("_a.npy")]
        a = torch.from_numpy(np.load(a_path)).cuda()
        b = torch.from_numpy(np.load(a_path.replace("_a.npy", "_b.npy"))).cuda()
        d = np.load(a_path.replace("_a.npy", "_d.npy"))
        if kind in ("fp16", "bf16"):
            out = torch.matmul(a.to(dt), b.to(dt)).float()  # values are exact in dt: no rounding here
            how = "torch.matmul"
        else:
            one = torch.ones((), device="cuda")
            # _scaled_mm wants B column-major: the transpose of a contiguous (n, k) tensor.
            bt = b.t().contiguous().to(dt).t()
            out = torch._scaled_mm(a.to(dt), bt, scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)
            how = "torch._scaled_mm"
        t = out.cpu().numpy()
        same = np.sum(t.view(np.uint32) == d.astype(np.float32).view(np.uint32))
        diff = np.max(np.abs(t.view(np.int32).astype(np.int64) - d.astype(np.float32).view(np.int32).astype(np.int64)))
        print(f"  {name:<14} {how}: {same}/{d.size} bit-identical to precsim's cuBLASLt result, max code distance {diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
