// How a dot product is summed: the order, the format of the running sum, the rounding of each step,
// and the Tensor Core block-FMA model with its per-GPU parameters
// (docs/reference/sources.md, TC 2 and 3).
//
// Spec grammar (accepted wherever a model is named, e.g. `precsim dot --model`):
//   PRESET                               a name from accum_presets() ("a100", "h100-fp8-fast", ...)
//   PRESET:key=value[:key=value...]      a preset with some parameters changed
//   KIND[:key=value...]                  KIND = seq | pairwise | kahan | exact | block | unordered
//   ARCH/INSTRUCTION[:key=value...]      a matrix instruction as MMA-Sim names it
//                                        ("hopper/wgmma.m64n8k32.f32.e4m3.e5m2", instruction_model.h)
//   {...}                                the JSON object written by to_json(AccumModel)
// Keys (all optional; defaults are those of the kind, or of the preset):
//   acc=FORMAT          accumulator format (seq, pairwise, kahan, exact) or block output format
//   round=MODE          rounding of every accumulation step (nearest-even, toward-zero, ...)
//   fma=0|1             seq: the product is added with one rounding (std::fma), as CUDA-core FFMA
//   n=INT               block: products fused per block
//   F=INT               block: fraction bits kept after alignment to the largest exponent
//   final=MODE          block: rounding of each block result (toward-zero or nearest-even)
//   ofb=INT             block: fraction bits of each block result (23 fp32, 13 e8m13, 10 fp16)
//   norm=0|1            block: normalise products to [1,2) before alignment (hardware: 0)
//   floor=INT           block: lower bound of the alignment exponent E
//   insub=0|1 outsub=0|1  block: subnormal inputs / results kept (0: flushed to zero)
//   cnan=0|1            block: NaN results are the canonical NaN
//   split=INT           block: blocks per MMA instruction (documentation of the hardware shape)
//   inscale=0|1         block: block scales of the operands are applied inside the instruction
//                       (Blackwell kind::mxf8f6f4, kind::mxf4nvf4): each product, or each group,
//                       is scaled exactly before the alignment; gemm() with BlockScales then
//                       takes this path instead of an FP32 multiply per block sum
//   group=INT           inscale: products summed exactly in groups of this many, each group
//                       aligned by its scale's exponent (mxf4nvf4: 16); 0: no groups (mxf8f6f4)
//   sfmt=ue8m0|ue4m3    inscale: format of the scale factors (fixes their exponent decomposition)
//   promote=INT         N_C: restart the inner accumulator every N_C products and add it to an
//                       FP32 outer accumulator (0: never, "fast accumulation")
//   promote_round=MODE  rounding of the outer FP32 add (default nearest-even, a CUDA-core add)
//   splitk=INT          K cut into this many contiguous slices summed independently
//   splitk_scheme=compute|output|inplace  where slices are combined: in the accumulator format
//                       (compute), or in the GEMM output format (output, inplace)
//   splitk_scheme=contiguous|serial|pairwise  cuBLASLt's FP8 split-K as mmaemu 0.1.0 names it
//                       (model/plan.py): contiguous: runs of 128-wide k-tiles, split s the tiles
//                       [s*q, (s+1)*q), q = ceil(T/S) (H100); serial, pairwise: 64-wide k-tiles, split s
//                       the tiles t = s mod S (RTX 4060). Partials added in FP32 (nearest-even):
//                       serial and contiguous ((p0 + p1) + p2)..., pairwise h = ceil(S/2),
//                       slot_i = p_i + p_(i+h) where i + h < S - 1, else p_i, then
//                       ((p_(S-1) + slot_0) + slot_1)...; promote restarts within each split
//   F2=INT              tr: fraction bits of the second stage (CDNA3: 31)
//   parity=0|1          tr: products summed as two interleaved halves (even k, odd k) first (CDNA3 FP8)
//   ops=A+B             operand formats the model takes (an instruction's types); others refused
//   cin=FORMAT          block: format the initial C is read in, when not acc (C f16, D f32)
//   pick=ARCH           the instruction of ARCH is chosen from the operand formats (mi300x, rtx5090)
//   tf32=MODE           rounding of FP32 operands into TF32 (toward-zero, nearest-even,
//                       nearest-away); applies when an operand format is tf32
// Example: "block:n=32:F=13:ofb=13:promote=128" is H100 FP8 with CUTLASS-style promotion.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {

enum class AccumKind : uint8_t {
  kSequential,   // s = round(s + round(a*b)), or round(s + a*b) with fma; k in increasing order
  kPairwise,     // products rounded, then a balanced binary tree of rounded adds (halves, left first)
  kKahan,        // compensated sequential sum in the accumulator format
  kExact,        // the exact sum, rounded once
  kBlockFma,     // Tensor Core block FMA: align to the largest exponent, truncate, sum, round
  kUnordered,    // Eigen's GEMM: fast, summation order depends on the CPU; not reproducible
  kExactBlocks,  // blocks of n products and c summed exactly, rounded to nearest (CDNA1 MFMA)
  kFtzPairs,     // FP32 multiplies and adds flushing subnormals, products added in pairs or
                 // fours (n = 2 or 4) before c (CDNA2 MFMA)
  kTwoStage,     // products aligned and truncated at F bits, then c added at F2 bits with
                 // round-down, the sum rounded to nearest FP32 (CDNA3 MFMA)
};

enum class SplitKScheme : uint8_t {
  kComputeType,  // slices combined in the accumulator format (cuBLASLt COMPUTE_TYPE)
  kOutputType,   // slices combined in the GEMM output format (OUTPUT_TYPE)
  kInplace,      // slices added into the output in the output format (INPLACE); same sums here
  kContiguous,   // mmaemu's "contiguous" (H100 cuBLASLt): 128-wide k-tiles in runs, partials in order
  kSerial,       // mmaemu's "serial" (RTX 4060): 64-wide k-tiles t mod S, partials in order
  kPairwise,     // mmaemu's "pairwise": the serial layout, partials added as cuBLASLt's customOption 1
};

// Parameters of the block-FMA model (reference section 2.1).
struct BlockFmaParams {
  int block_size = 8;                               // n
  int frac_bits = 24;                               // F
  Rounding final_rounding = Rounding::kTowardZero;  // toward-zero or nearest-even
  int out_frac_bits = 23;                           // fraction bits of each block result
  bool normalize_products = false;                  // KM26 denorm_prd = 1 means false
  int align_exp_floor = -1024;                      // KM26 min_exp_limit
  bool in_subnormals = true;
  bool out_subnormals = true;
  bool canonical_nan = true;
  int instruction_split = 1;
  bool in_instruction_scales = false;  // inscale
  int scale_group = 0;                 // group
  bool scale_ue4m3 = false;            // sfmt: false UE8M0, true UE4M3
  int frac_bits2 = 31;                 // F2 (kTwoStage)
  bool parity_halves = false;          // parity (kTwoStage)
  friend bool operator==(const BlockFmaParams&, const BlockFmaParams&) = default;
};

struct AccumModel {
  std::string name = "fp32-seq";  // preset name, or "custom"
  AccumKind kind = AccumKind::kSequential;
  Format acc;                      // accumulator (or block output) format; fp32 unless set
  Rounding rounding = Rounding::kNearestEven;
  bool fma = false;
  BlockFmaParams block;
  int promote_every = 0;  // N_C; 0: no promotion
  Rounding promote_rounding = Rounding::kNearestEven;
  int split_k = 1;
  SplitKScheme split_k_scheme = SplitKScheme::kComputeType;
  Rounding tf32_rounding = Rounding::kNearestEven;
  std::string operands;     // "A+B" formats the model takes (an instruction's); empty: any
  std::string pick;         // an architecture whose instruction is chosen by the operand formats
  std::string c_input;      // block: format of the first C when it is not the accumulator's (Volta
                            // mma .f32.f16.f16.f16: C in FP16, D in FP32); empty: acc
  std::string source;       // where the parameters come from
  bool calibrated = false;  // measured on hardware in this project
  std::string description;

  AccumModel();
  bool reproducible() const { return kind != AccumKind::kUnordered; }
  friend bool operator==(const AccumModel&, const AccumModel&) = default;
};

// All named presets, in display order.
const std::vector<AccumModel>& accum_presets();
// The preset modelling the FP16-output variant of preset `name`'s instruction (`<name>-f16acc`:
// FP16 C and D, each block's result rounded to nearest FP16), or nullptr where it has none.
const AccumModel* fp16_output_variant(std::string_view name);
// The names of the presets that have one, comma-separated (for error messages).
std::string presets_with_fp16_output();
std::string known_accum_model_names();
// A preset name, a spec or a JSON object (grammar above). Throws std::invalid_argument naming the
// bad part and what is allowed (unknown presets list the names).
AccumModel parse_accum_model(std::string_view spec);
// Canonical spec string: parse_accum_model(to_spec(m)) == m up to name/source/description.
std::string to_spec(const AccumModel& m);
// spec with an output (accumulator) format applied, as `precsim dot|gemm --output-format` and
// precsim.dot(out_format=) take it: fp16 on a block (Tensor Core) model picks the preset's
// FP16-output variant (`<preset>-f16acc`, the spec's own keys applied on top); any other format
// sets the accumulator format (":acc=FORMAT") and names the model "<spec> with <label> <format>".
// Throws std::invalid_argument: a bad spec, or "'<spec>' has no FP16-output variant ..." where the
// instruction it models has none.
AccumModel accum_model_with_output(const std::string& spec, const Format& of, const std::string& label);

std::string_view to_string(AccumKind);
std::string_view to_string(SplitKScheme);

// Whether an operand format is TF32, whose rounding from FP32 the model's tf32_rounding sets: by
// encoding, not name, so that a spec spelling of it ("e8m10") is TF32 too.
bool is_tf32(const Format& f);

// The model as it runs on operands a and b: a `pick` model becomes the instruction its
// architecture uses for those formats, and a model with `operands` refuses other formats
// (std::invalid_argument naming the formats and what the instruction takes). gemm() and
// accum_dot() call it.
AccumModel for_operands(const AccumModel& m, const Format& a, const Format& b);

}  // namespace precsim
