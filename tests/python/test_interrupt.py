"""Ctrl-C in the long Python calls: precsim.train, gemm on large operands and analyze of a large
tensor, each started in a subprocess and sent SIGINT once it runs, end with KeyboardInterrupt
within a second; train leaves the report of what finished, as `precsim train` does on SIGINT
(tests/report_interrupt_test.py), in `out` and on the exception. The chunks the engine polls
between change no bit (quantize across chunks equals the CLI)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import precsim

# A run far longer than the test: it only ends by the signal.
CONFIG = {
    "steps": 1000000, "batch": 16, "seed": 2, "log_every": 1, "shadow_every": 0,
    "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 256, "heldout_size": 64},
    "model": {"hidden": [16]}, "optimizer": {"kind": "sgd", "lr": 0.05}, "recipes": ["fp32", "bf16-amp"],
}

# The child prints "started" right before the call and, on KeyboardInterrupt, the monotonic time
# (one clock for every process) it was caught at.
CHILD = """
import json, sys, time
import numpy as np
import precsim
SETUP
print("started", flush=True)
try:
    result = CALL
except KeyboardInterrupt as e:
    print("interrupted", repr(time.monotonic()), json.dumps(getattr(e, "report", None)), flush=True)
    sys.exit(130)
print("finished", flush=True)
"""


def interrupt(call, setup="", wait=1.5):
    """Runs `call` in a child, sends SIGINT `wait` seconds after it started, and returns the
    seconds from the signal to the KeyboardInterrupt and the exception's `report` attribute."""
    code = CHILD.replace("SETUP", textwrap.dedent(setup)).replace("CALL", call)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OMP_NUM_THREADS="2"))
    try:
        assert p.stdout.readline().strip() == "started", p.stderr.read()
        time.sleep(wait)
        assert p.poll() is None, f"the call ended before the signal: {p.stdout.read()} {p.stderr.read()}"
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and out.startswith("interrupted"), f"exit {p.returncode}: {out!r} {err[-2000:]!r}"
    _, caught, report = out.split(" ", 2)
    return float(caught) - sent, json.loads(report)


def test_ctrl_c_stops_train_with_the_partial_report(tmp_path):
    out = tmp_path / "run.json"
    delay, report = interrupt(f"precsim.train({CONFIG!r}, out={str(out)!r})")
    assert delay < 1.0, f"KeyboardInterrupt {delay:.3f} s after SIGINT"
    with open(out) as f:
        written = json.load(f)
    # The CLI's interrupted report: status, every finished step, and a document that validates.
    assert written == report and written["status"] == "interrupted"
    run = written["results"]["runs"][0]
    done = run["steps_completed"]
    assert 1 <= done < CONFIG["steps"]
    assert all(v["series"]["step"] == list(range(done)) for v in run["variants"])
    assert precsim.report.validate(str(out)) == []
    assert sorted(os.listdir(tmp_path)) == ["run.json"]  # no temporary file left
    r = subprocess.run([os.environ["PRECSIM_CLI"], "report", "validate", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


GEMM_SETUP = """
rng = np.random.default_rng(0)
a = rng.standard_normal((2048, 2048)).astype(np.float32)
b = rng.standard_normal((2048, 2048)).astype(np.float32)
"""


def test_ctrl_c_stops_a_large_gemm():
    # About 8.6e9 emulated Tensor Core products: ten seconds or more on two idle cores.
    delay, report = interrupt("precsim.gemm(a, b, model='h100')", GEMM_SETUP)
    assert delay < 1.0 and report is None, f"KeyboardInterrupt {delay:.3f} s after SIGINT"


def test_ctrl_c_stops_analyze_of_a_large_tensor():
    setup = "x = np.random.default_rng(1).standard_normal(1 << 23).astype(np.float32)\n"
    delay, _ = interrupt("precsim.analyze(x, ','.join(['all'] * 8))", setup)
    assert delay < 1.0, f"KeyboardInterrupt {delay:.3f} s after SIGINT"


def test_train_out_must_be_writable(tmp_path):
    with pytest.raises(OSError, match="cannot write"):
        precsim.train(dict(CONFIG, steps=2), out=tmp_path / "missing" / "run.json")


def test_quantize_across_chunks_equals_the_cli(cli, tmp_path):
    # Past the 2^22 elements of one chunk: stochastic rounding keeps each element's index.
    x = np.random.default_rng(3).standard_normal((1 << 22) + 1000).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    cli("quantize", "-q", "-f", "e4m3", "--rounding", "stochastic", "--seed", 7, "--input", tmp_path / "x.npy",
        "--output", tmp_path / "y.npy", "--codes")
    codes, stats = precsim.encode(x, "e4m3", rounding="stochastic", seed=7, stats=True)
    assert codes.tobytes() == np.load(tmp_path / "y.npy").tobytes() and stats.count == x.size
    y = precsim.quantize(x, "e4m3", rounding="stochastic", seed=7)
    assert y.tobytes() == precsim.decode(codes, "e4m3").tobytes()
