// Every accumulation model precsim names, for `precsim models` and precsim.accum_models().
#include <nlohmann/json.hpp>

#include "precsim/sim/accum/accum_model_json.h"
#include "precsim/sim/accum/instruction_model.h"

namespace precsim {

nlohmann::json accum_models_json() {
  nlohmann::json rows = nlohmann::json::array();
  for (const AccumModel& p : accum_presets()) {
    nlohmann::json j = to_json(p);
    j["group"] = "preset";
    rows.push_back(j);
  }
  for (const InstructionInfo& r : instruction_table()) {
    nlohmann::json j = to_json(instruction_model(r, r.first_name()));
    j["group"] = "instruction";
    j["arch"] = r.arch;
    j["family"] = r.family;
    j["pattern"] = r.arch + "/" + r.pattern();
    j["names"] = instruction_names(r).size();
    j["operands"] = {{"a", r.a}, {"b", r.b},         {"c", r.c},
                     {"d", r.d}, {"scale", r.scale}, {"scale_block", r.scale_block}};
    j["mmasim"] = {{"arithmetic", r.arithmetic}, {"L_max", r.l_max}, {"F", r.f},     {"F2", r.f2},
                   {"e_zero", r.e_zero},         {"G", r.group},     {"rho", r.rho}, {"k", r.k}};
    rows.push_back(j);
  }
  return rows;
}

}  // namespace precsim
