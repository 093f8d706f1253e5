// AMD's MFMA arithmetic as MMA-Sim models it (Xie et al., arXiv:2511.10909; mmasim 2.1.1
// arithmetic/fdpa.py and ftz_mul_add.py), one kind per generation:
// - kExactBlocks (CDNA1 fp16/bf16, E-FDPA): each block of n products and c summed exactly and
//   rounded once to nearest-even FP32;
// - kFtzPairs (CDNA2 fp16/bf16): FP32 multiplies and adds, every subnormal input, product and sum
//   flushed to zero, the products added in pairs (n = 2) or pairs of pairs (n = 4) before c;
// - kTwoStage (CDNA3, TR-FDPA / GTR-FDPA): the products of a block aligned to their largest
//   exponent and truncated at F fraction bits (FP8: even and odd k as two such sums first), then
//   c added with the block's sum kept to F2 + 1 bits and c's to F bits, both rounded down, the
//   result rounded down to F2 bits and then to nearest-even FP32.
// The steps follow MMA-Sim's operations in the same order on doubles, where every intermediate is
// exact, so the bits agree (tests/instruction_oracle_test.cpp).
#include <cmath>
#include <limits>

#include "accum_engine.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/exact_dot.h"

namespace precsim::detail {
namespace {

constexpr int kZeroExp = -999;  // MMA-Sim's exponent of a zero product (below every other)

// x flushed to +0 when it is a subnormal (or zero) of the format whose smallest normal is 2^emin.
float flush_in(float x, int emin) { return std::fabs(x) < std::ldexp(1.0f, emin) ? 0.0f : x; }
// An FP32 result flushed to a zero of its sign when subnormal.
float flush_out(float x) { return std::fabs(x) < 0x1p-126f ? x * 0.0f : x; }

// One product as significand (|s| in [0, 4)) and exponent, MMA-Sim's frexp_and_normalize of each
// factor (subnormals at the format's smallest exponent) multiplied.
struct Product {
  double s;
  int e;
};

Product product_of(float a, const Format& af, float b, const Format& bf) {
  uint64_t ma, mb;
  int ea, eb;
  if (!decompose(a, af, true, ma, ea) || !decompose(b, bf, true, mb, eb)) return {0.0, kZeroExp};
  const double s =
      std::ldexp(static_cast<double>(ma), -af.man_bits) * std::ldexp(static_cast<double>(mb), -bf.man_bits);
  return {std::signbit(a) != std::signbit(b) ? -s : s, ea + eb};
}

// MMA-Sim's truncated_fused_sum: each term truncated at F bits below the largest exponent.
Product truncated_sum(const Product* p, int count, int stride, int F) {
  int emax = kZeroExp;
  for (int i = 0; i < count; i += stride) emax = std::max(emax, p[i].e);
  double sum = 0;
  for (int i = 0; i < count; i += stride) sum += std::ldexp(std::trunc(std::ldexp(p[i].s, p[i].e - emax + F)), -F);
  return {sum, emax};
}

// s * 2^(e - E + bits) rounded down, back in units of 2^-bits.
double floor_at(double s, int e, int E, int bits) { return std::ldexp(std::floor(std::ldexp(s, e - E + bits)), -bits); }

// The block result of an Inf or NaN operand, c or (bf16) product beyond FP32; false if none. The
// products that overflow are Infs of their sign, added to what special_block finds.
bool two_stage_special(const DotOperands& x, int64_t begin, int64_t end, const Product* p, double c, double& out,
                       uint32_t& st) {
  double r = 0;
  const bool special = special_block(x, begin, end, c, r, st);
  bool pinf = false, ninf = false;
  for (int64_t i = begin; i < end; ++i)
    if ((std::fabs(p[i - begin].s) >= 2) + p[i - begin].e >= 128) (p[i - begin].s < 0 ? ninf : pinf) = true;
  if ((!pinf && !ninf) || (special && std::isnan(r))) {
    out = r;
    return special;
  }
  if (special) (r > 0 ? pinf : ninf) = true;
  if (pinf && ninf) st |= kNanResult;
  out = pinf && ninf ? std::numeric_limits<double>::quiet_NaN() : pinf ? INFINITY : -INFINITY;
  return true;
}

}  // namespace

double AccumEngine::exact_blocks(const DotOperands& x, double c, uint32_t& st) const {
  const int64_t n = m_.block.block_size;
  for (int64_t b = 0; b < x.k; b += n) {
    const int64_t e = std::min(x.k, b + n);
    if (double r; special_block(x, b, e, c, r, st)) {
      c = r;
      continue;
    }
    LongAccumulator acc;
    acc.add(c);
    for (int64_t i = b; i < e; ++i) acc.add_product(x.a[i * x.sa], x.b[i * x.sb]);
    const Rounded r = acc.round(m_.acc, acc_opts_);
    st |= r.status;
    c = decode(m_.acc, r.code) + 0.0;  // an exact zero sum is +0 (MMA-Sim's normalised parts)
  }
  return c;
}

double AccumEngine::ftz_pairs(const DotOperands& x, double c, uint32_t& st) const {
  const int64_t n = m_.block.block_size;  // 2 or 4
  const int ea = a_fmt_.emin(), eb = b_fmt_.emin();
  auto prod = [&](int64_t i) {
    if (i >= x.k) return 0.0f;
    return flush_out(flush_in(x.a[i * x.sa], ea) * flush_in(x.b[i * x.sb], eb));
  };
  float d = flush_in(static_cast<float>(c), -126);
  for (int64_t i = 0; i < x.k; i += n) {
    float s = flush_out(prod(i) + prod(i + 1));
    if (n == 4) s = flush_out(s + flush_out(prod(i + 2) + prod(i + 3)));
    d = flush_out(d + s);
  }
  if (std::isnan(d)) st |= kNanResult;
  return d;
}

double AccumEngine::two_stage(const DotOperands& x, double c, uint32_t& st) const {
  const int64_t n = m_.block.block_size;
  const int F = m_.block.frac_bits, F2 = m_.block.frac_bits2;
  Product p[4096];
  for (int64_t b = 0; b < x.k; b += n) {
    const int64_t e = std::min(x.k, b + n);
    const int cnt = static_cast<int>(e - b);
    for (int64_t i = b; i < e; ++i) p[i - b] = product_of(x.a[i * x.sa], a_fmt_, x.b[i * x.sb], b_fmt_);
    if (double r; two_stage_special(x, b, e, p, c, r, st)) {
      c = r;
      continue;
    }
    Product dot;
    if (m_.block.parity_halves) {
      const Product ev = truncated_sum(p, cnt, 2, F), od = truncated_sum(p + 1, cnt - 1, 2, F);
      dot.e = std::max(ev.e, od.e);
      dot.s = floor_at(ev.s, ev.e, dot.e, F) + floor_at(od.s, od.e, dot.e, F);
    } else {
      dot = truncated_sum(p, cnt, 1, F);
    }
    int ec;
    double sc = std::frexp(c, &ec) * 2;  // |sc| in [1, 2), or c's subnormal scaled to 2^-126
    ec = c == 0 ? -126 : ec - 1;
    if (ec < -126) sc = std::ldexp(sc, ec + 126), ec = -126;
    const int E = std::max(dot.e, ec);
    const double sd = floor_at(dot.s, dot.e, E, F2 + 1);
    double scc = floor_at(sc, ec, E, F);
    if (m_.block.parity_halves && ec < E - F - 1) scc = 0;
    const double v = std::ldexp(sd + scc, E);
    if (v == 0) {
      c = 0.0;
      continue;
    }
    int ev;
    double sv = std::frexp(v, &ev) * 2;
    ev -= 1;
    if (ev < -126) sv = std::ldexp(sv, ev + 126), ev = -126;
    const double kept = std::ldexp(std::floor(std::ldexp(sv, F2)), -F2);
    c = static_cast<float>(std::ldexp(kept, ev));  // nearest-even FP32, Inf beyond
  }
  return c;
}

}  // namespace precsim::detail
