// Block quantization of 2-D float32 arrays: block amax, scale per block, elements through the
// format library's array API, dequantization with the block's decode scale.
//
// Pass 1 finds each block's largest finite magnitude. Pass 2, over fixed row chunks, scales
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

#include "block_plan.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

constexpr size_t kChunkElems = size_t{1} << 20;
constexpr size_t kParallelMin = size_t{1} << 15;

size_t chunk_rows(size_t cols) { return std::max<size_t>(1, kChunkElems / std::max<size_t>(1, cols)); }

// x * encode scale into `scaled`, for rows [r0, r1).
void scale_rows(const BlockPlan& p, const float* in, float* scaled, size_t r0, size_t r1) {
  const size_t cols = p.cols;
  // Threads only pay off on large chunks (a parallel region costs microseconds, far more on a
  // loaded machine).
#pragma omp parallel for schedule(static) if ((r1 - r0) * cols >= kParallelMin)
  for (int64_t r = static_cast<int64_t>(r0); r < static_cast<int64_t>(r1); ++r) {
    const float* x = in + r * cols;
    float* y = scaled + (r - r0) * cols;
    const BlockScale* b = p.row_blocks(static_cast<size_t>(r));
    if (p.bc >= cols) {
      const float e = b[0].enc, f = p.elem_factor;
      for (size_t c = 0; c < cols; ++c) y[c] = (x[c] * e) * f;
    } else {
      for (size_t c = 0; c < cols; ++c) y[c] = (x[c] * b[p.col_block[c]].enc) * p.elem_factor;
    }
  }
}

struct PassCounts {
  uint64_t saturated = 0, flushed = 0, nonfinite = 0;
};

// out = q * decode scale for rows [r0, r1); `q` holds the rounded scaled values.
PassCounts dequantize_rows(const BlockPlan& p, const float* in, const float* scaled, const float* q,
                           float* out, size_t r0, size_t r1, bool count) {
  const size_t cols = p.cols;
  const double elem_max = p.elem_max;
  uint64_t sat = 0, fl = 0, nf = 0;
#pragma omp parallel for schedule(static) reduction(+ : sat, fl, nf) if ((r1 - r0) * cols >= kParallelMin)
  for (int64_t r = static_cast<int64_t>(r0); r < static_cast<int64_t>(r1); ++r) {
    const size_t off = (r - r0) * cols;
    const BlockScale* b = p.row_blocks(static_cast<size_t>(r));
    for (size_t c = 0; c < cols; ++c) {
      const BlockScale& s = b[p.bc >= cols ? 0 : p.col_block[c]];
      const float x = in ? in[r * cols + c] : 0.0f;
      float v;
      if (s.nan_block) v = NAN;
      else if (s.zero_scale) v = std::copysign(0.0f, q[off + c]);
      else v = static_cast<float>(static_cast<double>(q[off + c]) * s.dec);
      if (count) {
        if (!std::isfinite(x)) ++nf;
        else {
          if (x != 0 && v == 0) ++fl;
          if (!s.nan_block && std::fabs(static_cast<double>(scaled[off + c])) > elem_max) ++sat;
        }
      }
      out[r * cols + c] = v;
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

}  // namespace

void block_fake_quantize(const BlockScaling& s, std::span<const float> in, std::span<float> out,
                         size_t rows, size_t cols, BlockStats* stats, uint64_t index_base,
                         double tensor_amax) {
  check_shape(in, rows, cols);
  if (out.size() != in.size())
    throw std::invalid_argument("block quantize: output has " + std::to_string(out.size()) +
                                " elements, input " + std::to_string(in.size()));
  const BlockPlan p = make_block_plan(s, in.data(), rows, cols, tensor_amax, -1);
  const size_t cr = chunk_rows(cols);
  std::vector<float> scaled(std::min(rows, cr) * cols), q(scaled.size());
  PassCounts total;
  for (size_t r0 = 0; r0 < rows; r0 += cr) {
    const size_t r1 = std::min(rows, r0 + cr), n = (r1 - r0) * cols;
    scale_rows(p, in.data(), scaled.data(), r0, r1);
    quantize(s.element, std::span<const float>(scaled.data(), n), std::span<float>(q.data(), n),
             s.element_options, nullptr, index_base + r0 * cols);
    const PassCounts c = dequantize_rows(p, in.data(), scaled.data(), q.data(), out.data(), r0, r1, stats != nullptr);
    total.saturated += c.saturated, total.flushed += c.flushed, total.nonfinite += c.nonfinite;
  }
  finish_stats(p, total, stats);
}

void fake_quantize_with_scale(const BlockScaling& s, float encode_scale, std::span<const float> in,
                              std::span<float> out, BlockStats* stats, uint64_t index_base) {
  if (s.rule != ScaleRule::kAmax || s.block_along != 0 || s.block_across != 0)
    throw std::invalid_argument("fake_quantize_with_scale: scheme '" + s.name +
                                "' is not a per-tensor FP8 recipe (<format>:tensor)");
  if (out.size() != in.size())
    throw std::invalid_argument("fake_quantize_with_scale: output size differs from input size");
  const BlockPlan p = make_block_plan(s, in.data(), 1, in.size(), -1, encode_scale);
  const size_t n = in.size();
  std::vector<float> scaled(n), q(n);
  scale_rows(p, in.data(), scaled.data(), 0, 1);
  quantize(s.element, std::span<const float>(scaled), std::span<float>(q), s.element_options, nullptr, index_base);
  const PassCounts c = dequantize_rows(p, in.data(), scaled.data(), q.data(), out.data(), 0, 1, stats != nullptr);
  finish_stats(p, c, stats);
}

BlockPacked block_quantize(const BlockScaling& s, std::span<const float> in, size_t rows, size_t cols,
                           BlockStats* stats, uint64_t index_base, double tensor_amax) {
  check_shape(in, rows, cols);
  const BlockPlan p = make_block_plan(s, in.data(), rows, cols, tensor_amax, -1);
  BlockPacked out;
  out.rows = rows, out.cols = cols, out.axis = s.axis;
  out.tensor_scale = p.tensor_dec;
  const Format& f = s.element;
  const size_t w = code_bytes(f);
  // Codes in the array's row-major order first.
  std::vector<uint8_t> codes(rows * cols * w);
  const size_t cr = chunk_rows(cols);
  std::vector<float> scaled(std::min(rows, cr) * cols);
  for (size_t r0 = 0; r0 < rows; r0 += cr) {
    const size_t r1 = std::min(rows, r0 + cr), n = (r1 - r0) * cols;
    scale_rows(p, in.data(), scaled.data(), r0, r1);
    encode_array(f, std::span<const float>(scaled.data(), n), codes.data() + r0 * cols * w,
                 s.element_options, nullptr, index_base + r0 * cols);
  }
  if (stats) {
    // The counts come from the same arithmetic as the fake-quant path.
    std::vector<float> fq(in.size());
    block_fake_quantize(s, in, fq, rows, cols, stats, index_base, tensor_amax);
  }
  // NaN blocks: the scale carries the NaN; their element codes are zero.
  const uint64_t zero = 0;
  for (size_t r = 0; r < rows; ++r) {
    const BlockScale* b = p.row_blocks(r);
    for (size_t c = 0; c < cols; ++c)
      if (b[p.bc >= cols ? 0 : p.col_block[c]].nan_block)
        std::copy_n(reinterpret_cast<const uint8_t*>(&zero), w, codes.data() + (r * cols + c) * w);
  }
  // Stored layout: rows along the block axis.
  const size_t srows = s.axis == 1 ? rows : cols, scols = s.axis == 1 ? cols : rows;
  std::vector<uint8_t> stored(codes.size());
  if (s.axis == 1) stored = std::move(codes);
  else
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        std::copy_n(codes.data() + (r * cols + c) * w, w, stored.data() + (c * rows + r) * w);
  if (f.bits() <= 4) {
    out.code_row_bytes = (scols + 1) / 2;
    out.codes.resize(srows * out.code_row_bytes);
    for (size_t r = 0; r < srows; ++r)
      pack_nibbles(std::span<const uint8_t>(stored.data() + r * scols, scols),
                   std::span<uint8_t>(out.codes.data() + r * out.code_row_bytes, out.code_row_bytes));
  } else {
    out.code_row_bytes = scols * w;
    out.codes = std::move(stored);
  }
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
