#!/usr/bin/python3
"""Ground truth from PyTorch (Debian python3-torch, CPU) for tests/torch_reference_test.cpp.

Writes to tests/data/: the data (torch_x.npy, torch_y.npy), the initial weights of a 16-32-4 ReLU
MLP (torch_w1.npy, torch_b1.npy, torch_w2.npy, torch_b2.npy), and the per-step training losses of
PyTorch's FP32 training and of its CPU bfloat16 autocast with FP32 master weights
(torch_loss_fp32.npy, torch_loss_bf16_autocast.npy). Batches are consecutive slices of the data,
wrapping around. Optimizer: SGD, lr 0.05, momentum 0.9. Run: /usr/bin/python3 tests/torch_reference.py
"""
import os

import numpy as np
import torch

STEPS, BATCH, LR, MOMENTUM = 100, 32, 0.05, 0.9
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
rng = np.random.default_rng(20261129)
n, f, h, c = 512, 16, 32, 4
means = rng.normal(0, 1.0, (c, f))
y = rng.integers(0, c, n).astype(np.int32)
x = (means[y] + rng.normal(0, 1.0, (n, f))).astype(np.float32)
w1 = (rng.normal(0, 1, (h, f)) / np.sqrt(f)).astype(np.float32)
b1 = np.zeros(h, np.float32)
w2 = (rng.normal(0, 1, (c, h)) / np.sqrt(h)).astype(np.float32)
b2 = np.zeros(c, np.float32)


def train(autocast):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    l1, l2 = torch.nn.Linear(f, h), torch.nn.Linear(h, c)
    with torch.no_grad():
        for p, v in ((l1.weight, w1), (l1.bias, b1), (l2.weight, w2), (l2.bias, b2)):
            p.copy_(torch.from_numpy(v))
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    losses = []
    for step in range(STEPS):
        idx = [(step * BATCH + i) % n for i in range(BATCH)]
        xb, yb = xt[idx], yt[idx]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = l2(torch.relu(l1(xb)))
            loss = torch.nn.functional.cross_entropy(logits, yb)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return np.array(losses, np.float64)


for name, arr in (("x", x), ("y", y), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2),
                  ("loss_fp32", train(False)), ("loss_bf16_autocast", train(True))):
    np.save(os.path.join(here, f"torch_{name}.npy"), arr)
print("torch", torch.__version__, "fp32 loss", train(False)[[0, -1]])
