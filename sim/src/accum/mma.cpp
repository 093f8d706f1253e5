// One matrix instruction D = A B + C (mma.h): the instruction found by name or picked by the
// operand formats, its shape and types checked, each output one dot product of the instruction's
// model starting from C.
#include "precsim/sim/accum/mma.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "accum_engine.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument("mma: " + msg); }

// The ARCH/INSTRUCTION part of a spec: up to the first ':' that is not part of a "::".
std::string_view instruction_head(std::string_view spec) {
  for (size_t i = 0; i < spec.size(); ++i) {
    if (spec[i] != ':') continue;
    if (i + 1 < spec.size() && spec[i + 1] == ':') {
      ++i;
      continue;
    }
    return spec.substr(0, i);
  }
  return spec;
}

std::string picking_presets() {
  std::string s;
  for (const AccumModel& p : accum_presets())
    if (!p.pick.empty()) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

// The instruction `arch` has for operands a x b writing D in d (default FP32 where it has one),
// not block-scaled: the one of shape m x n x k where there is one (a name with ranges of M and N
// takes them from the shape), else the first in MMA-Sim's order, whose shape the caller refuses.
InstructionShape pick_row(const std::string& arch, const Format& a, const Format& b, const std::optional<Format>& d,
                          int64_t m, int64_t n, int64_t k) {
  std::vector<const InstructionInfo*> rows;
  bool fp32 = false;
  for (const InstructionInfo& r : instruction_table()) {
    if (r.arch != arch || !r.scale.empty() || !same_encoding(format_by_name(r.a), a) ||
        !same_encoding(format_by_name(r.b), b) || (d && !same_encoding(format_by_name(r.d), *d)))
      continue;
    rows.push_back(&r);
    fp32 = fp32 || r.d == "fp32";
  }
  if (rows.empty()) {
    pick_instruction(arch, a, b);  // throws, listing the operand pairs the architecture has
    bad(fmt::format("{} has no instruction for {} x {} writing D in {}", arch, a.name, b.name, d->name));
  }
  const InstructionShape* first = nullptr;
  std::vector<InstructionShape> shapes;
  for (const InstructionInfo* r : rows) {
    if (!d && fp32 && r->d != "fp32") continue;
    for (const std::string& nm : instruction_names(*r)) shapes.push_back(find_instruction(arch + "/" + nm));
  }
  for (const InstructionShape& s : shapes) {
    if (s.m == m && s.n == n && s.k == k) return s;
    if (!first) first = &s;
  }
  return *first;
}

}  // namespace

MmaInstruction resolve_mma(const std::string& spec, const std::optional<Format>& a, const std::optional<Format>& b,
                           const std::optional<Format>& d, int64_t m, int64_t n, int64_t k) {
  const AccumModel parsed = parse_accum_model(spec);
  InstructionShape s;
  MmaInstruction ins;
  if (!parsed.pick.empty()) {
    if (!a || !b)
      bad(fmt::format("'{}' picks its {} instruction by the operand formats: give both (a_format and b_format, "
                      "--a-format and --b-format)", spec,
                      parsed.pick));
    s = pick_row(parsed.pick, *a, *b, d, m, n, k);
    ins.model = instruction_model(*s.row, s.name);
  } else if (is_instruction_spec(instruction_head(spec))) {
    s = find_instruction(instruction_head(spec));
    ins.model = parsed;
  } else {
    bad(fmt::format("'{}' is not one instruction; give ARCH/INSTRUCTION (`precsim models` lists them) or a preset "
                    "that picks one: {}",
                    spec, picking_presets()));
  }
  const InstructionInfo& r = *s.row;
  ins.row = &r;
  ins.name = r.arch + "/" + s.name;
  ins.m = s.m, ins.n = s.n, ins.k = s.k;
  ins.a = a.value_or(format_by_name(r.a));
  ins.b = b.value_or(format_by_name(r.b));
  ins.c = format_by_name(r.c);
  ins.d = format_by_name(r.d);
  ins.model = for_operands(ins.model, ins.a, ins.b);  // refuses other operand types, naming the instruction's
  if (d && !same_encoding(*d, ins.d))
    bad(fmt::format("instruction {} writes D in {}, not {}", ins.name, ins.d.name, d->name));
  if (!r.scale.empty()) {
    ins.scale = format_by_name(r.scale == "ue4m3" ? "e4m3" : r.scale);
    ins.scale_block = r.scale_block;
  }
  return ins;
}

namespace {

void check_shape(const MmaInstruction& ins, const char* what, const MmaMatrix& x, int64_t rows, int64_t cols) {
  if (x.rows != rows || x.cols != cols || static_cast<int64_t>(x.values.size()) != rows * cols)
    bad(fmt::format("instruction {} is m{}n{}k{}: {} must be {} x {}, not {} x {}", ins.name, ins.m, ins.n, ins.k,
                    what, rows, cols, x.rows, x.cols));
}

void check_values(const char* what, const MmaMatrix& x, const Format& f) {
  for (int64_t i = 0; i < x.rows * x.cols; ++i) {
    const float v = x.values[i];
    const double q = round_to(f, v);
    if (!(q == v || (std::isnan(q) && std::isnan(v))))
      bad(fmt::format("{}[{}][{}] = {} ({:a}) is not a value of {}", what, i / x.cols, i % x.cols, v, v, f.name));
  }
}

void check_scales(const MmaInstruction& ins, const char* what, const MmaMatrix& s, int64_t rows) {
  const int64_t cols = ins.k / ins.scale_block;
  if (s.rows != rows || s.cols != cols || static_cast<int64_t>(s.values.size()) != rows * cols)
    bad(fmt::format("instruction {} takes {} as {} x {} decode scales (one per {} k), not {} x {}", ins.name, what,
                    rows, cols, ins.scale_block, s.rows, s.cols));
  const bool ue4m3 = ins.row->scale == "ue4m3";
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float v = s.values[i];
    if (!(std::isfinite(v) && v >= 0 && round_to(*ins.scale, v) == v && (v > 0 || ue4m3)))
      bad(fmt::format("{}[{}][{}] = {} ({:a}) is not a {} value, which {} takes", what, i / cols, i % cols, v, v,
                      ue4m3 ? "UE4M3 (a non-negative e4m3 value)" : "UE8M0 (a power of two, 2^-127..2^127)",
                      ins.name));
  }
}

}  // namespace

std::vector<double> mma(const MmaInstruction& ins, const MmaOperands& x) {
  check_shape(ins, "A", x.a, ins.m, ins.k);
  check_shape(ins, "B", x.b, ins.k, ins.n);
  check_shape(ins, "C", x.c, ins.m, ins.n);
  check_values("A", x.a, ins.a);
  check_values("B", x.b, ins.b);
  check_values("C", x.c, ins.c);
  const bool scaled = ins.scale.has_value();
  if (!scaled && (!x.a_scales.values.empty() || !x.b_scales.values.empty()))
    bad(fmt::format("instruction {} takes no block scales (a_scales, b_scales)", ins.name));
  if (scaled) {
    check_scales(ins, "a_scales", x.a_scales, ins.m);
    check_scales(ins, "b_scales", x.b_scales, ins.n);
  }
  const detail::AccumEngine eng(ins.model, ins.a, ins.b, ins.d);
  const int64_t groups = scaled ? ins.k / ins.scale_block : 0;
  std::vector<double> d(static_cast<size_t>(ins.m * ins.n));
  for (int64_t i = 0; i < ins.m; ++i) {
    for (int64_t j = 0; j < ins.n; ++j) {
      uint32_t st = 0;
      const detail::DotOperands dx{x.a.values.data() + i * ins.k, 1, x.b.values.data() + j, ins.n, ins.k};
      const double c = x.c.values[i * ins.n + j];
      d[i * ins.n + j] =
          scaled ? eng.scaled_dot(dx, {x.a_scales.values.data() + i * groups, x.b_scales.values.data() + j * groups,
                                       ins.scale_block},
                                  c, st)
                 : eng.dot(dx, c, st);
    }
  }
  return d;
}

}  // namespace precsim
