"""A NumPy or ml_dtypes dtype stands for its format wherever a format is taken (Format, quantize,
encode, gemm, dot, allreduce), by the one table in precsim/_arrays.py; other dtypes are refused
with a ValueError naming the dtype and the accepted ones."""
import numpy as np
import pytest

import precsim
from conftest import need
from precsim._arrays import ML_DTYPES


@pytest.mark.parametrize("ours", list(ML_DTYPES))
def test_every_shared_dtype_is_its_format(ours):
    need("ml_dtypes")
    dt = precsim.ml_dtype(ours)
    assert precsim.Format(dt) == precsim.Format(ours)
    assert precsim.Format(dt.type) == precsim.Format(ours)  # the scalar type, as np.float16 is spelled
    x = np.array([1.1, -3.3, 0.02, 7.0], np.float32)
    assert np.array_equal(precsim.quantize(x, dt.type), precsim.quantize(x, ours), equal_nan=True)
    assert np.array_equal(precsim.encode(x, dt.type), precsim.encode(x, ours))


def test_numpy_floats_and_products():
    ml_dtypes = need("ml_dtypes")
    assert precsim.Format(np.float32) == precsim.Format("fp32") and precsim.Format(np.float64).name == "fp64"
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 16)).astype(np.float32)
    b = rng.normal(size=(16, 2)).astype(np.float32)
    by_dtype = precsim.gemm(a, b, model="fp32-seq", a_format=np.float16, b_format=ml_dtypes.bfloat16)
    assert np.array_equal(by_dtype, precsim.gemm(a, b, model="fp32-seq", a_format="fp16", b_format="bf16"))
    assert not np.array_equal(by_dtype, precsim.gemm(a, b, model="fp32-seq", a_format="fp32", b_format="fp32"))
    h = precsim.quantize(a[0], np.float16)
    assert precsim.dot(h, h, a_format=np.float16, b_format=np.float16) == precsim.dot(h, h, a_format="fp16",
                                                                                     b_format="fp16")
    grads = [a[0], a[1]]
    assert precsim.allreduce(grads, format=ml_dtypes.bfloat16)["error"] == precsim.allreduce(grads, format="bf16")["error"]


@pytest.mark.parametrize("call", [lambda d: precsim.Format(d), lambda d: precsim.quantize(np.ones(2, np.float32), d),
                                  lambda d: precsim.gemm(np.ones((1, 1), np.float32), np.ones((1, 1), np.float32),
                                                         a_format=d)])
def test_unsupported_dtype_is_a_value_error_naming_it(call):
    with pytest.raises(ValueError, match=r"dtype complex64 has no precsim format; accepted dtypes: bfloat16, float16, "
                                         r"float8_e4m3fn, .*float32, float64"):
        call(np.complex64)
