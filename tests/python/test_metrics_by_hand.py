"""The training metrics of `precsim train` recomputed by hand, outside the trainer, on a tiny MLP:
an FP64 reference and a chaos control stepped in torch float64, the bf16-amp variant stepped by the
torch twin (precsim.torch.emulate + torch.optim.SGD, which equals the trainer bit for bit:
test_torch.py), and every metric formula of docs/reference/metrics.md written out here in NumPy. A
factor of two, a wrong denominator or a metric taken at the wrong step fails."""
import copy

import numpy as np
import pytest

import precsim
from conftest import mlp_twin, need

torch = need("torch")
pt = need("precsim.torch")

STEPS, SHADOW = 20, 4
CONFIG = {"steps": STEPS, "batch": 32, "seed": 3, "shadow_every": SHADOW, "log_every": 1,
          "recipes": ["bf16-amp"],
          "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 256, "heldout_size": 64},
          "model": {"hidden": [32]}, "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9}}


def _flat(model, grad=False):
    return np.concatenate([(p.grad if grad else p).detach().numpy().astype(np.float64).ravel()
                           for p in model.parameters()])


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _loss_and_grad(model, x, y, loss_fn):
    for p in model.parameters():
        p.grad = None
    loss = loss_fn(model(x), y)
    loss.backward()
    return float(loss.detach())


@pytest.fixture(scope="module")
def by_hand():
    torch.set_num_threads(1)
    seed, lr, mom = CONFIG["seed"], CONFIG["optimizer"]["lr"], CONFIG["optimizer"]["momentum"]
    problem = precsim._precsim.mlp_problem(CONFIG, seed)
    x32 = torch.from_numpy(problem["x_train"])
    y = torch.from_numpy(problem["y_train"]).long()
    ref = mlp_twin(problem, torch.float64)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=mom)
    # The chaos control: every initial weight moved by one FP32 ulp, in a direction of our own.
    chaos = copy.deepcopy(ref)
    rng = np.random.default_rng(11)
    with torch.no_grad():
        for p in chaos.parameters():
            v = p.detach().numpy().astype(np.float32)
            step = np.spacing(np.abs(v)).astype(np.float64) * rng.choice([-1.0, 1.0], v.shape)
            p.copy_(torch.from_numpy(v.astype(np.float64) + step))
    chaos_opt = torch.optim.SGD(chaos.parameters(), lr=lr, momentum=mom)
    var = mlp_twin(problem, torch.float32)
    emu = pt.emulate(var, "bf16-amp", seed=seed)
    var_opt = torch.optim.SGD(var.parameters(), lr=lr, momentum=mom)
    shadow = mlp_twin(problem, torch.float32)  # the variant's arithmetic at the reference's weights
    shadow_emu = pt.emulate(shadow, "bf16-amp", seed=seed)
    out = {"loss": [], "ref_loss": [], "weight_distance": [], "chaos_distance": [], "shadow_step": [],
           "grad_rel_err": [], "grad_cosine": [], "update_rel_err": []}
    for step in range(STEPS):
        idx = torch.tensor(precsim._precsim.batch_indices(len(x32), CONFIG["batch"], seed, step))
        xb, yb = x32[idx], y[idx]
        for m in [*var.modules(), *shadow.modules()]:
            if isinstance(m, pt.Linear):
                m.step = step
        w_ref_before = _flat(ref)
        rl = _loss_and_grad(ref, xb.double(), yb, torch.nn.functional.cross_entropy)
        g_ref = _flat(ref, grad=True)
        ref_opt.step()
        d_ref = _flat(ref) - w_ref_before
        _loss_and_grad(chaos, xb.double(), yb, torch.nn.functional.cross_entropy)
        chaos_opt.step()
        if step % SHADOW == 0:
            # The variant's arithmetic at the reference's weights (rounded to FP32) with the
            # variant's own optimizer state; nothing of it kept.
            with torch.no_grad():
                off = 0
                for p in shadow.parameters():
                    p.copy_(torch.from_numpy(w_ref_before[off:off + p.numel()].reshape(p.shape).astype(np.float32)))
                    off += p.numel()
            _loss_and_grad(shadow, xb, yb, pt.cross_entropy)
            g_v = _flat(shadow, grad=True)
            sh_opt = torch.optim.SGD(shadow.parameters(), lr=lr, momentum=mom)
            state = copy.deepcopy(var_opt.state_dict())  # load_state_dict would share the buffers
            sh_opt.load_state_dict(state)
            before = _flat(shadow)
            sh_opt.step()
            d_v = _flat(shadow) - before
            out["shadow_step"].append(step)
            out["grad_rel_err"].append(_rel(g_v, g_ref))
            out["grad_cosine"].append(g_v @ g_ref / (np.linalg.norm(g_v) * np.linalg.norm(g_ref)))
            out["update_rel_err"].append(_rel(d_v, d_ref))
        vl = _loss_and_grad(var, xb, yb, pt.cross_entropy)
        var_opt.step()
        out["loss"].append(vl)
        out["ref_loss"].append(rl)
        out["weight_distance"].append(_rel(_flat(var), _flat(ref)))
        out["chaos_distance"].append(_rel(_flat(chaos), _flat(ref)))
    emu.undo()
    shadow_emu.undo()
    return {k: np.array(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def report():
    run = precsim.train(CONFIG)["results"]["runs"][0]
    return run["reference"], run["variants"][0]


def test_reference_and_variant_losses(by_hand, report):
    ref, var = report
    np.testing.assert_allclose(ref["series"]["loss"], by_hand["ref_loss"], rtol=1e-12)
    assert np.array(var["series"]["loss"]).tobytes() == by_hand["loss"].tobytes()
    np.testing.assert_allclose(var["series"]["loss_gap"], by_hand["loss"] - by_hand["ref_loss"], rtol=1e-9, atol=1e-13)


def test_weight_distance_and_summary(by_hand, report):
    ref, var = report
    np.testing.assert_allclose(var["series"]["weight_distance"], by_hand["weight_distance"], rtol=1e-6)
    s = var["summary"]
    window = max(1, STEPS // 10)
    final_v, final_r = by_hand["loss"][-window:].mean(), by_hand["ref_loss"][-window:].mean()
    assert s["final_loss"] == pytest.approx(final_v, rel=1e-12)
    assert s["loss_gap"] == pytest.approx(final_v - final_r, rel=1e-9)
    assert s["weight_distance"] == pytest.approx(by_hand["weight_distance"][-1], rel=1e-6)


def test_local_errors_at_shadow_steps(by_hand, report):
    _, var = report
    local = var["local"]
    assert list(local["step"]) == list(by_hand["shadow_step"])
    np.testing.assert_allclose(local["grad_rel_err"], by_hand["grad_rel_err"], rtol=1e-5)
    np.testing.assert_allclose(local["grad_cosine"], by_hand["grad_cosine"], rtol=1e-9)
    np.testing.assert_allclose(local["update_rel_err"], by_hand["update_rel_err"], rtol=1e-5)
    s = var["summary"]
    assert s["local_grad_rel_err"] == pytest.approx(by_hand["grad_rel_err"].mean(), rel=1e-5)
    assert s["local_update_rel_err"] == pytest.approx(by_hand["update_rel_err"].mean(), rel=1e-5)


def test_chaos_floor_and_drift(by_hand, report):
    """The chaos control's direction is keyed inside precsim; ours is another random direction of
    the same size, so the two distances agree in size, not in bits (bounds measured: see below)."""
    ref, var = report
    theirs = np.array(ref["series"]["chaos_weight_distance"])
    ratio = theirs / by_hand["chaos_distance"]
    print(f"chaos distance ratio precsim/by-hand: {ratio.min():.3f}..{ratio.max():.3f}")
    assert np.all((ratio > 0.8) & (ratio < 1.25))  # measured 1.01..1.06
    s = var["summary"]
    assert s["chaos_floor"] == pytest.approx(theirs[-1], rel=1e-12)
    assert s["drift_over_chaos_floor"] == pytest.approx(s["weight_distance"] / theirs[-1], rel=1e-12)
    np.testing.assert_allclose(var["series"]["drift_over_chaos_floor"],
                               np.array(var["series"]["weight_distance"]) / theirs, rtol=1e-12)
