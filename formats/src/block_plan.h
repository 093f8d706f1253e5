// Internal to the block-scaling implementation: the geometry of the blocks and the scale of
// every block of one array, computed once (pass 1) and used by every later pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "precsim/formats/block_scaling.h"

namespace precsim {

// Blocks in the array's own coordinates: br x bc elements, nbr x nbc blocks.
struct BlockGeometry {
  size_t br = 1, bc = 1, nbr = 1, nbc = 1;
};
BlockGeometry block_geometry(const BlockScaling& s, size_t rows, size_t cols);

struct BlockScale {
  float amax = 0;        // largest finite magnitude in the block
  float enc = 1;         // x * enc (then * elem_factor) is rounded into the element format
  double dec = 1;        // value = rounded * dec (elem unit included), in double, rounded once
  uint32_t code = 0;     // E8M0 code, E4M3 NaN code, or the bits of the FP32 decode scale
  float scale_value = 0; // NVFP4: the E4M3 block scale's value (its code is made when packing)
  int log2_scale = 0;    // for the histogram
  bool nonfinite = false;
  bool nan_block = false;   // MX / NVFP4: a NaN or Inf makes the whole block NaN
  bool zero_scale = false;  // NVFP4: the E4M3 block scale underflowed to zero
  bool clipped = false;
};

struct BlockPlan {
  const BlockScaling* scheme = nullptr;
  size_t rows = 0, cols = 0;
  size_t br = 1, bc = 1, nbr = 1, nbc = 1;
  std::vector<BlockScale> blocks;      // nbr x nbc, row-major
  // The same scales as flat arrays for the element passes. A NaN block has dec NaN and an
  // underflowed NVFP4 scale dec 0, so q * dec needs no special case.
  std::vector<float> enc;
  std::vector<double> dec;
  float elem_factor = 1;               // 2^-element_exp (MXINT8: 64)
  double elem_max = 0;                 // largest element value in scaled units
  float tensor_dec = 1;                // NVFP4 second-level decode scale

  const BlockScale* row_blocks(size_t r) const { return blocks.data() + (r / br) * nbc; }
  size_t row_offset(size_t r) const { return (r / br) * nbc; }
  BlockStats block_stats() const;      // blocks, clipped, non-finite, histogram
  void pack_scales(BlockPacked& out) const;
};

// The FP8 recipe scale of one block from b.amax and b.nonfinite (fixed_scale > 0: that scale);
// the one rule both the scalar and the vectorised path use.
void amax_scale(const BlockScaling& s, double max_elem, double fixed_scale, BlockScale& b);

// encode_scale > 0 fixes the scale of a per-tensor kAmax scheme (delayed scaling). index_base is
// the stochastic-rounding index of in[0] (Four Over Six rounds each block under both scales).
BlockPlan make_block_plan(const BlockScaling& s, const float* in, size_t rows, size_t cols,
                          double tensor_amax, double encode_scale, uint64_t index_base = 0);

}  // namespace precsim
