// Block-scaled formats: one scale factor shared by a block of elements (OCP MX, NVIDIA NVFP4,
// FP8 per-tensor / per-row / 1x128 tile / 128x128 block recipes). Knows nothing about training.
//
// Arrays are 2-D, row-major, rows x cols float32. `axis` names the dimension along which a block
// runs (the reduction dimension K of the GEMM that consumes the operand):
//   axis = 1: a block is a run of consecutive elements of one row (A[M,K] quantized along K);
//   axis = 0: a block is a run down one column (B[K,N] quantized along K).
// A block is block_along elements along the axis and block_across elements across it (1 for 1-D
// blocks, 16 or 128 for 2-D blocks; a 2-D block gives the same values whatever the axis).
// block_along = 0 or block_across = 0 means "the whole extent" (per-row: along = 0, across = 1;
// per-tensor: both 0). Edge blocks are partial: they hold what is left.
//
// The specifications behind every rule below are listed in docs/reference/sources.md ("Block scaling";
// section numbers noted as §x.y are those of the OCP MX v1.0 specification and the FP8 recipe
// papers listed there); the choices the specifications leave open are documented where they are
// made, in block_scaling.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

// How the scale of a block is derived from the block's largest magnitude, amax.
enum class ScaleRule : uint8_t {
  kNone,   // plain format: scale 1 (no scaling at all)
  // Power-of-two (E8M0) rules of OCP MX (§1.6); emax = exponent of the element's largest power of 2.
  kFloor,  // X = 2^(floor(log2 amax) - emax)          OCP v1.0 §6.3, the default; may clip
  kCeil,   // X = 2^(ceil(log2 amax) - emax)           torchao option
  kEven,   // amax rounded to the element's mantissa width (ties away, as torchao), then floor
  kRceil,  // X = 2^ceil(log2(amax / max_elem))        cuBLAS, Transformer Engine; never clips
  // FP8 recipes (§3.2-3.4, §4.1): encode scale s = max_elem / amax in FP32; values are x * s.
  kAmax,
  // NVFP4 (§1.7): E4M3 block decode scale under an FP32 tensor scale (6 * 448 / amax_tensor).
  kNvfp4,
};

enum class ScaleFormat : uint8_t {
  kNone,     // plain format
  kE8M0,     // MX: 2^(code - 127), code 0..254, 255 = NaN
  kE4M3,     // NVFP4 block scale (float8_e4m3fn code)
  kFp32,     // FP8 recipes: any float
  kPow2Fp32, // FP8 recipes with power-of-two scales: the FP32 scale with its mantissa cleared
};

struct BlockScaling {
  std::string name;          // the scheme as the user wrote it ("mxfp4:rule=rceil")
  Format element;            // element format (int8 for MXINT8, with an implicit 2^-6)
  ScaleRule rule = ScaleRule::kNone;
  ScaleFormat scale_format = ScaleFormat::kNone;
  int block_along = 0;       // elements per block along the axis; 0: whole extent
  int block_across = 0;      // elements per block across the axis; 0: whole extent
  int axis = 1;              // 1: along rows (last dimension), 0: along columns
  double amax_epsilon = 0;   // kAmax: amax below this is raised to it (TE amax_epsilon, torchao 1e-12)
  int margin = 0;            // kAmax: scale divided by 2^margin (TE DelayedScaling margin)
  // kNvfp4, Four Over Six (arXiv 2512.02010): the FP32 tensor scale is 6 * 256 / amax_tensor and
  // every block takes the E4M3 scale that maps its amax to 6 or the one that maps it to 4,
  // whichever gives the lower sum of squared errors of the dequantized block (6 on a tie).
  bool four_over_six = false;
  QuantOptions element_options{.overflow = Overflow::kSaturate};  // elements always saturate

  // Exponent of the element's largest power of two (E4M3 8, E5M2 15, E3M2 4, E2M3 2, E2M1 2,
  // MX INT8 0), and its largest magnitude (MX INT8: 127/64).
  int emax_elem() const;
  double max_elem() const;
  // Exponent of the implicit factor of integer elements (MXINT8: -6; floats: 0).
  int element_exp() const;
  bool is_plain() const { return rule == ScaleRule::kNone; }
  // Storage cost per element including the scale(s) for an array of this shape (MXFP8: 8.25).
  double bits_per_element(size_t rows, size_t cols) const;
  friend bool operator==(const BlockScaling&, const BlockScaling&) = default;
};

// Parses a scheme (the grammar of spec.h): "mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2",
// "mxfp4", "mxint8", "nvfp4", "<format>:tensor|row|tile<N>|block<N>" (fp8_e4m3, fp8_e5m2 or any
// format spec), "<format>:mx" / "<format>:nvfp4" (MX or NVFP4 scaling of an element written any way:
// "e4m3:nanonly:mx" is mxfp8_e4m3), or a plain format; options ":rule=floor|ceil|even|rceil",
// ":block=N", ":axis=0|1", ":2d" (NVFP4 16x16 / MX 2-D), ":pow2" / ":fp32" (FP8 scale format),
// ":eps=X", ":margin=N". Throws std::invalid_argument naming the bad part and what is allowed.
BlockScaling parse_block_scaling(std::string_view scheme);
// Typed constructors for code that holds its scheme's parts already (a training recipe's operands):
// the scheme parse_block_scaling gives for the text each writes into `name`, with its checks, and no
// text parsed. Each throws std::invalid_argument naming the value and what is allowed.
//   MX: "<mx preset>[:block=N][:rule=R][:2d]"; the element is the MX preset's whose encoding
//   `element` has (any spelling of it), the rule one of floor, ceil, even, rceil.
BlockScaling mx_block_scaling(const Format& element, int block = 32, ScaleRule rule = ScaleRule::kFloor,
                              bool two_d = false);
//   NVFP4: "nvfp4[:2d][:4over6]".
BlockScaling nvfp4_block_scaling(bool two_d = false, bool four_over_six = false);
//   FP8 recipes: "<element>:tensor" (along = across = 0), ":tile<N>" (N, 1) or ":block<N>" (N, N),
//   then ":pow2" for power-of-two FP32 scales and ":margin=M" (0..64).
BlockScaling amax_block_scaling(const Format& element, int along, int across, bool pow2, int margin = 0);

// The MX preset ("mxfp8_e4m3", ..., "mxint8") whose element has the encoding of `element`, whatever
// its name; nullopt when it is not an MX element.
std::optional<std::string_view> mx_scheme_name(const Format& element);
// Names accepted as the first part of a scheme (for error messages and `--formats all`).
std::vector<std::string> block_scaling_presets();
std::string_view to_string(ScaleRule);
std::string_view to_string(ScaleFormat);

// What a block quantization did, counted as it runs.
struct BlockStats {
  uint64_t elements = 0;
  uint64_t blocks = 0;
  uint64_t clipped_blocks = 0;     // the block's amax, scaled, exceeded max_elem before clamping
  uint64_t nonfinite_blocks = 0;   // a NaN or Inf in the block: scale NaN, block NaN
  uint64_t saturated = 0;          // elements clamped to +-max_elem
  uint64_t flushed = 0;            // non-zero finite inputs that became zero
  uint64_t nonfinite_inputs = 0;   // NaN or Inf inputs
  // log2 of the dequantization scale of each finite block (rounded down for non-powers of two)
  // -> number of blocks.
  std::map<int, uint64_t> scale_log2_histogram;
  BlockStats& operator+=(const BlockStats& o);
};

// Fake quantization: out = dequantize(quantize(in)), in and out row-major rows x cols (out may
// alias in). `tensor_amax` overrides the tensor amax of NVFP4's second level (and of per-tensor
// kAmax scaling) when >= 0, as for a tensor split across calls. Stochastic rounding of element i
// (row-major index) uses sr_bits(element_options.sr_key, index_base + i).
// Throws std::invalid_argument when the sizes do not match rows * cols.
void block_fake_quantize(const BlockScaling& s, std::span<const float> in, std::span<float> out,
                         size_t rows, size_t cols, BlockStats* stats = nullptr,
                         uint64_t index_base = 0, double tensor_amax = -1);

// The random Hadamard transform of size signs.size() along s.axis (random_hadamard_transform of
// hadamard.h), then block_fake_quantize of the transformed array into out: the same bits and
// statistics as the two calls. For NVFP4 with 1x16 or 16x1 blocks and a transform of size 16 (the
// NVFP4 recipe's weight-gradient operands) the transform and the block maxima share one pass over
// memory and the element pass runs in place. out may alias in. Throws std::invalid_argument as
// the two calls do (a size that is not a power of two, an axis extent it does not divide).
void rht_block_fake_quantize(const BlockScaling& s, std::span<const double> signs, std::span<const float> in,
                             std::span<float> out, size_t rows, size_t cols, BlockStats* stats = nullptr,
                             uint64_t index_base = 0);

// The scalar reference of block_fake_quantize: one pass for the block maxima and scales, then
// the elements through quantize(). block_fake_quantize takes a fused, vectorised path that must
// give the same bits and statistics; tests compare them.
void block_fake_quantize_reference(const BlockScaling& s, std::span<const float> in, std::span<float> out,
                                   size_t rows, size_t cols, BlockStats* stats = nullptr,
                                   uint64_t index_base = 0, double tensor_amax = -1);

// Quantization with a given FP32 encode scale for the whole tensor (delayed scaling: the scale
// comes from the amax history, not from this tensor; values beyond the range saturate). The
// scheme must be per-tensor kAmax.
void fake_quantize_with_scale(const BlockScaling& s, float encode_scale, std::span<const float> in,
                              std::span<float> out, BlockStats* stats = nullptr, uint64_t index_base = 0);

// The packed form. Element codes are stored row-major "along the block axis": for axis = 1 the
// array's own row-major order; for axis = 0 the transpose (cols x rows, row-major), so every 1-D
// block is contiguous. FP4 codes are two per byte, the even element in the low nibble (as
// pack_nibbles, ml_dtypes, PyTorch float4_e2m1fn_x2), each row of the stored layout padded to a
// whole byte; other formats one code per byte (code_bytes). Scales are a separate array in block
// order: scale_rows x scale_cols row-major, scale_rows = blocks across the axis, scale_cols =
// blocks along it (for axis = 0 again transposed). E8M0 and E4M3 scales are 1-byte codes, FP32
// scales 4-byte little-endian floats (the decode scale, as TE's scale_inv). NVFP4's tensor-level
// decode scale is `tensor_scale` (1 / s_enc).
struct BlockPacked {
  size_t rows = 0, cols = 0;       // of the original array
  int axis = 1;
  std::vector<uint8_t> codes;
  size_t code_row_bytes = 0;       // bytes per stored row of codes
  std::vector<uint8_t> scales;
  size_t scale_rows = 0, scale_cols = 0;
  float tensor_scale = 1.0f;       // NVFP4 second level (decode); 1 elsewhere
};

BlockPacked block_quantize(const BlockScaling& s, std::span<const float> in, size_t rows, size_t cols,
                           BlockStats* stats = nullptr, uint64_t index_base = 0, double tensor_amax = -1);
// The scalar reference of block_quantize (every element through encode()); tests compare.
BlockPacked block_quantize_reference(const BlockScaling& s, std::span<const float> in, size_t rows, size_t cols,
                                     BlockStats* stats = nullptr, uint64_t index_base = 0,
                                     double tensor_amax = -1);
// Exact values of a packed array, row-major rows x cols; gives the same bits as block_fake_quantize.
void block_dequantize(const BlockScaling& s, const BlockPacked& p, std::span<float> out);
// Decode value of one stored scale (index in block order).
double block_scale_value(const BlockScaling& s, const BlockPacked& p, size_t index);

// cuBLAS's layout of 1-byte block scale factors for block-scaled GEMMs (cuBLAS docs, "1D Block
// Scaling Factors Layout"; torchao to_blocked): the scale_rows x scale_cols matrix is padded
// with zeros to multiples of 128 x 4, cut into 128x4 tiles stored tile-row-major, and inside a
// tile (r, c) goes to byte (r % 32) * 16 + (r / 32) * 4 + c.
std::vector<uint8_t> swizzle_scales_cublas(std::span<const uint8_t> scales, size_t scale_rows,
                                           size_t scale_cols);

// Transformer Engine's delayed scaling (§3.2): the encode scale for step t comes from the amax
// history of earlier steps. scale = (max_elem / amax) / 2^margin over the window ("max") or the
// latest entry ("most_recent"); a non-finite or zero amax keeps the previous scale; an infinite
// scale becomes FLT_MAX.
class DelayedScaling {
 public:
  enum class Algo : uint8_t { kMax, kMostRecent };
  DelayedScaling(double max_elem, int history_len = 1024, Algo algo = Algo::kMax, int margin = 0);
  float scale() const { return scale_; }
  // Records the amax of this step's tensor and recomputes the scale for the next step.
  void update(float amax);
  const std::vector<float>& history() const { return history_; }  // most recent first
 private:
  double max_elem_;
  Algo algo_;
  int margin_;
  std::vector<float> history_;
  float scale_ = 1.0f;
};

// Error of an approximation q of x (finite pairs only; non-finite inputs are counted apart).
// Sums use fixed-size chunks combined in a fixed order, so the result is the same on any thread
// count.
struct ErrorStats {
  uint64_t count = 0;          // finite inputs compared
  uint64_t nonfinite_inputs = 0;
  uint64_t nonzero_inputs = 0;
  uint64_t flushed = 0;        // x != 0, q == 0
  double signal_power = 0;     // sum x^2
  double noise_power = 0;      // sum (x - q)^2
  double mse = 0;
  double qsnr_db = 0;          // 10 log10(signal / noise); +inf when exact
  double max_rel_error = 0;    // over x != 0
};
ErrorStats error_stats(std::span<const float> x, std::span<const float> q);

// Largest finite |x| over the array (NaN and Inf ignored) and whether any was non-finite.
double finite_amax(std::span<const float> x, bool* any_nonfinite = nullptr);

}  // namespace precsim
