// precsim analyze: what each format or block-scaling scheme does to a real or generated tensor.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_parse.h"
#include "precsim/formats/block_scaling.h"
#include "precsim/formats/quantize.h"
#include "precsim/reports/npy.h"
#include "precsim/reports/safetensors.h"
#include "precsim/sim/data/distributions.h"
#include "quant_args.h"

namespace precsim::cli {
namespace {

struct Args {
  std::string input;
  std::vector<std::string> tensors;
  std::string dist;
  std::string outliers;
  uint64_t count = 1 << 20;
  std::vector<std::string> formats;
  QuantArgs quant;
  OutputOptions out;
};

struct Tensor {
  std::string name, dtype;
  std::vector<size_t> shape;
  std::vector<float> values;
};

// A tensor of any rank as rows x cols: the last dimension is the block axis 1 (as the K of an
// activation or weight), the others fold into rows; 0-d and 1-d tensors are one row.
std::pair<size_t, size_t> as_2d(const std::vector<size_t>& shape) {
  if (shape.empty()) return {1, 1};
  size_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
  return {rows, shape.back()};
}

nlohmann::json scheme_to_json(const BlockScaling& s) {
  return {{"name", s.name},
          {"element", format_to_json(s.element)},
          {"rule", to_string(s.rule)},
          {"scale_format", to_string(s.scale_format)},
          {"block_along", s.block_along},
          {"block_across", s.block_across},
          {"axis", s.axis},
          {"amax_epsilon", s.amax_epsilon},
          {"margin", s.margin},
          {"element_exp", s.element_exp()},
          {"element_options", quant_options_to_json(s.element_options)}};
}

// The window of magnitudes the element format holds, as log2 (for block-scaled schemes, in units
// of the block scale: add the scale histogram's exponents to place it on the input's axis).
nlohmann::json window_json(const BlockScaling& s) {
  const Format& f = s.element;
  const int ee = s.element_exp();
  // min_exp / max_exp: the binades from the smallest subnormal to the largest finite value.
  return {{"min_exp", f.quantum_exp() + ee},
          {"min_normal_exp", f.emin() + ee},
          {"max_exp", f.emax() + ee},
          {"max_log2", json_number(std::log2(f.max_finite()) + ee)}};
}

// [{exponent, count}, ...] in exponent order (notebooks/analyze.ipynb reads this shape).
nlohmann::json histogram_json(const std::map<int, uint64_t>& h) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [k, c] : h) out.push_back({{"exponent", k}, {"count", c}});
  return out;
}

Tensor from_npy(const std::string& path) {
  const NpyArray a = or_usage_error("--input", [&] { return read_npy(path); });
  if (a.fortran_order) throw UsageError("--input '" + path + "': Fortran-order arrays are not supported");
  Tensor t{std::filesystem::path(path).stem().string(), a.descr, a.shape, {}};
  const size_t n = a.count();
  t.values.resize(n);
  auto conv = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, a.data.data() + i * sizeof(T), sizeof(T));
      t.values[i] = static_cast<float>(v);
    }
  };
  const std::string& d = a.descr;
  if (d == "<f4") std::memcpy(t.values.data(), a.data.data(), n * 4);
  else if (d == "<f8") conv(double{});
  else if (d == "<f2") decode_array(format_by_name("fp16"), a.data.data(), std::span<float>(t.values));
  else if (d == "|i1") conv(int8_t{});
  else if (d == "|u1" || d == "|b1") conv(uint8_t{});
  else if (d == "<i2") conv(int16_t{});
  else if (d == "<u2") conv(uint16_t{});
  else if (d == "<i4") conv(int32_t{});
  else if (d == "<u4") conv(uint32_t{});
  else if (d == "<i8") conv(int64_t{});
  else if (d == "<u8") conv(uint64_t{});
  else
    throw UsageError("--input '" + path + "': dtype " + d +
                     " is not supported; allowed: <f4, <f8, <f2, |i1, |u1, |b1, <i2, <u2, <i4, <u4, <i8, <u8");
  return t;
}

bool is_safetensors(const std::string& path) {
  return path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
}

struct Row {
  size_t tensor_index;
  std::string tensor, scheme;
  double qsnr, mse, max_rel, flushed, clipped, saturated, bits;
};

nlohmann::json analyze_tensor(const Tensor& t, const std::vector<BlockScaling>& schemes, uint32_t tensor_index,
                              std::vector<Row>& rows_out) {
  const auto [rows, cols] = as_2d(t.shape);
  const size_t n = t.values.size();
  // Exponent histogram of the input: floor(log2 |x|) of finite non-zero values.
  std::map<int, uint64_t> hist;
  uint64_t zeros = 0, nonfinite = 0;
  for (float v : t.values) {
    if (!std::isfinite(v)) ++nonfinite;
    else if (v == 0) ++zeros;
    else ++hist[std::ilogb(v)];
  }
  const nlohmann::json jh = histogram_json(hist);
  nlohmann::json jt = {{"name", t.name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"rows", rows},
                       {"cols", cols},
                       {"count", n},
                       {"zeros", zeros},
                       {"nonfinite", nonfinite},
                       {"exponent_histogram", jh},
                       {"schemes", nlohmann::json::array()}};
  std::vector<float> q(n);
  for (const auto& s0 : schemes) {
    BlockScaling s = s0;
    s.element_options.sr_key.tensor = tensor_index;
    BlockStats bs;
    block_fake_quantize(s, t.values, q, rows, cols, &bs);
    const ErrorStats e = error_stats(t.values, q);
    const double nz = static_cast<double>(e.nonzero_inputs);
    const double finite = static_cast<double>(e.count);
    Row r{tensor_index,
          t.name,
          s.name,
          e.qsnr_db,
          e.mse,
          e.max_rel_error,
          nz ? static_cast<double>(e.flushed) / nz : 0.0,
          bs.blocks ? static_cast<double>(bs.clipped_blocks) / static_cast<double>(bs.blocks) : 0.0,
          finite ? static_cast<double>(bs.saturated) / finite : 0.0,
          s.bits_per_element(rows, cols)};
    rows_out.push_back(r);
    const nlohmann::json sh = histogram_json(bs.scale_log2_histogram);
    jt["schemes"].push_back({{"scheme", s.name},
                             {"description", scheme_to_json(s)},
                             {"window", window_json(s)},
                             {"qsnr_db", json_number(e.qsnr_db)},
                             {"mse", json_number(e.mse)},
                             {"max_rel_error", json_number(e.max_rel_error)},
                             {"flushed_fraction", json_number(r.flushed)},
                             {"flushed", e.flushed},
                             {"nonzero_inputs", e.nonzero_inputs},
                             {"blocks", bs.blocks},
                             {"clipped_blocks", bs.clipped_blocks},
                             {"clipped_blocks_fraction", json_number(r.clipped)},
                             {"saturated", bs.saturated},
                             {"saturated_fraction", json_number(r.saturated)},
                             {"nonfinite_inputs", bs.nonfinite_inputs},
                             {"nonfinite_blocks", bs.nonfinite_blocks},
                             {"bits_per_element", json_number(r.bits)},
                             {"scale_log2_histogram", sh}});
  }
  return jt;
}

std::vector<BlockScaling> resolve_schemes(const Args& a, const QuantOptions& o) {
  std::vector<std::string> names;
  for (const auto& f : a.formats) {
    if (f == "all") {
      for (const auto& p : format_presets()) names.push_back(p.format.name);
      for (const auto& p : block_scaling_presets()) names.push_back(p);
    } else {
      names.push_back(f);
    }
  }
  if (names.empty()) throw UsageError("--formats: give at least one format or scheme (or 'all')");
  std::vector<BlockScaling> out;
  for (const auto& n : names) {
    BlockScaling s = or_usage_error("--formats", [&] { return parse_block_scaling(n); });
    const Overflow keep = s.element_options.overflow;
    s.element_options = o;
    // Block scales exist so that nothing overflows; elements saturate as MX and TE specify.
    // The --overflow choice applies to plain formats.
    if (!s.is_plain()) s.element_options.overflow = keep;
    out.push_back(std::move(s));
  }
  return out;
}

void run(const Args& a) {
  const QuantOptions o = a.quant.resolve();
  check_output(a.out);
  if (a.input.empty() == a.dist.empty()) throw UsageError("give either --input FILE or --dist NAME (not both)");
  if (!a.tensors.empty() && (a.input.empty() || !is_safetensors(a.input)))
    throw UsageError("--tensor selects tensors of a .safetensors --input");
  if (!a.outliers.empty() && a.dist.empty()) throw UsageError("--outliers needs --dist");
  const std::vector<BlockScaling> schemes = resolve_schemes(a, o);

  Report rep("analyze");
  nlohmann::json jschemes = nlohmann::json::array();
  for (const auto& s : schemes) jschemes.push_back(scheme_to_json(s));
  rep.config() = {{"formats", jschemes}, {"options", quant_options_to_json(o)}};
  rep.seeds() = {{"seed", a.quant.seed}};
  nlohmann::json results = nlohmann::json::array();
  std::vector<Row> rows;
  std::optional<InterruptGuard> guard;  // only a .safetensors input has several units of work

  if (!a.dist.empty()) {
    const Distribution d = or_usage_error("--dist", [&] {
      Distribution dist = parse_distribution(a.dist);
      if (!a.outliers.empty()) parse_outliers(a.outliers, dist);
      return dist;
    });
    if (a.count == 0) throw UsageError("--count 0: the tensor would be empty; give N >= 1");
    Tensor t{a.dist, "generated", {a.count}, std::vector<float>(a.count)};
    // Generated tensors are rows of 4096 (or one row when shorter), so row and column blocks
    // both exist.
    const size_t cols = std::min<uint64_t>(a.count, 4096);
    t.shape = a.count % cols == 0 && a.count > cols ? std::vector<size_t>{a.count / cols, cols}
                                                    : std::vector<size_t>{a.count};
    generate(d, t.values, a.quant.seed);
    rep.config()["input"] = {{"dist", std::string(to_string(d.kind))},
                             {"params", d.params},
                             {"outlier_fraction", d.outlier_fraction},
                             {"outlier_magnitude", d.outlier_magnitude},
                             {"count", a.count},
                             {"shape", t.shape}};
    std::cerr << fmt::format("analyzing {} values of {}\n", a.count, a.dist);
    results.push_back(analyze_tensor(t, schemes, 0, rows));
  } else if (!is_safetensors(a.input)) {
    const Tensor t = from_npy(a.input);
    if (t.values.empty()) throw UsageError("--input '" + a.input + "': the array is empty");
    rep.config()["input"] = {{"file", a.input}, {"dtype", t.dtype}, {"shape", t.shape}};
    std::cerr << fmt::format("analyzing {} ({} values)\n", a.input, t.values.size());
    results.push_back(analyze_tensor(t, schemes, 0, rows));
  } else {
    const auto file = or_usage_error("--input", [&] { return std::make_unique<SafetensorsFile>(a.input); });
    // Selection: names or globs; every tensor when none is given.
    std::vector<const SafetensorsTensor*> chosen;
    for (const auto& t : file->tensors()) {
      bool take = a.tensors.empty();
      for (const auto& pat : a.tensors) take |= fnmatch(pat.c_str(), t.name.c_str(), 0) == 0;
      if (take) chosen.push_back(&t);
    }
    for (const auto& pat : a.tensors) {
      bool hit = false;
      for (const auto& t : file->tensors()) hit |= fnmatch(pat.c_str(), t.name.c_str(), 0) == 0;
      if (!hit)
        throw UsageError("--tensor '" + pat + "': no such tensor in '" + a.input + "'; available: " + file->names());
    }
    // Check every chosen tensor before the long work starts.
    for (const auto* t : chosen) {
      if (safetensors_dtype_size(t->dtype) == 0)
        throw UsageError("--input '" + a.input + "': tensor '" + t->name + "' has dtype " + t->dtype +
                         ", which is not supported; supported: F64, F32, F16, BF16, F8_E4M3, F8_E5M2, and the integer types");
      if (t->count() == 0) throw UsageError("--input '" + a.input + "': tensor '" + t->name + "' is empty");
    }
    if (chosen.empty()) throw UsageError("--input '" + a.input + "' holds no tensors");
    nlohmann::json names = nlohmann::json::array();
    for (const auto* t : chosen) names.push_back(t->name);
    rep.config()["input"] = {{"file", a.input}, {"tensors", names}};
    // Ctrl-C stops after the tensor in progress; the report holds the tensors that finished.
    guard.emplace();
    for (size_t i = 0; i < chosen.size(); ++i) {
      const auto& st = *chosen[i];
      std::cerr << fmt::format("[{}/{}] {} {} {}\n", i + 1, chosen.size(), st.name, st.dtype,
                               fmt::join(st.shape, "x"));
      Tensor t{st.name, st.dtype, st.shape, {}};
      t.values = or_usage_error("--input", [&] { return file->read_f32(st); });
      results.push_back(analyze_tensor(t, schemes, static_cast<uint32_t>(i), rows));
      if (guard->requested()) break;
    }
  }
  rep.results()["tensors"] = results;

  // Ranked by QSNR (best first), per tensor in input order.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    return x.tensor_index != y.tensor_index ? x.tensor_index < y.tensor_index : x.qsnr > y.qsnr;
  });
  nlohmann::json ranking = nlohmann::json::array();
  for (const auto& r : rows) ranking.push_back({{"tensor", r.tensor}, {"scheme", r.scheme}, {"qsnr_db", json_number(r.qsnr)}});
  rep.results()["ranking"] = ranking;
  if (!a.out.json) {
    std::string last;
    for (const auto& r : rows) {
      if (r.tensor != last || &r == &rows.front()) {
        std::cout << fmt::format("\n{}\n{:<28} {:>9} {:>11} {:>10} {:>9} {:>9} {:>9} {:>6}\n", r.tensor, "scheme",
                                 "QSNR dB", "MSE", "max rel", "flushed", "clipped", "satur.", "bits");
        last = r.tensor;
      }
      std::cout << fmt::format("{:<28} {:>9.2f} {:>11.3e} {:>10.3g} {:>8.3f}% {:>8.2f}% {:>8.4f}% {:>6.3f}\n",
                               r.scheme, r.qsnr, r.mse, r.max_rel, 100 * r.flushed, 100 * r.clipped,
                               100 * r.saturated, r.bits);
    }
  }
  if (guard) {
    finish_report(rep, a.out, *guard, fmt::format("{} of {} tensors", results.size(), rep.config()["input"]["tensors"].size()));
  } else {
    finish_report(rep, a.out);
  }
}

const Registrar reg(40, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("analyze", "error, flushing and clipping of formats and block-scaling schemes on a tensor");
  auto a = std::make_shared<Args>();
  cmd->add_option("--input", a->input, ".npy or .safetensors file");
  cmd->add_option("--tensor", a->tensors, "tensor name or glob in a .safetensors file (default: all)");
  cmd->add_option("--dist", a->dist,
                  "generated input: normal|laplace|uniform|lognormal|student-t[:param=value,...]");
  cmd->add_option("--outliers", a->outliers, "FRACTION,MAGNITUDE: that share of values multiplied by MAGNITUDE");
  cmd->add_option("--count", a->count, "number of generated values")->capture_default_str();
  cmd->add_option("--formats", a->formats,
                  "formats and schemes, comma-separated: e4m3, mxfp8_e4m3, mxfp4:rule=rceil, nvfp4, "
                  "fp8_e4m3:tensor|row|tile128|block128, ... or all")
      ->delimiter(',')
      ->required();
  a->quant.add_to(cmd);
  add_output_options(cmd, a->out);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace precsim::cli
