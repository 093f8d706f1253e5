// What formats and block-scaling schemes do to one tensor (`precsim analyze`): the input's exponent
// histogram, and per scheme the error against the input, flushing, clipping, saturation and the
// storage cost. Typed results; the command line turns them into a table and a report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

// A tensor of any rank as rows x cols: the last dimension is the block axis 1 (as the K of an
// activation or weight), the others fold into rows; 0-d and 1-d tensors are one row.
std::pair<size_t, size_t> as_2d(const std::vector<size_t>& shape);

// Scheme names (as parse_block_scaling takes them; "all" expands to every format and block-scaling
// preset) with the element options `o` applied. Block scales exist so that nothing overflows:
// block-scaled elements keep their scheme's overflow (saturate, as MX and TE specify), plain
// formats take o.overflow. Throws std::invalid_argument for an empty list or a bad name.
std::vector<BlockScaling> resolve_schemes(const std::vector<std::string>& names, const QuantOptions& o);

struct SchemeAnalysis {
  BlockScaling scheme;  // as applied (element_options.sr_key.tensor set to the tensor's index)
  ErrorStats error;
  BlockStats blocks;
  double flushed_fraction = 0;    // of the non-zero inputs
  double clipped_fraction = 0;    // of the blocks
  double saturated_fraction = 0;  // of the finite inputs
  double bits_per_element = 0;
  // Finite inputs that came out NaN or Inf: a block holding a NaN or Inf is NaN as a whole (its
  // scale is), so one non-finite input takes its block's finite neighbours with it.
  uint64_t poisoned = 0;
};

struct TensorAnalysis {
  size_t rows = 0, cols = 0;
  uint64_t count = 0, zeros = 0, nonfinite = 0;
  std::map<int, uint64_t> exponent_histogram;  // floor(log2 |x|) of finite non-zero values -> count
  std::vector<SchemeAnalysis> schemes;          // in the order given
};

// One scheme on a rows x cols tensor: `q` receives the fake-quantized values (the bits of
// block_fake_quantize with the scheme's stochastic-rounding key set to `tensor_index`), and the
// result holds its error and statistics. analyze_tensor calls it per scheme.
SchemeAnalysis analyze_scheme(std::span<const float> values, size_t rows, size_t cols, const BlockScaling& s,
                              uint32_t tensor_index, std::span<float> q);

// Fake-quantizes `values` (shape `shape`, row-major) under each scheme. `tensor_index` keys the
// stochastic rounding of the tensor, so that tensors of one file draw different bits.
TensorAnalysis analyze_tensor(std::span<const float> values, const std::vector<size_t>& shape,
                              const std::vector<BlockScaling>& schemes, uint32_t tensor_index);

}  // namespace precsim
