"""precsim from Python: bit-exact emulation of ML number formats, block scaling, Tensor Core
accumulation and data-parallel all-reduce, over NumPy arrays (precsim.torch for PyTorch).

Every number comes from precsim's C++ libraries, the same code as the `precsim` command line;
this package only moves arrays in and out. float32/float64 C-contiguous arrays pass without a
copy; the GIL is released while the engine loops; results do not depend on set_num_threads.
Recipe holds a precision recipe as the engine resolves it (docs/python.md, "precsim.Recipe")."""
from . import report
from ._allreduce import allreduce
from ._arrays import decode, encode, ml_dtype, pack_fp4, quantize, unpack_fp4
from ._block import BlockEncoded, analyze, block_decode, block_encode, block_quantize, block_scaling_presets, error_stats
from ._gemm import accum_model, accum_models, dot, gemm, mma
from ._optim import Optimizer
from . import _precsim
from ._precsim import (BlockPacked, CheckRefused, Format, QuantOptions, QuantStats, ReportError, formats,
                       get_num_threads, set_num_threads)
from ._recipe import Recipe
from ._train import recipes, train

# Read as an attribute: the extension's stub does not list module attributes.
__version__: str = getattr(_precsim, "__version__")

__all__ = [
    "Format", "formats", "quantize", "encode", "decode", "ml_dtype", "pack_fp4", "unpack_fp4", "block_quantize",
    "block_encode", "block_decode", "analyze", "BlockEncoded", "block_scaling_presets", "error_stats", "gemm", "mma", "dot", "accum_models",
    "accum_model", "allreduce", "Optimizer", "Recipe", "train", "recipes", "report", "set_num_threads", "get_num_threads", "QuantOptions",
    "QuantStats", "BlockPacked", "ReportError", "CheckRefused", "__version__",
]
