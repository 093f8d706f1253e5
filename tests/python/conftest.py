"""Shared fixtures of the Python tests: the CLI to compare against, the torch twin of `precsim
train`'s MLP, and the rule that under CI (CI or PRECSIM_REQUIRE_ORACLES=1) a missing torch or
ml_dtypes fails instead of skipping."""
import contextlib
import importlib
import os
import subprocess

import pytest

REQUIRED = bool(os.environ.get("CI")) or os.environ.get("PRECSIM_REQUIRE_ORACLES") == "1"


def need(module):
    """The module, or a skip (a failure under CI) naming it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = f"{module} is not installed ({e}); scripts/setup.sh installs it into build/venv"
        if REQUIRED:
            pytest.fail(msg + " -- required under CI / PRECSIM_REQUIRE_ORACLES=1")
        pytest.skip(msg)


@pytest.fixture(scope="session")
def cli():
    """Runs the precsim CLI (PRECSIM_CLI) and returns its stdout; fails on a non-zero exit."""
    path = os.environ.get("PRECSIM_CLI")
    if not path:
        pytest.fail("PRECSIM_CLI is not set (ctest sets it to the built binary)")

    def run(*args):
        p = subprocess.run([path, *map(str, args)], capture_output=True, text=True)
        assert p.returncode == 0, f"precsim {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}"
        return p.stdout

    return run



@pytest.fixture
def gemm_operands(tmp_path):
    """make(seed, m, k, n): float32 normal A (m, k) and B (k, n), also saved as a.npy and b.npy in
    tmp_path for `precsim gemm --a --b`; returns (a, b, path_a, path_b)."""
    import numpy as np

    def make(seed, m, k, n):
        rng = np.random.default_rng(seed)
        a = rng.normal(size=(m, k)).astype(np.float32)
        b = rng.normal(size=(k, n)).astype(np.float32)
        np.save(tmp_path / "a.npy", a)
        np.save(tmp_path / "b.npy", b)
        return a, b, tmp_path / "a.npy", tmp_path / "b.npy"

    return make

@contextlib.contextmanager
def correctly_rounded_sqrt():
    """torch.Tensor.sqrt correctly rounded (NumPy's) while inside: torch's CPU float32 sqrt is not
    (test_torch_optim.py), precsim's AdamW's is."""
    import numpy as np
    import torch
    saved = torch.Tensor.sqrt
    torch.Tensor.sqrt = lambda self: torch.from_numpy(np.sqrt(self.detach().numpy()))
    try:
        yield
    finally:
        torch.Tensor.sqrt = saved


def mlp_twin(problem, dtype=None):
    """The torch MLP (Linear, ReLU, ..., Linear) with `precsim train`'s initial weights, from
    precsim._precsim.mlp_problem's layers; dtype: the parameters' (torch's default when None)."""
    import torch
    layers = problem["layers"]
    mods = []
    for i, (w, b) in enumerate(layers):
        lin = torch.nn.Linear(w.shape[1], w.shape[0], dtype=dtype)
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
        mods += [lin] if i == len(layers) - 1 else [lin, torch.nn.ReLU()]
    return torch.nn.Sequential(*mods)


def pytest_sessionfinish(session, exitstatus):
    """A run with skipped tests and no failure exits 77, which CTest (SKIP_RETURN_CODE) reports as
    skipped, as tests/support/gtest_main.cpp does for the C++ tests: a skip never reads as a pass."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = len(reporter.stats.get("skipped", [])) if reporter else 0
    if exitstatus == 0 and skipped:
        print(f"\nprecsim: {skipped} test(s) skipped; exit 77 so that CTest reports python_test as skipped")
        session.exitstatus = 77


@pytest.fixture
def one_engine_thread():
    """precsim's engine on one thread for the test (results do not depend on it): the torch tests'
    products are tiny, and on a busy machine each parallel region waits for a free core."""
    import precsim
    before = precsim.get_num_threads()
    precsim.set_num_threads(1)
    yield
    precsim.set_num_threads(before)
