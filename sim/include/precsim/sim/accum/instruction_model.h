// Matrix instructions by name, `ARCH/INSTRUCTION`, as MMA-Sim (Xie et al., arXiv:2511.10909; pip
// mmasim 2.1.1) lists and models them: ARCH one of volta, turing, ampere, ada-lovelace, hopper,
// blackwell, rtx-blackwell, cdna1, cdna2, cdna3, INSTRUCTION spelled as MMA-Sim spells it
// ("ampere/mma.m16n8k16.f32.bf16.bf16.f32", "cdna3/mfma.f32_16x16x16_f16"). The table is
// generated from mmasim by scripts/gen_instruction_table.py (sim/src/accum/instruction_table.inc),
// and each row becomes an AccumModel of the kind MMA-Sim's arithmetic for it corresponds to.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim {

// One row of the generated table: an instruction name pattern and MMA-Sim's arithmetic for it.
struct InstructionInfo {
  std::string arch, family;
  std::string ms, ns;  // M and N values: "a:b:step" or "x,y"; MFMA: its own M and N
  int k = 0;
  std::string rest;               // the name after the shape (MFMA: the whole suffix)
  std::string a, b, c, d, scale;  // precsim format names; scale "" when none
  int scale_block = 0;            // k per scale
  std::string arithmetic;         // MMA-Sim's: fma, t_fdpa, st_fdpa, gst_fdpa, e_fdpa, ftz_mul_add, tr_fdpa, gtr_fdpa
  int l_max = 0, f = 0, f2 = 0, e_zero = 0, group = 0;
  std::string rho;
  // The name with the smallest M and N, and the pattern naming every M and N.
  std::string first_name() const;
  std::string pattern() const;
};

const std::vector<InstructionInfo>& instruction_table();
const std::vector<std::string>& instruction_architectures();
// Every instruction name of the row (one per M and N), "family.mMnNkK.rest" or "mfma.suffix".
std::vector<std::string> instruction_names(const InstructionInfo& row);
// Whether a model spec's head names an instruction (it has an ARCH/ part).
bool is_instruction_spec(std::string_view head);
// The model of one instruction; std::invalid_argument for an unknown architecture (listing them)
// or an instruction it does not have (listing those it has).
AccumModel instruction_model(std::string_view arch_and_instruction);
// The row of one instruction name and the shape the name gives (MFMA: its M, N and K); the same
// errors as instruction_model.
struct InstructionShape {
  const InstructionInfo* row = nullptr;
  std::string name;  // without the ARCH/ part
  int m = 0, n = 0, k = 0;
};
InstructionShape find_instruction(std::string_view arch_and_instruction);
AccumModel instruction_model(const InstructionInfo& row, std::string_view name);
// The instruction ARCH uses for operands a and b (the first in MMA-Sim's order with FP32 output,
// not block-scaled); std::invalid_argument listing the operand pairs it has.
AccumModel pick_instruction(std::string_view arch, const Format& a, const Format& b);

}  // namespace precsim
