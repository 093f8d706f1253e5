"""The end of a training step as precsim's trainers compute it, on gradients the caller gives."""
from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from . import _precsim as _c
from ._arrays import float32_values
from ._recipe import RecipeLike, as_recipe


class Optimizer:
    """precsim's optimizer step over one flat float32 parameter vector, with the recipe's rounding
    and loss scaling: step(grads) unscales grads by the loss scale (GradScaler's FP32 reciprocal),
    skips the step on inf/NaN when the recipe scales the loss, clips the gradient norm, runs SGD or
    AdamW (PyTorch's formulas), rounds optimizer states, master copy and stored weights into the
    recipe's formats, and updates the loss scale.

    params: the initial parameters (any shape; flattened). optimizer: a dict as a train config's
    "optimizer" (kind, lr, momentum, beta1, beta2, eps, weight_decay, clip_norm). recipe: a
    precsim.Recipe, a preset name or a dict {"preset": ..., overrides...}, held as a Recipe in
    .recipe. seed keys stochastic rounding."""

    def __init__(self, params: Any, optimizer: Optional[Mapping[str, Any]] = None, recipe: RecipeLike = "fp32",
                 seed: int = 0) -> None:
        p = float32_values(params, "params")
        self._shape = p.shape
        self.recipe = as_recipe(recipe)
        opt = {} if optimizer is None else dict(optimizer) if isinstance(optimizer, Mapping) else optimizer
        self._c = _c.StepEnd(np.ascontiguousarray(p.reshape(-1)), opt, self.recipe._typed, int(seed))

    def step(self, grads: Any, lr: Optional[float] = None) -> Dict[str, Any]:
        """One step with the (loss-scaled) gradient grads. Returns a dict: found_inf, skipped,
        loss_scale (the scale this step's gradient carried), grad_norm (unscaled, before
        clipping), updates_intended, updates_lost."""
        g = float32_values(grads, "grads")
        if g.size != int(np.prod(self._shape)):
            raise ValueError(f"grads has shape {g.shape}; the parameters have {self._shape}")
        return self._c.step(np.ascontiguousarray(g.reshape(-1)), 0.0 if lr is None else float(lr))

    @property
    def weights(self) -> np.ndarray:
        return np.asarray(self._c.get_weights()).reshape(self._shape)

    @property
    def m(self) -> np.ndarray:
        return np.asarray(self._c.get_m()).reshape(self._shape)

    @property
    def v(self) -> np.ndarray:
        return np.asarray(self._c.get_v()).reshape(self._shape)

    @property
    def loss_scale(self) -> float:
        """The scale the next step's loss is multiplied by."""
        return self._c.loss_scale

    @property
    def growth_tracker(self) -> int:
        return self._c.growth_tracker

    @property
    def steps(self) -> int:
        return self._c.steps
