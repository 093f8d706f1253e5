"""precsim for PyTorch (CPU tensors): fake quantization with straight-through gradients, Linear and
matmul computed as a precsim recipe says, emulate() for every matrix product of any model, the MLP
trainer's cross-entropy, and a DDP communication hook reducing as precsim's all-reduce. torch is
imported only here; every number comes from precsim's C++ engine."""
try:
    import torch as _torch  # noqa: F401
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("precsim.torch needs PyTorch: pip install torch (scripts/setup.sh installs it into "
                      "build/venv)") from e

from ._autograd import block_quantize, cross_entropy, quantize
from ._ddp import allreduce_hook
from ._coverage import Coverage
from ._emulate import Emulation, emulate
from ._linear import Linear, matmul

from ._run import Run
from ._side_by_side import side_by_side
from ._attribute import attribute
from . import ops
from ._tiny_gpt import TinyGPT, token_cross_entropy, transformer_problem

__all__ = ["quantize", "block_quantize", "cross_entropy", "Linear", "matmul", "emulate", "Emulation", "Coverage",
           "allreduce_hook", "Run", "side_by_side", "attribute", "ops", "TinyGPT", "token_cross_entropy",
           "transformer_problem"]
