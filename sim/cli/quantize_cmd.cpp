// precsim quantize: round values (or a whole .npy array) into a format and show what happened.
#include <fmt/format.h>

#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string format;
  QuantArgs quant;
  std::vector<std::string> values;
  std::string input, output, input_format;
  bool codes = false;
  OutputOptions out;
};

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
  if (!a.out.json) {
    std::cout << fmt::format("{:<24} {:<10} {:<16} {:<26} {:<12} {:<12} {}\n", "input", "code",
                             "s|e|m", "value", "abs err", "rel err", "status");
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
    if (!a.out.json) {
      std::cout << fmt::format("{:<24} {:<10} {:<16} {:<26} {:<12.4g} {:<12.4g} {}\n", a.values[i],
                               code_hex(f, rd.code), fields_text(f, rd.code),
                               fmt::format("{:.17g}", q), abs_err, rel_err, status_to_string(rd.status));
    }
  }
  r.results()["values"] = rows;
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
  } else {
    throw UsageError("--input '" + a.input + "': dtype " + in.descr +
                     " is not supported; expected float32 (<f4) or float64 (<f8) values, or codes with --input-format F");
  }
}

void run_array(const Args& a, const Format& f, const QuantOptions& o) {
  if (!a.output.empty()) {
    try {
      check_writable(a.output);
    } catch (const std::exception& e) {
      throw UsageError(std::string("--output: ") + e.what());
    }
  }
  NpyArray in;
  try {
    in = read_npy(a.input);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--input: ") + e.what());
  }
  if (in.fortran_order) throw UsageError("--input '" + a.input + "': Fortran-order arrays are not supported");
  const size_t n = in.count();
  ArrayValues values;
  input_values(a, in, values);
  const bool is_double = values.is_double;
  const std::span<float> v32 = values.v32;
  const std::span<double> v64 = values.v64;
  std::cerr << fmt::format("quantizing {} elements into {}\n", n, f.name);
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
  if (!a.out.json) {
    std::cout << fmt::format("{} elements: inexact {}, underflow to zero {}, subnormal {}, overflow {}, saturated {}, NaN {}\n",
                             st.count, st.inexact, st.underflow_to_zero, st.subnormal, st.overflow,
                             st.saturated, st.nan);
  }
  finish_report(r, a.out);
}

void run(const Args& a) {
  const Format f = parse_format_arg("--format", a.format);
  const QuantOptions o = a.quant.resolve();
  check_output(a.out);
  if (!a.input.empty() && !a.values.empty())
    throw UsageError("give either VALUE... or --input FILE, not both");
  if (a.input.empty() && a.values.empty()) throw UsageError("nothing to quantize: give VALUE... or --input FILE");
  if (a.input.empty() && (!a.output.empty() || a.codes || !a.input_format.empty()))
    throw UsageError("--output, --codes and --input-format need --input FILE");
  if (a.input.empty()) run_values(a, f, o);
  else run_array(a, f, o);
}

const Registrar reg(20, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "round values or a .npy array into a format");
  auto a = std::make_shared<Args>();
  cmd->add_option("--format,-f", a->format, "target format (see `precsim formats`, or eXmY[:options])")->required();
  a->quant.add_to(cmd);
  // Negative values need no `--` (`quantize -f e4m3 -465 -0`); CLI11 2.1 accepts `--` only before
  // the first value, as it hands everything after a later `--` back to the root command.
  cmd->add_option("values", a->values, "values in decimal or C99 hex-float (0x1.8p-24); negative values need no --");
  cmd->add_option("--input", a->input, ".npy array to quantize (float32/float64, or codes with --input-format)");
  cmd->add_option("--output", a->output, ".npy file for the result (same dtype as the input values)");
  cmd->add_flag("--codes", a->codes, "write the codes (one per element, uint8/16/32/64) instead of values");
  cmd->add_option("--input-format", a->input_format, "the input array holds codes of this format");
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli
