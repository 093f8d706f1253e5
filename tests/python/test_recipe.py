"""precsim.Recipe: presets resolved by the engine, the dict round trip, replace() revalidating, and
the engine's messages for bad recipes."""
import copy
import dataclasses
import json
import pickle

import pytest

import precsim
from precsim import Recipe


def _leaves(d, prefix=()):
    """{path: value} of every leaf of a nested dict."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_leaves(v, prefix + (k,)))
        else:
            out[prefix + (k,)] = v
    return out


def _changed(a, b):
    la, lb = _leaves(a), _leaves(b)
    return {p: (la.get(p), lb.get(p)) for p in la.keys() | lb.keys() if la.get(p) != lb.get(p)}


@pytest.mark.parametrize("name", precsim.recipes())
def test_every_preset_round_trips(name):
    r = Recipe.preset(name)
    d = r.to_dict()
    assert (r.name, r.preset, d["name"], d["preset"]) == (name, name, name, name)
    assert json.loads(json.dumps(d, allow_nan=False)) == d  # plain JSON
    back = Recipe.from_dict(d)
    assert back == r and hash(back) == hash(r) and back.to_dict() == d
    assert Recipe.from_dict({"preset": name}) == r  # the name defaults to the preset
    assert Recipe.from_dict({"name": name}) == r  # and the preset to the name
    assert repr(r) == f"Recipe.preset({name!r})"
    # every key of `precsim train --config-help` is explicit
    assert {"weights", "master_weights", "activations", "gemm", "loss_scaling", "parallel", "accumulation",
            "attention", "rht", "mx_scale_rule"} <= d.keys()
    assert set(d["gemm"]) == {"forward", "dgrad", "wgrad"}


def test_presets_hold_their_documented_values():
    mx = Recipe.preset("mxfp8").to_dict()
    assert mx["gemm"]["forward"]["a"] == {"format": "e4m3", "rounding": "nearest-even", "scaling": "mx", "block": 32}
    assert mx["mx_scale_rule"] == "rceil" and mx["activations"]["format"] == "bf16"
    nv = Recipe.preset("nvfp4").to_dict()
    assert nv["keep_bf16_layers"] == 0.16 and nv["rht"] is True and nv["rht_size"] == 16
    assert Recipe.preset("fp16-amp").to_dict()["loss_scaling"]["mode"] == "dynamic"
    assert Recipe.preset("fp32") != Recipe.preset("bf16-amp")


def test_replace_changes_exactly_the_key_asked():
    r = Recipe.preset("mxfp8")
    before = r.to_dict()
    h = r.replace(gemm={"forward": {"accum": "h100"}})
    assert _changed(before, h.to_dict()) == {("gemm", "forward", "accum"): ("fp32-seq", "h100")}
    assert r.to_dict() == before  # r itself is unchanged
    assert (h.name, h.preset) == ("mxfp8", "mxfp8") and h != r
    assert repr(h) == "Recipe.preset('mxfp8').replace(gemm={'forward': {'accum': 'h100'}})"
    assert eval(repr(h), {"Recipe": Recipe}) == h
    m = r.replace(margin=2, name="mine")
    assert _changed(before, m.to_dict()) == {("margin",): (0, 2), ("name",): ("mxfp8", "mine")}
    assert repr(m) == "Recipe.preset('mxfp8').replace(margin=2, name='mine')"
    # None deletes the key from the patch: the preset's value comes back
    assert h.replace(gemm={"forward": {"accum": None}}) == r
    assert Recipe.from_dict(h.to_dict()) == h


def test_replace_and_from_dict_revalidate_with_the_engines_messages():
    r = Recipe.preset("mxfp8")
    with pytest.raises(ValueError, match=r"gemm\.forward\.a\.format: unknown format 'fp9'"):
        r.replace(gemm={"forward": {"a": {"format": "fp9"}}})
    with pytest.raises(ValueError, match=r"^weights\.format: unknown format 'fp9'"):
        r.replace(weights={"format": "fp9"})
    with pytest.raises(ValueError, match=r"unknown recipe key 'foo'; valid keys here: .*activations.*weights"):
        r.replace(foo=1)
    with pytest.raises(ValueError, match=r"unknown recipe key 'gemm\.forward\.acum'; valid keys here: a, accum, b"):
        r.replace(gemm={"forward": {"acum": "h100"}})
    with pytest.raises(ValueError, match=r"recipe key 'margin': expected number, got \"two\""):
        r.replace(margin="two")
    with pytest.raises(ValueError, match=r"recipe key 'margin': expected an integer, got 1\.5"):
        Recipe.from_dict({"preset": "fp32", "margin": 1.5})
    with pytest.raises(ValueError, match=r"unknown recipe 'fp33'; known recipes: fp32, bf16-amp"):
        Recipe.preset("fp33")
    with pytest.raises(ValueError, match=r"unknown recipe 'mine'; known recipes: fp32"):
        Recipe.from_dict({"name": "mine", "margin": 1})  # no preset: the name is taken for one
    with pytest.raises(ValueError, match=r"recipe key 'name': expected a string, got 3"):
        Recipe.from_dict({"name": 3, "preset": "fp32"})
    with pytest.raises(ValueError, match=r"^recipe\.margin: NaN is not a JSON number"):
        Recipe.from_dict({"preset": "fp32", "margin": float("nan")})
    with pytest.raises(TypeError, match="a recipe dict must be a dict, not list"):
        Recipe.from_dict(["fp32"])
    with pytest.raises(TypeError, match="a recipe preset name is a str, not int"):
        Recipe.preset(3)


def test_value_semantics():
    r = Recipe.preset("bf16-amp").replace(margin=1)
    assert len({r, Recipe.from_dict(r.to_dict()), Recipe.preset("bf16-amp")}) == 2
    assert pickle.loads(pickle.dumps(r)) == r and copy.deepcopy(r) == r
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.name = "other"
    with pytest.raises(TypeError, match="build a Recipe with Recipe.preset"):
        dataclasses.replace(r, name="other")  # would bypass the engine's validation
    d = r.to_dict()
    d["margin"] = 7  # a new dict each time: editing it leaves the recipe alone
    assert r.to_dict()["margin"] == 1


def test_layer_recipes_follow_keep_bf16_layers():
    nv = Recipe.preset("nvfp4")
    layers = nv.layer_recipes(3)
    assert len(layers) == 3 and all(isinstance(x, Recipe) for x in layers)
    # ceil(0.16 x 3) = 1: the last layer is computed in BF16, the others in NVFP4
    assert [x.to_dict()["gemm"]["forward"]["a"]["scaling"] for x in layers] == ["nvfp4", "nvfp4", "none"]
    assert layers[2].to_dict()["gemm"]["forward"]["a"]["format"] == "bf16"
    assert Recipe.preset("mxfp8").layer_recipes(3) == []
