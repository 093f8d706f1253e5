// Pass 1 of block quantization: block maxima and the scale of every block, by the scheme's rule.
#include "block_plan.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

// 2^e exactly, without a libm call (the per-block work is on the hot path of small blocks).
inline double pow2d(int e) { return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52); }  // -1022..1023
inline float pow2f(int e) { return static_cast<float>(pow2d(e)); }  // -149..127, exact
// floor(log2 a) of a positive finite float.
inline int ilogb_f(float a) {
  const uint32_t b = std::bit_cast<uint32_t>(a);
  return (b >> 23) ? static_cast<int>(b >> 23) - 127 : std::ilogb(a);
}

// |x| as its bit pattern: finite magnitudes order like their bits, and Inf and NaN lie above
// 0x7f7fffff, so one unsigned max (which vectorises) finds amax and flags non-finite values.
inline uint32_t mag_bits(float x) { return std::bit_cast<uint32_t>(x) & 0x7fffffffu; }
constexpr uint32_t kInfBits = 0x7f800000u;

// Per block column, the largest magnitude bits over rows [r0, r1).
void scan_rows(const float* in, size_t cols, size_t r0, size_t r1, const BlockPlan& p, uint32_t* amax) {
  for (size_t r = r0; r < r1; ++r) {
    const float* x = in + r * cols;
    if (p.bc == 1) {
      for (size_t c = 0; c < cols; ++c) amax[c] = std::max(amax[c], mag_bits(x[c]));
    } else {
      for (size_t c0 = 0, b = 0; c0 < cols; c0 += p.bc, ++b) {
        const size_t c1 = std::min(cols, c0 + p.bc);
        uint32_t m = 0;
        for (size_t c = c0; c < c1; ++c) m = std::max(m, mag_bits(x[c]));
        amax[b] = std::max(amax[b], m);
      }
    }
  }
}

// Maxima are exact, so any split over threads gives the same result.
void block_maxima(const float* in, BlockPlan& p) {
  const size_t nbc = p.nbc;
  std::vector<uint32_t> amax(p.nbr * nbc, 0);
  const int threads = omp_get_max_threads();
  const bool big = p.rows * p.cols >= (size_t{1} << 15);
  if (!big) {
    for (size_t rb = 0; rb < p.nbr; ++rb)
      scan_rows(in, p.cols, rb * p.br, std::min(p.rows, rb * p.br + p.br), p, amax.data() + rb * nbc);
  } else if (p.nbr >= static_cast<size_t>(4 * threads)) {
#pragma omp parallel for schedule(static)
    for (int64_t rb = 0; rb < static_cast<int64_t>(p.nbr); ++rb) {
      const size_t r0 = rb * p.br, r1 = std::min(p.rows, r0 + p.br);
      scan_rows(in, p.cols, r0, r1, p, amax.data() + rb * nbc);
    }
  } else {
    for (size_t rb = 0; rb < p.nbr; ++rb) {
      const size_t r0 = rb * p.br, r1 = std::min(p.rows, r0 + p.br);
#pragma omp parallel
      {
        std::vector<uint32_t> la(nbc, 0);
#pragma omp for schedule(static)
        for (int64_t r = static_cast<int64_t>(r0); r < static_cast<int64_t>(r1); ++r)
          scan_rows(in, p.cols, r, r + 1, p, la.data());
#pragma omp critical
        for (size_t b = 0; b < nbc; ++b) amax[rb * nbc + b] = std::max(amax[rb * nbc + b], la[b]);
      }
    }
  }
  for (size_t rb = 0; rb < p.nbr; ++rb)
    for (size_t cb = 0; cb < nbc; ++cb) {
      BlockScale& b = p.blocks[rb * nbc + cb];
      const uint32_t m = amax[rb * nbc + cb];
      b.nonfinite = m >= kInfBits;
      if (!b.nonfinite) {
        b.amax = std::bit_cast<float>(m);
        continue;
      }
      // Rare: the largest finite magnitude of a block holding NaN or Inf (NVFP4's tensor amax).
      uint32_t f = 0;
      for (size_t r = rb * p.br; r < std::min(p.rows, rb * p.br + p.br); ++r)
        for (size_t c = cb * p.bc; c < std::min(p.cols, cb * p.bc + p.bc); ++c) {
          const uint32_t v = mag_bits(in[r * p.cols + c]);
          if (v < kInfBits) f = std::max(f, v);
        }
      b.amax = std::bit_cast<float>(f);
    }
}

// OCP MX shared exponent (§1.4, §1.6). All-zero blocks get the smallest scale, 2^-127 (code 0),
// as the spec's reference code and microxcaling do. The exponent is clamped to E8M0's finite
// range [-127, 127]: below, the block's small values flush (microxcaling clamps the same way);
// above (possible only for ceil/rceil with amax near FLT_MAX) the elements saturate, as TE's
// float_to_e8m0 saturates Inf to 0xFE.
void mx_scale(const BlockScaling& s, double max_elem, int emax, BlockScale& b) {
  if (b.nonfinite) {
    // A NaN or Inf anywhere in the block: scale code 0xFF (NaN) and the whole block NaN, as
    // microxcaling's tests and torchao (scale NaN when max_abs is not finite) do.
    b.nan_block = true;
    b.code = 0xff;
    b.dec = NAN;
    b.enc = 0;
    return;
  }
  const double amax = b.amax;
  int e = -127;
  if (amax > 0) {
    const int E = ilogb_f(b.amax);
    const bool pow2 = amax == pow2d(E);
    switch (s.rule) {
      case ScaleRule::kFloor: e = E - emax; break;
      case ScaleRule::kCeil: e = E + (pow2 ? 0 : 1) - emax; break;
      case ScaleRule::kEven: {
        // torchao's EVEN: add half an ulp at the element's mantissa width to amax's bits and
        // truncate, i.e. round the mantissa with ties away; a carry moves amax up one binade.
        const int mbits = s.element.kind == FormatKind::kInt ? -s.element_exp() : s.element.man_bits;
        const double m = amax * pow2d(-E);
        e = E + (m >= 2.0 - pow2d(-(mbits + 1)) ? 1 : 0) - emax;
        break;
      }
      case ScaleRule::kRceil: {
        // amax / max_elem rounded up to a power of two; in double the quotient keeps its side of
        // every power of two, so the rule never clips (TE computes it in FP32).
        const double q = amax / max_elem;
        const int Eq = std::ilogb(q);
        e = Eq + (q == pow2d(Eq) ? 0 : 1);
        break;
      }
      default: break;
    }
  }
  e = std::clamp(e, -127, 127);
  b.code = static_cast<uint32_t>(e + 127);
  b.log2_scale = e;
  b.enc = pow2f(-e);
  b.dec = pow2d(e + s.element_exp());
  b.clipped = amax * pow2d(-e) > max_elem;
}

// NVFP4 (§1.7, NVFP4 paper Appendix B): s_enc = 6*448 / amax_tensor in FP32 (1 when the tensor
// amax is zero or not finite); the block decode scale amax_b / 6 * s_enc is rounded to E4M3
// (RNE, saturating) and elements are x * 1 / (e4m3 scale * s_dec). A block whose E4M3 scale
// underflows to zero quantizes to zeros; a NaN/Inf in the block makes it NaN (scale code 0x7f).
void nvfp4_scale(double max_elem, float scale_value, float s_dec, BlockScale& b) {
  if (b.nonfinite) {
    b.nan_block = true;
    b.code = 0x7f;
    b.dec = NAN;
    b.enc = 0;
    return;
  }
  const double sv = scale_value;  // E4M3 (RNE, saturating) of amax_b / 6 * s_enc
  b.scale_value = scale_value;
  if (sv == 0) {
    b.zero_scale = true;
    b.enc = 0;
    b.dec = 0;
    b.log2_scale = 0;
    return;
  }
  b.enc = 1.0f / static_cast<float>(static_cast<float>(sv) * s_dec);
  b.dec = sv * static_cast<double>(s_dec);
  b.log2_scale = std::ilogb(b.dec);
  b.clipped = b.amax * b.enc > max_elem;
}

// Four Over Six's tensor scale uses 256 in place of E4M3's 448, so that a block scaled to 4
// (its E4M3 scale 1.5 times larger) stays within E4M3's range (arXiv 2512.02010, their code's
// E4M3_MAX_FOUROVERSIX).
constexpr double kFourOverSixScaleMax = 256.0;

// Sum over block i of (dequantized - x)^2 in FP64 under the block scale b, with the element pass's
// arithmetic: (x * enc) in FP32, rounded by quantize() at the element's own SR index, times dec in
// double rounded once to FP32.
double block_sq_error(const BlockPlan& p, const float* in, size_t i, const BlockScale& b, uint64_t index_base) {
  const BlockScaling& s = *p.scheme;
  const size_t rb = i / p.nbc, cb = i % p.nbc;
  const size_t r1 = std::min(p.rows, rb * p.br + p.br), c0 = cb * p.bc, c1 = std::min(p.cols, c0 + p.bc);
  constexpr size_t kRun = 64;
  float scaled[kRun], q[kRun];
  double err = 0;
  for (size_t r = rb * p.br; r < r1; ++r)
    for (size_t c = c0; c < c1; c += kRun) {
      const float* x = in + r * p.cols + c;
      const size_t w = std::min(kRun, c1 - c);
      for (size_t k = 0; k < w; ++k) scaled[k] = x[k] * b.enc;
      quantize(s.element, std::span<const float>(scaled, w), std::span<float>(q, w), s.element_options, nullptr,
               index_base + r * p.cols + c);
      for (size_t k = 0; k < w; ++k) {
        const double d = static_cast<double>(static_cast<float>(static_cast<double>(q[k]) * b.dec)) - x[k];
        err += d * d;
      }
    }
  return err;
}

// The block's scale under Four Over Six: the candidate mapping amax to 6 unless the one mapping it
// to 4 has a strictly lower squared error.
void four_over_six_scale(BlockPlan& p, const float* in, size_t i, float scale6, float scale4, float s_dec,
                         uint64_t index_base) {
  const double max_elem = p.scheme->max_elem();
  BlockScale& b = p.blocks[i];
  BlockScale b4 = b;
  nvfp4_scale(max_elem, scale6, s_dec, b);
  if (b.nonfinite) return;
  nvfp4_scale(max_elem, scale4, s_dec, b4);
  if (block_sq_error(p, in, i, b4, index_base) < block_sq_error(p, in, i, b, index_base)) b = b4;
}

}  // namespace

// FP8 recipes (§3.3, §3.4, §4.1): encode scale max_elem * 2^-margin / amax in FP32; amax below
// eps is raised to eps; a zero or non-finite amax gives scale 1; an infinite scale FLT_MAX;
// pow2 clears the mantissa (rounds down). The decode scale is TE's scale_inv = 1 / scale in FP32.
void amax_scale(const BlockScaling& s, double max_elem, double fixed_scale, BlockScale& b) {
  float scale = 1.0f;
  if (fixed_scale > 0) {
    scale = static_cast<float>(fixed_scale);
  } else {
    float a = b.nonfinite ? NAN : b.amax;
    if (a < s.amax_epsilon) a = static_cast<float>(s.amax_epsilon);
    if (std::isfinite(a) && a > 0) {
      scale = static_cast<float>(std::ldexp(max_elem, -s.margin)) / a;
      if (std::isinf(scale)) scale = FLT_MAX;
      if (s.scale_format == ScaleFormat::kPow2Fp32) scale = std::ldexp(1.0f, std::ilogb(scale));
    }
  }
  const float dec = 1.0f / scale;
  b.enc = scale;
  b.dec = dec;
  std::memcpy(&b.code, &dec, 4);
  b.log2_scale = std::ilogb(dec);
  b.clipped = b.amax * scale > max_elem;
}

BlockGeometry block_geometry(const BlockScaling& s, size_t rows, size_t cols) {
  BlockGeometry g;
  if (s.is_plain()) {
    g.br = std::max<size_t>(rows, 1), g.bc = std::max<size_t>(cols, 1);
  } else {
    const size_t along_n = s.axis == 1 ? cols : rows, across_n = s.axis == 1 ? rows : cols;
    const size_t a = s.block_along ? s.block_along : std::max<size_t>(along_n, 1);
    const size_t c = s.block_across ? s.block_across : std::max<size_t>(across_n, 1);
    g.br = s.axis == 1 ? c : a;
    g.bc = s.axis == 1 ? a : c;
  }
  g.nbr = std::max<size_t>(1, (rows + g.br - 1) / g.br);
  g.nbc = std::max<size_t>(1, (cols + g.bc - 1) / g.bc);
  return g;
}

BlockPlan make_block_plan(const BlockScaling& s, const float* in, size_t rows, size_t cols,
                          double tensor_amax, double encode_scale, uint64_t index_base) {
  BlockPlan p;
  p.scheme = &s;
  p.rows = rows, p.cols = cols;
  const BlockGeometry g = block_geometry(s, rows, cols);
  p.br = g.br, p.bc = g.bc, p.nbr = g.nbr, p.nbc = g.nbc;
  p.blocks.resize(p.nbr * p.nbc);
  p.elem_factor = std::ldexp(1.0f, -s.element_exp());
  p.elem_max = s.element.max_finite();
  block_maxima(in, p);
  if (s.is_plain()) {
    for (auto& b : p.blocks) b.clipped = b.amax > p.elem_max;
    p.enc.assign(p.blocks.size(), 1.0f);
    p.dec.assign(p.blocks.size(), 1.0);
    return p;
  }
  const double max_elem = s.max_elem();
  const int emax = s.emax_elem();
  float s_enc = 1, s_dec = 1;
  Format e4m3;
  std::vector<float> nv_in, nv_scale, nv_scale4;
  if (s.rule == ScaleRule::kNvfp4) {
    e4m3 = format_by_name("float8_e4m3fn");
    double t = tensor_amax;
    if (t < 0) {
      t = 0;
      for (const auto& b : p.blocks) t = std::max<double>(t, b.amax);
    }
    if (std::isfinite(t) && t > 0) {
      s_enc = static_cast<float>(6.0 * (s.four_over_six ? kFourOverSixScaleMax : 448.0)) / static_cast<float>(t);
      if (std::isinf(s_enc)) s_enc = FLT_MAX;
    }
    s_dec = 1.0f / s_enc;
    p.tensor_dec = s_dec;
    // Every block's E4M3 scale in one call of the (vectorised) array API.
    nv_in.resize(p.blocks.size());
    nv_scale.resize(p.blocks.size());
    for (size_t i = 0; i < p.blocks.size(); ++i)
      nv_in[i] = p.blocks[i].nonfinite ? 0.0f : static_cast<float>(p.blocks[i].amax / 6.0f * s_enc);
    QuantOptions o;
    o.overflow = Overflow::kSaturate;
    quantize(e4m3, nv_in, nv_scale, o);
    if (s.four_over_six) {
      nv_scale4.resize(p.blocks.size());
      for (size_t i = 0; i < p.blocks.size(); ++i)
        nv_in[i] = p.blocks[i].nonfinite ? 0.0f : static_cast<float>(p.blocks[i].amax / 4.0f * s_enc);
      quantize(e4m3, nv_in, nv_scale4, o);
    }
  }
#pragma omp parallel for schedule(static) if (p.blocks.size() >= 4096)
  for (int64_t i = 0; i < static_cast<int64_t>(p.blocks.size()); ++i) {
    BlockScale& b = p.blocks[i];
    if (s.rule == ScaleRule::kAmax) amax_scale(s, max_elem, encode_scale, b);
    else if (s.rule == ScaleRule::kNvfp4 && s.four_over_six) four_over_six_scale(p, in, i, nv_scale[i], nv_scale4[i], s_dec, index_base);
    else if (s.rule == ScaleRule::kNvfp4) nvfp4_scale(max_elem, nv_scale[i], s_dec, b);
    else mx_scale(s, max_elem, emax, b);
  }
  p.enc.resize(p.blocks.size());
  p.dec.resize(p.blocks.size());
  for (size_t i = 0; i < p.blocks.size(); ++i) {
    p.enc[i] = p.blocks[i].enc;
    p.dec[i] = p.blocks[i].dec;
  }
  return p;
}

BlockStats BlockPlan::block_stats() const {
  BlockStats st;
  st.blocks = blocks.size();
  for (const auto& b : blocks) {
    st.clipped_blocks += b.clipped;
    st.nonfinite_blocks += b.nonfinite;
    if (!b.nan_block && !b.zero_scale && !scheme->is_plain()) ++st.scale_log2_histogram[b.log2_scale];
  }
  return st;
}

void BlockPlan::pack_scales(BlockPacked& out) const {
  const BlockScaling& s = *scheme;
  if (s.is_plain()) return;
  // Block order: rows across the axis, columns along it.
  out.scale_rows = s.axis == 1 ? nbr : nbc;
  out.scale_cols = s.axis == 1 ? nbc : nbr;
  const size_t width = s.scale_format == ScaleFormat::kFp32 || s.scale_format == ScaleFormat::kPow2Fp32 ? 4 : 1;
  out.scales.assign(blocks.size() * width, 0);
  const Format e4m3 = format_by_name("float8_e4m3fn");
  for (size_t rb = 0; rb < nbr; ++rb)
    for (size_t cb = 0; cb < nbc; ++cb) {
      const size_t idx = s.axis == 1 ? rb * nbc + cb : cb * nbr + rb;
      const BlockScale& b = blocks[rb * nbc + cb];
      const uint32_t code = s.scale_format == ScaleFormat::kE4M3 && !b.nan_block
                                ? static_cast<uint32_t>(encode(e4m3, b.scale_value).code)
                                : b.code;
      std::memcpy(out.scales.data() + idx * width, &code, width);  // little-endian host
    }
}

BlockStats& BlockStats::operator+=(const BlockStats& o) {
  elements += o.elements;
  blocks += o.blocks;
  clipped_blocks += o.clipped_blocks;
  nonfinite_blocks += o.nonfinite_blocks;
  saturated += o.saturated;
  flushed += o.flushed;
  nonfinite_inputs += o.nonfinite_inputs;
  for (const auto& [k, v] : o.scale_log2_histogram) scale_log2_histogram[k] += v;
  return *this;
}

}  // namespace precsim
