// A block-scaling scheme and what it did to a tensor, as JSON and as a table row: what `analyze`
// writes per scheme and `quantize` for a block-scaled array, so that the two read alike.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "precsim/sim/analysis/tensor_report.h"

namespace precsim::cli {

// The scheme, its result and the histograms as JSON: the library's (analysis/tensor_report.h),
// which Python's precsim.analyze shares.
using precsim::histogram_json;
using precsim::scheme_result_json;
using precsim::scheme_to_json;

// The table: a header line and one line per scheme (QSNR, MSE, max rel, flushed, clipped,
// saturated, bits per element), from a scheme_result_json object.
std::string scheme_table_header();
std::string scheme_table_row(const nlohmann::json& result);

// "warning: NAME: N of COUNT inputs are NaN or Inf; ..." with the finite inputs each scheme lost
// to a NaN/Inf in their block; empty when every input is finite.
std::string nonfinite_warning(const std::string& name, uint64_t nonfinite, uint64_t count,
                              std::span<const SchemeAnalysis> schemes);

// Why a tensor of an analyze report's results is left out of the ranking, or "" when it is
// ranked: integer tensors (token ids, masks, step counters) are not quantized by a recipe, and an
// all-zero tensor is exact under every scheme; ranked with the weights, both only push them down.
std::string unranked_reason(const nlohmann::json& tensor);

}  // namespace precsim::cli
