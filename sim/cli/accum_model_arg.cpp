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
  if (model.kind == AccumKind::kBlockFma && same_encoding(of, format_by_name("fp16"))) {
    if (same_encoding(model.acc, of)) return model;
    // A preset's FP16-output variant is another instruction (its own zero exponent and final
    // rounding), not the FP32 one with a narrower accumulator.
    const size_t colon = spec.find(':');
    const std::string head = spec.substr(0, colon);
    const AccumModel* variant = fp16_output_variant(head);
    if (!variant)
      throw UsageError(fmt::format("--output-format {}: {} '{}' has no FP16-output variant (the instruction it models "
                                   "has none); presets with one: {}", output_format, option, spec,
                                   presets_with_fp16_output()));
    const std::string rest = colon == std::string::npos ? "" : spec.substr(colon);
    return or_usage_error(option, [&] { return parse_accum_model(variant->name + rest); });
  }
  AccumModel m = or_usage_error(option, [&] { return parse_accum_model(to_spec(model) + ":acc=" + of.name); });
  m.name = spec + " with --output-format " + of.name;
  return m;
}

}  // namespace precsim::cli
