// Differential test against MMA-Sim (Xie et al., arXiv:2511.10909; `pip install mmasim`, pinned by
// scripts/setup.sh; tests/mmasim_reference.py does its side): every GPU preset, the FP16-output
// variants and the block-scaled Blackwell presets against the instruction each models, bit for
// bit, on five kinds of operands (normal; wide exponent range with subnormals; cancelling, with
// scale blocks that cancel under the largest scales; half zeros; probes of the exponent zeros
// align at), through accum_dot (the scalar model, with C) and gemm() (the vector kernels and the
// block-scaled path, C = 0). The interpreter is $PRECSIM_VENV_PYTHON, else build/venv/bin/python
// of the source tree; without mmasim the test is skipped, or fails where CI or
// PRECSIM_REQUIRE_ORACLES is set. MMA-Sim is a test oracle only, never a dependency.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "support/python_oracle.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

// A preset and the instruction it models (MMA-Sim's API, architecture and PTX shape.types).
struct Case {
  const char* preset;
  const char* api;
  const char* arch;  // '_' for ' '
  const char* instruction;
  const char* a_fmt;
  const char* b_fmt;
  int64_t scale_block = 0;  // block-scaled: k per scale
  bool ue4m3 = false;
};

const Case kCases[] = {
    {"v100", "mma", "Volta", "m8n8k4.f32.f16.f16.f32", "fp16", "fp16"},
    {"v100-f16acc", "mma", "Volta", "m8n8k4.f16.f16.f16.f16", "fp16", "fp16"},
    {"t4", "mma", "Turing", "m16n8k8.f32.f16.f16.f32", "fp16", "fp16"},
    {"t4-f16acc", "mma", "Turing", "m16n8k8.f16.f16.f16.f16", "fp16", "fp16"},
    {"a100", "mma", "Ampere", "m16n8k16.f32.f16.f16.f32", "fp16", "fp16"},
    {"a100", "mma", "Ampere", "m16n8k16.f32.bf16.bf16.f32", "bf16", "bf16"},
    {"a100-f16acc", "mma", "Ampere", "m16n8k16.f16.f16.f16.f16", "fp16", "fp16"},
    {"a100-tf32", "mma", "Ampere", "m16n8k8.f32.tf32.tf32.f32", "tf32", "tf32"},
    {"ada", "mma", "Ada_Lovelace", "m16n8k16.f32.f16.f16.f32", "fp16", "fp16"},
    {"ada", "mma", "Ada_Lovelace", "m16n8k16.f32.bf16.bf16.f32", "bf16", "bf16"},
    {"ada-f16acc", "mma", "Ada_Lovelace", "m16n8k16.f16.f16.f16.f16", "fp16", "fp16"},
    {"ada-fp8", "mma", "Ada_Lovelace", "m16n8k32.f32.e4m3.e4m3.f32", "e4m3", "e4m3"},
    {"ada-fp8", "mma", "Ada_Lovelace", "m16n8k32.f32.e5m2.e4m3.f32", "e5m2", "e4m3"},
    {"ada-fp8-f16acc", "mma", "Ada_Lovelace", "m16n8k32.f16.e4m3.e4m3.f16", "e4m3", "e4m3"},
    {"h100", "wgmma", "Hopper", "m64n8k16.f32.f16.f16", "fp16", "fp16"},
    {"h100", "wgmma", "Hopper", "m64n8k16.f32.bf16.bf16", "bf16", "bf16"},
    {"h100-f16acc", "wgmma", "Hopper", "m64n8k16.f16.f16.f16", "fp16", "fp16"},
    {"h100-tf32", "wgmma", "Hopper", "m64n8k8.f32.tf32.tf32", "tf32", "tf32"},
    {"h100-fp8-fast", "wgmma", "Hopper", "m64n8k32.f32.e4m3.e4m3", "e4m3", "e4m3"},
    {"h100-fp8-fast", "wgmma", "Hopper", "m64n8k32.f32.e5m2.e5m2", "e5m2", "e5m2"},
    {"h100-fp8-fast-f16acc", "wgmma", "Hopper", "m64n8k32.f16.e4m3.e4m3", "e4m3", "e4m3"},
    {"h100-fp8-promote", "promote128", "Hopper", "m64n8k32.f32.e4m3.e4m3", "e4m3", "e4m3"},
    {"b200", "tcgen05", "Blackwell", "m128n8k16.kind::f16.f32.f16.f16", "fp16", "fp16"},
    {"b200", "tcgen05", "Blackwell", "m128n8k16.kind::f16.f32.bf16.bf16", "bf16", "bf16"},
    {"b200-f16acc", "tcgen05", "Blackwell", "m128n8k16.kind::f16.f16.f16.f16", "fp16", "fp16"},
    {"b200-fp8", "tcgen05", "Blackwell", "m128n8k32.kind::f8f6f4.f32.e4m3.e4m3", "e4m3", "e4m3"},
    {"b200-fp8", "tcgen05", "Blackwell", "m128n8k32.kind::f8f6f4.f32.e3m2.e2m3", "e3m2", "e2m3"},
    {"b200-fp8", "tcgen05", "Blackwell", "m128n8k32.kind::f8f6f4.f32.e2m1.e2m1", "e2m1", "e2m1"},
    {"b200-fp8-f16acc", "tcgen05", "Blackwell", "m128n8k32.kind::f8f6f4.f16.e4m3.e5m2", "e4m3", "e5m2"},
    {"b200-mxf8f6f4", "tcgen05bs", "Blackwell", "m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0", "e4m3",
     "e4m3", 32},
    {"b200-mxf8f6f4", "tcgen05bs", "Blackwell", "m128n8k32.kind::mxf8f6f4.block32.f32.e2m1.e3m2.ue8m0", "e2m1",
     "e3m2", 32},
    {"b200-mxf4nvf4", "tcgen05bs", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3", "e2m1",
     "e2m1", 16, true},
    {"b200-mxf4", "tcgen05bs", "Blackwell", "m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0", "e2m1", "e2m1", 32},
    {"b200-mxf4", "tcgen05bs", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue8m0", "e2m1", "e2m1",
     16},
};

enum class Dist { kNormal, kWide, kCancel, kZeros, kFloor };
constexpr Dist kDists[] = {Dist::kNormal, Dist::kWide, Dist::kCancel, Dist::kZeros, Dist::kFloor};
const char* name(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kWide: return "wide";
    case Dist::kCancel: return "cancel";
    case Dist::kZeros: return "zeros";
    case Dist::kFloor: return "floor";
  }
  return "?";
}

constexpr int64_t kM = 8, kN = 8, kK = 256;

// Operands and C of one case, in the layout the helper reads (B stored N x K).
struct Data {
  std::vector<float> a, b, c, sa, sb;
  int64_t groups = 0;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  double u() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int i(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  // A value of f: (1 + u) * 2^e with e in [lo, hi], random sign, rounded to nearest-even.
  float value(const Format& f, int lo, int hi) {
    const double x = (u() < 0.5 ? -1 : 1) * (1 + u()) * std::ldexp(1.0, i(lo, hi));
    return static_cast<float>(round_to(f, x));
  }
  float operand(const Format& f, Dist d) {
    if (d == Dist::kWide) return value(f, f.emin() - f.man_bits, std::min(f.emax() - 1, 40));
    if (d == Dist::kZeros && u() < 0.5) return 0.0f;
    return value(f, -2, std::min(f.emax() - 1, 2));
  }

 private:
  std::mt19937_64 rng_;
};

// a * b == 2^t with a a value of af and b = 2^eb of bf (powers of two), and the product's
// alignment exponent (each factor's binade, subnormals at e_min) at most `below`; false if none.
bool power_product(const Format& af, const Format& bf, int t, int eb, int below, float& a, float& b) {
  const int ea = t - eb;
  auto fits = [](const Format& f, int e) { return e >= f.emin() - f.man_bits && e <= f.emax() - 1; };
  if (!fits(af, ea) || !fits(bf, eb) || std::max(ea, af.emin()) + std::max(eb, bf.emin()) > below) return false;
  a = static_cast<float>(std::ldexp(1.0, ea));
  b = static_cast<float>(std::ldexp(1.0, eb));
  return true;
}
int half_up(int t) { return -((-t) / 2); }  // ceil(t / 2) for t <= 0

// Probes of the exponent zeros align at (the floor): with C = 0 and every product below it, a
// result on a rounding boundary (half the smallest FP16 subnormal, nearest-even; twice the
// smallest FP32 subnormal, toward zero) plus or minus one unit of the floor's last kept bit,
// 2^(floor - F + d) with d = 0 (kept) or -1 (dropped). false where the operand formats cannot
// form such products (their products never fall below the floor: it is unobservable).
bool floor_probe(const AccumModel& m, const Format& af, const Format& bf, Data& x) {
  const Format& acc = m.acc;
  const bool nearest = m.block.final_rounding == Rounding::kNearestEven;
  const int t1 = nearest ? acc.emin() - acc.man_bits - 1 : acc.emin() - acc.man_bits + 1;
  const int floor = m.block.align_exp_floor, t2 = floor - m.block.frac_bits;
  float a0, b0, a1[2], b1;
  if (!power_product(af, bf, t1, half_up(t1), floor, a0, b0)) return false;
  // One B for both rows (a1 carries d), small enough that 2^(t2 - 1) / B is still a value of af.
  const int eb = std::min(half_up(t2), t2 - 1 - (af.emin() - af.man_bits));
  for (int d = 0; d < 2; ++d)
    if (!power_product(af, bf, t2 - d, eb, floor, a1[d], b1)) return false;
  std::fill(x.a.begin(), x.a.end(), 0.0f);
  std::fill(x.b.begin(), x.b.end(), 0.0f);
  std::fill(x.c.begin(), x.c.end(), 0.0f);
  for (int64_t j = 0; j < kN; ++j) {
    x.b[j * kK] = b0;
    x.b[j * kK + 1] = b1;
  }
  for (int64_t i = 0; i < kM; ++i) {
    x.a[i * kK] = a0;
    x.a[i * kK + 1] = (nearest ? 1 : -1) * a1[i % 2];
  }
  return true;
}

Data make_data(const Case& cs, const AccumModel& model, Dist d, uint64_t seed) {
  const Format af = format_by_name(cs.a_fmt), bf = format_by_name(cs.b_fmt);
  Gen g(seed);
  Data x;
  x.a.resize(kM * kK);
  x.b.resize(kN * kK);
  for (auto& v : x.a) v = g.operand(af, d);
  for (auto& v : x.b) v = g.operand(bf, d);
  if (d == Dist::kCancel) {  // pairs that cancel exactly, with small terms left over
    for (int64_t r = 0; r < kM; ++r)
      for (int64_t k = 1; k < kK; k += 2)
        x.a[r * kK + k] = g.u() < 0.75 ? -x.a[r * kK + k - 1] : g.value(af, af.emin(), af.emin() + 2);
    for (int64_t r = 0; r < kN; ++r)
      for (int64_t k = 1; k < kK; k += 2) x.b[r * kK + k] = x.b[r * kK + k - 1];
  }
  if (d == Dist::kZeros) std::fill(x.a.begin(), x.a.begin() + kK, 0.0f);  // one row of A all zero
  const Format& acc = model.acc;
  x.c.resize(kM * kN);
  for (int64_t i = 0; i < kM; ++i)
    for (int64_t j = 0; j < kN; ++j) {
      float& c = x.c[i * kN + j];
      if (d == Dist::kWide) c = g.value(acc, acc.emin() - acc.man_bits, std::min(acc.emax() - 1, 40));
      else if (d == Dist::kZeros) c = g.u() < 0.5 ? 0.0f : g.value(acc, acc.emin() - acc.man_bits, acc.emin());
      else c = g.value(acc, -2, 6);
      if (d == Dist::kCancel) {  // C cancels the exact sum of the first block
        double s = 0;
        for (int64_t k = 0; k < 4; ++k) s += double(x.a[i * kK + k]) * x.b[j * kK + k];
        c = static_cast<float>(round_to(acc, -s));
      }
    }
  if (d == Dist::kFloor && cs.scale_block == 0 && !floor_probe(model, af, bf, x)) {
    for (auto& v : x.a) v = g.value(af, af.emin() - af.man_bits, af.emin());  // tiny operands
    for (auto& c : x.c) c = 0.0f;
  }
  if (cs.scale_block > 0) {
    x.groups = kK / cs.scale_block;
    const Format sf = format_by_name(cs.ue4m3 ? "e4m3" : "e8m0");
    auto scale = [&] {
      if (cs.ue4m3) {
        if (d == Dist::kZeros && g.u() < 0.2) return 0.0f;
        return std::fabs(g.value(sf, d == Dist::kWide ? -9 : -3, d == Dist::kWide ? 7 : 3));
      }
      return static_cast<float>(std::ldexp(1.0, d == Dist::kWide ? g.i(-50, 45) : g.i(-8, 8)));
    };
    x.sa.resize(kM * x.groups);
    x.sb.resize(kN * x.groups);
    for (auto& v : x.sa) v = scale();
    for (auto& v : x.sb) v = scale();
    if (d == Dist::kCancel) {
      // The first scale block of every instruction cancels exactly under the largest scales:
      // it still sets the alignment, so the running sum (C) loses its low bits.
      const int64_t n = model.block.block_size;
      const float big = cs.ue4m3 ? 448.0f : 0x1p20f;
      for (int64_t k0 = 0; k0 < kK; k0 += n) {
        for (int64_t r = 0; r < kM; ++r) {
          for (int64_t k = k0 + 1; k < k0 + cs.scale_block; k += 2) x.a[r * kK + k] = -x.a[r * kK + k - 1];
          x.sa[r * x.groups + k0 / cs.scale_block] = big;
        }
        for (int64_t r = 0; r < kN; ++r) x.sb[r * x.groups + k0 / cs.scale_block] = big;
      }
    }
  }
  return x;
}

class MmaSim : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("precsim_mmasim_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream list(dir_ / "cases.txt");
    uint64_t seed = 20261201;
    for (size_t ci = 0; ci < std::size(kCases); ++ci)
      for (const Dist d : kDists) {
        const Case& cs = kCases[ci];
        const Data x = make_data(cs, parse_accum_model(cs.preset), d, seed++);
        const std::string id = fmt::format("c{}_{}", ci, name(d));
        auto save = [&](const char* what, const std::vector<float>& v, size_t rows) {
          write_npy(dir_ / (id + "_" + what + ".npy"), "<f4", {rows, v.size() / rows}, v.data(), v.size() * 4);
        };
        save("a", x.a, kM);
        save("b", x.b, kN);
        save("c", x.c, kM);
        if (cs.scale_block > 0) {
          save("sa", x.sa, kM);
          save("sb", x.sb, kN);
        }
        data_.push_back(x);
        list << id << ' ' << cs.api << ' ' << cs.arch << ' ' << cs.instruction << '\n';
      }
    list.close();
    // torch compiles MMA-Sim's small CPU kernel once; keep it in the build tree.
    std::string cmd = "TORCH_EXTENSIONS_DIR='" PRECSIM_BINARY_DIR "/torch_extensions' '";
    cmd += testing::oracle_python();
    cmd += "' '" PRECSIM_SOURCE_DIR "/tests/mmasim_reference.py' '";
    cmd += dir_.string();
    cmd += "' 2>&1";
    const int rc = std::system(cmd.c_str());
    status_ = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  void SetUp() override {
    const testing::OracleStatus s = testing::oracle_status(status_, "mmasim");
    if (s.ran) return;
    if (!s.skip) FAIL() << s.why;
    GTEST_SKIP() << s.why;
  }

  static std::vector<double> theirs(size_t index, const char* what) {
    const size_t ci = index / std::size(kDists);
    const std::string id = fmt::format("c{}_{}", ci, name(kDists[index % std::size(kDists)]));
    const NpyArray r = read_npy(dir_ / (id + "_" + what + ".npy"));
    return std::vector<double>(r.as<double>(), r.as<double>() + r.count());
  }

  static inline fs::path dir_;
  static inline std::vector<Data> data_;
  static inline int status_ = -1;
};

// Counts and prints disagreements of one case; returns the number.
int64_t compare(const std::string& label, const std::vector<double>& ours, const std::vector<double>& theirs,
                const Data& x) {
  int64_t bad = 0;
  for (size_t o = 0; o < ours.size(); ++o) {
    if (testing::same_result(ours[o], theirs[o])) continue;
    if (++bad <= 3)
      std::cout << fmt::format("{} output ({}, {}): ours {:a}, MMA-Sim {:a}, C {:a}\n", label, o / kN, o % kN,
                               ours[o], theirs[o], double(x.c[o]));
  }
  return bad;
}

TEST_F(MmaSim, EveryPresetMatchesTheInstructionItModelsBitForBit) {
  int64_t agree = 0, total = 0;
  for (size_t idx = 0; idx < data_.size(); ++idx) {
    const Case& cs = kCases[idx / std::size(kDists)];
    const Dist d = kDists[idx % std::size(kDists)];
    const Data& x = data_[idx];
    const AccumModel model = parse_accum_model(cs.preset);
    const Format af = format_by_name(cs.a_fmt), bf = format_by_name(cs.b_fmt);
    const std::string label = fmt::format("{} {} {} {}", cs.preset, cs.api, cs.instruction, name(d));
    // accum_dot with the random C (the scalar model), where the instruction takes no scales.
    if (cs.scale_block == 0) {
      std::vector<double> ours(kM * kN);
      for (int64_t i = 0; i < kM; ++i)
        for (int64_t j = 0; j < kN; ++j)
          ours[i * kN + j] = accum_dot(model, std::span(x.a).subspan(i * kK, kK), std::span(x.b).subspan(j * kK, kK),
                                       x.c[i * kN + j], af, bf);
      const int64_t bad = compare(label + " accum_dot", ours, theirs(idx, "d"), x);
      EXPECT_EQ(bad, 0) << label;
      agree += int64_t(ours.size()) - bad;
      total += int64_t(ours.size());
    }
    // gemm() with C = 0: the vector kernels, or the block-scaled path with the scales.
    GemmArgs g;
    g.m = kM, g.n = kN, g.k = kK, g.trans_b = true;
    g.a_format = af, g.b_format = bf, g.out_format = model.acc;
    g.threads = 2;
    if (cs.scale_block > 0) {
      g.a_scales = BlockScales{x.sa.data(), cs.scale_block, 1, x.groups};
      g.b_scales = BlockScales{x.sb.data(), cs.scale_block, 1, x.groups};
    }
    std::vector<double> ours(kM * kN);
    gemm(model, g, x.a.data(), x.b.data(), ours.data());
    const int64_t bad = compare(label + " gemm", ours, theirs(idx, "d0"), x);
    EXPECT_EQ(bad, 0) << label;
    agree += int64_t(ours.size()) - bad;
    total += int64_t(ours.size());
  }
  std::cout << fmt::format("MMA-Sim agreement: {} of {} outputs bit for bit ({} preset/instruction pairs x {} "
                           "operand kinds)\n", agree, total, std::size(kCases), std::size(kDists));
}

}  // namespace
}  // namespace precsim
