// Private to formats/: the vectorised block-scaling kernel (block_fused_kernel.cpp, Highway,
// picked at run time like the float32 quantize kernel) and the constants it needs. The scalar
// path of block_plan.cpp / block_quantize.cpp is the reference it must equal bit for bit
// (tests/block_fused_test.cpp checks every compiled target).
//
// Per block three arrays, in block order of the array's own coordinates (nbr x nbc, row-major):
//   amax  |x| bits of the block's largest magnitude (>= 0x7f800000: a NaN or Inf is in the block);
//   enc   x * enc (then * elem_factor) is rounded into the element format;
//   dec   value = rounded * dec (NVFP4: (rounded * dec) * tensor_dec, dec the E4M3 block scale).
// Every product is one float multiplication, which gives the reference's double product rounded
// once: the decode scales are powers of two (MX), FP32 values (FP8 recipes), or an E4M3 value whose
// product with an E2M1 value is exact before the one rounding multiplication by the FP32 tensor
// scale (NVFP4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "quantize_f32_plan.h"

namespace precsim {

// Codes of the element pass's rounded values (element formats of at most 8 bits) from their float
// bits: floats take the exponent rebiased and the top mantissa bits, or below the smallest normal
// value the value in units of the smallest subnormal; integers their two's complement. NaN, Inf
// and signed values of unsigned formats are left to the scalar encoder (block_fused.cpp checks
// the plan against it on every finite value of the format before using it).
struct CodePlan {
  bool is_int = false;
  int man_bits = 0;
  int32_t rebias = 0;          // code exponent field minus float exponent field
  uint32_t normal_below = 0;   // float bits of the smallest normal value (0: all normal)
  float sub_scale = 1;         // 2^(man_bits - emin): a subnormal value to its mantissa field
  uint32_t sign_bit = 0;       // 0: an unsigned format
  bool negative_zero = false;  // -0 has a code of its own
  uint32_t mask = 0xff;        // the code's bits
};

struct BlockKernelParams {
  size_t rows = 0, cols = 0;
  size_t br = 1, bc = 1, nbc = 1;  // block geometry (as BlockGeometry)
  ScaleRule rule = ScaleRule::kNone;
  // MX (E8M0) scale rules on amax = 1.frac * 2^E: e = E - emax + (ceil: frac != 0; even: frac >=
  // even_frac; rceil: frac > rceil_frac), then clamped to [-127, 127].
  int32_t emax = 0;
  uint32_t even_frac = 0;   // 2^23 - 2^(22 - mantissa bits); above 0x7fffff: never
  uint32_t rceil_frac = 0;  // the fraction bits of the largest element value
  int32_t element_exp = 0;  // MXINT8: -6
  // NVFP4: s_enc, its E4M3 block-scale rounding, and the tensor decode scale.
  float tensor_enc = 1, tensor_dec = 1;
  const F32Plan* scale_plan = nullptr;
  float elem_factor = 1;    // 2^-element_exp
  float elem_max_below = 0; // largest float <= the largest element value: |scaled| > it saturates
  const F32Plan* plan = nullptr;  // element rounding
  SrKey sr_key;
  bool stochastic = false;
  uint64_t index_base = 0;
  bool decode = true;  // false: out gets the rounded values in element units (for codes)
  // MX and NVFP4 blocks of one row (br == 1): the element pass finds the maxima and scales of
  // each group of blocks just before it rounds them, so the tile is read once (block_fused.cpp
  // leaves amax, enc and dec of such tiles to block_tile_quantize).
  bool inline_scales = false;
  const CodePlan* code = nullptr;  // with BlockTileIo::codes
};

// Counts of the element pass (BlockStats order): |scaled| above the largest element, finite
// non-zero inputs that became zero, NaN or Inf inputs.
struct BlockPassCounts {
  uint64_t saturated = 0, flushed = 0, nonfinite = 0;
};

// Largest |x| bits of every block meeting rows [r0, r1) x cols [c0, c1), max-ed into amax
// (nbr x nbc).
void block_tile_amax(const BlockKernelParams& p, const float* in, size_t r0, size_t r1, size_t c0,
                     size_t c1, uint32_t* amax);
// enc and dec of n consecutive blocks from their amax (MX rules and NVFP4; not kAmax, not plain).
void block_scales(const BlockKernelParams& p, const uint32_t* amax, size_t n, float* enc, float* dec);
// What the element pass of one tile reads and writes.
struct BlockTileIo {
  const float* in = nullptr;
  float* out = nullptr;  // may alias in
  // The block arrays (nbr x nbc); amax, enc and dec are written here under inline_scales.
  uint32_t* amax = nullptr;
  float* enc = nullptr;
  float* dec = nullptr;
  float* buf = nullptr;  // 2 * (c1 - c0) floats: the scales spread over columns
  BlockPassCounts* counts = nullptr;  // null, or the counts to add to
  // Elements from the start of this tile to the start of the next, whose input is prefetched
  // while this one is rounded (0: none).
  ptrdiff_t ahead = 0;
  // Codes instead of values (p.decode false, out null): one byte per element, row-major. Elements
  // the plan leaves to the scalar encoder get their flat index appended to rare (their byte is
  // written later); elements of NaN blocks (MX, NVFP4) get code 0.
  uint8_t* codes = nullptr;
  std::vector<size_t>* rare = nullptr;
  // > 0: FP4 codes packed two a byte (low nibble first) in rows of this many bytes instead.
  size_t code_row_bytes = 0;
};

// Two codes a byte, low nibble first (pack_nibbles' layout), eight codes at a time on a
// little-endian host: each even byte takes its odd neighbour's nibble, then the even bytes close
// up. An odd n leaves the last byte's high nibble 0.
inline void pack_nibble_run(const uint8_t* codes, size_t n, uint8_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    std::memcpy(&x, codes + i, 8);
    x &= 0x0f0f0f0f0f0f0f0full;
    x = (x | (x >> 4)) & 0x00ff00ff00ff00ffull;
    x = (x | (x >> 8)) & 0x0000ffff0000ffffull;
    const uint32_t y = static_cast<uint32_t>(x | (x >> 16));
    std::memcpy(out + i / 2, &y, 4);
  }
  for (; i < n; i += 2) out[i / 2] = static_cast<uint8_t>((codes[i] & 0xf) | (i + 1 < n ? (codes[i + 1] & 0xf) << 4 : 0));
}

// Scale, round and decode the tile rows [r0, r1) x cols [c0, c1) of io.in into io.out.
void block_tile_quantize(const BlockKernelParams& p, const BlockTileIo& io, size_t r0, size_t r1, size_t c0,
                         size_t c1);
// The fast block_fake_quantize (block_fused.cpp); false where it does not apply (element formats
// whose values are not all float32 values, empty arrays), and the scalar path runs.
bool fused_fake_quantize(const BlockScaling& s, const float* in, float* out, size_t rows, size_t cols,
                         BlockStats* stats, uint64_t index_base, double tensor_amax, double encode_scale);

// fused_fake_quantize of the random Hadamard transform (size 16, these signs) of in along the
// blocks' axis: NVFP4 with 1x16 or 16x1 blocks and an axis extent that 16 divides; false
// otherwise (the caller transforms, then quantizes).
bool fused_rht_fake_quantize(const BlockScaling& s, const double* signs, const float* in, float* out, size_t rows,
                             size_t cols, BlockStats* stats, uint64_t index_base);

// The fast block_quantize for element formats of at most 8 bits: the element pass turns each
// rounded value into its code in registers (CodePlan); the rare values it leaves (NaN, Inf) go
// through encode(). codes are row-major, one byte each, zero in NaN blocks; FP4 codes along rows
// go straight into out.codes instead (codes left empty). out gets the scales and the tensor scale.
// False where the fast path does not apply.
bool fused_block_codes(const BlockScaling& s, const float* in, size_t rows, size_t cols, uint64_t index_base,
                       double tensor_amax, std::vector<uint8_t>& codes, BlockPacked& out);

// Largest finite |x| of n values (NaN and Inf ignored), as float bits; with nonfinite, whether
// any value is NaN or Inf. Block maxima (|x| bits) may be passed as they are.
uint32_t finite_amax_bits(const float* in, size_t n, bool* nonfinite = nullptr);

// One row (or a run of whole rows) of MX or NVFP4's element pass in the loop of
// block_row_kernel.cpp: nearest-even or stochastic rounding (sr_bits at idx0 + i in the stream of
// k0, k1; the run must not cross a multiple of 2^32) by an element plan of the kind
// block_fused.cpp checks (every value at and above 2^emin drops the same number of bits, the
// stochastic path's float arithmetic below it, saturation, -0 kept). Every block of the run must
// be finite with a finite enc (others take the generic loop). enc and dec: one per 2^block_shift
// elements (at least a vector's lanes), or one per element (per_column).
struct ElementRow {
  const float* in = nullptr;
  float* out = nullptr;  // may alias in
  size_t n = 0;
  const float* enc = nullptr;
  const float* dec = nullptr;
  bool per_column = false;
  int block_shift = 4;
  float tensor_dec = 1;  // NVFP4's; 1 for MX
  const F32Plan* plan = nullptr;
  float max_below = 0;  // the largest float <= the largest element value: |scaled| above saturates
  bool stochastic = false;
  uint32_t k0 = 0, k1 = 0, sr_mask = 0, idx0 = 0;
};
// Adds saturated and flushed elements to counts when it is not null.
void element_row_pass(const ElementRow& r, BlockPassCounts* counts);

// Largest |x| bits of each of `runs` consecutive runs of `len` floats, len a multiple of 16 (NaN
// and Inf above every finite value, as block maxima).
void run_amax(const float* in, size_t runs, size_t len, uint32_t* amax);

}  // namespace precsim
