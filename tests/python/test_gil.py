"""The GIL is released while the engine loops over data: another Python thread runs during a long
call. Not a timing bound: it counts whether the other thread ran at all inside the call. With the
GIL held it cannot, but for a switch at each edge of the call (two stamps at most)."""
import threading
import time

import numpy as np
import pytest

import precsim

N = 1 << 24


def _stamps_inside(call):
    """How often the main thread ran while another thread was inside call()."""
    span, stamps = [], []

    def work():
        t0 = time.perf_counter()
        call()
        span.extend([t0, time.perf_counter()])

    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())
        time.sleep(0.0002)
    t.join()
    assert span, "the call raised"
    return sum(span[0] < s < span[1] for s in stamps)


def _x(n=N):
    return np.random.default_rng(1).normal(size=n).astype(np.float32)


CALLS = {
    "quantize": lambda: precsim.quantize(_X, "e4m3", rounding="stochastic", out=_Y),
    "encode": lambda: precsim.encode(_X, "e2m1"),
    "block_quantize": lambda: precsim.block_quantize(_X.reshape(-1, 1024), "nvfp4", out=_Y.reshape(-1, 1024)),
    "block_encode": lambda: precsim.block_encode(_X.reshape(-1, 1024), "mxfp4"),
    "analyze": lambda: precsim.analyze(_X.reshape(-1, 1024), ["mxfp8_e4m3", "fp8_e4m3:tile128"]),
    "error_stats": lambda: [precsim.error_stats(_X, _X) for _ in range(4)],
    "gemm": lambda: precsim.gemm(_X[:192 * 512].reshape(192, 512), _X[:512 * 192].reshape(512, 192), model="h100"),
    "dot": lambda: precsim.dot(_X, _X, model="h100"),
    "allreduce": lambda: precsim.allreduce([_X[: N // 16]] * 4, algorithm="ring", format="bf16"),
}
_X, _Y = _x(), np.empty(N, np.float32)


@pytest.mark.parametrize("name", list(CALLS))
def test_other_threads_run_during_the_call(name):
    threads = precsim.get_num_threads()
    precsim.set_num_threads(1)  # leaves a core for the main thread on a 2-core machine
    try:
        inside = _stamps_inside(CALLS[name])
    finally:
        precsim.set_num_threads(threads)
    assert inside > 4, f"{name}: the main thread ran {inside} times during the call; the GIL is held"
