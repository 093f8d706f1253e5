#!/usr/bin/env python3
"""The ml_dtypes side of tests/ml_dtypes_test.cpp.

Reads float32 inputs from IN.npy and, for every dtype given, writes to OUTDIR:
  <dtype>_codes.npy   the codes of inputs.astype(dtype) (uint8 or uint16, one code per element)
  <dtype>_decode.npy  float64 values of every code 0 .. 2^bits - 1 (exhaustive decode)
Usage: ml_dtypes_reference.py IN.npy OUTDIR DTYPE:BITS...
Exit status 3 when ml_dtypes cannot be imported, so the caller can skip rather than fail.
"""
import os
import sys

import numpy as np

try:
    import ml_dtypes
except ImportError as e:  # the caller turns this into a skipped test
    print(f"ml_dtypes not importable: {e}", file=sys.stderr)
    sys.exit(3)


def dtype_of(name):
    return np.dtype(np.float16) if name == "float16" else np.dtype(getattr(ml_dtypes, name))


def main():
    src, outdir, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    x = np.load(src)
    assert x.dtype == np.float32, x.dtype
    for spec in specs:
        name, bits = spec.split(":")
        dt = dtype_of(name)
        code_type = np.uint8 if dt.itemsize == 1 else np.uint16
        with np.errstate(all="ignore"):
            codes = x.astype(dt).view(code_type)
        np.save(os.path.join(outdir, f"{name}_codes.npy"), codes)
        all_codes = np.arange(2 ** int(bits), dtype=np.uint32).astype(code_type)
        with np.errstate(all="ignore"):
            values = all_codes.view(dt).astype(np.float64)
        np.save(os.path.join(outdir, f"{name}_decode.npy"), values)
    print(f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}: {len(specs)} dtypes, {x.size} inputs")


if __name__ == "__main__":
    main()
