// precsim quantize --input X.npy -f SCHEME: a block-scaled array, as the library quantizes it.
// The values are analyze_scheme's (the bits of block_fake_quantize, as `analyze` computes them);
// the codes and scales are block_quantize's packed form (block_scaling.h).
#include <fmt/format.h>

#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli_parse.h"
#include "command_tables.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "precsim/sim/data/npy_floats.h"
#include "quantize_cmd.h"
#include "scheme_report.h"

namespace precsim::cli {
namespace {

// "y.npy" -> "y.scales.npy": where the scales go when --scales is not given.
std::string default_scales_path(const std::string& output) {
  const std::string stem = output.ends_with(".npy") ? output.substr(0, output.size() - 4) : output;
  return stem + ".scales.npy";
}

// The packed codes and scales as two .npy files; returns what the report says about them.
nlohmann::json write_packed(const QuantizeArgs& a, const std::string& scales_path, const BlockScaling& s,
                            const BlockPacked& p) {
  const size_t stored_rows = p.axis == 1 ? p.rows : p.cols;
  const std::vector<size_t> code_shape = {stored_rows, p.code_row_bytes};
  write_npy(a.output, "|u1", code_shape, p.codes.data(), p.codes.size());
  const bool byte_scales = s.scale_format == ScaleFormat::kE8M0 || s.scale_format == ScaleFormat::kE4M3;
  const std::vector<size_t> scale_shape = {p.scale_rows, p.scale_cols};
  write_npy(scales_path, byte_scales ? "|u1" : "<f4", scale_shape, p.scales.data(), p.scales.size());
  note() << "wrote " << a.output << "\nwrote " << scales_path << "\n";
  return {{"codes", {{"file", a.output}, {"dtype", "|u1"}, {"shape", code_shape},
                     {"layout", p.axis == 1 ? "row-major" : "transposed (column-major of the input)"},
                     {"nibbles", s.element.bits() == 4 ? "two codes per byte, the even element in the low nibble"
                                                       : "one code per byte"}}},
          {"scales", {{"file", scales_path}, {"dtype", byte_scales ? "|u1" : "<f4"}, {"shape", scale_shape},
                      {"encoding", std::string(to_string(s.scale_format))}}},
          {"tensor_scale", json_number(p.tensor_scale)},
          {"tensor_scale_hex", hex_float(p.tensor_scale)}};
}

}  // namespace

void run_scheme_array(const QuantizeArgs& a, const BlockScaling& s) {
  if (!a.input_format.empty())
    throw UsageError("--input-format applies to plain formats; '" + a.format + "' is a block-scaling scheme");
  if (!a.scales.empty() && !a.codes) throw UsageError("--scales goes with --codes (the scales of the codes); without it --output holds values");
  const std::string scales_path = a.scales.empty() ? default_scales_path(a.output) : a.scales;
  if (!a.output.empty()) check_destination("--output", a.output);
  if (a.codes) {
    if (a.output.empty()) throw UsageError("--codes needs --output FILE for the codes (the scales go to --scales FILE)");
    check_destination("--scales", scales_path);
  }
  NpyArray in = or_usage_error("--input", [&] { return read_npy(a.input); });
  const std::vector<float> values = or_usage_error("--input", [&] { return npy_to_floats(in, a.input); });
  // An empty array rounds to an empty array, as a plain format's and precsim.block_quantize do.
  const auto [rows, cols] = as_2d(in.shape);
  note() << fmt::format("quantizing {} elements ({} x {}) with {}\n", values.size(), rows, cols, s.name);
  std::vector<float> q(values.size());
  const SchemeAnalysis r = analyze_scheme(values, rows, cols, s, 0, q);
  Report rep("quantize");
  rep.config() = {{"format", format_to_json(s.element)}, {"scheme", scheme_to_json(r.scheme)},
                  {"options", quant_options_to_json(s.element_options)},
                  {"mode", a.codes ? "array-scheme-codes" : "array-scheme-values"},
                  {"input", a.input}, {"input_format", nullptr}, {"input_dtype", in.descr}, {"shape", in.shape}};
  rep.seeds() = {{"sr_seed", s.element_options.sr_key.seed}};
  rep.results()["scheme"] = scheme_result_json(r);
  rep.results()["nonfinite_inputs"] = r.blocks.nonfinite_inputs;
  std::optional<float> tensor_scale;  // NVFP4's second level, when codes are written
  if (a.codes) {
    const BlockPacked p = block_quantize(r.scheme, values, rows, cols);
    rep.results()["packed"] = write_packed(a, scales_path, s, p);
    if (s.rule == ScaleRule::kNvfp4) tensor_scale = p.tensor_scale;
  } else if (!a.output.empty()) {
    write_npy(a.output, "<f4", in.shape, q.data(), q.size() * sizeof(float));
    note() << "wrote " << a.output << "\n";
  }
  std::cerr << nonfinite_warning(a.input, r.blocks.nonfinite_inputs, values.size(), {&r, 1});
  if (!a.out.json) std::cout << quantize_table(rep.config(), rep.results());
  // NVFP4's codes decode only with the tensor scale, which no .npy holds: say it on stdout as
  // well as in the report, so that --codes without --out keeps it.
  if (tensor_scale && !a.out.json)
    std::cout << fmt::format("tensor scale {} = {:.9g} (a value is code x block scale x tensor scale; the report "
                             "holds it as results.packed.tensor_scale)\n",
                             hex_float(*tensor_scale), *tensor_scale);
  finish_report(rep, a.out);
}

}  // namespace precsim::cli
