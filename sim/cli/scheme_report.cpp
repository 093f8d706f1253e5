#include "scheme_report.h"

#include <fmt/format.h>

#include <cctype>

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

namespace {

// safetensors' integer and boolean dtypes (I8..I64, U8..U64, BOOL) and NumPy's (<i8, |u1, |b1).
bool integer_dtype(const std::string& d) {
  if (d == "BOOL") return true;
  if (!d.empty() && (d[0] == 'I' || d[0] == 'U') && d.size() > 1 && std::isdigit(static_cast<unsigned char>(d[1])))
    return true;
  return d.size() >= 2 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=') &&
         (d[1] == 'i' || d[1] == 'u' || d[1] == 'b');
}

}  // namespace

std::string unranked_reason(const nlohmann::json& tensor) {
  const std::string dtype = tensor.value("dtype", "");
  if (integer_dtype(dtype)) return fmt::format("integer dtype {}: not quantized by a recipe", dtype);
  const uint64_t count = tensor.value("count", uint64_t{0});
  if (count > 0 && tensor.value("zeros", uint64_t{0}) == count)
    return fmt::format("all {} values are 0: exact under every scheme", count);
  return "";
}

}  // namespace precsim::cli
