// Block quantization of 2-D float32 arrays: block amax, scale per block, elements through the
// format library's array API, dequantization with the block's decode scale.
//
// Pass 1 finds each block's largest finite magnitude. Pass 2, over fixed chunks, scales
// the elements into a temporary (x * encode scale, in FP32 as hardware does), rounds the whole
// chunk with quantize()/encode_array() (so every rounding mode, stochastic included, comes from
// the one rounding routine; element i draws SR bits at its row-major index), and multiplies back
// by the decode scale, in double and rounded once to float.
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <cstring>
#include <string>

#include "block_kernel.h"
#include "block_plan.h"
#include "precsim/formats/hadamard.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

// Pass 2 works on fixed chunks of the flattened array, one parallel loop over chunks; inside,
// quantize() runs in a nested (so single-threaded) region. The chunk fits in L2 with its two
// temporaries, and the partition never depends on the thread count.
constexpr size_t kChunk = size_t{1} << 14;

// Calls fn(i, c0, c1, b) for each run of flat indices [i, i + c1 - c0) in [i0, i1) that lies in
// one row and one block column b (columns c0..c1 of that row).
template <typename Fn>
inline void for_runs(const BlockPlan& p, size_t i0, size_t i1, Fn&& fn) {
  const size_t cols = p.cols;
  for (size_t i = i0; i < i1;) {
    const size_t r = i / cols, c0 = i - r * cols;
    const size_t b = c0 / p.bc;
    const size_t c1 = std::min({cols, (b + 1) * p.bc, c0 + (i1 - i)});
    fn(i, r, c0, c1, b);
    i += c1 - c0;
  }
}

// Calls fn(i, r, c0, c1) for the part [i, i + c1 - c0) of [i0, i1) in row r (columns c0..c1).
template <typename Fn>
inline void for_row_runs(const BlockPlan& p, size_t i0, size_t i1, Fn&& fn) {
  for (size_t i = i0; i < i1;) {
    const size_t r = i / p.cols, c0 = i - r * p.cols, c1 = std::min(p.cols, c0 + (i1 - i));
    fn(i, r, c0, c1);
    i += c1 - c0;
  }
}

// x * encode scale for flat indices [i0, i1) into scaled[0 ..).
void scale_chunk(const BlockPlan& p, const float* in, float* scaled, size_t i0, size_t i1) {
  const float f = p.elem_factor;
  if (p.bc == 1) {  // a block per column: the scales of a row are a contiguous array
    for_row_runs(p, i0, i1, [&](size_t i, size_t r, size_t c0, size_t c1) {
      const float* e = p.enc.data() + p.row_offset(r);
      for (size_t c = c0; c < c1; ++c) scaled[i - i0 + c - c0] = (in[i + c - c0] * e[c]) * f;
    });
    return;
  }
  for_runs(p, i0, i1, [&](size_t i, size_t r, size_t c0, size_t c1, size_t b) {
    const float e = p.enc[p.row_offset(r) + b];
    const float* x = in + i;
    float* y = scaled + (i - i0);
    for (size_t k = 0; k < c1 - c0; ++k) y[k] = (x[k] * e) * f;
  });
}

// q * decode scale, in double and rounded once. A NaN block's decode scale is NaN and an
// underflowed NVFP4 scale 0, so no element needs a special case.
void dequantize_chunk(const BlockPlan& p, const float* q, float* v, size_t i0, size_t i1) {
  if (p.bc == 1) {
    for_row_runs(p, i0, i1, [&](size_t i, size_t r, size_t c0, size_t c1) {
      const double* d = p.dec.data() + p.row_offset(r);
      for (size_t c = c0; c < c1; ++c)
        v[i - i0 + c - c0] = static_cast<float>(static_cast<double>(q[i - i0 + c - c0]) * d[c]);
    });
    return;
  }
  for_runs(p, i0, i1, [&](size_t i, size_t r, size_t c0, size_t c1, size_t b) {
    const double d = p.dec[p.row_offset(r) + b];
    const float* qq = q + (i - i0);
    float* o = v + (i - i0);
    for (size_t k = 0; k < c1 - c0; ++k) o[k] = static_cast<float>(static_cast<double>(qq[k]) * d);
  });
}

struct PassCounts {
  uint64_t saturated = 0, flushed = 0, nonfinite = 0;
};

// Pass 2 of fake quantization. With `count`: saturated (|scaled| > largest element), flushed
// (finite non-zero in, zero out) and non-finite inputs. `out` may alias `in`: each chunk is
// finished in a buffer before it is stored.
PassCounts fake_quantize_pass(const BlockScaling& s, const BlockPlan& p, const float* in, float* out,
                              uint64_t index_base, bool count) {
  const size_t n = p.rows * p.cols;
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  const double elem_max = p.elem_max;
  uint64_t sat = 0, fl = 0, nf = 0;
#pragma omp parallel if (chunks > 1) reduction(+ : sat, fl, nf)
  {
    std::vector<float> scaled(std::min(n, kChunk)), q(scaled.size());
#pragma omp for schedule(static)
    for (int64_t k = 0; k < chunks; ++k) {
      const size_t i0 = static_cast<size_t>(k) * kChunk, i1 = std::min(n, i0 + kChunk), m = i1 - i0;
      scale_chunk(p, in, scaled.data(), i0, i1);
      quantize(s.element, std::span<const float>(scaled.data(), m), std::span<float>(q.data(), m),
               s.element_options, nullptr, index_base + i0);
      if (!count) {  // scaled already holds what the chunk needs of `in`
        dequantize_chunk(p, q.data(), out + i0, i0, i1);
        continue;
      }
      dequantize_chunk(p, q.data(), q.data(), i0, i1);
      if (count)
        for (size_t j = 0; j < m; ++j) {
          const float x = in[i0 + j];
          const bool finite = std::isfinite(x);
          nf += !finite;
          fl += finite && x != 0 && q[j] == 0;
          sat += std::fabs(static_cast<double>(scaled[j])) > elem_max;
        }
      std::copy_n(q.data(), m, out + i0);
    }
  }
  return {sat, fl, nf};
}

void check_shape(std::span<const float> in, size_t rows, size_t cols) {
  if (in.size() != rows * cols)
    throw std::invalid_argument("block quantize: " + std::to_string(in.size()) + " elements do not form a " +
                                std::to_string(rows) + "x" + std::to_string(cols) + " array");
}

void finish_stats(const BlockPlan& p, const PassCounts& c, BlockStats* stats) {
  if (!stats) return;
  BlockStats s = p.block_stats();
  s.elements = p.rows * p.cols;
  s.saturated = c.saturated;
  s.flushed = c.flushed;
  s.nonfinite_inputs = c.nonfinite;
  *stats += s;
}

void check_out(std::span<const float> in, std::span<float> out) {
  if (out.size() != in.size())
    throw std::invalid_argument("block quantize: output has " + std::to_string(out.size()) +
                                " elements, input " + std::to_string(in.size()));
}

}  // namespace

void block_fake_quantize(const BlockScaling& s, std::span<const float> in, std::span<float> out,
                         size_t rows, size_t cols, BlockStats* stats, uint64_t index_base,
                         double tensor_amax) {
  check_shape(in, rows, cols);
  check_out(in, out);
  if (fused_fake_quantize(s, in.data(), out.data(), rows, cols, stats, index_base, tensor_amax, -1)) return;
  block_fake_quantize_reference(s, in, out, rows, cols, stats, index_base, tensor_amax);
}

void rht_block_fake_quantize(const BlockScaling& s, std::span<const double> signs, std::span<const float> in,
                             std::span<float> out, size_t rows, size_t cols, BlockStats* stats, uint64_t index_base) {
  check_shape(in, rows, cols);
  check_out(in, out);
  check_hadamard_size(static_cast<int>(signs.size()));
  if (signs.size() == 16 && fused_rht_fake_quantize(s, signs.data(), in.data(), out.data(), rows, cols, stats, index_base))
    return;
  random_hadamard_transform(in, out, rows, cols, s.axis, signs);
  block_fake_quantize(s, out, out, rows, cols, stats, index_base);
}

void block_fake_quantize_reference(const BlockScaling& s, std::span<const float> in, std::span<float> out,
                                   size_t rows, size_t cols, BlockStats* stats, uint64_t index_base,
                                   double tensor_amax) {
  check_shape(in, rows, cols);
  check_out(in, out);
  const BlockPlan p = make_block_plan(s, in.data(), rows, cols, tensor_amax, -1, index_base);
  const PassCounts total = fake_quantize_pass(s, p, in.data(), out.data(), index_base, stats != nullptr);
  finish_stats(p, total, stats);
}

void fake_quantize_with_scale(const BlockScaling& s, float encode_scale, std::span<const float> in,
                              std::span<float> out, BlockStats* stats, uint64_t index_base) {
  if (s.rule != ScaleRule::kAmax || s.block_along != 0 || s.block_across != 0)
    throw std::invalid_argument("fake_quantize_with_scale: scheme '" + s.name +
                                "' is not a per-tensor FP8 recipe (<format>:tensor)");
  if (out.size() != in.size())
    throw std::invalid_argument("fake_quantize_with_scale: output size differs from input size");
  if (fused_fake_quantize(s, in.data(), out.data(), 1, in.size(), stats, index_base, -1, encode_scale)) return;
  const BlockPlan p = make_block_plan(s, in.data(), 1, in.size(), -1, encode_scale);
  const PassCounts c = fake_quantize_pass(s, p, in.data(), out.data(), index_base, stats != nullptr);
  finish_stats(p, c, stats);
}

namespace {

// Row-major codes (code_bytes each) into the stored layout: rows along the block axis, FP4 two per
// byte.
void store_codes(const BlockScaling& s, std::vector<uint8_t>&& codes, BlockPacked& out) {
  const Format& f = s.element;
  const size_t w = code_bytes(f), rows = out.rows, cols = out.cols;
  // Stored layout: rows along the block axis.
  const size_t srows = s.axis == 1 ? rows : cols, scols = s.axis == 1 ? cols : rows;
  std::vector<uint8_t> stored;
  if (s.axis == 1) {
    stored = std::move(codes);
  } else {
    stored.resize(codes.size());
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        std::copy_n(codes.data() + (r * cols + c) * w, w, stored.data() + (c * rows + r) * w);
  }
  if (f.bits() <= 4) {
    out.code_row_bytes = (scols + 1) / 2;
    out.codes.resize(srows * out.code_row_bytes);
    for (size_t r = 0; r < srows; ++r)
      pack_nibble_run(stored.data() + r * scols, scols, out.codes.data() + r * out.code_row_bytes);
  } else {
    out.code_row_bytes = scols * w;
    out.codes = std::move(stored);
  }
}

}  // namespace

BlockPacked block_quantize(const BlockScaling& s, std::span<const float> in, size_t rows, size_t cols,
                           BlockStats* stats, uint64_t index_base, double tensor_amax) {
  check_shape(in, rows, cols);
  BlockPacked out;
  out.rows = rows, out.cols = cols, out.axis = s.axis;
  std::vector<uint8_t> codes;
  if (!fused_block_codes(s, in.data(), rows, cols, index_base, tensor_amax, codes, out))
    return block_quantize_reference(s, in, rows, cols, stats, index_base, tensor_amax);
  if (stats) {  // the counts of the fake-quant path
    std::vector<float> fq(in.size());
    block_fake_quantize(s, in, fq, rows, cols, stats, index_base, tensor_amax);
  }
  if (!codes.empty()) store_codes(s, std::move(codes), out);  // else packed in place
  return out;
}

BlockPacked block_quantize_reference(const BlockScaling& s, std::span<const float> in, size_t rows, size_t cols,
                                     BlockStats* stats, uint64_t index_base, double tensor_amax) {
  check_shape(in, rows, cols);
  const BlockPlan p = make_block_plan(s, in.data(), rows, cols, tensor_amax, -1, index_base);
  BlockPacked out;
  out.rows = rows, out.cols = cols, out.axis = s.axis;
  out.tensor_scale = p.tensor_dec;
  const Format& f = s.element;
  const size_t w = code_bytes(f);
  // Codes in the array's row-major order first.
  std::vector<uint8_t> codes(rows * cols * w);
  const size_t n = rows * cols;
  std::vector<float> scaled(n);
  scale_chunk(p, in.data(), scaled.data(), 0, n);
  encode_array(f, std::span<const float>(scaled), codes.data(), s.element_options, nullptr, index_base);
  if (stats) {
    // The counts come from the same arithmetic as the fake-quant path.
    std::vector<float> fq(in.size());
    block_fake_quantize_reference(s, in, fq, rows, cols, stats, index_base, tensor_amax);
  }
  // NaN blocks: the scale carries the NaN; their element codes are zero.
  const uint64_t zero = 0;
  for (size_t r = 0; r < rows; ++r) {
    const BlockScale* b = p.row_blocks(r);
    for (size_t c = 0; c < cols; ++c)
      if (b[c / p.bc].nan_block) std::copy_n(reinterpret_cast<const uint8_t*>(&zero), w, codes.data() + (r * cols + c) * w);
  }
  store_codes(s, std::move(codes), out);
  p.pack_scales(out);
  return out;
}

double block_scale_value(const BlockScaling& s, const BlockPacked& p, size_t index) {
  switch (s.scale_format) {
    case ScaleFormat::kNone: return 1.0;
    case ScaleFormat::kE8M0:
      return p.scales[index] == 0xff ? NAN : std::ldexp(1.0, int{p.scales[index]} - 127);
    case ScaleFormat::kE4M3:
      return decode(format_by_name("float8_e4m3fn"), p.scales[index]) * static_cast<double>(p.tensor_scale);
    case ScaleFormat::kFp32:
    case ScaleFormat::kPow2Fp32: {
      float v;
      std::memcpy(&v, p.scales.data() + 4 * index, 4);
      return v;
    }
  }
  return NAN;
}

void block_dequantize(const BlockScaling& s, const BlockPacked& p, std::span<float> out) {
  const size_t rows = p.rows, cols = p.cols;
  if (out.size() != rows * cols)
    throw std::invalid_argument("block_dequantize: output has " + std::to_string(out.size()) +
                                " elements, the packed array " + std::to_string(rows * cols));
  const Format& f = s.element;
  const size_t w = code_bytes(f);
  const size_t srows = s.axis == 1 ? rows : cols, scols = s.axis == 1 ? cols : rows;
  const BlockGeometry g = block_geometry(s, rows, cols);
  // Scale index of element (r, c) in block order (rows across the axis, columns along it).
  auto scale_index = [&](size_t r, size_t c) {
    return s.axis == 1 ? (r / g.br) * g.nbc + c / g.bc : (c / g.bc) * g.nbr + r / g.br;
  };
  std::vector<double> scale_values(p.scale_rows * p.scale_cols);
  for (size_t i = 0; i < scale_values.size(); ++i) scale_values[i] = block_scale_value(s, p, i);
  const double elem_unit = std::ldexp(1.0, s.element_exp());
  std::vector<uint8_t> row_codes(scols * w);
  for (size_t sr = 0; sr < srows; ++sr) {
    if (f.bits() <= 4) unpack_nibbles(std::span<const uint8_t>(p.codes.data() + sr * p.code_row_bytes, p.code_row_bytes), row_codes);
    else std::copy_n(p.codes.data() + sr * p.code_row_bytes, scols * w, row_codes.data());
    for (size_t sc = 0; sc < scols; ++sc) {
      uint64_t code = 0;
      for (size_t b = 0; b < w; ++b) code |= uint64_t{row_codes[sc * w + b]} << (8 * b);
      const size_t r = s.axis == 1 ? sr : sc, c = s.axis == 1 ? sc : sr;
      const double q = decode(f, code) * elem_unit;
      const double dec = s.is_plain() ? 1.0 : scale_values[scale_index(r, c)];
      out[r * cols + c] = dec == 0 ? static_cast<float>(std::copysign(0.0, q)) : static_cast<float>(q * dec);
    }
  }
}

}  // namespace precsim
