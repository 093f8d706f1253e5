#include "scheme_report.h"

#include <fmt/format.h>

#include "precsim/reports/report.h"
#include "quant_args.h"

namespace precsim::cli {

std::string scheme_table_header() {
  return fmt::format("{:<28} {:>9} {:>11} {:>10} {:>9} {:>9} {:>9} {:>6}\n", "scheme", "QSNR dB", "MSE", "max rel",
                     "flushed", "clipped", "satur.", "bits");
}

std::string scheme_table_row(const nlohmann::json& r) {
  const auto num = [&](const char* key) { return read_number(r.at(key)); };
  return fmt::format("{:<28} {:>9.2f} {:>11.3e} {:>10.3g} {:>8.3f}% {:>8.2f}% {:>8.4f}% {:>6.3f}\n",
                     r.at("scheme").get<std::string>(), num("qsnr_db"), num("mse"), num("max_rel_error"),
                     100 * num("flushed_fraction"), 100 * num("clipped_blocks_fraction"), 100 * num("saturated_fraction"),
                     num("bits_per_element"));
}

std::string nonfinite_warning(const std::string& name, uint64_t nonfinite, uint64_t count,
                              std::span<const SchemeAnalysis> schemes) {
  if (nonfinite == 0) return "";
  std::string lost;
  for (const auto& r : schemes)
    if (r.poisoned) lost += fmt::format("{}{} {}", lost.empty() ? "" : ", ", r.scheme.name, r.poisoned);
  return fmt::format("warning: {}: {} of {} inputs are NaN or Inf; the metrics are over the finite inputs{}\n", name,
                     nonfinite, count,
                     lost.empty() ? "" : "; finite inputs made NaN by a NaN or Inf in their block: " + lost);
}

}  // namespace precsim::cli
