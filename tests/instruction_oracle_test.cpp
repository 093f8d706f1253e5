// Every numeric class of matrix instruction MMA-Sim models (instruction_table(): architecture,
// family, K, operand/accumulator types, scale kind and arithmetic), by its precsim name, against
// MMA-Sim itself (tests/instruction_reference.py), bit for bit: accum_dot with a random C (the
// scalar model) and gemm() with C = 0 (the GEMM path, block scales included), chained along K one
// instruction at a time. Operands: normal values; a wide exponent range with subnormals;
// cancelling pairs; zeros; NaN and Inf where the formats have them. A few dot products per class
// (4 x 4 outputs); PRECSIM_INSTRUCTION_FULL=1 runs 16 x 16 outputs and a longer K. Each class's
// agreement is printed as "coverage ARCH/NAME agree total" for scripts/instruction_coverage.py.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "precsim/formats/rounding.h"
#include "precsim/reports/npy.h"
#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/accum/instruction_model.h"
#include "support/python_oracle.h"

namespace precsim {
namespace {

namespace fs = std::filesystem;

bool full_run() {
  const char* v = std::getenv("PRECSIM_INSTRUCTION_FULL");
  return v && *v && std::string(v) != "0";
}
const int64_t kM = full_run() ? 16 : 4, kN = kM;

enum class Dist { kNormal, kWide, kCancel, kZeros, kSpecial };
constexpr Dist kDists[] = {Dist::kNormal, Dist::kWide, Dist::kCancel, Dist::kZeros, Dist::kSpecial};
const char* name(Dist d) {
  switch (d) {
    case Dist::kNormal: return "normal";
    case Dist::kWide: return "wide";
    case Dist::kCancel: return "cancel";
    case Dist::kZeros: return "zeros";
    case Dist::kSpecial: return "special";
  }
  return "?";
}

// One representative name per numeric class, in table order.
std::vector<const InstructionInfo*> classes() {
  std::vector<const InstructionInfo*> v;
  std::map<std::string, bool> seen;
  for (const InstructionInfo& r : instruction_table()) {
    const std::string key =
        fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", r.arch, r.family, r.k, r.a, r.b, r.c, r.d,
                    r.scale, r.scale_block, r.arithmetic, r.l_max, r.f, r.f2, r.e_zero, r.group, r.rho);
    if (!seen.emplace(key, true).second) continue;
    v.push_back(&r);
  }
  return v;
}

struct Data {
  std::vector<float> a, b, c, sa, sb;
  int64_t k = 0, groups = 0;
};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  double u() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int i(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  float value(const Format& f, int lo, int hi) {
    const double x = (u() < 0.5 ? -1 : 1) * (1 + u()) * std::ldexp(1.0, i(lo, hi));
    QuantOptions o;
    o.overflow = Overflow::kSaturate;
    return static_cast<float>(round_to(f, x, o));
  }
  // Within float's range: the fp64 instructions take float values here (DotOperands are float).
  float operand(const Format& f, Dist d) {
    const int lo = std::max(f.emin() - f.man_bits, -149), hi = std::min(f.emax() - 1, 40);
    if (d == Dist::kWide) return value(f, lo, hi);
    if (d == Dist::kZeros && u() < 0.5) return u() < 0.5 || f.nonfinite == NonFinite::kFnuz ? 0.0f : -0.0f;
    return value(f, -2, std::min(f.emax() - 1, 2));
  }
  // NaN or (where the format has it) Inf, for a few entries.
  float special(const Format& f) {
    if (f.nonfinite == NonFinite::kFiniteOnly) return value(f, -2, 2);
    if (f.nonfinite != NonFinite::kIeee || u() < 0.3) return NAN;
    return u() < 0.5 ? INFINITY : -INFINITY;
  }

 private:
  std::mt19937_64 rng_;
};

void fill_scales(const InstructionInfo& r, Dist d, Gen& g, Data& x) {
  x.groups = x.k / r.scale_block;
  const bool ue4m3 = r.scale == "ue4m3";
  const Format sf = format_by_name(ue4m3 ? "e4m3" : "e8m0");
  auto scale = [&] {
    if (ue4m3) {
      if (d == Dist::kZeros && g.u() < 0.2) return 0.0f;
      return std::fabs(g.value(sf, d == Dist::kWide ? -9 : -3, d == Dist::kWide ? 7 : 3));
    }
    return static_cast<float>(std::ldexp(1.0, d == Dist::kWide ? g.i(-50, 45) : g.i(-8, 8)));
  };
  x.sa.resize(kM * x.groups);
  x.sb.resize(kN * x.groups);
  for (auto& v : x.sa) v = scale();
  for (auto& v : x.sb) v = scale();
}

Data make_data(const InstructionInfo& r, Dist d, uint64_t seed) {
  const Format af = format_by_name(r.a), bf = format_by_name(r.b), cf = format_by_name(r.c);
  Gen g(seed);
  Data x;
  const int64_t per = std::max<int64_t>(2, (full_run() ? 256 : 16) / r.k);
  x.k = r.k * per;
  x.a.resize(kM * x.k);
  x.b.resize(kN * x.k);
  for (auto& v : x.a) v = g.operand(af, d);
  for (auto& v : x.b) v = g.operand(bf, d);
  if (d == Dist::kCancel) {  // pairs that cancel exactly, with small terms left over
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t k = 1; k < x.k; k += 2)
        x.a[i * x.k + k] = g.u() < 0.75 ? -x.a[i * x.k + k - 1] : g.value(af, af.emin(), af.emin() + 2);
    for (int64_t j = 0; j < kN; ++j)
      for (int64_t k = 1; k < x.k; k += 2) x.b[j * x.k + k] = x.b[j * x.k + k - 1];
  }
  if (d == Dist::kSpecial)
    for (int t = 0; t < 3; ++t) {
      x.a[g.i(0, int(kM * x.k) - 1)] = g.special(af);
      x.b[g.i(0, int(kN * x.k) - 1)] = g.special(bf);
    }
  x.c.resize(kM * kN);
  for (auto& c : x.c) {
    const int lo = std::max(cf.emin() - cf.man_bits, -149);
    if (d == Dist::kWide)
      c = g.value(cf, lo, std::min(cf.emax() - 1, 40));
    else if (d == Dist::kZeros)
      c = g.u() < 0.5 ? (g.u() < 0.5 ? 0.0f : -0.0f) : g.value(cf, lo, cf.emin());
    else
      c = g.value(cf, -2, 6);
  }
  if (d == Dist::kSpecial) x.c[0] = g.special(cf), x.c[1] = NAN;
  if (!r.scale.empty()) fill_scales(r, d, g, x);
  return x;
}

class Instructions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("precsim_instr_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ofstream list(dir_ / "cases.txt");
    uint64_t seed = 20261202;
    for (const InstructionInfo* r : classes())
      for (const Dist d : kDists) {
        const Data x = make_data(*r, d, seed++);
        const std::string id = fmt::format("c{}", data_.size());
        auto save = [&](const char* what, const std::vector<float>& v, size_t rows) {
          write_npy(dir_ / (id + "_" + what + ".npy"), "<f4", {rows, v.size() / rows}, v.data(), v.size() * 4);
        };
        save("a", x.a, kM);
        save("b", x.b, kN);
        save("c", x.c, kM);
        if (!r->scale.empty()) {
          save("sa", x.sa, kM);
          save("sb", x.sb, kN);
        }
        data_.push_back(x);
        list << id << ' ' << r->arch << '/' << r->first_name() << '\n';
      }
    list.close();
    std::string cmd = "TORCH_EXTENSIONS_DIR='" PRECSIM_BINARY_DIR "/torch_extensions' '";
    cmd += testing::oracle_python();
    cmd += "' '" PRECSIM_SOURCE_DIR "/tests/instruction_reference.py' '" + dir_.string() + "' 2>&1";
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
    const NpyArray r = read_npy(dir_ / fmt::format("c{}_{}.npy", index, what));
    return std::vector<double>(r.as<double>(), r.as<double>() + r.count());
  }

  static inline fs::path dir_;
  static inline std::vector<Data> data_;
  static inline int status_ = -1;
};

int64_t compare(const std::string& label, const std::vector<double>& ours, const std::vector<double>& theirs) {
  int64_t bad = 0;
  for (size_t o = 0; o < ours.size(); ++o) {
    if (testing::same_result(ours[o], theirs[o])) continue;
    if (++bad <= 2)
      std::cout << fmt::format("{} output ({}, {}): ours {:a}, MMA-Sim {:a}\n", label, o / kN, o % kN, ours[o],
                               theirs[o]);
  }
  return bad;
}

// Ours for one case: accum_dot with C (unscaled instructions), and gemm() with C = 0.
std::pair<std::vector<double>, std::vector<double>> ours(const InstructionInfo& r, const AccumModel& model,
                                                         const Data& x) {
  const Format af = format_by_name(r.a), bf = format_by_name(r.b);
  std::vector<double> dot;
  if (r.scale.empty())
    for (int64_t i = 0; i < kM; ++i)
      for (int64_t j = 0; j < kN; ++j)
        dot.push_back(accum_dot(model, std::span(x.a).subspan(i * x.k, x.k), std::span(x.b).subspan(j * x.k, x.k),
                                x.c[i * kN + j], af, bf));
  GemmArgs g;
  g.m = kM, g.n = kN, g.k = x.k, g.trans_b = true;
  g.a_format = af, g.b_format = bf, g.out_format = model.acc;
  g.threads = 1;
  if (!r.scale.empty()) {
    g.a_scales = BlockScales{x.sa.data(), r.scale_block, 1, x.groups};
    g.b_scales = BlockScales{x.sb.data(), r.scale_block, 1, x.groups};
  }
  std::vector<double> gm(kM * kN);
  gemm(model, g, x.a.data(), x.b.data(), gm.data());
  return {dot, gm};
}

TEST_F(Instructions, EveryClassMatchesMmaSimBitForBit) {
  const auto cls = classes();
  int64_t agree = 0, total = 0, classes_ok = 0;
  for (size_t ci = 0; ci < cls.size(); ++ci) {
    const InstructionInfo& r = *cls[ci];
    const std::string spec = r.arch + "/" + r.first_name();
    const AccumModel model = parse_accum_model(spec);
    int64_t c_agree = 0, c_total = 0;
    for (size_t di = 0; di < std::size(kDists); ++di) {
      const size_t idx = ci * std::size(kDists) + di;
      std::vector<double> dot, gm;
      try {
        std::tie(dot, gm) = ours(r, model, data_[idx]);
      } catch (const std::exception& e) {
        ADD_FAILURE() << spec << ": " << e.what();
        continue;
      }
      const std::string label = spec + " " + name(kDists[di]);
      const int64_t bad_dot = dot.empty() ? 0 : compare(label + " accum_dot", dot, theirs(idx, "d"));
      const int64_t bad_gemm = compare(label + " gemm", gm, theirs(idx, "d0"));
      EXPECT_EQ(bad_dot + bad_gemm, 0) << label;
      c_agree += int64_t(dot.size() + gm.size()) - bad_dot - bad_gemm;
      c_total += int64_t(dot.size() + gm.size());
    }
    std::cout << fmt::format("coverage {} {} {}\n", spec, c_agree, c_total);
    classes_ok += c_agree == c_total;
    agree += c_agree;
    total += c_total;
  }
  std::cout << fmt::format("MMA-Sim agreement: {} of {} classes, {} of {} outputs bit for bit\n", classes_ok,
                           cls.size(), agree, total);
}

}  // namespace
}  // namespace precsim
