"""What the property tests (test_props_*.py) share: hypothesis settings with a fixed seed and a
bounded example count (PRECSIM_PROPS_LONG=1: many more, from a random seed), strategies for arrays
of every dtype, shape, layout and special value the API takes, and the CLI as the reference."""
import os
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import REQUIRED

try:
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
except ImportError as e:  # as conftest.need: a skip, or under CI a failure
    if REQUIRED:
        raise
    pytest.skip(f"hypothesis is not installed ({e}); scripts/setup.sh installs it into build/venv",
                allow_module_level=True)

LONG = os.environ.get("PRECSIM_PROPS_LONG") == "1"
# The long mode's examples per default example: minutes instead of seconds (docs/testing.md).
LONG_FACTOR = int(os.environ.get("PRECSIM_PROPS_FACTOR", "40"))


def props(examples):
    """Settings of one property: `examples` examples from a fixed seed in the default suite, so that
    a run is repeatable and its time bounded; LONG_FACTOR times as many from a random seed (printed
    by hypothesis on a failure, with the @seed that replays it) in the long mode."""
    return settings(max_examples=examples * LONG_FACTOR if LONG else examples, derandomize=not LONG, deadline=None,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


FLOAT_DTYPES = ["float32", "float64", "float16", "bfloat16"]
INT_DTYPES = ["int8", "int16", "int32", "uint8", "uint16", "int64", "bool"]
# Values the formats treat specially: signed zeros, infinities, NaN, float32's and float16's
# subnormals and limits, E4M3's and FP4's saturation points, ties of the small formats.
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.4e-45, -1.4e-45, 1.1754942e-38, 5.96e-8, 6.1e-5, 65504.0,
           65520.0, 448.0, 464.0, 480.0, 6.0, 7.0, -5.0, 0.25, 0.75, 2.5, 3.4028235e38, 1e-300, 1e300, 0.5 + 2**-24]


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@st.composite
def shapes(draw, max_size=400, min_size=0, max_dims=3):
    """0-d, empty and 1- to 3-d shapes of at most max_size elements."""
    nd = draw(st.integers(0, max_dims))
    dims = []
    for _ in range(nd):
        room = max(1, max_size // max(1, int(np.prod(dims, dtype=np.int64))))
        dims.append(draw(st.integers(0 if min_size == 0 else 1, min(room, 80 if nd > 1 else max_size))))
    shape = tuple(dims)
    if int(np.prod(shape, dtype=np.int64)) < min_size:
        shape = (min_size,)
    return shape


def _values(rng, kind, n):
    if kind == "bits":  # every float32 bit pattern equally likely: NaNs, infinities, subnormals
        with np.errstate(invalid="ignore"):  # NaN payloads widen quietly
            return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).astype(np.float64)
    if kind == "wide":  # normal values over many binades, subnormal to huge
        return rng.standard_normal(n) * np.exp2(rng.integers(-140, 130, n))
    if kind == "small":  # the range of the 4- to 8-bit formats, with ties and saturation points
        return rng.integers(-64, 65, n) / 8.0 * np.exp2(rng.integers(-8, 6, n))
    return rng.standard_normal(n)


@st.composite
def float_values(draw, n):
    """n float64 values of one of the kinds above, with special values sprinkled in."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    v = _values(rng, draw(st.sampled_from(["bits", "wide", "small", "normal"])), n)
    if n and draw(st.booleans()):
        idx = rng.integers(0, n, max(1, n // 8))
        v[idx] = rng.choice(np.array(SPECIAL), idx.size)
    return v


def layout(draw, base):
    """`base` as the caller may hand it over: C order, Fortran order, a strided or reversed view of
    a larger array, or (for multi-byte dtypes) big-endian."""
    how = draw(st.sampled_from(["c", "c", "fortran", "strided", "reversed", "swapped"]))
    if how == "fortran":
        return np.asfortranarray(base)
    if how == "strided" and base.ndim:
        big = np.repeat(base, 2, axis=-1)
        return big[..., ::2]
    if how == "reversed" and base.ndim:
        return base[..., ::-1].copy()[..., ::-1]
    if how == "swapped" and base.dtype.itemsize > 1 and base.dtype.kind == "f" and base.dtype.names is None \
            and base.dtype.name in ("float32", "float64", "float16"):
        return base.astype(base.dtype.newbyteorder(">"))
    return base


@st.composite
def arrays(draw, dtypes=tuple(FLOAT_DTYPES), max_size=400, min_size=0, max_dims=3, contiguous=False):
    """An array of a dtype from `dtypes`, a shape from shapes() and values from float_values();
    integer dtypes get integers of their range; the layout varies unless contiguous."""
    dt = np_dtype(draw(st.sampled_from(list(dtypes))))
    shape = draw(shapes(max_size, min_size, max_dims))
    n = int(np.prod(shape, dtype=np.int64))
    v = draw(float_values(n))
    if dt.kind in "biu":
        info = np.iinfo(dt) if dt.kind != "b" else None
        v = np.nan_to_num(v * 50, nan=0, posinf=0, neginf=0)
        v = (v != 0) if info is None else np.clip(np.round(v), max(info.min, -2**31), min(info.max, 2**31))
    with np.errstate(over="ignore", invalid="ignore"):
        base = np.asarray(v).astype(dt).reshape(shape)
    return base if contiguous else layout(draw, base)


def outcome(fn, *args, **kw):
    """(fn's result, None), or (None, the ValueError or TypeError it raised)."""
    try:
        return fn(*args, **kw), None
    except (ValueError, TypeError) as e:
        return None, e


def native_c(a):
    """a as a C-contiguous array of its own dtype in native byte order (how the CLI's .npy holds it)."""
    a = np.asarray(a)
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into a 1-d one.
    return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")


def run_cli(*args, ok=True):
    """The CLI's (returncode, stdout, stderr); with ok, a non-zero exit fails the test."""
    p = subprocess.run([os.environ["PRECSIM_CLI"], *map(str, args)], capture_output=True, text=True)
    if ok:
        assert p.returncode == 0, f"precsim {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}"
    return p.returncode, p.stdout, p.stderr


def cli_error(*args):
    """The CLI's error line for a bad input (exit 2), without the "precsim: error: " prefix."""
    rc, _, err = run_cli(*args, ok=False)
    assert rc == 2, f"precsim {' '.join(map(str, args))}: exit {rc}, want 2\n{err}"
    lines = [ln for ln in err.splitlines() if ln.startswith("precsim: error: ")]
    assert len(lines) == 1, err
    return lines[0][len("precsim: error: "):]


# The names Python's keyword arguments have where the CLI's messages name its flags.
_FLAG_OF = {"sr_bits": "--sr-bits", "a": "--a", "b": "--b", "c": "--c", "model": "--model",
            "out_format": "--output-format"}


def cli_text(message):
    """A Python error message as the CLI words it: a keyword argument's name as the flag's; the
    array argument's "x: " dropped, where the CLI names its --input file."""
    if message.startswith("x: "):
        return message[3:]
    for kw, flag in _FLAG_OF.items():
        if message.startswith(kw + " "):
            message = flag + message[len(kw):]
            break
    return message.replace(" with out_format ", " with --output-format ")


def tmpdir():
    return tempfile.TemporaryDirectory(prefix="precsim-props-")


def same_bits(a, b):
    """Equal dtype, shape and bytes."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and native_c(a).tobytes() == native_c(b).tobytes()


def same_values(a, b):
    """Equal shape and values, any NaN equal to any NaN, +0 and -0 told apart."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        return False
    both_nan = np.isnan(a) & np.isnan(b)
    return bool(np.all(both_nan | ((a == b) & (np.signbit(a) == np.signbit(b)))))
