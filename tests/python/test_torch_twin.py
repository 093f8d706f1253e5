"""precsim.torch.Run (the recipe's training semantics around a torch optimizer), side_by_side (a
user's model in lockstep with its FP64 reference, its chaos control and recipe twins, as a train
report) and attribute (its attribute report). Expected values come from torch itself (GradScaler,
torch.optim, torch's bfloat16 casts) or from arithmetic written out here, never from the code
under test."""
import json
import os
import subprocess

import pytest

import precsim
from conftest import need

torch = need("torch")
pt = need("precsim.torch")
torch.set_num_threads(1)


def _bf16(t):
    """Round to nearest even into BF16 by torch's own cast (an oracle apart from precsim)."""
    return t.detach().to(torch.bfloat16).to(torch.float32)


class _Weights(torch.nn.Module):
    """One weight vector; loss (w * c).sum() has gradient c exactly."""

    def __init__(self, w):
        super().__init__()
        self.w = torch.nn.Parameter(w.clone())

    def forward(self, c):
        return (self.w * c).sum()


def _mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _tiny_loss(out, target):
    # Output gradients 2^-24 * 2 (out - target) / 128, at most 2^-24 * 0.35 with targets 16 +- 4
    # away: below half FP16's smallest subnormal (2^-25), so flushed to zero, unless scaled by
    # fp16-amp's 2^16, which puts them near 2^-10, far from FP16's underflow.
    return 2.0 ** -24 * torch.nn.functional.mse_loss(out, target)


def _batches(n=4, seed=123):
    # Targets about 16 above the outputs: no output gradient comes near zero, scaled or not.
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(32, 8, generator=g), 16 + torch.randn(32, 4, generator=g)) for _ in range(n)]


def _train(recipe, steps=3, model=None, opt_fn=lambda ps: torch.optim.SGD(ps, lr=0.1)):
    model = _mlp() if model is None else model
    pt.emulate(model, recipe)
    opt = opt_fn(model.parameters())
    run = pt.Run(model, recipe, opt)
    for x, y in _batches(steps):
        opt.zero_grad()
        loss = _tiny_loss(model(x), y)
        with run.step():
            loss.backward()
    return model, run


def test_fp16_amp_keeps_the_gradients_fp16_noscale_flushes():
    _, fp32 = _train("fp32", steps=1)
    amp_model, amp = _train("fp16-amp", steps=1)
    _, noscale = _train("fp16-noscale", steps=1)
    assert all(bool((p.grad == 0).all()) for p in noscale._params)  # every gradient flushed to zero
    for g, ref in zip((p.grad for p in amp._params), (p.grad for p in fp32._params)):
        assert float((g - ref).norm() / ref.norm()) < 1e-2  # kept, to FP16's precision
    assert amp.last["loss_scale"] == 65536.0 and noscale.last["loss_scale"] == 1.0


def test_loss_scale_and_skipped_steps_follow_grad_scaler():
    keys = {"mode": "dynamic", "init_scale": 1024.0, "growth_factor": 4.0, "backoff_factor": 0.25,
            "growth_interval": 2}
    recipe = precsim.Recipe.preset("fp32").replace(loss_scaling=keys)
    w0 = torch.linspace(-1, 1, 16)
    ours, theirs = _Weights(w0), _Weights(w0)
    opt_a, opt_b = torch.optim.SGD(ours.parameters(), lr=0.5), torch.optim.SGD(theirs.parameters(), lr=0.5)
    run = pt.Run(ours, recipe, opt_a)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_factor=4.0, backoff_factor=0.25,
                                  growth_interval=2)
    for step in range(8):
        c = torch.full((16,), 1e-3) * (step + 1)
        if step in (3, 4):
            c[5] = float("inf")  # an overflowing gradient: the step is skipped
        before = ours.w.detach().clone()
        opt_a.zero_grad()
        with run.step():
            ours(c).backward()
        opt_b.zero_grad()
        scaler.scale(theirs(c)).backward()
        scaler.step(opt_b)
        scaler.update()
        assert run.loss_scale == scaler.get_scale(), step
        assert torch.equal(ours.w, theirs.w), step
        assert run.last["skipped"] == (step in (3, 4))
        if run.last["skipped"]:
            assert torch.equal(ours.w, before)
    assert run.skipped_steps == 2


def test_skipped_step_backs_off_by_the_recipe_factor():
    recipe = precsim.Recipe.preset("fp16-amp").replace(loss_scaling={"init_scale": 2.0 ** 40, "backoff_factor": 0.125})
    model = _mlp()
    w0 = [p.detach().clone() for p in model.parameters()]
    pt.emulate(model, recipe)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    run = pt.Run(model, recipe, opt)
    x, y = _batches(1)[0]
    opt.zero_grad()
    with run.step():  # 2^40 times the loss gradient overflows FP16 (max 65504)
        torch.nn.functional.mse_loss(model(x), y).backward()
    assert run.last["found_inf"] and run.last["skipped"]
    assert run.loss_scale == 2.0 ** 37
    # unchanged: still the initial FP32 weights cast into FP16 (the compute copy of the master)
    assert all(torch.equal(p, _fp16(w)) for p, w in zip(model.parameters(), w0))
    assert not opt.state  # the optimizer never stepped


def _fp16(t):
    return t.detach().to(torch.float16).to(torch.float32)


def test_master_copy_in_fp32_and_weights_rounded_into_bf16():
    model = _Weights(torch.linspace(-1, 1, 64) * 1.001)
    master = model.w.detach().clone()  # the master copy starts at the model's FP32 weights
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    run = pt.Run(model, "bf16-amp", opt)
    assert torch.equal(model.w, _bf16(master))
    for step in range(3):
        c = torch.linspace(0.5, 2.0, 64) * (step + 1)
        opt.zero_grad()
        with run.step():
            model(c).backward()
        # torch's SGD on the FP32 master copy with the gradient rounded into BF16 (weight_grads)
        master = master.add(_bf16(c), alpha=-0.01)
        assert torch.equal(run.master_weights()[0], master)
        assert torch.equal(model.w, _bf16(master))


def test_updates_without_master_nearest_stagnates_sr_and_kahan_move():
    w0 = 1.0 + torch.arange(256, dtype=torch.float32) / 256  # BF16's ulp in [1, 2) is 2^-7
    w0 = _bf16(w0)
    delta = 2.0 ** -10  # an eighth of an ulp: nearest rounding loses every update
    moved = {}
    for rule in ("nearest-even", "stochastic", "kahan"):
        recipe = precsim.Recipe.preset("bf16-pure").replace(update_rounding=rule)
        model = _Weights(w0)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        run = pt.Run(model, recipe, opt, seed=3)
        for _ in range(16):
            opt.zero_grad()
            with run.step():
                model(torch.full((256,), -delta)).backward()
            assert torch.equal(model.w, _bf16(model.w))  # stored in BF16
        moved[rule] = float((model.w.detach() - w0).mean())
    intended = 16 * delta  # 2^-6: two ulps
    assert moved["nearest-even"] == 0.0
    assert abs(moved["stochastic"] - intended) < 0.2 * intended  # unbiased on average
    assert abs(moved["kahan"] - intended) <= 2.0 ** -7  # compensated to within one ulp


def test_optimizer_state_rounded_into_its_format():
    recipe = precsim.Recipe.preset("fp32").replace(optimizer_state={"format": "bf16"})
    model = _Weights(torch.linspace(-1, 1, 32))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    run = pt.Run(model, recipe, opt)
    c = torch.linspace(0.1, 3.3, 32) * 1.0001
    with run.step():
        model(c).backward()
    st = opt.state[model.w]
    assert torch.equal(st["exp_avg"], _bf16(0.1 * c))  # (1 - beta1) g, then rounded
    assert torch.equal(st["exp_avg_sq"], _bf16(0.001 * c * c))
    assert not torch.equal(st["exp_avg"], 0.1 * c)


def test_accumulation_buffer_in_its_format():
    recipe = precsim.Recipe.preset("fp32").replace(accumulation={"micro_batches": 2, "buffer_format": "bf16"})
    model = _Weights(torch.zeros(32))
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    run = pt.Run(model, recipe, opt)
    c1, c2 = torch.linspace(0.1, 1.7, 32) * 1.003, torch.linspace(-0.3, 0.9, 32) * 1.007
    with run.step():
        model(c1).backward()
        model(c2).backward()
    expected = _bf16(_bf16(c1) + c2)  # buf = round(0 + g1), then round(buf + g2)
    assert torch.equal(model.w.grad, expected)
    assert torch.equal(model.w, -expected)
    assert run.last["micro_batches"] == 2


def test_run_refuses_parameters_missing_from_the_optimizer():
    model = _mlp()
    opt = torch.optim.SGD(model[0].parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"parameters \['2.weight', '2.bias'\] of the model are not in the"):
        pt.Run(model, "fp32", opt)


@pytest.fixture(scope="module")
def fp16_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("twin") / "sbs.json"
    doc = pt.side_by_side(_mlp, ["fp32", "fp16-amp", "fp16-noscale"], _batches(), _tiny_loss,
                          lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=20, seeds=3, shadow_every=5, out=out,
                          progress=False)
    return doc, out


def test_side_by_side_fp16_noscale_flushes_fp16_amp_does_not(fp16_report):
    doc, _ = fp16_report
    v = {x["name"]: x for x in doc["results"]["variants"]}
    # Every output gradient flushes without scaling (and with it every gradient behind them); with
    # fp16-amp none of them does, and of the hidden layer's, sums of terms of both signs, a few
    # land within 2^-25 of zero (about 1e-5 of them, as precsim train finds for fp16-amp).
    assert v["fp16-noscale"]["summary"]["underflow_fraction"] > 0.9
    assert v["fp16-amp"]["summary"]["underflow_fraction"] < 1e-4
    for run in doc["results"]["runs"]:
        roles = {x["name"]: x["roles"] for x in run["variants"]}
        assert roles["fp16-noscale"]["activation_grads"]["flush_fraction"] > 0.9
        assert roles["fp16-amp"]["activation_grads"]["flush_fraction"] < 1e-4
        assert "activation_grads" not in roles["fp32"]  # FP32 gradients are not rounded
    amp_lo, amp_hi = v["fp16-amp"]["summary_ci95"]["loss_gap"]
    ns_lo, ns_hi = v["fp16-noscale"]["summary_ci95"]["loss_gap"]
    assert amp_hi < ns_lo  # the intervals are apart: no scaling costs loss


def test_side_by_side_fp32_gap_within_the_chaos_floor(fp16_report):
    doc, _ = fp16_report
    fp32 = next(x for x in doc["results"]["variants"] if x["name"] == "fp32")
    floor = [abs(r["reference"]["series"]["chaos_loss"][-1] - r["reference"]["series"]["loss"][-1])
             for r in doc["results"]["runs"]]
    assert abs(fp32["summary"]["loss_gap"]) <= sum(floor) / len(floor)
    assert fp32["summary"]["drift_over_chaos_floor"] < 5


def test_side_by_side_summary_by_hand(fp16_report):
    doc, _ = fp16_report
    run = doc["results"]["runs"][0]
    ref, amp = run["reference"], run["variants"][1]
    losses = amp["series"]["loss"]  # log_every 0 logs every step of a 20-step run
    assert amp["series"]["step"] == [float(s) for s in range(20)]
    assert amp["summary"]["final_loss"] == pytest.approx(sum(losses[-2:]) / 2, rel=1e-15)
    assert amp["summary"]["loss_gap"] == pytest.approx(amp["summary"]["final_loss"] - ref["final_loss"], rel=1e-12)
    assert amp["local"]["step"] == [0.0, 5.0, 10.0, 15.0]
    assert amp["summary"]["chaos_floor"] == ref["chaos_floor"] == ref["series"]["chaos_weight_distance"][-1]


def _cli(*args):
    path = os.environ.get("PRECSIM_CLI")
    if not path:
        pytest.fail("PRECSIM_CLI is not set (ctest sets it to the built binary)")
    return subprocess.run([path, *map(str, args)], capture_output=True, text=True)


def test_side_by_side_report_reads_back(fp16_report):
    doc, out = fp16_report
    p = _cli("report", "validate", out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(out.read_text()) == doc
    summary = _cli("report", "summary", out)
    assert summary.returncode == 0 and "fp16-noscale" in summary.stdout
    cmp = _cli("report", "compare", out, "--a", "fp16-amp", "--b", "fp16-noscale", "--metric", "loss_gap", "--json")
    assert cmp.returncode == 1 and json.loads(cmp.stdout)["verdict"] == "different"


def test_side_by_side_same_seeds_same_report(fp16_report):
    doc, _ = fp16_report
    again = pt.side_by_side(_mlp, ["fp32", "fp16-amp", "fp16-noscale"], _batches(), _tiny_loss,
                            lambda ps: torch.optim.Adam(ps, lr=1e-2), steps=20, seeds=3, shadow_every=5,
                            progress=False)
    assert again == doc and again["digest"] == doc["digest"]


def test_side_by_side_bad_input():
    with pytest.raises(ValueError, match=r"steps 0 is out of range; allowed: an int >= 1"):
        pt.side_by_side(_mlp, ["fp32"], _batches(), _tiny_loss, torch.optim.Adam, steps=0)
    with pytest.raises(ValueError, match=r"recipes \['fp32'\] appear twice"):
        pt.side_by_side(_mlp, ["fp32", "fp32"], _batches(), _tiny_loss, torch.optim.Adam, steps=1)
    with pytest.raises(ValueError, match="unknown recipe preset|nope"):
        pt.side_by_side(_mlp, ["nope"], _batches(), _tiny_loss, torch.optim.Adam, steps=1)


def test_attribute_finds_fp16_noscale_loses_in_the_activation_gradients(tmp_path):
    out = tmp_path / "attr.json"
    doc = pt.attribute(_mlp, "fp16-noscale", _batches(), _tiny_loss, lambda ps: torch.optim.Adam(ps, lr=1e-2),
                       steps=20, seeds=3, shadow_every=5, units=["weights", "activation_grads", "optimizer_state"],
                       metric="final_loss", out=out, progress=False)
    res = doc["results"]
    by = {u["unit"]: u for u in res["units"]}
    assert [u["unit"] for u in res["units"]][0] == "activation_grads" and by["activation_grads"]["rank"] == 1
    # activation_grads holds the loss scaling: putting it back in FP32 removes the whole gap
    assert by["activation_grads"]["share_of_gap"] > 0.9 and not by["activation_grads"]["indistinguishable"]
    assert abs(by["weights"]["share_of_gap"]) < 0.1
    assert by["optimizer_state"]["identical"] and by["optimizer_state"]["leave_one_out"]["final_loss"]["mean"] == 0
    assert res["runs_distinct"] == 6  # R, H, and weights' and activation_grads' counterfactuals
    gap = res["gap"]["final_loss"]["mean"]
    loo = by["activation_grads"]["leave_one_out"]["final_loss"]["mean"]
    assert res["interaction"]["final_loss"]["mean"] == pytest.approx(
        loo + by["weights"]["leave_one_out"]["final_loss"]["mean"] - gap, rel=1e-9, abs=1e-18)
    p = _cli("report", "validate", out)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "activation_grads" in _cli("report", "summary", out).stdout


def test_attribute_bad_input():
    with pytest.raises(ValueError, match="unit 'layer' is not available for a PyTorch model; allowed: role, gemm"):
        pt.attribute(_mlp, "fp16-noscale", _batches(), _tiny_loss, torch.optim.Adam, steps=1, unit="layer")
    with pytest.raises(ValueError, match="computes every role in FP32"):
        pt.attribute(_mlp, "fp32", _batches(), _tiny_loss, torch.optim.Adam, steps=1)
