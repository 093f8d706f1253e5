#include "accum_model_arg.h"

#include <fmt/format.h>

#include "cli_common.h"
#include "cli_parse.h"
#include "quant_args.h"

namespace precsim::cli {

AccumModel accum_model_arg(const std::string& option, const std::string& spec, const std::string& output_format) {
  AccumModel model = or_usage_error(option, [&] { return parse_accum_model(spec); });
  if (output_format.empty()) return model;
  const Format of = parse_format_arg("--output-format", output_format);
  try {
    return accum_model_with_output(spec, of, "--output-format");
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--output-format {}: {} {}", output_format, option, e.what()));
  }
}

}  // namespace precsim::cli
