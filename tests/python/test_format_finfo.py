"""Format's numpy.finfo names (eps, smallest_normal, smallest_subnormal, nmant, nexp) hold finfo's
numbers for every float format ml_dtypes (or NumPy) has, beside precsim's own names."""
import numpy as np
import pytest

import precsim
from conftest import need

# The float formats ml_dtypes shares with precsim (int4 and int8 have no finfo).
FLOATS = ["bf16", "fp16", "float8_e4m3fn", "float8_e4m3", "float8_e4m3fnuz", "float8_e4m3b11fnuz", "float8_e5m2",
          "float8_e5m2fnuz", "float8_e3m4", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float8_e8m0fnu"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_aliases_equal_finfo(name):
    ml_dtypes = need("ml_dtypes")
    f = precsim.Format(name)
    dt = precsim.ml_dtype(f)
    fi = np.finfo(dt) if dt == np.float16 else ml_dtypes.finfo(dt)
    assert (f.eps, f.smallest_normal, f.smallest_subnormal) == (float(fi.eps), float(fi.smallest_normal),
                                                                float(fi.smallest_subnormal))
    assert (f.nmant, f.nexp, f.max) == (fi.nmant, fi.nexp, float(fi.max))
    # The aliases are precsim's own numbers under finfo's names.
    assert (f.eps, f.smallest_normal, f.smallest_subnormal, f.nmant, f.nexp) == (
        f.epsilon, f.min_normal, f.min_subnormal, f.mantissa_bits, f.exponent_bits)


def test_finfo_aliases_by_hand():
    f = precsim.Format("e4m3")  # OCP E4M3: 3 mantissa bits, emin -6
    assert (f.eps, f.smallest_normal, f.smallest_subnormal, f.nmant, f.nexp) == (2.0**-3, 2.0**-6, 2.0**-9, 3, 4)
