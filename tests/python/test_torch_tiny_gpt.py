"""precsim.torch.TinyGPT under emulate(), trained with torch.optim.AdamW from `precsim train
--experiment tiny-gpt`'s initial weights on its batches: the per-step losses equal precsim's bit
for bit in fp32, bf16-amp, mxfp8, bf16-amp with attention.opmath low and nvfp4 with nearest-rounded
gradients, attention included; nvfp4, whose stochastic rounding precsim's transformer keys by a
running tensor count, differs by its rounding noise only, within the bound docs/torch-coverage.md
states."""

import numpy as np
import pytest

import precsim
from conftest import correctly_rounded_sqrt, need

torch = need("torch")
pt = need("precsim.torch")

STEPS = 25
# `precsim train --experiment tiny-gpt` (sim/cli/train_runner.cpp) with 25 steps and the recipes.
CONFIG = {"steps": STEPS, "batch": 16, "seed": 1, "shadow_every": 0,
          "model": {"type": "transformer", "layers": 2, "heads": 2, "width": 32, "context": 12},
          "data": {"kind": "copy", "symbols": 6, "min_length": 2, "max_length": 6, "train_size": 1024,
                   "heldout_size": 128},
          "optimizer": {"kind": "adamw", "lr": 0.003},
          "recipes": ["fp32", "bf16-amp", "mxfp8", "nvfp4"]}
LOW = precsim.Recipe.preset("bf16-amp").replace(name="bf16-amp-low-opmath", attention={"opmath": "low"})


def _nearest_gradients(recipe):
    """nvfp4 with its gradient operands rounded to nearest instead of stochastically: everything else
    (RHT on the wgrad operands, 16x16 weight blocks, the last block in BF16) kept."""
    g = recipe.to_dict()["gemm"]
    near = {p: {"a": dict(g[p]["a"], rounding="nearest-even"), "b": g[p]["b"], "accum": g[p]["accum"]} for p in g}
    return recipe.replace(name=recipe.name + "-nearest-gradients", gemm=near, sr_gradients=False)


NVFP4_NEAR = _nearest_gradients(precsim.Recipe.preset("nvfp4"))
CONFIG["recipes"] += [NVFP4_NEAR.to_dict()]
RECIPES = {"fp32": "fp32", "bf16-amp": "bf16-amp", "mxfp8": "mxfp8", NVFP4_NEAR.name: NVFP4_NEAR}
# precsim's low-opmath kernels round each intermediate by a scalar call (about 2 s a step here):
# fewer steps for that recipe.
LOW_STEPS = 4
# nvfp4's two runs differ only by their stochastic-rounding bits (docs/torch-coverage.md): the
# largest relative difference of a step's loss measured over these 25 steps is 4.0%.
NVFP4_REL_BOUND = 0.06


def train_torch(problem, recipe, steps=STEPS):
    """Per-step losses of TinyGPT under emulate(recipe) with torch's AdamW (single-tensor, no decay)."""
    model = pt.TinyGPT.from_problem(problem)
    emu = pt.emulate(model, recipe, seed=problem["seed"])
    opt = torch.optim.AdamW(model.parameters(), lr=0.003, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                            foreach=False)
    losses = []
    with correctly_rounded_sqrt():
        for step in range(steps):
            tokens, targets, valid, mask = problem["batch_of"](step)
            emu.step = step
            loss = pt.token_cross_entropy(model(tokens.long(), valid), targets.long(), mask)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    emu.undo()
    return np.array(losses)


@pytest.fixture(scope="module")
def problem():
    return pt.transformer_problem(CONFIG)


def _losses(config):
    r = precsim.train(config)
    return {v["name"]: np.array(v["series"]["loss"]) for v in r["results"]["runs"][0]["variants"]}


@pytest.fixture(scope="module")
def reference():
    return _losses(CONFIG)


# nvfp4-nearest-gradients: nvfp4's RHT, 2-D weight blocks and BF16 last block, bit for bit.
@pytest.mark.parametrize("recipe", list(RECIPES))
def test_tiny_gpt_equals_precsim_train_bit_for_bit(problem, reference, recipe):
    torch.set_num_threads(1)
    ours = train_torch(problem, RECIPES[recipe])
    assert len(reference[recipe]) == STEPS
    diff = np.abs(ours - reference[recipe])
    assert ours.tobytes() == reference[recipe].tobytes(), (int(np.argmax(diff > 0)), diff.max())
    assert reference[recipe][-1] < reference[recipe][0] - 0.1  # it trains: the comparison is not of a flat run


def test_tiny_gpt_low_opmath_equals_precsim_train_bit_for_bit(problem):
    """attention.opmath low: every LayerNorm and softmax intermediate in bf16 (layernorm_forward_low,
    masked_softmax_forward's opmath), the first LOW_STEPS steps."""
    torch.set_num_threads(1)
    ref = _losses(dict(CONFIG, steps=LOW_STEPS, recipes=[LOW.to_dict()]))[LOW.name]
    ours = train_torch(problem, LOW, steps=LOW_STEPS)
    assert len(ref) == LOW_STEPS and ours.tobytes() == ref.tobytes(), np.abs(ours - ref).max()
    fp32_opmath = train_torch(problem, "bf16-amp", steps=LOW_STEPS)
    assert not np.array_equal(ours, fp32_opmath)  # the opmath changes the losses


def test_tiny_gpt_nvfp4_differs_by_its_stochastic_rounding_only(problem, reference):
    """precsim's transformer keys each stochastic rounding by its running count of roundings in the
    step and rounds the wgrad's gradient operand in a transposed copy; emulate keys by module and
    pass. The forward rounds to nearest, so the first loss is the same bits; after it, two draws of
    the same recipe's rounding noise."""
    torch.set_num_threads(1)
    ours, ref = train_torch(problem, "nvfp4"), reference["nvfp4"]
    assert ours[0] == ref[0]
    rel = np.abs(ours - ref) / ref
    print(f"\nnvfp4 vs precsim train: largest relative loss difference {rel.max():.3f} at step {rel.argmax()}")
    assert not np.array_equal(ours, ref)
    assert rel.max() < NVFP4_REL_BOUND


def test_config_is_the_tiny_gpt_experiment(cli, tmp_path):
    """CONFIG is `precsim train --experiment tiny-gpt`'s: its report's config, key for key."""
    import json
    out = tmp_path / "tiny-gpt.json"
    cli("train", "--experiment", "tiny-gpt", "--steps", "1", "--recipes", "fp32", "--out", out)
    theirs = json.loads(out.read_text())["config"]
    for key in ("batch", "seed"):
        assert theirs[key] == CONFIG[key]
    for key in ("model", "data", "optimizer"):
        assert {k: theirs[key][k] for k in CONFIG[key]} == CONFIG[key], key
    # The rest of the model and optimizer is at the defaults TinyGPT and train_torch assume.
    assert theirs["model"]["tied"] and theirs["model"]["outlier_scale"] == 1.0
    assert theirs["optimizer"]["weight_decay"] == 0.0 and theirs["optimizer"]["clip_norm"] == 0.0
    assert not theirs["optimizer"]["cosine"] and theirs["optimizer"]["warmup_steps"] == 0
