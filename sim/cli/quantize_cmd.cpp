// precsim quantize: round values (or a whole .npy array) into a format and show what happened; a
// block-scaling scheme over an array goes to quantize_scheme.cpp.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <variant>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "command_tables.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/analysis/tensor_analysis.h"
#include "quantize_cmd.h"

namespace precsim::cli {
namespace {

using Args = QuantizeArgs;

std::string code_hex(const Format& f, uint64_t code) {
  const int digits = std::max(1, (f.bits() + 3) / 4);
  return fmt::format("0x{:0{}x}", code, digits);
}

std::string fields_text(const Format& f, uint64_t code) {
  const CodeFields c = split_code(f, code);
  if (f.kind == FormatKind::kInt) return fmt::format("{:0{}b}", c.mantissa, f.bits());
  std::string s = f.is_signed ? fmt::format("{}|", c.sign) : "";
  s += f.exp_bits ? fmt::format("{:0{}b}", c.exponent, f.exp_bits) : "";
  s += "|" + (f.man_bits ? fmt::format("{:0{}b}", c.mantissa, f.man_bits) : std::string("-"));
  return s;
}

void run_values(const Args& a, const Format& f, const QuantOptions& o) {
  Report r("quantize");
  r.config() = {{"format", format_to_json(f)}, {"options", quant_options_to_json(o)}, {"mode", "values"}};
  r.seeds() = {{"sr_seed", o.sr_key.seed}};
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> xs;
  for (const auto& v : a.values) {
    xs.push_back(or_usage_error("VALUE", [&] { return parse_real(v); }));
  }
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    const Rounded rd = encode(f, x, o, i);
    const double q = decode(f, rd.code);
    const double abs_err = std::fabs(q - x);
    const double rel_err = x != 0 ? abs_err / std::fabs(x) : (q == 0 ? 0.0 : INFINITY);
    rows.push_back({{"input", json_number(x)},
                    {"input_hex", hex_float(x)},
                    {"code", code_hex(f, rd.code)},
                    {"fields", fields_text(f, rd.code)},
                    {"value", json_number(q)},
                    {"value_hex", hex_float(q)},
                    {"abs_error", json_number(abs_err)},
                    {"rel_error", json_number(rel_err)},
                    {"status", status_to_string(rd.status)}});
  }
  r.results()["values"] = rows;
  if (!a.out.json) std::cout << quantize_table(r.config(), r.results());
  finish_report(r, a.out);
}

// The input's values as float or double, to be rounded in place in the input buffer (no copy of a
// large array); codes of another format are decoded exactly first.
struct ArrayValues {
  std::vector<float> f32;
  std::vector<double> f64;
  std::span<float> v32;
  std::span<double> v64;
  bool is_double = false;
};

void decode_input_codes(const Args& a, const NpyArray& in, ArrayValues& v) {
  const size_t n = in.count();
  const Format src = parse_format_arg("--input-format", a.input_format);
  // ml_dtypes saves its types as void items ('<V1', '<V2'), except float8_e5m2, which it saves as
  // '<f1': no NumPy float has one byte, so '<f1' can only be codes.
  const char kind = in.descr[1];
  const bool code_kind = kind == 'u' || kind == 'V' || kind == 'i' || (kind == 'f' && in.item_size() == 1);
  if (in.item_size() != code_bytes(src) || !code_kind)
    throw UsageError(fmt::format("--input '{}': dtype {} does not hold {}-byte codes of {}; expected unsigned or void items of {} bytes",
                                 a.input, in.descr, code_bytes(src), src.name, code_bytes(src)));
  v.is_double = src.bits() > 32 || src.emax() > 127 || src.quantum_exp() < -149 || src.man_bits > 23;
  if (v.is_double) {
    v.f64.resize(n);
    decode_array(src, in.data.data(), std::span<double>(v.f64));
    v.v64 = v.f64;
  } else {
    v.f32.resize(n);
    decode_array(src, in.data.data(), std::span<float>(v.f32));
    v.v32 = v.f32;
  }
}

void input_values(const Args& a, NpyArray& in, ArrayValues& v) {
  const size_t n = in.count();
  if (!a.input_format.empty()) {
    decode_input_codes(a, in, v);
  } else if (in.descr == "<f4") {
    v.v32 = {reinterpret_cast<float*>(in.data.data()), n};
  } else if (in.descr == "<f8") {
    v.is_double = true;
    v.v64 = {reinterpret_cast<double*>(in.data.data()), n};
  } else if (in.descr == "<f2") {
    // Every float16 is a float32: decoded exactly, then rounded as float32 input.
    v.f32.resize(n);
    decode_array(format_by_name("fp16"), in.data.data(), std::span<float>(v.f32));
    v.v32 = v.f32;
  } else {
    throw UsageError("--input '" + a.input + "': dtype " + in.descr +
                     " is not supported; allowed: float16 (<f2), float32 (<f4) or float64 (<f8) values, or codes with --input-format F");
  }
}

// NaN and Inf inputs, counted before rounding (quantize's `nan` counts NaN results).
template <class T>
uint64_t count_nonfinite(std::span<const T> v) {
  uint64_t n = 0;
  for (const T x : v) n += !std::isfinite(x);
  return n;
}

void run_array(const Args& a, const Format& f, const QuantOptions& o) {
  if (!a.output.empty()) check_destination("--output", a.output);
  if (!a.scales.empty()) throw UsageError("--scales applies to block-scaling schemes (mxfp4, nvfp4, ...); '" + a.format + "' is a plain format");
  NpyArray in = or_usage_error("--input", [&] { return read_npy(a.input); });
  to_c_order(in);
  const size_t n = in.count();
  ArrayValues values;
  input_values(a, in, values);
  const bool is_double = values.is_double;
  const std::span<float> v32 = values.v32;
  const std::span<double> v64 = values.v64;
  note() << fmt::format("quantizing {} elements into {}\n", n, f.name);
  const uint64_t nonfinite = is_double ? count_nonfinite<double>(v64) : count_nonfinite<float>(v32);
  QuantStats st;
  std::vector<unsigned char> codes;
  if (a.codes) {
    codes.resize(n * code_bytes(f));
    if (is_double) encode_array(f, std::span<const double>(v64), codes.data(), o, &st);
    else encode_array(f, std::span<const float>(v32), codes.data(), o, &st);
  } else if (is_double) {
    quantize(f, std::span<const double>(v64), v64, o, &st);
  } else {
    quantize(f, std::span<const float>(v32), v32, o, &st);
  }
  if (!a.output.empty()) {
    if (a.codes) {
      const size_t w = code_bytes(f);
      write_npy(a.output, w == 1 ? "|u1" : "<u" + std::to_string(w), in.shape, codes.data(), codes.size());
    } else if (is_double) {
      write_npy(a.output, "<f8", in.shape, v64.data(), n * 8);
    } else {
      write_npy(a.output, "<f4", in.shape, v32.data(), n * 4);
    }
    note() << "wrote " << a.output << "\n";
  }
  Report r("quantize");
  r.config() = {{"format", format_to_json(f)},
                {"options", quant_options_to_json(o)},
                {"mode", a.codes ? "array-codes" : "array-values"},
                {"input", a.input},
                {"input_format", a.input_format.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.input_format)},
                {"input_dtype", in.descr},
                {"shape", in.shape}};
  r.seeds() = {{"sr_seed", o.sr_key.seed}};
  r.results()["stats"] = quant_stats_to_json(st);
  r.results()["nonfinite_inputs"] = nonfinite;
  if (nonfinite)
    std::cerr << fmt::format("warning: {}: {} of {} inputs are NaN or Inf (they stay NaN or Inf)\n", a.input, nonfinite, n);
  if (!a.out.json) std::cout << quantize_table(r.config(), r.results());
  finish_report(r, a.out);
}

// A plain format (e4m3, bf16, e5m2:fnuz, ...), or else a block-scaling scheme (mxfp4, nvfp4,
// fp8_e4m3:tile128, ...) with the element options applied as analyze applies them.
std::variant<Format, BlockScaling> parse_target(const Args& a, const QuantOptions& o) {
  if (auto f = parse_format(a.format)) return *f;
  BlockScaling s = or_usage_error("--format", [&] { return resolve_schemes({a.format}, o).front(); });
  if (s.is_plain()) return s.element;
  return s;
}

void run(const Args& a) {
  const QuantOptions o = a.quant.resolve();
  const auto target = parse_target(a, o);
  check_output(a.out);
  if (!a.input.empty() && !a.values.empty())
    throw UsageError("give either VALUE... or --input FILE, not both");
  if (a.input.empty() && a.values.empty()) throw UsageError("nothing to quantize: give VALUE... or --input FILE");
  if (a.input.empty() && (!a.output.empty() || a.codes || !a.input_format.empty() || !a.scales.empty()))
    throw UsageError("--output, --codes, --scales and --input-format need --input FILE");
  if (const auto* s = std::get_if<BlockScaling>(&target)) {
    if (a.input.empty()) throw UsageError("--format '" + a.format + "' is a block-scaling scheme: give --input FILE (a scheme scales whole blocks, not single values)");
    run_scheme_array(a, *s);
  } else if (a.input.empty()) {
    run_values(a, std::get<Format>(target), o);
  } else {
    run_array(a, std::get<Format>(target), o);
  }
}

const Registrar reg(20, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "round values or a .npy array into a format");
  auto a = std::make_shared<Args>();
  cmd->add_option("--format,-f", a->format,
                  "target format: a preset name or alias (`precsim formats` lists them) or "
                  "eXmY[:bias=B][:nosub][:ieee|nanonly|finite|fnuz][:unsigned]; or with --input a block-scaling scheme: "
                  "mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, nvfp4, "
                  "<format>:tensor|row|tile128|block128|mx|nvfp4, options :rule=floor|ceil|even|rceil, :block=N, "
                  ":axis=0|1, :2d, :pow2, :fp32, :eps=X, :margin=N")
      ->required();
  a->quant.add_to(cmd);
  // Negative values need no `--` (`quantize -f e4m3 -465 -0`); CLI11 2.1 accepts `--` only before
  // the first value, as it hands everything after a later `--` back to the root command.
  cmd->add_option("values", a->values, "values in decimal or C99 hex-float (0x1.8p-24); negative values need no --");
  cmd->add_option("--input", a->input,
                  ".npy array to quantize (float16/32/64 in C or Fortran order, or codes with --input-format); a "
                  "block scheme sees it as rows x last dimension, in float32");
  cmd->add_option("--output", a->output,
                  ".npy file for the result (a plain format: the input's dtype, float32 for float16; a scheme: float32)");
  cmd->add_flag("--codes", a->codes,
                "write the codes instead of values: one per element (uint8/16/32/64); a scheme's codes as bytes, "
                "FP4 two per byte (low nibble first), and its scales to --scales");
  cmd->add_option("--scales", a->scales, "a scheme's block scales with --codes (default: OUTPUT with .scales.npy)");
  cmd->add_option("--input-format", a->input_format, "the input array holds codes of this format");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli
