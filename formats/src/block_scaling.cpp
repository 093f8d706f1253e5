// Scheme descriptions: parsing, derived properties, delayed scaling, cuBLAS scale layout.
#include "precsim/formats/block_scaling.h"

#include <cfloat>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace precsim {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

int parse_int(std::string_view scheme, std::string_view key, std::string_view v, int lo, int hi) {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    throw std::invalid_argument("scheme '" + std::string(scheme) + "': " + std::string(key) + "=" +
                                std::string(v) + " is not an integer in " + std::to_string(lo) +
                                ".." + std::to_string(hi));
  return x;
}

BlockScaling mx(const char* element, int block = 32) {
  BlockScaling s;
  s.element = format_by_name(element);
  s.rule = ScaleRule::kFloor;  // OCP v1.0 §6.3
  s.scale_format = ScaleFormat::kE8M0;
  s.block_along = block;
  s.block_across = 1;
  return s;
}

struct Preset {
  const char* name;
  const char* element;  // nullptr: not an MX preset
};
constexpr Preset kMxPresets[] = {
    {"mxfp8_e4m3", "float8_e4m3fn"}, {"mxfp8_e5m2", "float8_e5m2"}, {"mxfp6_e2m3", "float6_e2m3fn"},
    {"mxfp6_e3m2", "float6_e3m2fn"}, {"mxfp4", "float4_e2m1fn"},    {"mxint8", "int8"},
};

const char* kOptionHelp =
    "options: rule=floor|ceil|even|rceil, block=N, axis=0|1, 2d, tensor, row, tile<N>, block<N>, "
    "pow2, fp32, eps=X, margin=N";

}  // namespace

std::string_view to_string(ScaleRule r) {
  switch (r) {
    case ScaleRule::kNone: return "none";
    case ScaleRule::kFloor: return "floor";
    case ScaleRule::kCeil: return "ceil";
    case ScaleRule::kEven: return "even";
    case ScaleRule::kRceil: return "rceil";
    case ScaleRule::kAmax: return "amax";
    case ScaleRule::kNvfp4: return "nvfp4";
  }
  return "?";
}

std::string_view to_string(ScaleFormat f) {
  switch (f) {
    case ScaleFormat::kNone: return "none";
    case ScaleFormat::kE8M0: return "e8m0";
    case ScaleFormat::kE4M3: return "e4m3";
    case ScaleFormat::kFp32: return "fp32";
    case ScaleFormat::kPow2Fp32: return "pow2-fp32";
  }
  return "?";
}

std::vector<std::string> block_scaling_presets() {
  std::vector<std::string> v;
  for (const auto& p : kMxPresets) v.emplace_back(p.name);
  v.insert(v.end(), {"nvfp4", "fp8_e4m3:tensor", "fp8_e4m3:row", "fp8_e4m3:tile128",
                     "fp8_e4m3:block128", "fp8_e5m2:tensor", "fp8_e5m2:row"});
  return v;
}

// MX INT8 elements are 1.6 fixed point (§1.2): the int8 code times 2^-6. A plain int8 format
// keeps its integer values.
int BlockScaling::element_exp() const {
  return element.kind == FormatKind::kInt && !is_plain() ? -6 : 0;
}
int BlockScaling::emax_elem() const { return element.emax() + element_exp(); }
double BlockScaling::max_elem() const { return std::ldexp(element.max_finite(), element_exp()); }

double BlockScaling::bits_per_element(size_t rows, size_t cols) const {
  const double n = static_cast<double>(rows) * static_cast<double>(cols);
  double bits = element.bits();
  if (is_plain() || n == 0) return bits;
  const size_t along_n = axis == 1 ? cols : rows, across_n = axis == 1 ? rows : cols;
  const size_t a = block_along ? block_along : along_n, c = block_across ? block_across : across_n;
  const double blocks = static_cast<double>((along_n + a - 1) / a) * static_cast<double>((across_n + c - 1) / c);
  const int scale_bits = scale_format == ScaleFormat::kE8M0 || scale_format == ScaleFormat::kE4M3 ? 8 : 32;
  bits += blocks * scale_bits / n;
  if (rule == ScaleRule::kNvfp4) bits += 32.0 / n;  // the FP32 tensor scale
  return bits;
}

BlockScaling parse_block_scaling(std::string_view scheme) {
  const auto parts = split(scheme, ':');
  const std::string head(parts[0]);
  BlockScaling s;
  bool known_head = false;
  for (const auto& p : kMxPresets)
    if (head == p.name) s = mx(p.element), known_head = true;
  if (head == "nvfp4") {
    s = mx("float4_e2m1fn", 16);
    s.rule = ScaleRule::kNvfp4;
    s.scale_format = ScaleFormat::kE4M3;
    known_head = true;
  }
  // Remaining parts: our keywords, or options of a custom element format (bias=, nosub, ...),
  // which never collide with ours.
  std::string format_spec = known_head ? "" : head;
  bool rule_given = false, pow2 = false, fp32 = false, two_d = false;
  int block = -1, granularity_along = -2, granularity_across = -2;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    const size_t eq = p.find('=');
    const std::string_view key = p.substr(0, eq);
    const std::string_view val = eq == std::string_view::npos ? std::string_view() : p.substr(eq + 1);
    auto bad = [&](const std::string& why) {
      return std::invalid_argument("scheme '" + std::string(scheme) + "': " + why);
    };
    if (key == "rule") {
      if (val == "floor") s.rule = ScaleRule::kFloor;
      else if (val == "ceil") s.rule = ScaleRule::kCeil;
      else if (val == "even") s.rule = ScaleRule::kEven;
      else if (val == "rceil") s.rule = ScaleRule::kRceil;
      else throw bad("rule '" + std::string(val) + "' is unknown; allowed: floor, ceil, even, rceil");
      rule_given = true;
    } else if (key == "block" && eq != std::string_view::npos) {
      block = parse_int(scheme, key, val, 1, 1 << 20);
    } else if (key == "axis") {
      s.axis = parse_int(scheme, key, val, 0, 1);
    } else if (key == "eps") {
      char* end = nullptr;
      const std::string v(val);
      s.amax_epsilon = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(s.amax_epsilon >= 0) || !std::isfinite(s.amax_epsilon))
        throw bad("eps=" + v + " is not a finite number >= 0");
    } else if (key == "margin") {
      s.margin = parse_int(scheme, key, val, 0, 64);
    } else if (p == "2d") {
      two_d = true;
    } else if (p == "pow2") {
      pow2 = true;
    } else if (p == "fp32") {
      fp32 = true;
    } else if (p == "tensor") {
      granularity_along = 0, granularity_across = 0;
    } else if (p == "row") {
      granularity_along = 0, granularity_across = 1;
    } else if (p.starts_with("tile") || (p.starts_with("block") && eq == std::string_view::npos)) {
      const bool tile = p.starts_with("tile");
      const int n = parse_int(scheme, tile ? "tile" : "block", p.substr(tile ? 4 : 5), 1, 1 << 20);
      granularity_along = n, granularity_across = tile ? 1 : n;
    } else if (!known_head && eq != std::string_view::npos ? key == "bias" : !known_head) {
      format_spec.append(":").append(p);  // an option of a custom element format
    } else {
      throw bad("'" + std::string(p) + "' is not understood; " + kOptionHelp);
    }
  }
  if (!known_head) {
    std::string err;
    const auto f = parse_format(format_spec, &err);
    if (!f)
      throw std::invalid_argument("scheme '" + std::string(scheme) + "': " + err +
                                  "; block-scaled schemes: mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, "
                                  "mxfp4, mxint8, nvfp4, <format>:tensor|row|tile128|block128");
    s.element = *f;
    if (granularity_along != -2) {
      s.rule = ScaleRule::kAmax;
      s.scale_format = pow2 ? ScaleFormat::kPow2Fp32 : ScaleFormat::kFp32;
      s.block_along = granularity_along;
      s.block_across = granularity_across;
    }
  }
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("scheme '" + std::string(scheme) + "': " + why);
  };
  if (s.rule == ScaleRule::kNone && (rule_given || block >= 0 || two_d || pow2 || fp32 || s.amax_epsilon > 0 || s.margin))
    throw bad("scaling options need a scaled scheme (mx*, nvfp4, or :tensor, :row, :tile<N>, :block<N>)");
  if (rule_given && s.scale_format != ScaleFormat::kE8M0)
    throw bad("rule= applies to MX schemes only (E8M0 scales)");
  if ((pow2 || fp32 || s.amax_epsilon > 0 || s.margin) && s.rule != ScaleRule::kAmax)
    throw bad("pow2, fp32, eps and margin apply to FP8 recipes (:tensor, :row, :tile<N>, :block<N>)");
  if (pow2 && fp32) throw bad("pow2 and fp32 exclude each other");
  if (block >= 0) {
    if (s.rule == ScaleRule::kAmax) throw bad("use tile<N> or block<N> for FP8 recipes, not block=N");
    s.block_along = block;
  }
  if (two_d) {
    if (s.rule == ScaleRule::kAmax) throw bad("2d applies to MX and NVFP4; FP8 2-D blocks are block<N>");
    s.block_across = s.block_along;
  }
  if (s.rule != ScaleRule::kNone && s.element.bits() > 16 && s.element.kind == FormatKind::kFloat &&
      s.element.exp_bits >= 8)
    throw bad("element format " + s.element.name + " has FP32's range; scaling it is not supported");
  s.name = std::string(scheme);
  return s;
}

DelayedScaling::DelayedScaling(double max_elem, int history_len, Algo algo, int margin)
    : max_elem_(max_elem), algo_(algo), margin_(margin) {
  if (history_len < 1)
    throw std::invalid_argument("DelayedScaling: amax history length " + std::to_string(history_len) +
                                " must be at least 1");
  history_.assign(static_cast<size_t>(history_len), 0.0f);
}

void DelayedScaling::update(float amax) {
  // TE stages the new amax at position 0 of its buffer, computes the scale over the whole window
  // and then rolls the buffer; keeping the window most-recent-first gives the same window.
  for (size_t i = history_.size() - 1; i > 0; --i) history_[i] = history_[i - 1];
  history_[0] = amax;
  float a = amax;
  if (algo_ == Algo::kMax)
    for (float h : history_) a = std::isnan(h) || std::isnan(a) ? NAN : std::max(a, h);
  // TE's kernel: scaled_max = fp8_max * 2^-margin; scale = scaled_max / amax, in FP32; a
  // non-finite or zero amax keeps the previous scale, an infinite scale becomes FLT_MAX.
  if (std::isfinite(a) && a > 0) {
    const float scaled_max = static_cast<float>(std::ldexp(max_elem_, -margin_));
    float s = scaled_max / a;
    if (std::isinf(s)) s = FLT_MAX;
    scale_ = s;
  }
}

std::vector<uint8_t> swizzle_scales_cublas(std::span<const uint8_t> scales, size_t scale_rows,
                                           size_t scale_cols) {
  if (scales.size() != scale_rows * scale_cols)
    throw std::invalid_argument("swizzle_scales_cublas: " + std::to_string(scales.size()) +
                                " scales for a " + std::to_string(scale_rows) + "x" +
                                std::to_string(scale_cols) + " matrix");
  const size_t tile_rows = (scale_rows + 127) / 128, tile_cols = (scale_cols + 3) / 4;
  std::vector<uint8_t> out(tile_rows * tile_cols * 512, 0);
  for (size_t r = 0; r < scale_rows; ++r)
    for (size_t c = 0; c < scale_cols; ++c) {
      const size_t tile = (r / 128) * tile_cols + c / 4;
      const size_t rr = r % 128, cc = c % 4;
      out[tile * 512 + (rr % 32) * 16 + (rr / 32) * 4 + cc] = scales[r * scale_cols + c];
    }
  return out;
}

}  // namespace precsim
