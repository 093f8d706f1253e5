// An accumulation model named on the command line, with --output-format applied (dot, gemm).
#pragma once

#include <string>

#include "precsim/sim/accum/accum_model.h"

namespace precsim::cli {

// parse_accum_model(spec), as a UsageError naming `option` when it fails. With output_format
// given: fp16 on a block (Tensor Core) model picks the preset's FP16-output variant
// (`<preset>-f16acc`, the spec's own keys applied on top), a UsageError when the instruction it
// models has none; any other format sets the accumulator format (":acc=FORMAT").
AccumModel accum_model_arg(const std::string& option, const std::string& spec, const std::string& output_format);

}  // namespace precsim::cli
