// Private: one AccumModel prepared for fixed operand formats, summing strided dot products.
// gemm.cpp and accum_dot.cpp share it; nothing outside sim/src includes it.
#pragma once

#include <cstdint>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim::detail {

// Preset formats looked up once.
inline const Format& fp32_format() {
  static const Format f = format_by_name("fp32");
  return f;
}
inline const Format& fp64_format() {
  static const Format f = format_by_name("fp64");
  return f;
}

// Strided operands: a[i * sa], b[i * sb] for i < k.
struct DotOperands {
  const float* a;
  int64_t sa;
  const float* b;
  int64_t sb;
  int64_t k;
};

// The block scales of one dot product's operands: a[q] and b[q] scale products
// [q * block_k, (q + 1) * block_k); nullptr: every scale of that operand is 1.
struct DotScales {
  const float* a = nullptr;
  const float* b = nullptr;
  int64_t block_k = 1;
};

// One term of a block's fused sum: |value| = sig * 2^(exp - frac), aligned by exp.
struct BlockTerm {
  uint64_t sig;
  int exp;   // alignment exponent (products: unnormalised significand in [0, 4))
  int frac;  // fraction bits of sig
  bool neg;
};

class AccumEngine {
 public:
  // out_fmt: format split-K slices are combined in for the output/inplace schemes.
  AccumEngine(const AccumModel& m, const Format& a_fmt, const Format& b_fmt, const Format& out_fmt);
  // c + sum of products, summed as the model says (split-K included).
  double dot(const DotOperands& x, double c, uint32_t& status) const;
  // Whether the plain FP32 (or FP64) recursive sum in nearest-even applies, so a vectorised
  // kernel gives the same bits.
  bool native_f32() const { return native32_ && m_.kind == AccumKind::kSequential; }
  bool native_f64() const { return native64_ && m_.kind == AccumKind::kSequential; }
  // c + sum of products for a model with in-instruction scales (inscale=1): instructions of n
  // products chained in increasing k, each a block whose products (or groups) carry their
  // scales exactly (scaled_block.cpp).
  double scaled_dot(const DotOperands& x, const DotScales& s, double c, uint32_t& status) const;
  const AccumModel& model() const { return m_; }
  const Format& a_format() const { return a_fmt_; }
  const Format& b_format() const { return b_fmt_; }

 private:
  double dot_slice(const DotOperands& x, double c, uint32_t& st) const;
  double tiled_split(const DotOperands& x, double c, uint32_t& st) const;  // contiguous, serial, pairwise
  double sequential(const DotOperands& x, double c, uint32_t& st) const;
  double pairwise(const DotOperands& x, double c, uint32_t& st) const;
  double kahan(const DotOperands& x, double c, uint32_t& st) const;
  double exact(const DotOperands& x, double c, uint32_t& st) const;
  double block_chain(const DotOperands& x, double c, uint32_t& st) const;
  double exact_blocks(const DotOperands& x, double c, uint32_t& st) const;  // amd_dot.cpp
  double ftz_pairs(const DotOperands& x, double c, uint32_t& st) const;
  double two_stage(const DotOperands& x, double c, uint32_t& st) const;
  // first: c is the dot product's own C (read in c_in_), not a previous block's result.
  double block(const DotOperands& x, int64_t begin, int64_t end, double c, uint32_t& st, bool first = false) const;
  double scaled_block(const DotOperands& x, const DotScales& s, int64_t begin, int64_t end, double c,
                      uint32_t& st) const;
  // Terms aligned to the largest exponent (or the floor), each truncated to F fraction bits,
  // summed exactly and rounded once into the block's output format.
  double fused_sum(const BlockTerm* terms, int nt, uint32_t& st) const;

  AccumModel m_;
  Format a_fmt_, b_fmt_, out_fmt_, block_out_, fp32_, scale_fmt_, c_in_;
  QuantOptions acc_opts_, block_opts_, promote_opts_;
  bool native32_ = false, native64_ = false;
};

// The exact value of x + y rounded into f with o (x, y finite doubles; f has at most 50
// fraction bits, or is fp64 with nearest-even). TwoSum gives the error term exactly, and its
// sign places the exact sum strictly between s and its neighbour.
double round_sum(const Format& f, const QuantOptions& o, double x, double y, uint32_t& st);
double round_value(const Format& f, const QuantOptions& o, double x, uint32_t& st);

// A non-zero value x of format f as M * 2^(e - f.man_bits), M an integer and e the exponent of
// its binade clamped to f's smallest normal exponent (subnormals keep e_min), as the block-FMA
// model decomposes inputs. false: x counts as zero (or is a subnormal that is flushed).
bool decompose(float x, const Format& f, bool subnormals, uint64_t& M, int& e);
// Throws std::invalid_argument unless a_fmt and b_fmt are operand formats of the block-scaled
// instruction the model (inscale=1) stands for: fp8/fp6/fp4 (group 0), e2m1 (groups).
void check_block_scaled_operands(const AccumModel& m, const Format& a_fmt, const Format& b_fmt);
// The result of a block holding an Inf or NaN operand (or c), in `out`; false when every value
// is finite. NaN for NaN inputs, Inf times zero and Infs of both signs, else the Inf.
bool special_block(const DotOperands& x, int64_t begin, int64_t end, double c, double& out, uint32_t& st);

}  // namespace precsim::detail
