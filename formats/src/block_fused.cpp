// The fast path of block fake quantization: arrays cut into tiles of whole blocks that fit in
// L1/L2, and per tile the block maxima, the scales and the element pass (block_fused_kernel.cpp),
// so the input is read from memory once. Blocks too large for a tile (per-tensor scaling, a row
// or column longer than kMaxFusedBlock) take the maxima over the whole array first; NVFP4 reads
// the tensor amax first unless it is given. Tiles never depend on the thread count, and maxima
// and counts are exact, so results are the same on any number of threads.
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "block_kernel.h"
#include "block_plan.h"
#include "hadamard_kernel.h"
#include "precsim/formats/quantize.h"
#include "precsim/formats/rounding.h"
#include "precsim/formats/sr_bits.h"

namespace precsim {
namespace {

constexpr size_t kTile = size_t{1} << 13;           // elements per tile: 32 KB of input
constexpr size_t kMaxFusedBlock = size_t{1} << 16;  // larger blocks take a separate maxima pass
constexpr uint32_t kInfBits = 0x7f800000u;

struct Tile {
  size_t r0, r1, c0, c1;
};

// Tiles of whole blocks: along a row for 1-row blocks (several rows when a row is short), one
// block-row high otherwise.
std::vector<Tile> fused_tiles(const BlockGeometry& g, size_t rows, size_t cols) {
  std::vector<Tile> t;
  if (g.br == 1 && cols <= kTile) {
    const size_t k = std::max<size_t>(1, kTile / std::max<size_t>(cols, 1));
    for (size_t r = 0; r < rows; r += k) t.push_back({r, std::min(rows, r + k), 0, cols});
    return t;
  }
  const size_t w = std::max(g.bc, kTile / (g.br * g.bc) * g.bc);
  for (size_t r = 0; r < rows; r += g.br)
    for (size_t c = 0; c < cols; c += w) t.push_back({r, std::min(rows, r + g.br), c, std::min(cols, c + w)});
  return t;
}

// Tiles of any shape for the element pass after a whole-array maxima pass.
std::vector<Tile> plain_tiles(size_t rows, size_t cols) {
  std::vector<Tile> t;
  if (cols <= kTile) {
    const size_t k = std::max<size_t>(1, kTile / std::max<size_t>(cols, 1));
    for (size_t r = 0; r < rows; r += k) t.push_back({r, std::min(rows, r + k), 0, cols});
  } else {
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; c += kTile) t.push_back({r, r + 1, c, std::min(cols, c + kTile)});
  }
  return t;
}

struct Fast;
std::vector<Tile> pass_tiles(const Fast& f, size_t rows, size_t cols);

struct Fast {
  BlockKernelParams k;
  BlockGeometry g;
  F32Plan plan, scale_plan;
  double max_elem = 0;  // the clip threshold in scaled units (block_plan.cpp's)
  double encode_scale = -1;
  std::vector<uint32_t> amax;
  std::vector<float> enc, dec;
  // With statistics, FP8 recipes and plain formats: the largest finite magnitude of each block
  // holding NaN or Inf (its clip count), read before the element pass may overwrite the input.
  std::vector<float> nonfinite_amax;
};

struct BlockArrays {
  std::vector<uint32_t> amax;
  std::vector<float> enc, dec;
};
BlockArrays& cached_block_arrays() {
  thread_local BlockArrays a;
  return a;
}

// The parameters of the fast path, or nullopt where it does not apply (formats whose values are
// not all float32 values, MX elements whose largest value has more than 23 fraction bits).
std::optional<Fast> make_fast(const BlockScaling& s, size_t rows, size_t cols, double encode_scale) {
  // Four Over Six rounds every block twice to choose its scale: the reference path does it.
  if (rows == 0 || cols == 0 || s.four_over_six) return std::nullopt;
  const auto plan = make_f32_plan(s.element, s.element_options);
  if (!plan) return std::nullopt;
  Fast f;
  f.plan = *plan;
  f.encode_scale = encode_scale;
  f.g = block_geometry(s, rows, cols);
  BlockKernelParams& k = f.k;
  k.rows = rows, k.cols = cols;
  k.br = f.g.br, k.bc = f.g.bc, k.nbc = f.g.nbc;
  k.rule = s.rule;
  k.plan = &f.plan;
  k.sr_key = s.element_options.sr_key;
  k.stochastic = s.element_options.rounding == Rounding::kStochastic;
  k.elem_factor = std::ldexp(1.0f, -s.element_exp());
  const double elem_max = s.element.max_finite();
  float below = static_cast<float>(elem_max);
  if (static_cast<double>(below) > elem_max) below = std::nextafter(below, 0.0f);
  k.elem_max_below = below;
  f.max_elem = s.is_plain() ? elem_max : s.max_elem();
  if (s.scale_format == ScaleFormat::kE8M0) {
    k.emax = s.emax_elem();
    k.element_exp = s.element_exp();
    const int mbits = s.element.kind == FormatKind::kInt ? -s.element_exp() : s.element.man_bits;
    k.even_frac = mbits <= 22 ? (1u << 23) - (1u << (22 - mbits)) : 1u << 23;
    const double frac = (s.max_elem() * std::ldexp(1.0, -k.emax) - 1.0) * 0x1p23;
    if (frac != std::floor(frac) || frac < 0 || frac >= 0x1p23) return std::nullopt;
    k.rceil_frac = static_cast<uint32_t>(frac);
  }
  if (s.rule == ScaleRule::kNvfp4) {
    QuantOptions o;
    o.overflow = Overflow::kSaturate;
    const auto sp = make_f32_plan(format_by_name("float8_e4m3fn"), o);
    if (!sp) return std::nullopt;
    f.scale_plan = *sp;
    k.scale_plan = &f.scale_plan;
  }
  const size_t nb = f.g.nbr * f.g.nbc;
  // The block arrays of this thread's last call, reused: fresh ones of a large array cost page
  // faults on every call (with threads, glibc maps and unmaps them each time).
  BlockArrays& cache = cached_block_arrays();
  f.amax = std::move(cache.amax);
  f.enc = std::move(cache.enc);
  f.dec = std::move(cache.dec);
  f.amax.assign(nb, 0);
  f.enc.resize(nb);
  f.dec.resize(nb);
  return f;
}

// Hands the block arrays back to this thread's cache when they are not too large to keep.
void keep_block_arrays(Fast& f) {
  if (f.amax.capacity() > (size_t{1} << 22)) return;
  BlockArrays& cache = cached_block_arrays();
  cache.amax = std::move(f.amax);
  cache.enc = std::move(f.enc);
  cache.dec = std::move(f.dec);
}

// Largest finite magnitude of block i (rare: blocks holding NaN or Inf, for the clip count).
float block_finite_amax(const float* in, const Fast& f, size_t i) {
  const size_t rb = i / f.g.nbc, cb = i % f.g.nbc;
  uint32_t m = 0;
  for (size_t r = rb * f.g.br; r < std::min(f.k.rows, rb * f.g.br + f.g.br); ++r)
    for (size_t c = cb * f.g.bc; c < std::min(f.k.cols, cb * f.g.bc + f.g.bc); ++c) {
      const uint32_t v = std::bit_cast<uint32_t>(in[r * f.k.cols + c]) & 0x7fffffffu;
      if (v < kInfBits) m = std::max(m, v);
    }
  return std::bit_cast<float>(m);
}

// enc and dec of blocks [i0, i1) from their maxima.
void derive_scales(const BlockScaling& s, Fast& f, const float* in, size_t i0, size_t i1) {
  if (!f.nonfinite_amax.empty())
    for (size_t i = i0; i < i1; ++i)
      if (f.amax[i] >= kInfBits) f.nonfinite_amax[i] = block_finite_amax(in, f, i);
  if (s.is_plain()) {
    std::fill(f.enc.begin() + i0, f.enc.begin() + i1, 1.0f);
    std::fill(f.dec.begin() + i0, f.dec.begin() + i1, 1.0f);
  } else if (s.rule == ScaleRule::kAmax) {
    // One scale per row, tile or 128x128 block: the scalar rule costs little.
    for (size_t i = i0; i < i1; ++i) {
      BlockScale b;
      b.nonfinite = f.amax[i] >= kInfBits;
      b.amax = b.nonfinite ? 0.0f : std::bit_cast<float>(f.amax[i]);
      amax_scale(s, f.max_elem, f.encode_scale, b);
      f.enc[i] = b.enc;
      f.dec[i] = static_cast<float>(b.dec);
    }
  } else {
    block_scales(f.k, f.amax.data() + i0, i1 - i0, f.enc.data() + i0, f.dec.data() + i0);
  }
}

size_t tile_blocks_begin(const Fast& f, size_t r, size_t c0) { return (r / f.g.br) * f.g.nbc + c0 / f.g.bc; }
size_t tile_blocks_end(const Fast& f, size_t r, size_t c1) {
  return (r / f.g.br) * f.g.nbc + (c1 + f.g.bc - 1) / f.g.bc;
}

// Maxima of every block over the whole array, for blocks larger than a tile.
void whole_array_maxima(const float* in, Fast& f) {
  const size_t rows = f.k.rows, cols = f.k.cols;
  const int threads = omp_get_max_threads();
  const bool big = rows * cols >= (size_t{1} << 15);
  if (f.g.nbr >= static_cast<size_t>(4 * threads) || !big) {
#pragma omp parallel for schedule(static) if (big)
    for (int64_t rb = 0; rb < static_cast<int64_t>(f.g.nbr); ++rb)
      block_tile_amax(f.k, in, rb * f.g.br, std::min(rows, (rb + 1) * f.g.br), 0, cols, f.amax.data());
    return;
  }
  // Few block-rows: pieces of the array into per-thread maxima, combined by max (exact).
  const std::vector<Tile> pieces = plain_tiles(rows, cols);
#pragma omp parallel
  {
    std::vector<uint32_t> local(f.amax.size(), 0);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(pieces.size()); ++i) {
      const Tile& t = pieces[i];
      block_tile_amax(f.k, in, t.r0, t.r1, t.c0, t.c1, local.data());
    }
#pragma omp critical
    for (size_t b = 0; b < local.size(); ++b) f.amax[b] = std::max(f.amax[b], local[b]);
  }
}

// The tiles of the element pass: whole blocks, or any shape after a whole-array maxima pass.
std::vector<Tile> pass_tiles(const Fast& f, size_t rows, size_t cols) {
  return f.g.br * f.g.bc <= kMaxFusedBlock ? fused_tiles(f.g, rows, cols) : plain_tiles(rows, cols);
}

// The block statistics of block_plan.cpp's BlockPlan::block_stats, from the three arrays.
BlockStats fast_block_stats(const BlockScaling& s, const Fast& f) {
  BlockStats st;
  st.blocks = f.amax.size();
  constexpr int kLo = -400, kHi = 400;  // every log2 scale lies in [-300, 300]
  std::vector<uint64_t> hist(kHi - kLo, 0);
  const bool elementwise_nan = s.rule == ScaleRule::kAmax || s.is_plain();
  for (size_t i = 0; i < f.amax.size(); ++i) {
    const bool nonfinite = f.amax[i] >= kInfBits;
    st.nonfinite_blocks += nonfinite;
    const bool nan_block = nonfinite && !elementwise_nan;
    const bool zero_scale = s.rule == ScaleRule::kNvfp4 && !nonfinite && f.dec[i] == 0;
    if (nan_block || zero_scale) continue;
    const float a = nonfinite ? f.nonfinite_amax[i] : std::bit_cast<float>(f.amax[i]);
    const float scaled = a * f.enc[i];
    st.clipped_blocks += scaled > f.max_elem;
    if (s.is_plain()) continue;
    int l = 0;
    if (s.rule == ScaleRule::kNvfp4) l = std::ilogb(static_cast<double>(f.dec[i]) * static_cast<double>(f.k.tensor_dec));
    else if (s.rule == ScaleRule::kAmax) l = std::ilogb(f.dec[i]);
    else l = std::ilogb(f.dec[i]) - s.element_exp();
    ++hist[static_cast<size_t>(std::clamp(l, kLo, kHi - 1) - kLo)];
  }
  for (int l = kLo; l < kHi; ++l)
    if (hist[l - kLo]) st.scale_log2_histogram[l] = hist[l - kLo];
  return st;
}

// NVFP4's second level: the FP32 tensor scale from the tensor amax t.
void nvfp4_tensor_scale(Fast& f, double t) {
  float s_enc = 1;  // as block_plan.cpp
  if (std::isfinite(t) && t > 0) {
    s_enc = static_cast<float>(6.0 * 448.0) / static_cast<float>(t);
    if (std::isinf(s_enc)) s_enc = FLT_MAX;
  }
  f.k.tensor_enc = s_enc;
  f.k.tensor_dec = 1.0f / s_enc;
}

// The same from the tensor amax given, or found here.
void set_nvfp4_tensor_scale(Fast& f, const float* in, size_t n, double tensor_amax, bool big) {
  double t = tensor_amax;
  if (t < 0) {
    constexpr size_t kChunk = size_t{1} << 16;
    const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
    uint32_t m = 0;
#pragma omp parallel for schedule(static) reduction(max : m) if (big)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t b = static_cast<size_t>(c) * kChunk;
      m = std::max(m, finite_amax_bits(in + b, std::min(kChunk, n - b)));
    }
    t = std::bit_cast<float>(m);
  }
  nvfp4_tensor_scale(f, t);
}

// The fused pass over the whole array into out (decoded values) or codes.
// codes (with rare and code_row_bytes): BlockTileIo's, out null.
void run_fused(const BlockScaling& s, Fast& f, const float* in, float* out, size_t rows, size_t cols,
               BlockStats* stats, uint64_t index_base, double tensor_amax, uint8_t* codes = nullptr,
               std::vector<size_t>* rare = nullptr, size_t code_row_bytes = 0) {
  f.k.plan = &f.plan;  // the optional moved: point into its own copy
  f.k.scale_plan = &f.scale_plan;
  f.k.index_base = index_base;
  f.k.decode = codes == nullptr;
  if (stats && (s.is_plain() || s.rule == ScaleRule::kAmax)) f.nonfinite_amax.assign(f.amax.size(), 0.0f);
  const size_t n = rows * cols;
  const bool big = n >= (size_t{1} << 15);
  if (s.rule == ScaleRule::kNvfp4) set_nvfp4_tensor_scale(f, in, n, tensor_amax, big);
  const bool fused = f.g.br * f.g.bc <= kMaxFusedBlock;
  if (!fused) {
    whole_array_maxima(in, f);
    const size_t nb = f.amax.size();
#pragma omp parallel for schedule(static) if (nb >= 4096)
    for (int64_t i = 0; i < static_cast<int64_t>(nb); i += 1024)
      derive_scales(s, f, in, i, std::min(nb, static_cast<size_t>(i) + 1024));
  }
  const std::vector<Tile> tiles = pass_tiles(f, rows, cols);
  // MX and NVFP4 blocks within a row: the kernel makes each group's maxima and scales as it goes.
  f.k.inline_scales = fused && f.g.br == 1 && (s.scale_format == ScaleFormat::kE8M0 || s.rule == ScaleRule::kNvfp4);
  size_t buf_size = 0;
  for (const Tile& t : tiles) buf_size = std::max(buf_size, 2 * (t.c1 - t.c0));
  uint64_t sat = 0, fl = 0, nf = 0;
#pragma omp parallel if (big && tiles.size() > 1) reduction(+ : sat, fl, nf)
  {
    std::vector<float> buf(buf_size);
    BlockPassCounts c;
    std::vector<size_t> rare_here;
    BlockTileIo io;
    io.in = in, io.out = out, io.amax = f.amax.data(), io.enc = f.enc.data(), io.dec = f.dec.data();
    io.buf = buf.data(), io.counts = stats ? &c : nullptr, io.codes = codes, io.rare = &rare_here;
    io.code_row_bytes = code_row_bytes;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(tiles.size()); ++i) {
      const Tile& t = tiles[i];
      if (fused && !f.k.inline_scales) {
        // Rows of one block-row share their blocks: maxima and scales once per block-row.
        for (size_t r = t.r0; r < t.r1; r = std::min(t.r1, (r / f.g.br + 1) * f.g.br)) {
          const size_t r_end = std::min(t.r1, (r / f.g.br + 1) * f.g.br);
          block_tile_amax(f.k, in, r, r_end, t.c0, t.c1, f.amax.data());
          derive_scales(s, f, in, tile_blocks_begin(f, r, t.c0), tile_blocks_end(f, r, t.c1));
        }
      }
      io.ahead = 0;
      if (static_cast<size_t>(i) + 1 < tiles.size()) {
        const Tile& u = tiles[i + 1];
        io.ahead = static_cast<ptrdiff_t>(u.r0 * cols + u.c0) - static_cast<ptrdiff_t>(t.r0 * cols + t.c0);
      }
      block_tile_quantize(f.k, io, t.r0, t.r1, t.c0, t.c1);
    }
    sat += c.saturated, fl += c.flushed, nf += c.nonfinite;
    if (rare && !rare_here.empty()) {
#pragma omp critical
      rare->insert(rare->end(), rare_here.begin(), rare_here.end());
    }
  }
  if (stats) {
    BlockStats st = fast_block_stats(s, f);
    st.elements = n;
    st.saturated = sat;
    st.flushed = fl;
    st.nonfinite_inputs = nf;
    *stats += st;
  }
}

// Whether the element rounding is of the kind block_row_kernel.cpp's loop writes out: the paths of
// quantize_f32_round-inl.h (fixed-drop nearest-even; stochastic with the float path below
// 2^emin), a signed format with -0 that saturates on overflow.
bool row_plan_fits(const F32Plan& p) {
  const bool sr = p.rounding == Rounding::kStochastic;
  if (p.rounding != Rounding::kNearestEven && !(sr && p.sr_small_float)) return false;
  return p.fixed_drop && !p.flush && p.signed_zero && p.is_signed && !p.overflow_nonfinite && p.overflow_result_signed;
}

// MX (float elements) and NVFP4 (not 4/6) with an element plan of that kind and blocks the loop
// takes: 2^k >= 16 columns wide (a scale per block of a row: 1-D along rows, 2-D) or one column
// wide (a scale per column: 1-D down columns).
bool row_loop_applies(const BlockScaling& s, const Fast& f) {
  const bool mx = s.scale_format == ScaleFormat::kE8M0 && s.rule != ScaleRule::kAmax && s.rule != ScaleRule::kNone;
  const bool nv = s.rule == ScaleRule::kNvfp4 && !s.four_over_six;
  if (!(mx || nv) || f.k.elem_factor != 1.0f || !row_plan_fits(f.plan)) return false;
  const size_t bc = f.g.bc;
  return bc == 1 || (bc >= 16 && (bc & (bc - 1)) == 0);
}

// The block maxima of rows [r0, r1) (r0 on a block-row); 1-D blocks along rows through run_amax.
void row_maxima(Fast& f, const float* in, size_t r0, size_t r1) {
  const size_t cols = f.k.cols, bc = f.g.bc;
  if (f.g.br != 1 || bc % 16 != 0) return block_tile_amax(f.k, in, r0, r1, 0, cols, f.amax.data());
  const size_t runs = cols / bc;
  for (size_t r = r0; r < r1; ++r) {
    uint32_t* a = f.amax.data() + r * f.g.nbc;
    run_amax(in + r * cols, runs, bc, a);
    if (runs < f.g.nbc) {  // the row's last block is short
      uint32_t m = 0;
      for (size_t c = runs * bc; c < cols; ++c) m = std::max(m, std::bit_cast<uint32_t>(in[r * cols + c]) & 0x7fffffffu);
      a[runs] = m;
    }
  }
}

// The blocks [first, second) of the block-rows holding rows [r0, r1) (r0 on a block-row).
std::pair<size_t, size_t> row_blocks(const Fast& f, size_t r0, size_t r1) {
  return {(r0 / f.g.br) * f.g.nbc, ((r1 - 1) / f.g.br + 1) * f.g.nbc};
}

// Block-rows of about a tile each, the unit of work of the maxima and element passes.
std::vector<std::pair<size_t, size_t>> row_chunks(const Fast& f) {
  const size_t rows = f.k.rows, cols = f.k.cols;
  const size_t k = std::max<size_t>(1, kTile / std::max<size_t>(cols * f.g.br, 1)) * f.g.br;
  std::vector<std::pair<size_t, size_t>> c;
  for (size_t r = 0; r < rows; r += k) c.emplace_back(r, std::min(rows, r + k));
  return c;
}

// The element pass on the block arrays: whole chunks of rows through the loop of
// block_row_kernel.cpp (1-D blocks along rows filling whole rows: one contiguous run of blocks), or
// row by row; a row whose blocks are not all finite with a finite encode scale, or whose SR
// indices cross a stream boundary, through the generic loop.
void row_elements(const BlockScaling& s, Fast& f, const float* in, float* out,
                  const std::vector<std::pair<size_t, size_t>>& chunks, const std::vector<uint8_t>& chunk_plain,
                  BlockPassCounts* counts) {
  const size_t rows = f.k.rows, cols = f.k.cols;
  const bool nv = s.rule == ScaleRule::kNvfp4;
  // MX encode scales are powers of two in range. NVFP4's are all finite when the largest, that of
  // the smallest E4M3 scale 2^-9, is (enc falls as the scale grows): not only for tensor amaxes
  // below about 2^-117.
  const bool enc_finite = !nv || 1.0f / (0x1p-9f * f.k.tensor_dec) <= FLT_MAX;
  const bool sr = f.k.stochastic;
  const bool contiguous = f.g.br == 1 && f.g.bc > 1 && cols % f.g.bc == 0;
  const bool big = rows * cols >= (size_t{1} << 15);
  uint64_t sat = 0, fl = 0, nf = 0;
#pragma omp parallel if (big && chunks.size() > 1) reduction(+ : sat, fl, nf)
  {
    std::vector<float> buf;
    BlockPassCounts c;
    BlockPassCounts* cp = counts ? &c : nullptr;
    ElementRow row;
    row.tensor_dec = nv ? f.k.tensor_dec : 1.0f;
    row.plan = &f.plan;
    row.max_below = f.k.elem_max_below;
    row.stochastic = sr;
    row.sr_mask = f.plan.sr_mask;
    row.per_column = f.g.bc == 1;
    row.block_shift = std::countr_zero(f.g.bc);
    // Rows [r0, r1) as one run of n elements; plain: their blocks are known to be finite.
    auto fast_run = [&](size_t r0, size_t r1, size_t n, bool plain) {
      const uint64_t index = f.k.index_base + r0 * cols;
      if (sr) {
        if ((index & 0xffffffffu) + n > (uint64_t{1} << 32)) return false;
        const SrStream st = make_sr_stream(f.k.sr_key, index >> 32);
        row.k0 = st.k0, row.k1 = st.k1;
      }
      const auto [b0, b1] = row_blocks(f, r0, r1);
      if (!plain)
        for (size_t b = b0; b < b1; ++b)
          if (f.amax[b] >= kInfBits || !(f.enc[b] <= FLT_MAX)) return false;
      row.in = in + r0 * cols, row.out = out + r0 * cols, row.n = n;
      row.enc = f.enc.data() + b0, row.dec = f.dec.data() + b0;
      row.idx0 = static_cast<uint32_t>(index);
      element_row_pass(row, cp);
      return true;
    };
    auto generic_row = [&](size_t r) {
      buf.resize(2 * cols);
      BlockTileIo io;
      io.in = in, io.out = out, io.amax = f.amax.data(), io.enc = f.enc.data(), io.dec = f.dec.data();
      io.buf = buf.data(), io.counts = cp;
      block_tile_quantize(f.k, io, r, r + 1, 0, cols);
    };
#pragma omp for schedule(static)
    for (int64_t i = 0; i < static_cast<int64_t>(chunks.size()); ++i) {
      const auto [r0, r1] = chunks[i];
      const bool plain = chunk_plain[i] && enc_finite;
      if (contiguous && fast_run(r0, r1, (r1 - r0) * cols, plain)) continue;
      for (size_t r = r0; r < r1; ++r)
        if (!fast_run(r, r + 1, cols, plain)) generic_row(r);
    }
    sat += c.saturated, fl += c.flushed, nf += c.nonfinite;
  }
  if (counts) counts->saturated += sat, counts->flushed += fl, counts->nonfinite += nf;
}

// MX and NVFP4 in three passes: every block's maximum (for NVFP4 their largest finite one is the
// tensor amax), the scales, then the element pass through the loop of block_row_kernel.cpp. For
// NVFP4 the generic fused pass read the input twice as well (tensor amax, then the tile); for MX
// it read it once, and the second read costs less than the generic loop's overhead. With signs (a
// random Hadamard transform of size 16 along the blocks' axis), the first pass transforms each
// chunk into out and takes its maxima there while it is in cache, and the element pass then runs
// in place on out.
void run_rows(const BlockScaling& s, Fast& f, const float* in, float* out, BlockStats* stats, uint64_t index_base,
               double tensor_amax, const double* signs) {
  f.k.plan = &f.plan;
  f.k.scale_plan = &f.scale_plan;
  f.k.index_base = index_base;
  f.k.decode = true;
  f.k.inline_scales = false;
  const size_t rows = f.k.rows, cols = f.k.cols, n = rows * cols, nb = f.amax.size();
  const bool big = n >= (size_t{1} << 15);
  const auto chunks = row_chunks(f);
  // Per chunk: the largest finite block maximum, and whether every block is finite.
  std::vector<uint32_t> chunk_max(chunks.size());
  std::vector<uint8_t> chunk_plain(chunks.size());
#pragma omp parallel for schedule(static) if (big && chunks.size() > 1)
  for (int64_t i = 0; i < static_cast<int64_t>(chunks.size()); ++i) {
    const auto [r0, r1] = chunks[i];
    if (signs && f.g.br == 1) {
      rht16_runs(in + r0 * cols, out + r0 * cols, (r1 - r0) * cols / 16, signs);
      row_maxima(f, out, r0, r1);
    } else if (signs) {  // 16x1 blocks: each transformed column is a block, its maximum made there
      // The 16 rows copied into out first, in order, then transformed there in place: reading one
      // array's 16 rows and writing another's, 32 interleaved streams, took a fifth longer.
      for (size_t r = r0; r < r1; r += 16) {
        if (in != out) std::memcpy(out + r * cols, in + r * cols, std::min<size_t>(16, rows - r) * cols * sizeof(float));
        rht16_columns(out + r * cols, out + r * cols, cols, cols, signs, f.amax.data() + (r / 16) * f.g.nbc);
      }
    } else {
      row_maxima(f, in, r0, r1);
    }
    const auto [b0, b1] = row_blocks(f, r0, r1);
    bool nonfinite = false;
    chunk_max[i] = finite_amax_bits(reinterpret_cast<const float*>(f.amax.data() + b0), b1 - b0, &nonfinite);
    chunk_plain[i] = !nonfinite;
  }
  const float* src = signs ? out : in;
  const bool nv = s.rule == ScaleRule::kNvfp4;
  double t = tensor_amax;
  if (nv && t < 0) {
    uint32_t m = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      m = std::max(m, chunk_max[i]);
      if (chunk_plain[i]) continue;
      // Rare: the finite part of a block holding NaN or Inf.
      const auto [b0, b1] = row_blocks(f, chunks[i].first, chunks[i].second);
      for (size_t b = b0; b < b1; ++b)
        if (f.amax[b] >= kInfBits) m = std::max(m, std::bit_cast<uint32_t>(block_finite_amax(src, f, b)));
    }
    t = std::bit_cast<float>(m);
  }
  if (nv) nvfp4_tensor_scale(f, t);
#pragma omp parallel for schedule(static) if (nb >= 4096)
  for (int64_t i = 0; i < static_cast<int64_t>(nb); i += 4096)
    block_scales(f.k, f.amax.data() + i, std::min<size_t>(4096, nb - i), f.enc.data() + i, f.dec.data() + i);
  BlockPassCounts c;
  row_elements(s, f, src, out, chunks, chunk_plain, stats ? &c : nullptr);
  if (stats) {
    BlockStats st = fast_block_stats(s, f);
    st.elements = n;
    st.saturated = c.saturated;
    st.flushed = c.flushed;
    st.nonfinite_inputs = c.nonfinite;
    *stats += st;
  }
}

// The kernel's StoreCodes for one finite value (its scalar twin), to check a plan.
uint32_t code_of_value(const CodePlan& c, float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v), a = u & 0x7fffffffu;
  const bool neg = (u >> 31) != 0;
  uint32_t code = 0;
  if (c.is_int) {
    code = static_cast<uint32_t>(static_cast<int32_t>(v));
  } else {
    code = a < c.normal_below ? static_cast<uint32_t>(std::bit_cast<float>(a) * c.sub_scale)
                              : (static_cast<uint32_t>(static_cast<int32_t>(a >> 23) + c.rebias) << c.man_bits) |
                                    ((a & 0x7fffffu) >> (23 - c.man_bits));
    if (neg && (a != 0 || c.negative_zero)) code |= c.sign_bit;
  }
  return code & c.mask;
}

// The code plan of a format of at most 8 bits, if it gives encode()'s code for every finite value
// of the format (and -0); nullopt otherwise (the scalar path runs).
std::optional<CodePlan> make_code_plan(const Format& fmt, const QuantOptions& o) {
  if (fmt.bits() > 8) return std::nullopt;
  CodePlan c;
  c.is_int = fmt.kind == FormatKind::kInt;
  c.man_bits = fmt.man_bits;
  c.rebias = fmt.bias - 127;
  c.mask = (1u << fmt.bits()) - 1;
  c.sign_bit = static_cast<uint32_t>(fmt.sign_mask());
  c.negative_zero = fmt.has_negative_zero();
  if (!c.is_int && fmt.has_zero) {
    const int emin = fmt.emin();
    if (emin < -126 || fmt.man_bits > 23) return std::nullopt;
    c.normal_below = std::bit_cast<uint32_t>(std::ldexp(1.0f, emin));
    c.sub_scale = std::ldexp(1.0f, fmt.man_bits - emin);
  }
  std::vector<double> values = {-0.0};
  for (uint64_t k = 0; k <= c.mask; ++k)
    if (fmt.is_canonical(k)) values.push_back(decode(fmt, k));
  for (const double v : values) {
    if (!std::isfinite(v) || (v < 0 && !fmt.is_signed)) continue;
    const float f = static_cast<float>(v);
    if (static_cast<double>(f) != v || code_of_value(c, f) != encode(fmt, v, o).code) return std::nullopt;
  }
  return c;
}

// Scales in block order as BlockPlan::pack_scales writes them.
void pack_fast_scales(const BlockScaling& s, const Fast& f, BlockPacked& out) {
  const size_t nbr = f.g.nbr, nbc = f.g.nbc;
  out.scale_rows = s.axis == 1 ? nbr : nbc;
  out.scale_cols = s.axis == 1 ? nbc : nbr;
  const size_t width = s.scale_format == ScaleFormat::kFp32 || s.scale_format == ScaleFormat::kPow2Fp32 ? 4 : 1;
  out.scales.assign(nbr * nbc * width, 0);
  const Format e4m3 = format_by_name("float8_e4m3fn");
  const int element_exp = s.element_exp();
  for (size_t rb = 0; rb < nbr; ++rb)
    for (size_t cb = 0; cb < nbc; ++cb) {
      const size_t i = rb * nbc + cb, idx = s.axis == 1 ? i : cb * nbr + rb;
      const bool nonfinite = f.amax[i] >= kInfBits;
      uint32_t code = std::bit_cast<uint32_t>(f.dec[i]);  // FP8 recipes: the FP32 decode scale
      if (s.scale_format == ScaleFormat::kE8M0)
        code = nonfinite ? 0xff : static_cast<uint32_t>(std::ilogb(f.dec[i]) - element_exp + 127);
      if (s.scale_format == ScaleFormat::kE4M3)
        code = nonfinite ? 0x7f : static_cast<uint32_t>(encode(e4m3, f.dec[i]).code);
      std::memcpy(out.scales.data() + idx * width, &code, width);  // little-endian host
    }
}

}  // namespace

bool fused_fake_quantize(const BlockScaling& s, const float* in, float* out, size_t rows, size_t cols,
                         BlockStats* stats, uint64_t index_base, double tensor_amax, double encode_scale) {
  std::optional<Fast> made = make_fast(s, rows, cols, encode_scale);
  if (!made) return false;
  if (row_loop_applies(s, *made)) run_rows(s, *made, in, out, stats, index_base, tensor_amax, nullptr);
  else run_fused(s, *made, in, out, rows, cols, stats, index_base, tensor_amax);
  keep_block_arrays(*made);
  return true;
}

bool fused_rht_fake_quantize(const BlockScaling& s, const double* signs, const float* in, float* out, size_t rows,
                             size_t cols, BlockStats* stats, uint64_t index_base) {
  std::optional<Fast> made = make_fast(s, rows, cols, -1);
  if (!made) return false;
  if (s.rule != ScaleRule::kNvfp4 || !row_loop_applies(s, *made) || made->g.br * made->g.bc != 16 ||
      (s.axis == 1 ? cols : rows) % 16 != 0) {
    keep_block_arrays(*made);
    return false;
  }
  run_rows(s, *made, in, out, stats, index_base, -1, signs);
  keep_block_arrays(*made);
  return true;
}

bool fused_block_codes(const BlockScaling& s, const float* in, size_t rows, size_t cols, uint64_t index_base,
                       double tensor_amax, std::vector<uint8_t>& codes, BlockPacked& out) {
  const Format& fmt = s.element;
  if (code_bytes(fmt) != 1) return false;
  const std::optional<CodePlan> code = make_code_plan(fmt, s.element_options);
  if (!code) return false;
  std::optional<Fast> made = make_fast(s, rows, cols, -1);
  if (!made) return false;
  Fast& f = *made;
  f.k.code = &*code;
  // FP4 along rows packs in place where no two tiles share a byte.
  const std::vector<Tile> tiles = pass_tiles(f, rows, cols);
  const bool nibbles = s.axis == 1 && fmt.bits() <= 4 &&
                       std::all_of(tiles.begin(), tiles.end(), [](const Tile& t) { return t.c0 % 2 == 0; });
  uint8_t* dest = nullptr;
  size_t row_bytes = 0;
  if (nibbles) {
    row_bytes = out.code_row_bytes = (cols + 1) / 2;
    out.codes.assign(rows * row_bytes, 0);
    dest = out.codes.data();
  } else {
    codes.resize(rows * cols);
    dest = codes.data();
  }
  std::vector<size_t> rare;
  run_fused(s, f, in, nullptr, rows, cols, nullptr, index_base, tensor_amax, dest, &rare, row_bytes);
  for (const size_t i : rare) {  // NaN, Inf: the scalar encoder on the scaled input, as the reference
    const size_t r = i / cols, c = i % cols, b = (r / f.g.br) * f.g.nbc + c / f.g.bc;
    float scaled = in[i] * f.enc[b];
    if (f.k.elem_factor != 1.0f) scaled = scaled * f.k.elem_factor;
    const auto code = static_cast<uint8_t>(encode(fmt, scaled, s.element_options, index_base + i).code);
    if (!nibbles) {
      codes[i] = code;
      continue;
    }
    uint8_t& byte = out.codes[r * row_bytes + c / 2];
    byte = c % 2 ? static_cast<uint8_t>((byte & 0x0f) | ((code & 0xf) << 4)) : static_cast<uint8_t>((byte & 0xf0) | (code & 0xf));
  }
  out.tensor_scale = f.k.tensor_dec;
  if (!s.is_plain()) pack_fast_scales(s, f, out);
  keep_block_arrays(f);
  return true;
}

}  // namespace precsim
