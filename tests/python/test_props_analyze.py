"""Property tests of precsim.analyze (hypothesis; props_common.py): random tensors of every dtype the
CLI reads (integers and bool too), shapes with NaN, Inf and subnormals, lists of formats and schemes
(the block tests' strategy, good and bad) and rounding options. The result equals the tensor's entry
of `precsim analyze --input --json` on the same .npy, or both fail with the same message."""
import json

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st

import precsim
from props_common import arrays, cli_error, cli_text, native_c, props, run_cli, tmpdir
from test_analyze import _floats, _same
from test_props_block import schemes
from test_props_quantize import quant_options


@props(30)
@given(x=arrays(dtypes=("float32", "float64", "float16", "int16", "uint8", "bool"), max_size=300),
       names=st.lists(schemes(), min_size=1, max_size=4), opt=quant_options(bad=True))
def test_analyze_equals_the_cli(x, names, opt):
    kw, args = opt
    try:
        got, err = precsim.analyze(x, names, **kw), None
    except (ValueError, TypeError) as e:
        got, err = None, e
    with tmpdir() as d:
        np.save(f"{d}/x.npy", native_c(x))
        cmd = ["analyze", "--input", f"{d}/x.npy", "--formats", ",".join(names), *args]
        if err is not None:
            event(f"refused: {type(err).__name__}")
            assert isinstance(err, ValueError), err
            assert cli_text(str(err)) in cli_error(*cmd)
            return
        _, out, _ = run_cli(*cmd, "--json", "--deterministic", "-q")
    (entry,) = json.loads(out)["results"]["tensors"]
    del entry["name"]  # the file's stem; Python's array has none
    if not x.dtype.isnative:  # the .npy holds it native (the CLI reads no big-endian file)
        entry["dtype"] = x.dtype.str
    assert _same(got, _floats(entry))
    assert [s["scheme"] for s in got["schemes"]] == names and got["count"] == x.size
