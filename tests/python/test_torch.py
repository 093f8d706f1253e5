"""precsim.torch: autograd functions, Linear/matmul/emulate under a recipe, and a PyTorch MLP trained
under emulate() step for step against `precsim train` on the same weights and batches."""
import numpy as np
import pytest

import precsim
from conftest import mlp_twin, need

torch = need("torch")
pt = need("precsim.torch")

CONFIG = {"steps": 25, "batch": 32, "seed": 1, "shadow_every": 0, "recipes": ["fp32", "bf16-amp", "mxfp8", "nvfp4"],
          "data": {"kind": "gaussian-mixture", "features": 16, "classes": 4, "train_size": 512, "heldout_size": 128},
          "model": {"hidden": [32, 32]}, "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9}}


def _train_torch(recipe, precsim_arithmetic):
    """Per-step losses of the twin under emulate(recipe) with torch.optim.SGD (whose FP32 step the
    trainer's equals bit for bit). precsim_arithmetic: the loss as the trainer computes it
    (pt.cross_entropy); else torch's own F.cross_entropy."""
    torch.manual_seed(0)
    seed, lr, mom = CONFIG["seed"], CONFIG["optimizer"]["lr"], CONFIG["optimizer"]["momentum"]
    problem = precsim._precsim.mlp_problem(CONFIG, seed)
    x_all, y_all = torch.from_numpy(problem["x_train"]), torch.from_numpy(problem["y_train"]).long()
    model = mlp_twin(problem)
    emu = pt.emulate(model, recipe, seed=seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=mom)
    losses = []
    for step in range(CONFIG["steps"]):
        idx = torch.tensor(precsim._precsim.batch_indices(len(x_all), CONFIG["batch"], seed, step))
        for m in model.modules():
            if isinstance(m, pt.Linear):
                m.step = step
        out = model(x_all[idx])
        if precsim_arithmetic:
            loss = pt.cross_entropy(out, y_all[idx])
        else:
            loss = torch.nn.functional.cross_entropy(out, y_all[idx])
        for p in model.parameters():
            p.grad = None
        loss.backward()
        losses.append(float(loss.detach()))
        opt.step()
    emu.undo()
    return np.array(losses)


@pytest.fixture(scope="module")
def reference():
    r = precsim.train(CONFIG)
    return {v["name"]: np.array(v["series"]["loss"]) for v in r["results"]["runs"][0]["variants"]}


# nvfp4: RHT, 16x16 weight blocks, SR on gradients, and its last layer kept in BF16 by keep_bf16_layers.
@pytest.mark.parametrize("recipe", ["fp32", "bf16-amp", "mxfp8", "nvfp4"])
def test_emulated_mlp_equals_precsim_train_bit_for_bit(reference, recipe):
    ours = _train_torch(recipe, precsim_arithmetic=True)
    assert len(reference[recipe]) == CONFIG["steps"]
    assert ours.tobytes() == reference[recipe].tobytes(), np.max(np.abs(ours - reference[recipe]))


@pytest.mark.parametrize("recipe", ["fp32", "bf16-amp"])
def test_torch_loss_differs_by_rounding_only(reference, recipe):
    ours = _train_torch(recipe, precsim_arithmetic=False)
    rel = np.abs(ours - reference[recipe]) / reference[recipe]
    print(f"\n{recipe}: torch's cross_entropy vs precsim train: first-step rel diff {rel[0]:.2e}, "
          f"max over {len(rel)} steps {rel.max():.2e}")
    assert rel[0] < 1e-6  # the same weights and batch: only the loss's own rounding differs
    assert rel.max() < (1e-4 if recipe == "fp32" else 2e-2)


def test_quantize_straight_through_and_gradient_format():
    x = torch.linspace(-3, 3, 101, requires_grad=True)
    y = pt.quantize(x, "e4m3", grad_format="e5m2")
    assert torch.equal(y, torch.from_numpy(precsim.quantize(x.detach().numpy(), "e4m3")))
    g = torch.linspace(-1, 1, 101) * 1.001
    y.backward(g)
    assert torch.equal(x.grad, torch.from_numpy(precsim.quantize(g.numpy(), "e5m2")))
    x.grad = None
    pt.quantize(x, "bf16").sum().backward()
    assert torch.equal(x.grad, torch.ones(101))
    b = torch.randn(8, 64, requires_grad=True)
    q = pt.block_quantize(b, "mxfp4", grad_scheme="mxfp8_e5m2", grad_axis=0)
    assert torch.equal(q, torch.from_numpy(precsim.block_quantize(b.detach().numpy(), "mxfp4")))
    gb = torch.randn(8, 64)
    q.backward(gb)
    assert torch.equal(b.grad, torch.from_numpy(precsim.block_quantize(gb.numpy(), "mxfp8_e5m2", axis=0)))
    with pytest.raises(ValueError, match="unknown format"):
        pt.quantize(x, "e4m9x")
    with pytest.raises(TypeError, match="dtype torch.int64 is not supported"):
        pt.quantize(torch.arange(4), "bf16")


def test_linear_and_matmul_products():
    torch.manual_seed(1)
    a = torch.randn(24, 40, requires_grad=True)
    b = torch.randn(40, 16, requires_grad=True)
    c = pt.matmul(a, b, "bf16-amp")
    qa, qb = precsim.quantize(a.detach().numpy(), "bf16"), precsim.quantize(b.detach().numpy(), "bf16")
    assert torch.equal(c, torch.from_numpy(precsim.gemm(qa, qb, model="fp32-seq", a_format="bf16", b_format="bf16")))
    g = torch.randn(24, 16)
    c.backward(g)
    qg = precsim.quantize(g.numpy(), "bf16")
    da = precsim.gemm(qg, qb, model="fp32-seq", a_format="bf16", b_format="bf16", trans_b=True)
    assert torch.equal(a.grad, torch.from_numpy(da))
    # mxfp8's forward: weights cast to bf16, both operands MX-quantized along K (E4M3, blocks of
    # 32, Transformer Engine's rceil scale rule), fp32-seq accumulation, bias added in FP32, the
    # output rounded to bf16.
    lin = pt.Linear(40, 16, recipe="mxfp8")
    y = lin(a)
    wc = precsim.quantize(lin.weight.detach().numpy(), "bf16")
    bc = precsim.quantize(lin.bias.detach().numpy(), "bf16")
    xq = precsim.block_quantize(a.detach().numpy(), "mxfp8_e4m3:rule=rceil")
    wq = precsim.block_quantize(wc, "mxfp8_e4m3:rule=rceil")
    c = precsim.gemm(xq, wq, trans_b=True, model="fp32-seq", a_format="fp32", b_format="fp32")
    ref = precsim.quantize(c + bc, "bf16")
    assert torch.equal(y, torch.from_numpy(ref))
    with pytest.raises(ValueError, match="unknown recipe|fp33"):
        pt.Linear(4, 4, recipe="fp33")


def test_emulate_selects_and_undoes():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(3))
    native = model(x)
    with pt.emulate(model, "nvfp4", layers=["2"]) as e:
        assert e.layers == ["2"] and e.recipe_of("0") is None
        # Only module 2's product is emulated; it keys as layer 1 (the second module owning
        # parameters) and takes the last layer's recipe (nvfp4 keeps it in BF16).
        assert e.recipe_of("2").to_dict()["gemm"]["forward"]["a"]["format"] == "bf16"
        alone = pt.Linear.from_linear(model[2], e.recipe_of("2"), layer=1)
        assert torch.equal(model(x), alone(torch.tanh(model[0](x))))
    assert [type(m) for m in model] == [torch.nn.Linear, torch.nn.Tanh, torch.nn.Linear]
    assert torch.equal(model(x), native)
    with pytest.raises(ValueError, match=r"layers \['9'\] are not modules of the model; the model's modules are: '', '0'"):
        pt.emulate(model, "fp32", layers=["9"])
    with pytest.raises(ValueError, match="on meta|on cuda|precsim.torch computes on CPU"):
        pt.quantize(torch.ones(2, device="meta"), "bf16")
