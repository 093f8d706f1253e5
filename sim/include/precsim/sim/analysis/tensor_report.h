// What `precsim analyze` writes for a tensor, as JSON: the one assembly the CLI's report and
// Python's precsim.analyze share, so that both give the same statistics in the same shape
// (docs/reference/metrics.md names each field).
#pragma once

#include <cstdint>
#include <map>

#include <nlohmann/json_fwd.hpp>

#include "precsim/formats/block_scaling.h"
#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/analysis/tensor_analysis.h"

namespace precsim {

nlohmann::json format_to_json(const Format& f);
nlohmann::json quant_options_to_json(const QuantOptions& o);

// The scheme as configured (element format, rule, scale format, block sizes, options).
nlohmann::json scheme_to_json(const BlockScaling& s);
// [{exponent, count}, ...] in exponent order (notebooks/analyze.ipynb reads this shape).
nlohmann::json histogram_json(const std::map<int, uint64_t>& h);
// Error, flushing, clipping, saturation, non-finite counts and storage cost of one scheme.
nlohmann::json scheme_result_json(const SchemeAnalysis& r);
// A tensor's counts, exponent histogram and every scheme's result: an entry of the report's
// results.tensors without its name, dtype and shape (the caller knows those).
nlohmann::json tensor_analysis_json(const TensorAnalysis& a);

}  // namespace precsim
