// The instruction table (generated from MMA-Sim) and the AccumModel of each instruction.
#include "precsim/sim/accum/instruction_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <stdexcept>

namespace precsim {
namespace {

struct Row {
  const char *arch, *family, *ms, *ns;
  int k;
  const char *rest, *a, *b, *c, *d, *scale;
  int block;
  const char* arithmetic;
  int l_max, f, f2, e_zero, group;
  const char* rho;
};

constexpr Row kRows[] = {
#include "instruction_table.inc"
};

constexpr const char* kSource = "MMA-Sim 2.1.1, Xie et al., arXiv:2511.10909";

std::vector<int> values_of(const std::string& spec) {
  std::vector<int> v;
  auto num = [](std::string_view s) {
    int x = 0;
    std::from_chars(s.data(), s.data() + s.size(), x);
    return x;
  };
  if (spec.find(':') != std::string::npos) {
    const size_t p1 = spec.find(':'), p2 = spec.find(':', p1 + 1);
    const int lo = num(std::string_view(spec).substr(0, p1)),
              hi = num(std::string_view(spec).substr(p1 + 1, p2 - p1 - 1));
    const int step = num(std::string_view(spec).substr(p2 + 1));
    for (int x = lo; x <= hi; x += step) v.push_back(x);
    return v;
  }
  size_t b = 0;
  while (b <= spec.size()) {
    const size_t e = std::min(spec.find(',', b), spec.size());
    v.push_back(num(std::string_view(spec).substr(b, e - b)));
    b = e + 1;
  }
  return v;
}

std::string shape_of(const std::string& ms, const std::string& ns, int k) {
  auto show = [](const std::string& s) {
    if (s.find(':') == std::string::npos) return s.find(',') == std::string::npos ? s : "{" + s + "}";
    const std::vector<int> v = values_of(s);
    return fmt::format("{{{}..{} step {}}}", v.front(), v.back(), v[1] - v[0]);
  };
  return "m" + show(ms) + "n" + show(ns) + "k" + std::to_string(k);
}

std::vector<InstructionInfo> make_table() {
  std::vector<InstructionInfo> t;
  for (const Row& r : kRows)
    t.push_back({r.arch, r.family, r.ms, r.ns, r.k, r.rest, r.a, r.b, r.c, r.d, r.scale, r.block, r.arithmetic, r.l_max,
                 r.f, r.f2, r.e_zero, r.group, r.rho});
  return t;
}

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

// NVIDIA names: the family, the shape token mMnNkK, the rest; false when there is no shape token.
bool split_nv(std::string_view name, std::string& family, int& m, int& n, int& k, std::string& rest) {
  size_t b = 0;
  while (b < name.size()) {
    const size_t e = std::min(name.find('.', b), name.size());
    const std::string_view tok = name.substr(b, e - b);
    if (std::sscanf(std::string(tok).c_str(), "m%dn%dk%d", &m, &n, &k) == 3 &&
        tok == fmt::format("m{}n{}k{}", m, n, k)) {
      if (b == 0 || e >= name.size()) return false;
      family = name.substr(0, b - 1);
      rest = name.substr(e + 1);
      return true;
    }
    b = e + 1;
  }
  return false;
}

std::string valid_names(std::string_view arch) {
  std::string s;
  for (const InstructionInfo& r : instruction_table())
    if (r.arch == arch) s += (s.empty() ? "" : ", ") + r.pattern();
  return s;
}

void describe(AccumModel& m, const InstructionInfo& r) {
  std::string params = r.arithmetic + "(";
  if (r.l_max) params += fmt::format("{}={}", r.arithmetic == "ftz_mul_add" ? "P" : "L_max", r.l_max);
  if (r.f) params += fmt::format(", F={}", r.f);
  if (r.f2) params += fmt::format(", F2={}", r.f2);
  if (r.e_zero) params += fmt::format(", e_zero={}", r.e_zero);
  if (r.group) params += fmt::format(", G={}", r.group);
  if (!r.rho.empty()) params += ", rho=" + r.rho;
  m.source = std::string(kSource) + ": " + params + ")";
  m.description = fmt::format("{} {}: A {}, B {}, C {}, D {}{}", r.arch, r.family, r.a, r.b, r.c, r.d,
                              r.scale.empty() ? "" : fmt::format(", {} scales per {} k", r.scale, r.scale_block));
}

}  // namespace

std::string InstructionInfo::first_name() const {
  if (family == "mfma") return "mfma." + rest;
  return fmt::format("{}.m{}n{}k{}.{}", family, values_of(ms).front(), values_of(ns).front(), k, rest);
}

std::string InstructionInfo::pattern() const {
  if (family == "mfma") return "mfma." + rest;
  return family + "." + shape_of(ms, ns, k) + "." + rest;
}

const std::vector<InstructionInfo>& instruction_table() {
  static const std::vector<InstructionInfo> t = make_table();
  return t;
}

const std::vector<std::string>& instruction_architectures() {
  static const std::vector<std::string> a = {"volta",     "turing",        "ampere", "ada-lovelace", "hopper",
                                             "blackwell", "rtx-blackwell", "cdna1",  "cdna2",        "cdna3"};
  return a;
}

std::vector<std::string> instruction_names(const InstructionInfo& r) {
  if (r.family == "mfma") return {"mfma." + r.rest};
  std::vector<std::string> v;
  for (const int m : values_of(r.ms))
    for (const int n : values_of(r.ns)) v.push_back(fmt::format("{}.m{}n{}k{}.{}", r.family, m, n, r.k, r.rest));
  return v;
}

bool is_instruction_spec(std::string_view head) { return head.find('/') != std::string_view::npos; }

AccumModel instruction_model(const InstructionInfo& r, std::string_view name) {
  AccumModel m;
  m.name = r.arch + "/" + std::string(name);
  m.acc = format_by_name(r.d);
  m.operands = r.a + "+" + r.b;
  if (r.c != r.d) m.c_input = r.c;
  m.tf32_rounding = Rounding::kTowardZero;  // the instructions read an FP32 register's top 19 bits
  const int n = std::min(r.k, r.l_max);
  BlockFmaParams& b = m.block;
  b.block_size = n;
  b.instruction_split = n > 0 ? std::max(1, r.k / n) : 1;
  if (r.arithmetic == "fma") {
    m.kind = AccumKind::kSequential;
    m.fma = true;
    b = BlockFmaParams();
  } else if (r.arithmetic == "t_fdpa" || r.arithmetic == "st_fdpa" || r.arithmetic == "gst_fdpa") {
    m.kind = AccumKind::kBlockFma;
    b.frac_bits = r.f;
    b.align_exp_floor = r.e_zero;
    b.final_rounding = r.rho == "RNE-FP16" ? Rounding::kNearestEven : Rounding::kTowardZero;
    b.out_frac_bits = r.rho == "RZ-E8M13" ? 13 : m.acc.man_bits;
    b.in_instruction_scales = r.arithmetic != "t_fdpa";
    b.scale_group = r.group;
    b.scale_ue4m3 = r.scale == "ue4m3";
  } else if (r.arithmetic == "e_fdpa") {
    m.kind = AccumKind::kExactBlocks;
  } else if (r.arithmetic == "ftz_mul_add") {
    m.kind = AccumKind::kFtzPairs;
    b.block_size = r.l_max;  // P: products per add tree
  } else if (r.arithmetic == "tr_fdpa" || r.arithmetic == "gtr_fdpa") {
    m.kind = AccumKind::kTwoStage;
    b.frac_bits = r.f;
    b.frac_bits2 = r.f2;
    b.parity_halves = r.arithmetic == "gtr_fdpa";
  } else {
    bad("instruction table: unknown arithmetic '" + r.arithmetic + "'");
  }
  describe(m, r);
  return m;
}

InstructionShape find_instruction(std::string_view spec) {
  const size_t slash = spec.find('/');
  const std::string arch(spec.substr(0, slash));
  const std::string name(spec.substr(slash + 1));
  const auto& archs = instruction_architectures();
  if (std::find(archs.begin(), archs.end(), arch) == archs.end())
    bad(fmt::format("instruction '{}': unknown architecture '{}'; allowed: {}", spec, arch, fmt::join(archs, ", ")));
  std::string family, rest;
  int m = 0, n = 0, k = 0;
  const bool nv = split_nv(name, family, m, n, k, rest);
  for (const InstructionInfo& r : instruction_table()) {
    if (r.arch != arch) continue;
    if (r.family == "mfma" ? name == "mfma." + r.rest : nv && r.family == family && r.k == k && r.rest == rest) {
      if (r.family == "mfma") return {&r, name, values_of(r.ms).front(), values_of(r.ns).front(), r.k};
      const auto ms = values_of(r.ms), ns = values_of(r.ns);
      if (std::find(ms.begin(), ms.end(), m) == ms.end() || std::find(ns.begin(), ns.end(), n) == ns.end())
        bad(fmt::format("instruction '{}': {} has this instruction as {} only", spec, arch, r.pattern()));
      return {&r, name, m, n, k};
    }
  }
  bad(fmt::format("instruction '{}' does not exist on {} (MMA-Sim's list); valid: {}", name, arch, valid_names(arch)));
}

AccumModel instruction_model(std::string_view spec) {
  const InstructionShape s = find_instruction(spec);
  return instruction_model(*s.row, s.name);
}

AccumModel pick_instruction(std::string_view arch, const Format& a, const Format& b) {
  const InstructionInfo* any = nullptr;
  std::string pairs;
  for (const InstructionInfo& r : instruction_table()) {
    if (r.arch != arch || !r.scale.empty() || r.a == "fp64") continue;
    const std::string pair = r.a + " x " + r.b;
    if (pairs.find(pair) == std::string::npos) pairs += (pairs.empty() ? "" : ", ") + pair;
    if (!same_encoding(format_by_name(r.a), a) || !same_encoding(format_by_name(r.b), b)) continue;
    if (r.d == "fp32") return instruction_model(r, r.first_name());
    if (!any) any = &r;
  }
  if (any) return instruction_model(*any, any->first_name());
  bad(fmt::format("{} has no instruction for operands {} x {}; it has: {}", arch, a.name, b.name, pairs));
}

}  // namespace precsim
