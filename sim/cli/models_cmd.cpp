// precsim models: every accumulation model preset and matrix instruction, with its parameters and
// its source (a table with a legend, or --json: the list precsim.accum_models() returns).
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "precsim/sim/accum/accum_model_json.h"
#include "precsim/sim/accum/instruction_model.h"

namespace precsim::cli {
namespace {

constexpr const char* kLegend =
    "kind    seq: recursive sum (fma: fused); pairwise; kahan; exact: rounded once; block: Tensor Core\n"
    "        block FMA (n products and C aligned to the largest exponent, truncated to F fraction bits,\n"
    "        summed, rounded once); exactblock: n products and C exact, rounded to nearest (CDNA1);\n"
    "        ftz: FP32 multiplies and adds flushing subnormals, n = 2 or 4 per add tree (CDNA2); tr:\n"
    "        products truncated at F bits, C added at F2 bits rounding down, then nearest FP32 (CDNA3)\n"
    "acc     format of the accumulator (the instruction's D)\n"
    "n       products per block (per add tree for ftz)\n"
    "F       fraction bits kept after alignment (tr: first stage; F2 second)\n"
    "round   rounding of each block result: rz toward zero, rne nearest-even (ofb: its fraction bits)\n"
    "floor   exponent zeros align at (MMA-Sim e_zero)\n"
    "takes   operand formats A x B (instructions); pick: chosen by the operand formats\n"
    "source  where the parameters come from\n";

std::string params(const nlohmann::json& j) {
  const std::string kind = j.at("kind");
  const nlohmann::json& b = j.at("block");
  if (kind == "seq") return j.at("fma").get<bool>() ? "fma" : "";
  if (kind == "block") {
    std::string s =
        fmt::format("n={} F={} {} ofb={} floor={}", b.at("n").get<int>(), b.at("F").get<int>(),
                    b.at("final") == "toward-zero" ? "rz" : "rne", b.at("ofb").get<int>(), b.at("floor").get<int>());
    if (b.contains("inscale"))
      s += fmt::format(" inscale group={} {}", b.at("group").get<int>(), b.at("sfmt").get<std::string>());
    if (j.at("promote").get<int>() > 0) s += fmt::format(" promote={}", j.at("promote").get<int>());
    return s;
  }
  if (kind == "tr")
    return fmt::format("n={} F={} F2={}{}", b.at("n").get<int>(), b.at("F").get<int>(), b.at("F2").get<int>(),
                       b.at("parity").get<bool>() ? " parity" : "");
  if (kind == "exactblock" || kind == "ftz") return fmt::format("n={}", b.at("n").get<int>());
  return "";
}

std::string takes(const nlohmann::json& j) {
  if (j.contains("pick")) return "pick " + j.at("pick").get<std::string>();
  if (!j.contains("ops")) return "any";
  std::string s = j.at("ops");
  s.replace(s.find('+'), 1, " x ");
  return s;
}

void run(bool json, const std::string& arch) {
  const auto& archs = instruction_architectures();
  if (!arch.empty() && std::find(archs.begin(), archs.end(), arch) == archs.end())
    throw UsageError(fmt::format("--arch '{}' unknown; allowed: {}", arch, fmt::join(archs, ", ")));
  nlohmann::json rows = nlohmann::json::array();
  for (const nlohmann::json& j : accum_models_json())
    if (arch.empty() || (j.contains("arch") && j.at("arch") == arch)) rows.push_back(j);
  if (json) {
    std::cout << rows.dump(2) << '\n';
    return;
  }
  std::cout << fmt::format("{:<72} {:<10} {:<6} {:<19} {:<44} {}\n", "model", "kind", "acc", "takes", "parameters",
                           "source");
  for (const nlohmann::json& j : rows) {
    const std::string name =
        j.contains("pattern") ? j.at("pattern").get<std::string>() : j.at("name").get<std::string>();
    std::cout << fmt::format("{:<72} {:<10} {:<6} {:<19} {:<44} {}\n", name, j.at("kind").get<std::string>(),
                             j.at("acc").get<std::string>(), takes(j), params(j), j.at("source").get<std::string>());
  }
  std::cout << "\n" << kLegend;
  std::cout << fmt::format(
      "{} models: {} presets and {} instruction patterns (m{{a..b step s}}: every M or N of the "
      "range is a name)\n",
      rows.size(), std::count_if(rows.begin(), rows.end(), [](const auto& j) { return j.at("group") == "preset"; }),
      std::count_if(rows.begin(), rows.end(), [](const auto& j) { return j.at("group") == "instruction"; }));
}

const Registrar reg(42, [](CLI::App& app) {
  auto* cmd =
      app.add_subcommand("models", "list every accumulation model preset and matrix instruction (ARCH/INSTRUCTION)");
  auto json = std::make_shared<bool>(false);
  auto arch = std::make_shared<std::string>();
  // The list precsim.accum_models() returns, not a report, with the shared flag's wording.
  cmd->add_flag("--json", *json, "print the JSON report on stdout and nothing else");
  cmd->add_option("--arch", *arch, "only the instructions of this architecture (volta ... cdna3)");
  cmd->callback([json, arch] { run(*json, *arch); });
});

}  // namespace
}  // namespace precsim::cli
