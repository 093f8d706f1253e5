"""The one converter between Python objects and the engine's JSON (sim/python/src/py_json.cpp): each
value becomes what nlohmann::json::parse(json.dumps(value)) made of it before, and comes back as
json.loads(dump) gave it."""
import math

import numpy as np
import pytest

from precsim import _precsim as _c

echo, kind = _c._json_echo, _c._json_kind


def test_nested_values_come_back_equal_with_their_types():
    v = {"a": [1, -2, 2.5, True, False, None, "µ→✓", {"b": (3, [4.0, []]), "c": {}}], "": "empty key"}
    back = echo(v)
    assert back == {"a": [1, -2, 2.5, True, False, None, "µ→✓", {"b": [3, [4.0, []]], "c": {}}], "": "empty key"}
    assert [type(x) for x in back["a"][:6]] == [int, int, float, bool, bool, type(None)]
    assert type(back["a"][7]["b"][1][0]) is float  # 4.0 stays a float


def test_bools_are_not_ints_and_ints_are_stored_as_the_parser_stores_them():
    assert [kind(x) for x in (True, False, None, "s", [], (), {})] == [
        "boolean", "boolean", "null", "string", "array", "array", "object"]
    # not negative: number_unsigned, negative: number_integer, beyond 64 bits: the parser's double
    assert [kind(x) for x in (0, 1, 2**64 - 1, -1, -2**63)] == ["unsigned"] * 3 + ["integer"] * 2
    assert [kind(x) for x in (2**64, -2**63 - 1, 1.0, 0.0)] == ["float"] * 4
    assert echo(2**64 - 1) == 2**64 - 1 and echo(-2**63) == -2**63
    assert echo(2**70) == 1180591620717411303424.0 and type(echo(2**70)) is float
    assert kind(np.int64(-5)) == "integer" and echo(np.uint8(200)) == 200  # NumPy integers are integers
    with pytest.raises(ValueError, match=r"^value: the integer is too large for a JSON number"):
        echo(10**400)


def test_floats_are_exact():
    for x in (0.1, 1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e21, -1.5, 65504.0):
        assert echo(x) == x and kind(x) == "float"
    assert math.copysign(1.0, echo(-0.0)) == -1.0
    assert echo(np.float64(0.1)) == 0.1  # a float subclass


@pytest.mark.parametrize("bad,spelled", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                         (float("-inf"), "-Infinity")])
def test_non_finite_floats_are_refused_with_their_path(bad, spelled):
    with pytest.raises(ValueError, match=rf"^value\.a\[1\]\.b: {spelled} is not a JSON number"):
        echo({"a": [0, {"b": bad}]})


def test_values_json_has_no_spelling_for_are_type_errors():
    with pytest.raises(TypeError, match=r"^value\.a: keys must be strings, got the int 1"):
        echo({"a": {1: 2}})
    with pytest.raises(TypeError, match=r"^value\[2\]: a set is not a JSON value; allowed: dict, list"):
        echo([1, 2, {3}])
    with pytest.raises(TypeError, match=r"^value: a numpy.float32 is not a JSON value"):
        echo(np.float32(0.5))
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match=r"nested more than 200 levels deep"):
        echo(loop)
