#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "accum_engine.h"
#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/exact_dot.h"
#include "precsim/sim/accum/gemm.h"

namespace precsim {
namespace detail {
namespace {

bool is_native(const Format& f, const QuantOptions& o, const Format& native) {
  return f == native && o.rounding == Rounding::kNearestEven && o.overflow == Overflow::kIeee &&
         !o.flush_subnormals;
}

// |x| = sig * 2^exp with sig < 2^53 (x a finite non-zero double).
void split(double x, uint64_t& sig, int& exp) {
  int e;
  const double fr = std::frexp(std::fabs(x), &e);
  sig = static_cast<uint64_t>(std::ldexp(fr, 53));
  exp = e - 53;
}

}  // namespace

bool decompose(float x, const Format& f, bool subnormals, uint64_t& M, int& e) {
  if (x == 0) return false;
  const float ax = std::fabs(x);
  int ex;
  std::frexp(ax, &ex);
  int fl = ex - 1;
  if (fl < f.emin()) {
    if (!subnormals) return false;
    fl = f.emin();
  }
  e = fl;
  M = static_cast<uint64_t>(std::ldexp(static_cast<double>(ax), f.man_bits - fl));
  return true;
}

bool special_block(const DotOperands& x, int64_t begin, int64_t end, double c, double& out, uint32_t& st) {
  bool nan = std::isnan(c), pinf = c == INFINITY, ninf = c == -INFINITY;
  bool special = nan || pinf || ninf;
  for (int64_t i = begin; i < end && !special; ++i)
    special = !std::isfinite(x.a[i * x.sa]) || !std::isfinite(x.b[i * x.sb]);
  if (!special) return false;
  for (int64_t i = begin; i < end; ++i) {
    const float a = x.a[i * x.sa], b = x.b[i * x.sb];
    if (std::isnan(a) || std::isnan(b)) {
      nan = true;
    } else if (std::isinf(a) || std::isinf(b)) {
      if (a == 0 || b == 0) nan = true;
      else (std::signbit(a) != std::signbit(b) ? ninf : pinf) = true;
    }
  }
  if (nan || (pinf && ninf)) {
    st |= kNanResult;
    out = std::numeric_limits<double>::quiet_NaN();
  } else {
    out = pinf ? INFINITY : -INFINITY;
  }
  return true;
}

double round_value(const Format& f, const QuantOptions& o, double x, uint32_t& st) {
  if (is_native(f, o, fp64_format())) return x;
  uint32_t s = 0;
  const double r = round_to(f, x, o, &s);
  st |= s;
  return r;
}

double round_sum(const Format& f, const QuantOptions& o, double x, double y, uint32_t& st) {
  const double s = x + y;
  if (is_native(f, o, fp64_format())) return s;
  if (!std::isfinite(s)) return round_value(f, o, s, st);
  const double bb = s - x;
  const double err = (x - (s - bb)) + (y - bb);
  if (err == 0) return round_value(f, o, s, st);
  Exact e;
  e.negative = s < 0;
  split(s, e.sig, e.exp);
  if ((err < 0) != (s < 0)) e.sig -= 1;  // the exact magnitude lies just below |s|
  e.sticky = true;
  const Rounded r = round_exact(f, e, o, 0);
  st |= r.status;
  return decode(f, r.code);
}

AccumEngine::AccumEngine(const AccumModel& m, const Format& a_fmt, const Format& b_fmt, const Format& out_fmt)
    : m_(m), a_fmt_(a_fmt), b_fmt_(b_fmt), out_fmt_(out_fmt), block_out_(m.acc), fp32_(fp32_format()) {
  acc_opts_.rounding = m.rounding;
  native32_ = is_native(m.acc, acc_opts_, fp32_format());
  native64_ = is_native(m.acc, acc_opts_, fp64_format());
  block_out_.man_bits = m.block.out_frac_bits;
  if (block_out_.man_bits != m.acc.man_bits) block_out_.name = m.acc.name + "-ofb" + std::to_string(block_out_.man_bits);
  block_opts_.rounding = m.block.final_rounding;
  block_opts_.flush_subnormals = !m.block.out_subnormals;
  promote_opts_.rounding = m.promote_rounding;
  if (m.kind == AccumKind::kBlockFma || m.kind == AccumKind::kExactBlocks || m.kind == AccumKind::kFtzPairs ||
      m.kind == AccumKind::kTwoStage) {
    for (const Format* f : {&a_fmt_, &b_fmt_}) {
      if (f->kind != FormatKind::kFloat || f->man_bits > 23 || f->emin() < -126 || f->emax() > 127)
        throw std::invalid_argument("block-FMA model: operand format '" + f->name +
                                    "' must be a floating-point format that fits fp32 (the Tensor Core inputs)");
    }
    if (m.acc.emin() < -126 || m.acc.emax() > 127)
      throw std::invalid_argument("block-FMA model: output format '" + m.acc.name + "' must fit fp32");
    if (m.block.in_instruction_scales) check_block_scaled_operands(m, a_fmt_, b_fmt_);
  }
  scale_fmt_ = format_by_name(m.block.scale_ue4m3 ? "e4m3" : "e8m0");
  c_in_ = m.c_input.empty() ? m.acc : format_by_name(m.c_input);
  if (m.kind == AccumKind::kUnordered)
    throw std::invalid_argument("the unordered model has no defined summation order; use it in gemm only");
}

// cuBLASLt's FP8 split-K as mmaemu 0.1.0 models it (model/plan.py): K cut into k-tiles, each split
// a run of tiles (contiguous, 128 wide) or every S-th tile (serial, pairwise, 64 wide), its own
// chain from zero (c enters the first split); the partials added in the combine format.
double AccumEngine::tiled_split(const DotOperands& x, double c, uint32_t& st) const {
  const int64_t S = m_.split_k;
  const bool runs = m_.split_k_scheme == SplitKScheme::kContiguous;
  const int64_t tile = runs ? 128 : 64, tiles = (x.k + tile - 1) / tile, q = (tiles + S - 1) / S;
  std::vector<double> p(static_cast<size_t>(S));
  std::vector<float> ga, gb;
  for (int64_t s = 0; s < S; ++s) {
    ga.clear();
    gb.clear();
    for (int64_t t = runs ? s * q : s; t < (runs ? std::min(tiles, (s + 1) * q) : tiles); t += runs ? 1 : S) {
      for (int64_t i = t * tile; i < std::min(x.k, (t + 1) * tile); ++i) {
        ga.push_back(x.a[i * x.sa]);
        gb.push_back(x.b[i * x.sb]);
      }
    }
    p[s] = dot_slice({ga.data(), 1, gb.data(), 1, static_cast<int64_t>(ga.size())}, s == 0 ? c : 0.0, st);
  }
  const Format& cf = m_.kind == AccumKind::kBlockFma ? fp32_ : m_.acc;
  QuantOptions co;
  co.rounding = m_.kind == AccumKind::kBlockFma ? Rounding::kNearestEven : m_.rounding;
  if (m_.split_k_scheme != SplitKScheme::kPairwise) {
    double r = p[0];
    for (int64_t s = 1; s < S; ++s) r = round_sum(cf, co, r, p[s], st);
    return r;
  }
  const int64_t h = (S + 1) / 2;
  double r = p[S - 1];
  for (int64_t i = 0; i < h; ++i)
    r = round_sum(cf, co, r, i + h < S - 1 ? round_sum(cf, co, p[i], p[i + h], st) : p[i], st);
  return r;
}

double AccumEngine::dot(const DotOperands& x, double c, uint32_t& st) const {
  if (m_.split_k <= 1 || x.k == 0) return dot_slice(x, c, st);
  if (m_.split_k_scheme == SplitKScheme::kContiguous || m_.split_k_scheme == SplitKScheme::kSerial ||
      m_.split_k_scheme == SplitKScheme::kPairwise)
    return tiled_split(x, c, st);
  int64_t len = (x.k + m_.split_k - 1) / m_.split_k;
  // Slices hold whole blocks (and whole promotion intervals), as a tiled kernel cuts K.
  int64_t grain = m_.kind == AccumKind::kBlockFma ? m_.block.block_size : 1;
  if (m_.promote_every > 0) grain = m_.promote_every;
  len = (len + grain - 1) / grain * grain;
  const bool in_output = m_.split_k_scheme != SplitKScheme::kComputeType;
  const Format& cf = in_output ? out_fmt_ : (m_.kind == AccumKind::kBlockFma ? fp32_ : m_.acc);
  QuantOptions co;
  co.rounding = Rounding::kNearestEven;
  if (!in_output && m_.kind != AccumKind::kBlockFma) co.rounding = m_.rounding;
  double r = 0;
  for (int64_t s = 0; s * len < x.k; ++s) {
    const int64_t b = s * len, e = std::min(x.k, b + len);
    const DotOperands part{x.a + b * x.sa, x.sa, x.b + b * x.sb, x.sb, e - b};
    double p = dot_slice(part, s == 0 ? c : 0.0, st);
    if (in_output) p = round_value(cf, co, p, st);
    r = s == 0 ? p : round_sum(cf, co, r, p, st);
  }
  return r;
}

double AccumEngine::dot_slice(const DotOperands& x, double c, uint32_t& st) const {
  switch (m_.kind) {
    case AccumKind::kSequential: return sequential(x, c, st);
    case AccumKind::kPairwise: return pairwise(x, c, st);
    case AccumKind::kKahan: return kahan(x, c, st);
    case AccumKind::kExact: return exact(x, c, st);
    case AccumKind::kBlockFma: return m_.block.in_instruction_scales ? scaled_dot(x, DotScales{}, c, st)
                                                                      : block_chain(x, c, st);
    case AccumKind::kExactBlocks: return exact_blocks(x, c, st);
    case AccumKind::kFtzPairs: return ftz_pairs(x, c, st);
    case AccumKind::kTwoStage: return two_stage(x, c, st);
    case AccumKind::kUnordered: break;
  }
  throw std::logic_error("unreachable accumulation kind");
}

double AccumEngine::sequential(const DotOperands& x, double c, uint32_t& st) const {
  if (native32_) {
    float s = static_cast<float>(c);
    if (m_.fma) {
      for (int64_t i = 0; i < x.k; ++i) s = std::fma(x.a[i * x.sa], x.b[i * x.sb], s);
    } else {
      for (int64_t i = 0; i < x.k; ++i) s = s + x.a[i * x.sa] * x.b[i * x.sb];
    }
    return s;
  }
  if (native64_) {  // float products are exact in double, so fma changes nothing
    double s = c;
    for (int64_t i = 0; i < x.k; ++i) s += static_cast<double>(x.a[i * x.sa]) * x.b[i * x.sb];
    return s;
  }
  double s = c;
  for (int64_t i = 0; i < x.k; ++i) {
    const double p = static_cast<double>(x.a[i * x.sa]) * x.b[i * x.sb];  // exact
    s = round_sum(m_.acc, acc_opts_, s, m_.fma ? p : round_value(m_.acc, acc_opts_, p, st), st);
  }
  return s;
}

double AccumEngine::pairwise(const DotOperands& x, double c, uint32_t& st) const {
  if (x.k == 0) return c;
  std::vector<double> p(x.k);
  for (int64_t i = 0; i < x.k; ++i)
    p[i] = round_value(m_.acc, acc_opts_, static_cast<double>(x.a[i * x.sa]) * x.b[i * x.sb], st);
  // Bottom-up over a tree that splits each range at its floor half, left before right.
  auto tree = [&](auto&& self, int64_t lo, int64_t hi) -> double {
    if (hi - lo == 1) return p[lo];
    const int64_t mid = lo + (hi - lo) / 2;
    const double l = self(self, lo, mid);
    const double r = self(self, mid, hi);
    return round_sum(m_.acc, acc_opts_, l, r, st);
  };
  return round_sum(m_.acc, acc_opts_, c, tree(tree, 0, x.k), st);
}

double AccumEngine::kahan(const DotOperands& x, double c, uint32_t& st) const {
  double s = c, comp = 0;
  const Format& f = m_.acc;
  for (int64_t i = 0; i < x.k; ++i) {
    const double p = round_value(f, acc_opts_, static_cast<double>(x.a[i * x.sa]) * x.b[i * x.sb], st);
    const double y = round_sum(f, acc_opts_, p, -comp, st);
    const double t = round_sum(f, acc_opts_, s, y, st);
    comp = round_sum(f, acc_opts_, round_sum(f, acc_opts_, t, -s, st), -y, st);
    s = t;
  }
  return s;
}

double AccumEngine::exact(const DotOperands& x, double c, uint32_t& st) const {
  LongAccumulator acc;
  acc.add(c);
  for (int64_t i = 0; i < x.k; ++i) acc.add_product(x.a[i * x.sa], x.b[i * x.sb]);
  const Rounded r = acc.round(m_.acc, acc_opts_);
  st |= r.status;
  return decode(m_.acc, r.code);
}

double AccumEngine::block_chain(const DotOperands& x, double c, uint32_t& st) const {
  const int64_t n = m_.block.block_size;
  const int64_t nc = m_.promote_every;
  if (nc <= 0) {
    double d = c;
    for (int64_t b = 0; b < x.k; b += n) d = block(x, b, std::min(x.k, b + n), d, st, b == 0);
    return d;
  }
  // Promotion: the inner accumulator restarts from zero every nc products; its result is added
  // to the FP32 outer accumulator by a CUDA-core add.
  double outer = c;
  for (int64_t g = 0; g < x.k; g += nc) {
    const int64_t ge = std::min(x.k, g + nc);
    double d = 0;
    for (int64_t b = g; b < ge; b += n) d = block(x, b, std::min(ge, b + n), d, st);
    outer = round_sum(fp32_, promote_opts_, outer, d, st);
  }
  return outer;
}

// One block FMA (reference section 2.1): products exact and unnormalised, aligned to the largest
// exponent (c included), each truncated to F fraction bits, summed exactly, rounded once.
double AccumEngine::block(const DotOperands& x, int64_t begin, int64_t end, double c, uint32_t& st, bool first) const {
  const BlockFmaParams& bp = m_.block;
  if (double r; special_block(x, begin, end, c, r, st)) return r;
  BlockTerm terms[4097];
  int nt = 0;
  const int fp = a_fmt_.man_bits + b_fmt_.man_bits;
  for (int64_t i = begin; i < end; ++i) {
    const float a = x.a[i * x.sa], b = x.b[i * x.sb];
    uint64_t ma, mb;
    int ea, eb;
    if (!decompose(a, a_fmt_, bp.in_subnormals, ma, ea) || !decompose(b, b_fmt_, bp.in_subnormals, mb, eb)) continue;
    BlockTerm t{ma * mb, ea + eb, fp, std::signbit(a) != std::signbit(b)};
    if (bp.normalize_products) t.exp = (63 - std::countl_zero(t.sig)) - fp + t.exp;
    terms[nt++] = t;
  }
  {
    uint64_t mc;
    int ec;
    const Format& cf = first ? c_in_ : m_.acc;
    if (decompose(static_cast<float>(c), cf, true, mc, ec)) terms[nt++] = BlockTerm{mc, ec, cf.man_bits, c < 0};
  }
  return fused_sum(terms, nt, st);
}

double AccumEngine::fused_sum(const BlockTerm* terms, int nt, uint32_t& st) const {
  const BlockFmaParams& bp = m_.block;
  if (nt == 0) return 0.0;
  int E = bp.align_exp_floor;
  for (int i = 0; i < nt; ++i) E = std::max(E, terms[i].exp);
  const int F = bp.frac_bits;
  __int128 S = 0;
  for (int i = 0; i < nt; ++i) {
    const int sh = F + terms[i].exp - E - terms[i].frac;
    uint64_t t;
    if (sh >= 0) t = terms[i].sig << sh;
    else t = -sh >= 64 ? 0 : terms[i].sig >> -sh;
    S += terms[i].neg ? -static_cast<__int128>(t) : static_cast<__int128>(t);
  }
  if (S == 0) return 0.0;
  Exact e;
  e.negative = S < 0;
  const unsigned __int128 mag = static_cast<unsigned __int128>(e.negative ? -S : S);
  e.sig = static_cast<uint64_t>(mag);  // |S| < 2^(F + 2 + log2 n) < 2^63
  e.exp = E - F;
  const Rounded r = round_exact(block_out_, e, block_opts_, 0);
  st |= r.status;
  return decode(block_out_, r.code);
}

}  // namespace detail

double accum_dot(const AccumModel& model, std::span<const float> a, std::span<const float> b, double c,
                 const Format& a_fmt, const Format& b_fmt, uint32_t* status, const Format* out_fmt) {
  if (a.size() != b.size())
    throw std::invalid_argument("dot: a has " + std::to_string(a.size()) + " elements but b has " +
                                std::to_string(b.size()));
  const AccumModel m = for_operands(model, a_fmt, b_fmt);
  const detail::AccumEngine eng(m, a_fmt, b_fmt, out_fmt ? *out_fmt : m.acc);
  uint32_t st = 0;
  const double r = eng.dot({a.data(), 1, b.data(), 1, static_cast<int64_t>(a.size())}, c, st);
  if (status) *status |= st;
  return r;
}

}  // namespace precsim
