// Scheme descriptions: parsing, derived properties, delayed scaling, cuBLAS scale layout.
#include "precsim/formats/block_scaling.h"

#include <algorithm>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>

#include "precsim/formats/spec.h"

namespace precsim {
namespace {

int parse_int(const Spec& spec, const SpecOption& o, std::string_view key, std::string_view v, int lo, int hi) {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    throw spec.error(o, std::string(key) + "=" + std::string(v) + " is not an integer in " + std::to_string(lo) +
                            ".." + std::to_string(hi));
  return x;
}

BlockScaling mx(const Format& element, int block = 32) {
  BlockScaling s;
  s.element = element;
  s.rule = ScaleRule::kFloor;  // OCP v1.0 §6.3
  s.scale_format = ScaleFormat::kE8M0;
  s.block_along = block;
  s.block_across = 1;
  return s;
}

struct Preset {
  const char* name;
  const char* element;
};
constexpr Preset kMxPresets[] = {
    {"mxfp8_e4m3", "float8_e4m3fn"}, {"mxfp8_e5m2", "float8_e5m2"}, {"mxfp6_e2m3", "float6_e2m3fn"},
    {"mxfp6_e3m2", "float6_e3m2fn"}, {"mxfp4", "float4_e2m1fn"},    {"mxint8", "int8"},
};

const char* kMxElementHelp = "e4m3 (float8_e4m3fn), e5m2, e2m3, e3m2, e2m1, int8";
const char* kOptionHelp =
    "options: rule=floor|ceil|even|rceil, block=N, axis=0|1, 2d, 4over6, tensor, row, tile<N>, block<N>, mx, nvfp4, "
    "pow2, fp32, eps=X, margin=N";
const char* kSchemeHelp =
    "block-scaled schemes: mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2, mxfp4, mxint8, nvfp4, "
    "<format>:tensor|row|tile128|block128|mx|nvfp4";

BlockScaling nvfp4(const Format& element) {
  BlockScaling s = mx(element, 16);
  s.rule = ScaleRule::kNvfp4;
  s.scale_format = ScaleFormat::kE4M3;
  return s;
}

// The scheme a preset name stands for, or nullopt for a name that must be an element format.
std::optional<BlockScaling> preset_scheme(std::string_view name) {
  for (const auto& p : kMxPresets)
    if (name == p.name) return mx(format_by_name(p.element));
  if (name == "nvfp4") return nvfp4(format_by_name("float4_e2m1fn"));
  return std::nullopt;
}

// What the options of a scheme asked for, before it is checked as a whole.
struct SchemeRequest {
  bool rule_given = false, pow2 = false, fp32 = false, two_d = false, four_over_six = false;
  bool mx = false, nvfp4 = false;  // "<format>:mx", "<format>:nvfp4"
  int block = -1;                  // block=N
  int along = -2, across = -2;     // tensor, row, tile<N>, block<N>; -2: not given
  std::string format_spec;         // a custom element format's own options are appended here
};

// Reads one option of a scheme into s and r; false when it is not a scheme option.
bool apply_scheme_option(const Spec& spec, const SpecOption& o, BlockScaling& s, SchemeRequest& r) {
  // val owns its characters: value_or returns a temporary std::string, and a string_view of it
  // dangled (ASan: stack-use-after-scope in every rule=/block=/eps= option, --sanitize).
  const std::string_view key = o.key;
  const std::string val = o.value.value_or("");
  if (!o.is_flag()) {
    if (key == "rule") {
      static const std::pair<std::string_view, ScaleRule> kRules[] = {
          {"floor", ScaleRule::kFloor}, {"ceil", ScaleRule::kCeil}, {"even", ScaleRule::kEven}, {"rceil", ScaleRule::kRceil}};
      bool known = false;
      for (const auto& [n, rule] : kRules)
        if (val == n) s.rule = rule, known = true;
      if (!known) throw spec.error(o, "rule '" + std::string(val) + "' is unknown; allowed: floor, ceil, even, rceil");
      r.rule_given = true;
    } else if (key == "block") {
      r.block = parse_int(spec, o, key, val, 1, 1 << 20);
    } else if (key == "axis") {
      s.axis = parse_int(spec, o, key, val, 0, 1);
    } else if (key == "eps") {
      char* end = nullptr;
      const std::string v(val);
      s.amax_epsilon = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(s.amax_epsilon >= 0) || !std::isfinite(s.amax_epsilon))
        throw spec.error(o, "eps=" + v + " is not a finite number >= 0");
    } else if (key == "margin") {
      s.margin = parse_int(spec, o, key, val, 0, 64);
    } else {
      return false;
    }
    return true;
  }
  if (key == "2d") r.two_d = true;
  else if (key == "4over6") r.four_over_six = true;
  else if (key == "pow2") r.pow2 = true;
  else if (key == "fp32") r.fp32 = true;
  else if (key == "mx") r.mx = true;
  else if (key == "nvfp4") r.nvfp4 = true;
  else if (key == "tensor") r.along = 0, r.across = 0;
  else if (key == "row") r.along = 0, r.across = 1;
  else if (key.starts_with("tile") || key.starts_with("block")) {
    const bool tile = key.starts_with("tile");
    const int n = parse_int(spec, o, tile ? "tile" : "block", key.substr(tile ? 4 : 5), 1, 1 << 20);
    r.along = n, r.across = tile ? 1 : n;
  } else {
    return false;
  }
  return true;
}

// MX and NVFP4 are defined for their element formats only; any spelling of those is accepted
// ("e4m3:nanonly:mx" is mxfp8_e4m3), any other element is refused.
BlockScaling element_scheme(const Spec& spec, const Format& element, const SchemeRequest& r) {
  if (r.mx && r.nvfp4) throw spec.error("mx and nvfp4 exclude each other");
  if ((r.mx || r.nvfp4) && r.along != -2)
    throw spec.error("mx and nvfp4 exclude tensor, row, tile<N> and block<N>");
  if (r.mx) {
    if (!mx_scheme_name(element))
      throw spec.error("element format " + element.name + " is not an MX element; MX elements: " + kMxElementHelp);
    return mx(element);
  }
  if (r.nvfp4) {
    if (!same_encoding(element, format_by_name("float4_e2m1fn")))
      throw spec.error("nvfp4 needs an E2M1 element (float4_e2m1fn), got " + element.name);
    return nvfp4(element);
  }
  BlockScaling s;
  s.element = element;
  if (r.along != -2) {
    s.rule = ScaleRule::kAmax;
    s.scale_format = r.pow2 ? ScaleFormat::kPow2Fp32 : ScaleFormat::kFp32;
    s.block_along = r.along;
    s.block_across = r.across;
  }
  return s;
}

// The checks that need the whole scheme.
void check_scheme(const Spec& spec, BlockScaling& s, const SchemeRequest& r) {
  if (s.rule == ScaleRule::kNone && (r.rule_given || r.block >= 0 || r.two_d || r.pow2 || r.fp32 || s.amax_epsilon > 0 || s.margin))
    throw spec.error("scaling options need a scaled scheme (mx*, nvfp4, or :tensor, :row, :tile<N>, :block<N>, :mx, :nvfp4)");
  if (r.rule_given && s.scale_format != ScaleFormat::kE8M0) throw spec.error("rule= applies to MX schemes only (E8M0 scales)");
  if ((r.pow2 || r.fp32 || s.amax_epsilon > 0 || s.margin) && s.rule != ScaleRule::kAmax)
    throw spec.error("pow2, fp32, eps and margin apply to FP8 recipes (:tensor, :row, :tile<N>, :block<N>)");
  if (r.pow2 && r.fp32) throw spec.error("pow2 and fp32 exclude each other");
  if (r.block >= 0) {
    if (s.rule == ScaleRule::kAmax) throw spec.error("use tile<N> or block<N> for FP8 recipes, not block=N");
    s.block_along = r.block;
  }
  if (r.four_over_six) {
    if (s.rule != ScaleRule::kNvfp4) throw spec.error("4over6 applies to NVFP4 only (nvfp4, <e2m1 format>:nvfp4)");
    s.four_over_six = true;
  }
  if (r.two_d) {
    if (s.rule == ScaleRule::kAmax) throw spec.error("2d applies to MX and NVFP4; FP8 2-D blocks are block<N>");
    s.block_across = s.block_along;
  }
  if (s.rule != ScaleRule::kNone && s.element.bits() > 16 && s.element.kind == FormatKind::kFloat &&
      s.element.exp_bits >= 8)
    throw spec.error("element format " + s.element.name + " has FP32's range; scaling it is not supported");
}

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

std::optional<std::string_view> mx_scheme_name(const Format& element) {
  for (const auto& p : kMxPresets)
    if (same_encoding(element, format_by_name(p.element))) return p.name;
  return std::nullopt;
}

namespace {

void check_block_length(int n, std::string_view what) {
  if (n < 1 || n > (1 << 20))
    throw std::invalid_argument(std::string(what) + " " + std::to_string(n) + " is out of range; allowed: 1..1048576");
}

}  // namespace

BlockScaling mx_block_scaling(const Format& element, int block, ScaleRule rule, bool two_d) {
  const auto preset = mx_scheme_name(element);
  if (!preset)
    throw std::invalid_argument("element format " + element.name + " is not an MX element; MX elements: " +
                                kMxElementHelp);
  if (rule != ScaleRule::kFloor && rule != ScaleRule::kCeil && rule != ScaleRule::kEven && rule != ScaleRule::kRceil)
    throw std::invalid_argument("MX scale rule '" + std::string(to_string(rule)) +
                                "' is not an E8M0 rule; allowed: floor, ceil, even, rceil");
  check_block_length(block, "MX block length");
  BlockScaling s = *preset_scheme(*preset);
  s.rule = rule;
  s.block_along = block;
  if (two_d) s.block_across = block;
  s.name = std::string(*preset) + (block != 32 ? ":block=" + std::to_string(block) : "") +
           (rule != ScaleRule::kFloor ? ":rule=" + std::string(to_string(rule)) : "") + (two_d ? ":2d" : "");
  return s;
}

BlockScaling nvfp4_block_scaling(bool two_d, bool four_over_six) {
  BlockScaling s = *preset_scheme("nvfp4");
  if (two_d) s.block_across = s.block_along;
  s.four_over_six = four_over_six;
  s.name = std::string("nvfp4") + (two_d ? ":2d" : "") + (four_over_six ? ":4over6" : "");
  return s;
}

BlockScaling amax_block_scaling(const Format& element, int along, int across, bool pow2, int margin) {
  std::string layout;
  if (along == 0 && across == 0) layout = ":tensor";
  else if (across == 1) layout = ":tile" + std::to_string(along);
  else if (across == along) layout = ":block" + std::to_string(along);
  else
    throw std::invalid_argument("FP8 scale blocks " + std::to_string(along) + "x" + std::to_string(across) +
                                " are not a layout; allowed: tensor (0x0), tile<N> (Nx1), block<N> (NxN)");
  if (layout != ":tensor") check_block_length(along, "FP8 scale block length");
  if (margin < 0 || margin > 64)
    throw std::invalid_argument("margin " + std::to_string(margin) + " is out of range; allowed: 0..64");
  if (element.bits() > 16 && element.kind == FormatKind::kFloat && element.exp_bits >= 8)
    throw std::invalid_argument("element format " + element.name + " has FP32's range; scaling it is not supported");
  BlockScaling s;
  s.element = element;
  s.rule = ScaleRule::kAmax;
  s.scale_format = pow2 ? ScaleFormat::kPow2Fp32 : ScaleFormat::kFp32;
  s.block_along = along;
  s.block_across = across;
  s.margin = margin;
  s.name = element.name + layout + (pow2 ? ":pow2" : "") + (margin ? ":margin=" + std::to_string(margin) : "");
  return s;
}

BlockScaling parse_block_scaling(std::string_view scheme) {
  const Spec spec = parse_spec(scheme, {.what = "scheme"});
  const std::optional<BlockScaling> preset = preset_scheme(spec.name);
  BlockScaling s = preset.value_or(BlockScaling{});
  SchemeRequest r;
  r.format_spec = spec.name;
  for (const SpecOption& o : spec.options) {
    if (apply_scheme_option(spec, o, s, r)) {
      const bool element_only = o.key == "mx" || o.key == "nvfp4" || o.key == "tensor" || o.key == "row" ||
                                (o.is_flag() && (o.key.starts_with("tile") || o.key.starts_with("block")));
      if (preset && element_only)
        throw spec.error(o, "'" + o.text + "' applies to an element format, not to the preset " + spec.name);
      continue;
    }
    // The options of a custom element format (bias=B, nosub, ...), which never collide with ours.
    static constexpr std::string_view kFormatFlags[] = {"nosub", "ieee", "nanonly", "fn", "finite", "fnuz", "unsigned"};
    const bool format_option = o.is_flag() ? std::ranges::find(kFormatFlags, o.key) != std::end(kFormatFlags) : o.key == "bias";
    if (preset || !format_option)
      throw spec.error(o, "'" + o.text + "' is not understood; " + kOptionHelp +
                              (preset ? "" : "; of a custom element format: bias=B, nosub, ieee, nanonly, finite, fnuz, unsigned"));
    r.format_spec.append(":").append(o.text);
  }
  if (!preset) {
    std::string err;
    const auto f = parse_format(r.format_spec, &err);
    if (!f) throw spec.error(err + "; " + kSchemeHelp);
    const BlockScaling given = s;  // the options read so far, applied to the element's scheme
    s = element_scheme(spec, *f, r);
    s.axis = given.axis, s.amax_epsilon = given.amax_epsilon, s.margin = given.margin;
    if (r.rule_given && s.scale_format != ScaleFormat::kE8M0) throw spec.error("rule= applies to MX schemes only (E8M0 scales)");
    if (r.rule_given) s.rule = given.rule;
  }
  check_scheme(spec, s, r);
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
