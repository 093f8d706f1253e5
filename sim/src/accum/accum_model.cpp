#include "precsim/sim/accum/accum_model.h"

#include "accum_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "precsim/formats/spec.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "precsim/sim/accum/instruction_model.h"

namespace precsim {
namespace {

const Format& fp32() { return detail::fp32_format(); }
const Format& fp64() { return detail::fp64_format(); }

constexpr const char* kSrcFasi = "Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 7:e330 (2021)";
constexpr const char* kSrcKm = "Khattak & Mikaitis, arXiv:2512.07004 (KM26 models)";
constexpr const char* kSrcMma = "Xie et al., MMA-Sim, arXiv:2511.10909";
constexpr const char* kSrcMmaemu = "mmaemu 0.1.0 model/plan.py";
// The block-FMA model and where each preset's parameters were measured: docs/reference/sources.md.
constexpr const char* kRef = "docs/reference/sources.md, block-FMA model";

AccumModel simple(std::string name, AccumKind kind, bool fma, std::string desc) {
  AccumModel m;
  m.name = std::move(name);
  m.kind = kind;
  m.fma = fma;
  m.source = "IEEE 754 binary32 arithmetic (definition)";
  m.description = std::move(desc);
  return m;
}

AccumModel block(std::string name, int n, int frac, int floor, int split, std::string src,
                 std::string desc) {
  AccumModel m;
  m.name = std::move(name);
  m.kind = AccumKind::kBlockFma;
  m.block.block_size = n;
  m.block.frac_bits = frac;
  m.block.align_exp_floor = floor;
  m.block.instruction_split = split;
  m.source = std::move(src) + "; " + kRef;
  m.description = std::move(desc);
  return m;
}

// Blackwell's block-scaled tcgen05.mma (MMA-Sim's ST-FDPA and GST-FDPA, docs/reference/sources.md): the
// scale factors enter the fused sum, so a scale change moves the alignment of its products.
void add_block_scaled_presets(std::vector<AccumModel>& p) {
  const std::string src = std::string(kSrcMma) + " (tcgen05.mma block_scale); PTX ISA 8.7 tcgen05.mma";
  AccumModel m = block("b200-mxf8f6f4", 32, 25, -133, 1, src + ", kind::mxf8f6f4",
                       "B200 tcgen05 kind::mxf8f6f4: fp8/fp6/fp4 operands, UE8M0 scales per 32 k applied to each "
                       "product inside the block of 32, 25 fraction bits, FP32 result truncated");
  m.block.in_instruction_scales = true;
  p.push_back(m);
  m = block("b200-mxf4nvf4", 64, 35, -139, 1, src + ", kind::mxf4nvf4",
            "B200 tcgen05 kind::mxf4nvf4 (NVFP4): e2m1 operands, UE4M3 scales per 16 k; groups of 16 products "
            "summed exactly, scaled, aligned at 35 fraction bits over k=64, FP32 result truncated");
  m.block.in_instruction_scales = true;
  m.block.scale_group = 16;
  m.block.scale_ue4m3 = true;
  p.push_back(m);
  m.name = "b200-mxf4";
  m.source = src + ", kind::mxf4 and kind::mxf4nvf4 with .ue8m0; " + kRef;
  m.description = "B200 tcgen05 kind::mxf4 (MXFP4): e2m1 operands, UE8M0 scales per 32 (or 16) k; groups of 16 "
                  "products summed exactly, scaled, aligned at 35 fraction bits over k=64, FP32 result truncated";
  m.block.scale_ue4m3 = false;
  p.push_back(m);
}

// FP16-output variants (D = C in FP16): each block's exact truncated sum rounded to nearest FP16,
// zeros aligned at the variant's own exponent (MMA-Sim e_zero for fp16 output).
void add_fp16_output_presets(std::vector<AccumModel>& p) {
  struct Variant {
    const char* base;
    int floor;
    const char* instruction;
  };
  static const Variant kVariants[] = {
      {"v100", -19, "mma.m8n8k4.f16.f16.f16.f16 (sm_70)"},
      {"t4", -20, "mma.m16n8k8.f16.f16.f16.f16 (sm_75)"},
      {"a100", -20, "mma.m16n8k16.f16.f16.f16.f16 (sm_80)"},
      {"ada", -20, "mma.m16n8k16.f16.f16.f16.f16 (sm_89)"},
      {"ada-fp8", -20, "mma.m16n8k32.f16.e4m3/e5m2.f16 (sm_89)"},
      {"h100", -21, "wgmma.m64nNk16.f16.f16.f16 (sm_90a)"},
      {"h100-fp8-fast", -21, "wgmma.m64nNk32.f16.e4m3/e5m2 (sm_90a)"},
      {"b200", -21, "tcgen05.mma kind::f16 with f16 D (sm_100a)"},
      {"b200-fp8", -21, "tcgen05.mma kind::f8f6f4 with f16 D (sm_100a)"},
  };
  for (const Variant& v : kVariants) {
    const auto base = std::find_if(p.begin(), p.end(), [&](const AccumModel& m) { return m.name == v.base; });
    AccumModel m = *base;
    m.name = std::string(v.base) + "-f16acc";
    m.acc = format_by_name("fp16");
    m.block.out_frac_bits = m.acc.man_bits;
    m.block.final_rounding = Rounding::kNearestEven;
    m.block.align_exp_floor = v.floor;
    m.source = std::string(kSrcMma) + " (e_zero " + std::to_string(v.floor) + ", RNE-FP16); " + kSrcFasi + "; " + kRef;
    m.description = std::string(v.instruction) + ": as " + v.base +
                    " but C and D in FP16, each block's result rounded to nearest-even FP16";
    p.push_back(m);
  }
}

// GPUs whose preset picks the instruction from the operand formats (for_operands): shown with the
// instruction it takes for fp16 operands.
void add_instruction_set_presets(std::vector<AccumModel>& p) {
  struct Gpu {
    const char *name, *arch, *what;
  };
  static const Gpu kGpus[] = {
      {"mi100", "cdna1", "AMD Instinct MI100 (CDNA1) MFMA: fp16/bf16 blocks summed exactly, rounded to nearest FP32"},
      {"mi250x", "cdna2", "AMD Instinct MI250X (CDNA2) MFMA: FP32 multiplies and adds flushing subnormals"},
      {"mi300x", "cdna3", "AMD Instinct MI300X (CDNA3) MFMA: truncated block sums, rounded to nearest FP32; fnuz FP8"},
      {"rtx5090", "rtx-blackwell",
       "RTX 5090 (sm_120) mma: blocks of 32 bytes, 25 fraction bits; kind::f8f6f4 FP8/FP6/FP4"},
  };
  const Format fp16 = format_by_name("fp16");
  for (const Gpu& g : kGpus) {
    AccumModel m = pick_instruction(g.arch, fp16, fp16);
    m.name = g.name;
    m.operands.clear();
    m.pick = g.arch;
    m.description = std::string(g.what) + "; the instruction chosen by the operand formats (shown: fp16)";
    m.source += "; instruction as MMA-Sim lists it for " + std::string(g.arch);
    p.push_back(m);
  }
}

std::vector<AccumModel> make_presets() {
  std::vector<AccumModel> p;
  p.push_back(simple("fp32-seq", AccumKind::kSequential, false,
                     "FP32 recursive sum in increasing k, product and add each rounded to nearest-even"));
  p.push_back(simple("fp32-fma", AccumKind::kSequential, true,
                     "FP32 recursive sum with a fused multiply-add per step (CUDA-core FFMA)"));
  p.push_back(simple("pairwise", AccumKind::kPairwise, false,
                     "FP32 products summed by a balanced binary tree (halves, left first)"));
  p.push_back(simple("kahan", AccumKind::kKahan, false, "FP32 Kahan-compensated recursive sum"));
  p.push_back(simple("exact", AccumKind::kExact, false,
                     "exact sum (long accumulator), rounded once to nearest-even FP32"));
  {
    AccumModel u = simple("unordered", AccumKind::kUnordered, false,
                          "Eigen's float GEMM: summation order depends on CPU and threads; NOT reproducible");
    u.source = "Eigen 3.4 general matrix product";
    p.push_back(u);
  }
  p.push_back(block("v100", 4, 23, -1024, 1, std::string(kSrcKm) + " V100TC.m; " + kSrcMma + "; " + kSrcFasi,
                    "V100 fp16 HMMA: blocks of 4, 23 fraction bits, FP32 result truncated"));
  p.push_back(block("t4", 8, 24, -132, 1, std::string(kSrcMma) + " Turing; " + kSrcFasi +
                                              " (floor assumed as A100: unverified)",
                    "T4 fp16: blocks of 8, 24 fraction bits, FP32 result truncated"));
  p.push_back(block("a100", 8, 24, -132, 2, std::string(kSrcKm) + " A100TC.m; " + kSrcMma + " Ampere",
                    "A100 fp16/bf16 m16n8k16 = 2 x 8: 24 fraction bits, FP32 result truncated"));
  {
    AccumModel m = block("a100-tf32", 4, 24, -132, 2, std::string(kSrcKm) + "; " + kSrcMma,
                         "A100 tf32 m16n8k8 = 2 x 4: 24 fraction bits; FP32 operands rounded to TF32 nearest-even (cuBLAS)");
    p.push_back(m);
  }
  p.push_back(block("ada", 8, 24, -132, 2, std::string(kSrcKm) + " AdaTC.m, L40STC.m; " + kSrcMma + " Ada",
                    "L40S / RTX 4090 fp16/bf16: blocks of 8, 24 fraction bits, FP32 result truncated"));
  {
    AccumModel m = block("ada-fp8", 16, 13, -132, 2, std::string(kSrcKm) + " AdaTC.m; " + kSrcMma,
                         "L40S / RTX 4090 fp8 mma k32 = 2 x 16: 13 fraction bits, e8m13 result");
    m.block.out_frac_bits = 13;
    p.push_back(m);
    // cuBLASLt's FP8 GEMM without fast accumulation (torch._scaled_mm's default) on Ada.
    m.name = "ada-fp8-promote";
    m.promote_every = 128;
    m.source += "; " + std::string(kSrcMmaemu) + " (RTX 4060, cuBLASLt 12.8.3.14, use_fast_accum=False)";
    m.description = "L40S / RTX 4090 fp8 as cuBLASLt runs it without fast accumulation: chains of 128 products "
                    "from zero, each added to FP32 (nearest-even)";
    p.push_back(m);
  }
  p.push_back(block("h100", 16, 25, -133, 1, std::string(kSrcKm) + " H100TC.m; " + kSrcMma + " Hopper",
                    "H100/H200 fp16/bf16 wgmma: blocks of 16, 25 fraction bits, FP32 result truncated"));
  {
    AccumModel m = block("h100-tf32", 8, 25, -133, 1, std::string(kSrcKm) + "; " + kSrcMma,
                         "H100/H200 tf32: blocks of 8, 25 fraction bits; FP32 operands rounded to TF32 nearest-even (cuBLAS)");
    p.push_back(m);
  }
  {
    AccumModel m = block("h100-fp8-fast", 32, 13, -133, 1,
                         std::string(kSrcKm) + " (fma 32, neab -10); " + kSrcMma + "; DeepSeek-V3 arXiv:2412.19437 3.3.2",
                         "H100/H200 fp8 wgmma, fast accumulation: 13 fraction bits, e8m13 result, never promoted");
    m.block.out_frac_bits = 13;
    p.push_back(m);
    m.name = "h100-fp8-promote";
    m.promote_every = 128;
    m.source += "; CUTLASS 2xAcc mma_promotion_interval 4 x k32; " + std::string(kSrcMmaemu) +
                " (H100 PCIe, cuBLASLt 12.8.3.14, use_fast_accum=False)";
    m.description = "H100/H200 fp8 wgmma with the inner e8m13 accumulator added to FP32 every 128 products";
    p.push_back(m);
  }
  p.push_back(block("b200", 16, 25, -133, 1, std::string(kSrcKm) + " B200TC.m; " + kSrcMma + " Blackwell",
                    "B200 tcgen05 fp16/bf16: blocks of 16, 25 fraction bits, FP32 result truncated"));
  p.push_back(block("b200-fp8", 32, 25, -133, 1, std::string(kSrcKm) + " B200TC.m (fma 32, neab 2); " + kSrcMma,
                    "B200 tcgen05 fp8/fp6/fp4: blocks of 32, 25 fraction bits, FP32 result truncated"));
  add_block_scaled_presets(p);
  add_fp16_output_presets(p);
  add_instruction_set_presets(p);
  return p;
}

const std::map<std::string, AccumKind, std::less<>>& kind_names() {
  static const std::map<std::string, AccumKind, std::less<>> m = {{"seq", AccumKind::kSequential},
                                                                  {"pairwise", AccumKind::kPairwise},
                                                                  {"kahan", AccumKind::kKahan},
                                                                  {"exact", AccumKind::kExact},
                                                                  {"block", AccumKind::kBlockFma},
                                                                  {"unordered", AccumKind::kUnordered},
                                                                  {"exactblock", AccumKind::kExactBlocks},
                                                                  {"ftz", AccumKind::kFtzPairs},
                                                                  {"tr", AccumKind::kTwoStage}};
  return m;
}

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

int parse_int(std::string_view key, std::string_view v) {
  int x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size())
    bad(fmt::format("accumulation model: '{}={}' is not an integer", key, v));
  return x;
}

bool parse_bool(std::string_view key, std::string_view v) {
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  bad(fmt::format("accumulation model: '{}={}' must be 0 or 1", key, v));
}

Rounding parse_mode(std::string_view key, std::string_view v) {
  try {
    return parse_rounding(v);
  } catch (const std::invalid_argument& e) {
    bad(fmt::format("accumulation model: '{}': {}", key, e.what()));
  }
}

SplitKScheme parse_scheme(std::string_view v) {
  if (v == "compute") return SplitKScheme::kComputeType;
  if (v == "output") return SplitKScheme::kOutputType;
  if (v == "inplace") return SplitKScheme::kInplace;
  if (v == "contiguous") return SplitKScheme::kContiguous;
  if (v == "serial") return SplitKScheme::kSerial;
  if (v == "pairwise") return SplitKScheme::kPairwise;
  bad(fmt::format("accumulation model: splitk_scheme '{}' unknown; allowed: compute, output, inplace, contiguous, "
                  "serial, pairwise", v));
}

void validate_in_instruction_scales(const AccumModel& m) {
  const BlockFmaParams& b = m.block;
  if (!b.in_instruction_scales) {
    if (b.scale_group != 0 || b.scale_ue4m3)
      bad("accumulation model: group and sfmt apply only with inscale=1 (scales applied inside the instruction)");
    return;
  }
  if (b.scale_group < 0 || (b.scale_group > 0 && b.block_size % b.scale_group != 0))
    bad(fmt::format("accumulation model: group={} must be 0 or divide n={}", b.scale_group, b.block_size));
  if (m.promote_every != 0 || m.split_k != 1)
    bad("accumulation model: inscale=1 models one block-scaled instruction chain; promote and splitk must be 0 and 1");
  if (b.normalize_products || !b.in_subnormals)
    bad("accumulation model: inscale=1 needs norm=0 and insub=1 (the block-scaled instructions' inputs)");
}

bool amd_kind(AccumKind k) {
  return k == AccumKind::kExactBlocks || k == AccumKind::kFtzPairs || k == AccumKind::kTwoStage;
}

void validate_amd_kinds(const AccumModel& m) {
  if (!amd_kind(m.kind)) return;
  const BlockFmaParams& b = m.block;
  if (!(m.acc == fp32()))
    bad(fmt::format("accumulation model: {} accumulates in fp32 only (acc={})", to_string(m.kind), m.acc.name));
  if (m.promote_every != 0) bad("accumulation model: promote applies to the block model only");
  if (m.kind == AccumKind::kFtzPairs && b.block_size != 2 && b.block_size != 4)
    bad(fmt::format("accumulation model: ftz n={} must be 2 or 4 (products per add tree)", b.block_size));
  if (b.block_size < 1 || b.block_size > 4096)
    bad(fmt::format("accumulation model: n={} must be in 1..4096", b.block_size));
  if (m.kind == AccumKind::kTwoStage && (b.frac_bits < 1 || b.frac_bits > 40 || b.frac_bits2 < 1 || b.frac_bits2 > 40))
    bad(fmt::format("accumulation model: tr F={} and F2={} must be in 1..40", b.frac_bits, b.frac_bits2));
}

// Rejects parameter combinations the kernels cannot honour exactly.
void validate(const AccumModel& m) {
  const Format& f = m.acc;
  if (f.kind != FormatKind::kFloat || !f.is_signed || !f.has_zero)
    bad(fmt::format("accumulation model: accumulator format '{}' must be a signed floating-point format", f.name));
  if (f.bits() > 64 || f.exp_bits > 11) bad(fmt::format("accumulation model: accumulator format '{}' is wider than fp64", f.name));
  auto no_sr = [](Rounding r, std::string_view what) {
    if (is_stochastic(r))
      bad(fmt::format("accumulation model: {} cannot be stochastic (not modelled)", what));
  };
  no_sr(m.rounding, "round");
  no_sr(m.promote_rounding, "promote_round");
  if (m.tf32_rounding != Rounding::kTowardZero && m.tf32_rounding != Rounding::kNearestEven &&
      m.tf32_rounding != Rounding::kNearestAway)
    bad("accumulation model: tf32 must be toward-zero, nearest-even or nearest-away");
  const bool is_fp64 = f == fp64();
  if (f.man_bits > 50 && !(is_fp64 && m.rounding == Rounding::kNearestEven))
    bad(fmt::format("accumulation model: accumulator '{}' with more than 50 fraction bits supports only fp64 with nearest-even", f.name));
  if (m.split_k < 1 || m.split_k > 1 << 20) bad(fmt::format("accumulation model: splitk={} must be in 1..1048576", m.split_k));
  if (m.promote_every < 0) bad(fmt::format("accumulation model: promote={} must be >= 0", m.promote_every));
  if (m.kind == AccumKind::kUnordered && !(f == fp32()))
    bad("accumulation model: unordered (Eigen) accumulates in fp32 only");
  if (m.promote_every > 0 && m.kind != AccumKind::kBlockFma)
    bad("accumulation model: promote applies to the block model only");
  validate_amd_kinds(m);
  // Only the sequential sum fuses; elsewhere fma=1 was accepted and changed nothing (spec_fuzz).
  if (m.fma && m.kind != AccumKind::kSequential)
    bad(fmt::format("accumulation model: fma=1 applies to seq only; {} rounds each product and sum as it defines",
                    to_string(m.kind)));
  if (m.kind == AccumKind::kBlockFma) {
    const BlockFmaParams& b = m.block;
    if (b.block_size < 1 || b.block_size > 4096) bad(fmt::format("accumulation model: n={} must be in 1..4096", b.block_size));
    if (b.frac_bits < 1 || b.frac_bits > 48) bad(fmt::format("accumulation model: F={} must be in 1..48", b.frac_bits));
    if (b.out_frac_bits < 1 || b.out_frac_bits > f.man_bits)
      bad(fmt::format("accumulation model: ofb={} must be in 1..{} (the fraction bits of {})", b.out_frac_bits, f.man_bits, f.name));
    if (b.final_rounding != Rounding::kTowardZero && b.final_rounding != Rounding::kNearestEven)
      bad("accumulation model: final must be toward-zero or nearest-even");
    if (b.instruction_split < 1) bad("accumulation model: split must be >= 1");
    if (f.man_bits > 50) bad("accumulation model: the block model's output format must have at most 50 fraction bits");
    validate_in_instruction_scales(m);
  }
}

// ops=A+B: two format names.
std::string parse_ops(std::string_view v) {
  const size_t plus = v.find('+');
  if (plus == std::string_view::npos) bad(fmt::format("accumulation model: ops '{}' must be A+B (two format names)", v));
  for (std::string_view f : {v.substr(0, plus), v.substr(plus + 1)}) {
    std::string err;
    if (!parse_format(f, &err)) bad("accumulation model: ops: " + err);
  }
  return std::string(v);
}

void apply(AccumModel& m, std::string_view key, std::string_view v, bool& ofb_set, bool& acc_set) {
  auto& b = m.block;
  if (key == "acc") {
    std::string err;
    auto f = parse_format(v, &err);
    if (!f) bad("accumulation model: acc: " + err);
    m.acc = *f;
    acc_set = true;
  } else if (key == "round") {
    m.rounding = parse_mode(key, v);
  } else if (key == "fma") {
    m.fma = parse_bool(key, v);
  } else if (key == "n") {
    b.block_size = parse_int(key, v);
  } else if (key == "F") {
    b.frac_bits = parse_int(key, v);
  } else if (key == "final") {
    b.final_rounding = parse_mode(key, v);
  } else if (key == "ofb") {
    b.out_frac_bits = parse_int(key, v);
    ofb_set = true;
  } else if (key == "norm") {
    b.normalize_products = parse_bool(key, v);
  } else if (key == "floor") {
    b.align_exp_floor = parse_int(key, v);
  } else if (key == "insub") {
    b.in_subnormals = parse_bool(key, v);
  } else if (key == "outsub") {
    b.out_subnormals = parse_bool(key, v);
  } else if (key == "cnan") {
    b.canonical_nan = parse_bool(key, v);
  } else if (key == "split") {
    b.instruction_split = parse_int(key, v);
  } else if (key == "inscale") {
    b.in_instruction_scales = parse_bool(key, v);
  } else if (key == "group") {
    b.scale_group = parse_int(key, v);
  } else if (key == "sfmt") {
    if (v != "ue8m0" && v != "ue4m3") bad(fmt::format("accumulation model: sfmt '{}' unknown; allowed: ue8m0, ue4m3", v));
    b.scale_ue4m3 = v == "ue4m3";
  } else if (key == "promote") {
    m.promote_every = parse_int(key, v);
  } else if (key == "promote_round") {
    m.promote_rounding = parse_mode(key, v);
  } else if (key == "splitk") {
    m.split_k = parse_int(key, v);
  } else if (key == "splitk_scheme") {
    m.split_k_scheme = parse_scheme(v);
  } else if (key == "tf32") {
    m.tf32_rounding = parse_mode(key, v);
  } else if (key == "F2") {
    b.frac_bits2 = parse_int(key, v);
  } else if (key == "parity") {
    b.parity_halves = parse_bool(key, v);
  } else if (key == "ops") {
    m.operands = parse_ops(v);
  } else if (key == "cin") {
    std::string err;
    auto f = parse_format(v, &err);
    if (!f) bad("accumulation model: cin: " + err);
    m.c_input = f->name;
  } else if (key == "pick") {
    const auto& archs = instruction_architectures();
    if (std::find(archs.begin(), archs.end(), v) == archs.end())
      bad(fmt::format("accumulation model: pick '{}' unknown; allowed: {}", v, fmt::join(archs, ", ")));
    m.pick = std::string(v);
  } else {
    bad(
        fmt::format("accumulation model: unknown key '{}'; allowed: acc, round, fma, n, F, final, ofb, norm, "
                    "floor, insub, outsub, cnan, split, inscale, group, sfmt, promote, promote_round, splitk, "
                    "splitk_scheme, tf32, F2, parity, ops, cin, pick",
                    key));
  }
}

}  // namespace

AccumModel::AccumModel() : acc(fp32()) {}

const std::vector<AccumModel>& accum_presets() {
  static const std::vector<AccumModel> p = make_presets();
  return p;
}

const AccumModel* fp16_output_variant(std::string_view name) {
  const std::string want = std::string(name) + "-f16acc";
  for (const auto& m : accum_presets())
    if (m.name == want) return &m;
  return nullptr;
}

std::string presets_with_fp16_output() {
  std::string s;
  for (const auto& m : accum_presets())
    if (m.name.ends_with("-f16acc")) s += (s.empty() ? "" : ", ") + m.name.substr(0, m.name.size() - 7);
  return s;
}

AccumModel accum_model_with_output(const std::string& spec, const Format& of, const std::string& label) {
  const AccumModel model = parse_accum_model(spec);
  if (model.kind == AccumKind::kBlockFma && same_encoding(of, format_by_name("fp16"))) {
    if (same_encoding(model.acc, of)) return model;
    // A preset's FP16-output variant is another instruction (its own zero exponent and final
    // rounding), not the FP32 one with a narrower accumulator.
    const size_t colon = spec.find(':');
    const AccumModel* variant = fp16_output_variant(spec.substr(0, colon));
    if (!variant)
      throw std::invalid_argument(
          fmt::format("'{}' has no FP16-output variant (the instruction it models has none); "
                      "presets with one: {}",
                      spec, presets_with_fp16_output()));
    return parse_accum_model(variant->name + (colon == std::string::npos ? "" : spec.substr(colon)));
  }
  AccumModel m = parse_accum_model(to_spec(model) + ":acc=" + of.name);
  m.name = spec + " with " + label + " " + of.name;
  return m;
}

std::string known_accum_model_names() {
  std::string s;
  for (const auto& m : accum_presets()) s += (s.empty() ? "" : ", ") + m.name;
  return s;
}

std::string_view to_string(AccumKind k) {
  for (const auto& [name, kind] : kind_names())
    if (kind == k) return name;
  return "?";
}

std::string_view to_string(SplitKScheme s) {
  switch (s) {
    case SplitKScheme::kComputeType: return "compute";
    case SplitKScheme::kOutputType: return "output";
    case SplitKScheme::kInplace: return "inplace";
    case SplitKScheme::kContiguous: return "contiguous";
    case SplitKScheme::kSerial: return "serial";
    case SplitKScheme::kPairwise: return "pairwise";
  }
  return "?";
}

AccumModel parse_accum_model(std::string_view spec) {
  if (!spec.empty() && spec.front() == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(spec);
    } catch (const nlohmann::json::exception& e) {
      bad(std::string("accumulation model: malformed JSON: ") + e.what());
    }
    return accum_model_from_json(j);
  }
  // A later key overrides an earlier one, so that text appended to a spec (or to_spec's output)
  // changes it: "h100:F=30", to_spec(m) + ":acc=bf16".
  // An instruction name has "::" in it (kind::f8f6f4): its keys start at the first lone ':'.
  size_t keys = spec.size();
  if (is_instruction_spec(spec.substr(0, spec.find(':')))) {
    for (size_t i = 0; i < spec.size(); ++i) {
      if (spec[i] != ':') continue;
      if (i + 1 < spec.size() && spec[i + 1] == ':') {
        ++i;
        continue;
      }
      keys = i;
      break;
    }
  }
  const bool instruction = keys != spec.size() || is_instruction_spec(spec.substr(0, spec.find(':')));
  const AccumModel instr = instruction ? instruction_model(spec.substr(0, keys)) : AccumModel();
  const std::string rewritten = instruction ? "instruction" + std::string(spec.substr(keys)) : std::string();
  const Spec parsed = parse_spec(instruction ? std::string_view(rewritten) : spec,
                                 {.what = "accumulation model", .later_key_overrides = true});
  const std::string_view head = instruction ? spec.substr(0, keys) : std::string_view(parsed.name);
  AccumModel m;
  const AccumModel* preset = instruction ? &instr : nullptr;
  for (const auto& p : accum_presets())
    if (p.name == head) preset = &p;
  if (preset) {
    m = *preset;
  } else {
    const auto it = kind_names().find(head);
    if (it == kind_names().end())
      bad(fmt::format("unknown accumulation model '{}'; presets: {}; or a spec KIND[:key=value...] with KIND one "
                      "of seq, pairwise, kahan, exact, block, unordered",
                      head, known_accum_model_names()));
    m.kind = it->second;
    m.name = "custom";
    m.source = m.kind == AccumKind::kBlockFma ? "user spec (" + std::string(kRef) + ")" : "user spec";
    m.description = "";
  }
  bool ofb_set = false, acc_set = false;
  // The block model's keys on another kind were accepted and changed nothing (spec_fuzz found
  // "fp32-fma:F=3"). Only in specs: a report's JSON form of any model carries its "block" object.
  static const std::set<std::string_view> kBlockKeys = {"n",      "F",   "final", "ofb",     "norm",  "floor", "insub",
                                                        "outsub", "cnan", "split", "inscale", "group", "sfmt"};
  for (const SpecOption& o : parsed.options) {
    if (o.is_flag()) throw parsed.error(o, fmt::format("'{}' is not key=value", o.text));
    if (m.kind != AccumKind::kBlockFma && kBlockKeys.count(o.key))
      throw parsed.error(o, fmt::format("'{}' applies to the block model only, not to {}", o.key, to_string(m.kind)));
    try {
      apply(m, o.key, *o.value, ofb_set, acc_set);
    } catch (const std::invalid_argument& e) {
      std::string why = e.what();  // apply()'s messages also serve the JSON form, which has no column
      if (why.starts_with("accumulation model: ")) why.erase(0, std::string_view("accumulation model: ").size());
      throw parsed.error(o, why);
    }
  }
  if (acc_set && !ofb_set) m.block.out_frac_bits = std::min(m.block.out_frac_bits, m.acc.man_bits);
  if (acc_set && !ofb_set && m.kind == AccumKind::kBlockFma && !preset) m.block.out_frac_bits = m.acc.man_bits;
  if (preset && !parsed.options.empty()) {
    m.name = std::string(spec);
    m.description = "preset " + std::string(head) + " with changed parameters";
  }
  validate(m);
  return m;
}

std::string to_spec(const AccumModel& m) {
  const auto& b = m.block;
  std::string s = fmt::format("{}:acc={}:round={}", to_string(m.kind), m.acc.name, to_string(m.rounding));
  if (m.kind == AccumKind::kSequential) s += fmt::format(":fma={}", int(m.fma));
  if (m.kind == AccumKind::kBlockFma) {
    s += fmt::format(":n={}:F={}:final={}:ofb={}:norm={}:floor={}:insub={}:outsub={}:cnan={}:split={}:promote={}:promote_round={}",
                     b.block_size, b.frac_bits, to_string(b.final_rounding), b.out_frac_bits,
                     int(b.normalize_products), b.align_exp_floor, int(b.in_subnormals),
                     int(b.out_subnormals), int(b.canonical_nan), b.instruction_split, m.promote_every,
                     to_string(m.promote_rounding));
    // Only where set, so that the specs of the other models read as before.
    if (b.in_instruction_scales)
      s += fmt::format(":inscale=1:group={}:sfmt={}", b.scale_group, b.scale_ue4m3 ? "ue4m3" : "ue8m0");
  }
  if (amd_kind(m.kind)) s += fmt::format(":n={}", b.block_size);
  if (m.kind == AccumKind::kTwoStage)
    s += fmt::format(":F={}:F2={}:parity={}", b.frac_bits, b.frac_bits2, int(b.parity_halves));
  s += fmt::format(":splitk={}:splitk_scheme={}:tf32={}", m.split_k, to_string(m.split_k_scheme),
                   to_string(m.tf32_rounding));
  if (!m.operands.empty()) s += ":ops=" + m.operands;
  if (!m.c_input.empty()) s += ":cin=" + m.c_input;
  if (!m.pick.empty()) s += ":pick=" + m.pick;
  return s;
}

nlohmann::json to_json(const AccumModel& m) {
  const auto& b = m.block;
  nlohmann::json j = {{"name", m.name},
                      {"kind", to_string(m.kind)},
                      {"acc", m.acc.name},
                      {"round", to_string(m.rounding)},
                      {"fma", m.fma},
                      {"promote", m.promote_every},
                      {"promote_round", to_string(m.promote_rounding)},
                      {"splitk", m.split_k},
                      {"splitk_scheme", to_string(m.split_k_scheme)},
                      {"tf32", to_string(m.tf32_rounding)},
                      {"source", m.source},
                      {"calibrated", m.calibrated},
                      {"reproducible", m.reproducible()},
                      {"description", m.description},
                      {"spec", to_spec(m)}};
  j["block"] = {{"n", b.block_size},          {"F", b.frac_bits},
                {"final", to_string(b.final_rounding)}, {"ofb", b.out_frac_bits},
                {"norm", b.normalize_products}, {"floor", b.align_exp_floor},
                {"insub", b.in_subnormals},   {"outsub", b.out_subnormals},
                {"cnan", b.canonical_nan},    {"split", b.instruction_split}};
  if (m.kind == AccumKind::kTwoStage) {
    j["block"]["F2"] = b.frac_bits2;
    j["block"]["parity"] = b.parity_halves;
  }
  if (!m.operands.empty()) j["ops"] = m.operands;
  if (!m.c_input.empty()) j["cin"] = m.c_input;
  if (!m.pick.empty()) j["pick"] = m.pick;
  if (b.in_instruction_scales) {
    j["block"]["inscale"] = true;
    j["block"]["group"] = b.scale_group;
    j["block"]["sfmt"] = b.scale_ue4m3 ? "ue4m3" : "ue8m0";
  }
  return j;
}

AccumModel accum_model_from_json(const nlohmann::json& j) {
  if (!j.is_object()) bad("accumulation model: JSON must be an object");
  AccumModel m;
  m.name = "custom";
  m.source = "JSON spec";
  m.description = "";
  try {
    if (!j.contains("kind")) bad("accumulation model JSON: missing 'kind'");
    const std::string kind = j.at("kind").get<std::string>();
    const auto it = kind_names().find(kind);
    if (it == kind_names().end())
      bad("accumulation model JSON: kind '" + kind + "' unknown; allowed: seq, pairwise, kahan, exact, block, unordered");
    m.kind = it->second;
    bool ofb_set = true, acc_set = false;
    auto text = [](const nlohmann::json& v) {
      if (v.is_boolean()) return std::string(v.get<bool>() ? "1" : "0");
      if (v.is_number_integer()) return std::to_string(v.get<long long>());
      if (v.is_string()) return v.get<std::string>();
      bad("accumulation model JSON: value " + v.dump() + " must be a string, integer or boolean");
    };
    static const char* kMeta[] = {"name", "kind", "source", "calibrated", "reproducible", "description", "spec", "block"};
    for (const auto& [key, v] : j.items()) {
      bool meta = false;
      for (const char* k : kMeta) meta = meta || key == k;
      if (!meta) apply(m, key, text(v), ofb_set, acc_set);
    }
    if (j.contains("block")) {
      for (const auto& [key, v] : j.at("block").items()) apply(m, key, text(v), ofb_set, acc_set);
    }
    if (j.contains("name")) m.name = j.at("name").get<std::string>();
    if (j.contains("source")) m.source = j.at("source").get<std::string>();
    if (j.contains("description")) m.description = j.at("description").get<std::string>();
    if (j.contains("calibrated")) m.calibrated = j.at("calibrated").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("accumulation model JSON: ") + e.what());
  }
  validate(m);
  return m;
}

AccumModel for_operands(const AccumModel& m, const Format& a, const Format& b) {
  if (!m.pick.empty()) {
    AccumModel r = pick_instruction(m.pick, a, b);
    r.split_k = m.split_k;
    r.split_k_scheme = m.split_k_scheme;
    r.description = m.name + " picks " + r.name + ": " + r.description;
    return r;
  }
  if (m.operands.empty()) return m;
  const size_t plus = m.operands.find('+');
  const Format want_a = format_by_name(m.operands.substr(0, plus)),
               want_b = format_by_name(m.operands.substr(plus + 1));
  std::string wrong;
  if (!same_encoding(a, want_a)) wrong = "A in " + a.name;
  if (!same_encoding(b, want_b)) wrong += (wrong.empty() ? "B in " : " and B in ") + b.name;
  if (!wrong.empty())
    bad(fmt::format("accumulation model '{}' takes A in {} and B in {} (the instruction's operand types), not {}",
                    m.name, want_a.name, want_b.name, wrong));
  return m;
}

bool is_tf32(const Format& f) {
  static const Format tf32 = format_by_name("tf32");
  return same_encoding(f, tf32);
}

}  // namespace precsim
