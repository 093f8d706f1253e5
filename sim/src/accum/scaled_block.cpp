// Blackwell's block-scaled MMA (tcgen05.mma kind::mxf8f6f4 and kind::mxf4nvf4) as the block-FMA
// model with the scales inside the fused sum (MMA-Sim's ST-FDPA and GST-FDPA, docs/reference/sources.md):
// - group = 0 (mxf8f6f4): each product a*b*sa*sb is exact, its exponent e_a + e_b + e_sa + e_sb;
// - group = G (mxf4nvf4): G products summed exactly, the group sum times sa*sb carries the
//   exponent of the scales only, so a cancelling group still sets the alignment and an
//   all-zero group (or a zero scale) does not.
// Every term is then truncated to F fraction bits below the largest exponent (c included, the
// floor standing for the zeros' exponent) and the exact sum rounded once, as block() does.
#include <cmath>
#include <stdexcept>
#include <string>

#include "accum_engine.h"
#include "precsim/formats/format.h"
#include "precsim/formats/rounding.h"

namespace precsim::detail {
namespace {

// One scale as (M, e, frac bits) in its format, as the instruction reads it; nullptr is 1.
struct Scale {
  uint64_t m = 1;
  int e = 0;
  int frac = 0;
  bool zero = false;
};

Scale scale_of(const float* s, int64_t q, const Format& f) {
  Scale r;
  if (!s) return r;
  r.frac = f.man_bits;
  r.zero = !decompose(s[q], f, true, r.m, r.e);
  return r;
}

}  // namespace

void check_block_scaled_operands(const AccumModel& m, const Format& a_fmt, const Format& b_fmt) {
  const bool groups = m.block.scale_group > 0;
  const char* allowed = groups ? "e2m1" : "e4m3, e5m2, e3m2, e2m3, e2m1";
  for (const Format* f : {&a_fmt, &b_fmt}) {
    bool ok = same_encoding(*f, format_by_name("e2m1"));
    if (!groups)
      for (const char* name : {"e4m3", "e5m2", "e3m2", "e2m3"}) ok = ok || same_encoding(*f, format_by_name(name));
    if (!ok)
      throw std::invalid_argument("accumulation model " + m.name + ": operand format '" + f->name +
                                  "' is not an operand of the block-scaled instruction it models; allowed: " + allowed);
  }
}

double AccumEngine::scaled_dot(const DotOperands& x, const DotScales& s, double c, uint32_t& st) const {
  const int64_t n = m_.block.block_size;
  double d = c;
  for (int64_t b = 0; b < x.k; b += n) d = scaled_block(x, s, b, std::min(x.k, b + n), d, st);
  return d;
}

double AccumEngine::scaled_block(const DotOperands& x, const DotScales& s, int64_t begin, int64_t end, double c,
                                 uint32_t& st) const {
  const BlockFmaParams& bp = m_.block;
  if (double r; special_block(x, begin, end, c, r, st)) return r;
  BlockTerm terms[4097];
  int nt = 0;
  const int fa = a_fmt_.man_bits, fb = b_fmt_.man_bits;
  const int64_t g = bp.scale_group > 0 ? bp.scale_group : 1;
  for (int64_t g0 = begin; g0 < end; g0 += g) {
    const int64_t q = g0 / s.block_k;
    const Scale sa = scale_of(s.a, q, scale_fmt_), sb = scale_of(s.b, q, scale_fmt_);
    if (sa.zero || sb.zero) continue;
    const uint64_t ms = sa.m * sb.m;
    const int es = sa.e + sb.e, fs = sa.frac + sb.frac;
    if (bp.scale_group == 0) {
      uint64_t ma, mb;
      int ea, eb;
      const float a = x.a[g0 * x.sa], b = x.b[g0 * x.sb];
      if (!decompose(a, a_fmt_, true, ma, ea) || !decompose(b, b_fmt_, true, mb, eb)) continue;
      terms[nt++] = BlockTerm{ma * mb * ms, ea + eb + es, fa + fb + fs, std::signbit(a) != std::signbit(b)};
      continue;
    }
    // The group's exact sum on the grid of its smallest possible product, 2^(base - fa - fb).
    const int base = a_fmt_.emin() + b_fmt_.emin();
    int64_t sum = 0;
    bool any = false;
    for (int64_t i = g0; i < std::min(end, g0 + g); ++i) {
      uint64_t ma, mb;
      int ea, eb;
      const float a = x.a[i * x.sa], b = x.b[i * x.sb];
      if (!decompose(a, a_fmt_, true, ma, ea) || !decompose(b, b_fmt_, true, mb, eb)) continue;
      any = true;
      const int64_t p = static_cast<int64_t>((ma * mb) << (ea + eb - base));
      sum += std::signbit(a) != std::signbit(b) ? -p : p;
    }
    if (!any) continue;
    const uint64_t mag = static_cast<uint64_t>(sum < 0 ? -sum : sum);
    terms[nt++] = BlockTerm{mag * ms, es, fa + fb + fs - base, sum < 0};
  }
  {
    uint64_t mc;
    int ec;
    if (decompose(static_cast<float>(c), m_.acc, true, mc, ec)) terms[nt++] = BlockTerm{mc, ec, m_.acc.man_bits, c < 0};
  }
  return fused_sum(terms, nt, st);
}

}  // namespace precsim::detail
