// precsim quantize's options, shared by its two paths: a plain format (quantize_cmd.cpp) and a
// block-scaling scheme over a whole array (quantize_scheme.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "precsim/formats/block_scaling.h"
#include "quant_args.h"

namespace precsim::cli {

struct QuantizeArgs {
  std::string format;
  QuantArgs quant;
  std::vector<std::string> values;
  std::string input, output, input_format, scales;
  bool codes = false;
  OutputOptions out;
};

// --input under a block-scaling scheme (`s` with the element options of --rounding etc. applied):
// the fake-quantized array, or with --codes the element codes and the scales, and a report.
void run_scheme_array(const QuantizeArgs& a, const BlockScaling& s);

}  // namespace precsim::cli
