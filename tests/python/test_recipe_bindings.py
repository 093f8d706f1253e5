"""A precsim.Recipe, its dict and its preset name are one recipe to every binding that takes one:
precsim.torch (matmul, Linear, emulate), precsim.Optimizer and precsim.train give the same bits."""
import numpy as np
import pytest

import precsim
from precsim import Recipe
from conftest import need

CONFIG = {"steps": 6, "batch": 16, "seed": 5, "shadow_every": 0,
          "data": {"kind": "gaussian-mixture", "features": 8, "classes": 3, "train_size": 64, "heldout_size": 16},
          "model": {"hidden": [16]}, "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9}}

# A preset, and a variant of one whose dict is written by hand as a config would hold it.
VARIANT = Recipe.preset("mxfp8").replace(name="mxfp8-h100", gemm={"forward": {"accum": "h100"}},
                                         weights={"format": "fp16"})
VARIANT_DICT = {"name": "mxfp8-h100", "preset": "mxfp8", "gemm": {"forward": {"accum": "h100"}},
                "weights": {"format": "fp16"}}


def _forms(name):
    r = Recipe.preset(name)
    return {"name": name, "Recipe": r, "dict": r.to_dict()}


def _torch_products(recipe):
    """Forward output and both gradients of matmul and of Linear under recipe, as bytes."""
    torch = need("torch")
    pt = need("precsim.torch")
    g = torch.Generator().manual_seed(7)
    a = torch.randn(32, 64, generator=g, requires_grad=True)
    b = torch.randn(64, 16, generator=g, requires_grad=True)
    c = pt.matmul(a, b, recipe, seed=3)
    c.backward(torch.randn(32, 16, generator=g))
    lin = pt.Linear(64, 16, recipe=recipe, seed=3)
    with torch.no_grad():
        lin.weight.copy_(b.detach().T)
        lin.bias.copy_(torch.randn(16, generator=g))
    x = a.detach().clone().requires_grad_(True)
    y = lin(x)
    y.backward(torch.randn(32, 16, generator=g))
    out = [c, a.grad, b.grad, y, x.grad, lin.weight.grad, lin.bias.grad]
    assert all(bool(torch.isfinite(t).all()) and bool(t.abs().sum() > 0) for t in out)
    assert isinstance(lin.recipe, Recipe)
    return [t.detach().numpy().tobytes() for t in out]


@pytest.mark.parametrize("name", ["bf16-amp", "mxfp8", "nvfp4"])
def test_torch_takes_a_recipe_its_dict_and_its_name(name):
    got = {form: _torch_products(r) for form, r in _forms(name).items()}
    assert got["Recipe"] == got["name"] and got["dict"] == got["name"]


def test_torch_variant_recipe_equals_its_dicts():
    ours = _torch_products(VARIANT)
    assert _torch_products(VARIANT.to_dict()) == ours and _torch_products(VARIANT_DICT) == ours
    assert ours != _torch_products("mxfp8")  # the changed keys are in effect


def test_emulate_takes_a_recipe():
    torch = need("torch")
    pt = need("precsim.torch")
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(2))
    outs = []
    for r in _forms("nvfp4").values():
        with pt.emulate(model, r, seed=1) as e:
            assert [e.recipe_of(n).to_dict()["gemm"]["forward"]["a"]["format"] for n in "024"] == ["e2m1", "e2m1", "bf16"]
            outs.append(model(x).detach().numpy().tobytes())
    assert outs[0] == outs[1] == outs[2]


def test_optimizer_takes_a_recipe_its_dict_and_its_name():
    rng = np.random.default_rng(4)
    w0 = rng.normal(size=(5, 7)).astype(np.float32)
    grads = [rng.normal(size=(5, 7)).astype(np.float32) for _ in range(3)]
    results = []
    for r in _forms("bf16-pure-sr").values():
        opt = precsim.Optimizer(w0, {"kind": "adamw", "lr": 0.01}, recipe=r, seed=9)
        stats = [opt.step(g) for g in grads]
        results.append((opt.weights.tobytes(), opt.m.tobytes(), opt.v.tobytes(), stats))
        assert opt.recipe == Recipe.preset("bf16-pure-sr")
    assert results[0] == results[1] == results[2]
    assert not np.array_equal(np.frombuffer(results[0][0], np.float32).reshape(5, 7), w0)


def test_train_takes_a_recipe_its_dict_and_its_name():
    runs = [precsim.train({**CONFIG, "recipes": ["mxfp8", VARIANT_DICT]}),
            precsim.train({**CONFIG, "recipes": [Recipe.preset("mxfp8"), VARIANT]}),
            precsim.train({**CONFIG, "recipes": [Recipe.preset("mxfp8").to_dict(), VARIANT.to_dict()]})]
    assert runs[0]["digest"] == runs[1]["digest"] == runs[2]["digest"]
    assert runs[0]["results"] == runs[1]["results"] == runs[2]["results"]
    variants = runs[0]["results"]["runs"][0]["variants"]
    assert [v["name"] for v in variants] == ["mxfp8", "mxfp8-h100"]
    assert len(variants[0]["series"]["loss"]) == CONFIG["steps"]
    assert variants[0]["series"]["loss"] != variants[1]["series"]["loss"]  # the variant computes differently
    # The resolved recipes written into the report are the Recipes' dicts.
    assert [Recipe.from_dict(r) for r in runs[0]["config"]["recipes"]] == [Recipe.preset("mxfp8"), VARIANT]


def test_bad_recipes_and_configs_raise_with_the_engines_message():
    torch = need("torch")
    pt = need("precsim.torch")
    with pytest.raises(TypeError, match="recipe must be a precsim.Recipe, a preset name or a dict, not int"):
        pt.Linear(4, 4, recipe=3)
    with pytest.raises(ValueError, match=r"unknown recipe key 'gemm\.forward\.acum'"):
        pt.matmul(torch.ones(2, 2), torch.ones(2, 2), {"preset": "mxfp8", "gemm": {"forward": {"acum": "h100"}}})
    with pytest.raises(ValueError, match=r"unknown recipe 'fp33'; known recipes"):
        precsim.Optimizer(np.zeros(3, np.float32), recipe="fp33")
    with pytest.raises(ValueError, match=r"^optimizer\.lr: NaN is not a JSON number"):
        precsim.Optimizer(np.zeros(3, np.float32), {"lr": float("nan")})
    with pytest.raises(ValueError, match=r"^config\.recipes\[1\]\.margin: Infinity is not a JSON number"):
        precsim.train({**CONFIG, "recipes": ["fp32", {"name": "x", "preset": "fp32", "margin": float("inf")}]})
    with pytest.raises(TypeError, match=r"^config\.model\.hidden\[0\]: a set is not a JSON value"):
        precsim.train({**CONFIG, "model": {"hidden": [{16}]}})
    with pytest.raises(ValueError, match=r"unknown recipe key 'fooo'"):
        precsim.train({**CONFIG, "recipes": [{"name": "x", "preset": "fp32", "fooo": 1}]})
    with pytest.raises(FileNotFoundError):
        precsim.train("/nonexistent/config.json")
