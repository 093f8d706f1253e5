#include "export_train_csv.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "csv_table.h"
#include "precsim/reports/json_path.h"

namespace precsim {
namespace {

using nlohmann::json;

// Values of one group of columns of equal length (a SeriesLog object: "step" and the series),
// keyed by step so that groups logged at different steps join into one row per step.
void add_by_step(std::map<double, json>& rows, const json& group, const std::string& prefix) {
  if (!group.is_object() || !group.contains("step") || !group["step"].is_array()) return;
  const json& steps = group["step"];
  for (size_t i = 0; i < steps.size(); ++i) {
    json& row = rows[numeric_value(steps[i])];
    for (auto it = group.begin(); it != group.end(); ++it)
      if (it.key() != "step" && it.value().is_array() && i < it.value().size()) row[prefix + it.key()] = it.value()[i];
  }
}

void steps_table(CsvTable& t, const json& run) {
  for (const auto& v : run["variants"]) {
    std::map<double, json> rows;
    add_by_step(rows, v.value("series", json()), "");
    add_by_step(rows, v.value("local", json()), "local.");
    add_by_step(rows, v.value("evals", json()), "eval.");
    add_by_step(rows, run["reference"].value("series", json()), "reference.");
    for (const auto& [step, cols] : rows) {
      t.new_row();
      t.set("seed", run["seed"]);
      t.set("variant", v["name"]);
      t.set("step", step == std::floor(step) ? json(static_cast<long long>(step)) : json(step));
      for (auto it = cols.begin(); it != cols.end(); ++it) t.set(it.key(), it.value());
    }
  }
}

void summary_table(CsvTable& t, const json& run) {
  const json& ref = run["reference"];
  t.new_row();
  t.set("seed", run["seed"]);
  t.set("variant", "reference");
  for (auto it = ref.begin(); it != ref.end(); ++it)
    if (!it.value().is_object() && !it.value().is_array()) t.set(it.key(), it.value());
  for (const auto& v : run["variants"]) {
    t.new_row();
    t.set("seed", run["seed"]);
    t.set("variant", v["name"]);
    t.set_leaves("", v["summary"]);
    t.set_leaves("roles", v.value("roles", json::object()));
    for (const auto& s : v.value("fp8_delayed_scales", json::array())) {
      const std::string op = "fp8_operand_" + scalar_text(s["operand"]);
      t.set(op + ".scale", s["scale"]);
      t.set(op + ".last_amax", s["last_amax"]);
    }
  }
}

void variants_table(CsvTable& t, const json& variants) {
  for (const auto& v : variants) {
    t.new_row();
    t.set("variant", v["name"]);
    t.set("preset", v["preset"]);
    t.set_leaves("split", v.value("split", json::object()));
    const json& ci = v.value("summary_ci95", json::object());
    for (auto it = v["summary"].begin(); it != v["summary"].end(); ++it) {
      if (it.key() == "diverged_at") {
        const json& d = it.value();
        t.set("diverged_seeds", d.is_array() ? std::count_if(d.begin(), d.end(), [](const json& e) { return !e.is_null(); })
                                             : long(!d.is_null()));
        continue;
      }
      t.set(it.key(), it.value());
      if (ci.contains(it.key())) {
        t.set(it.key() + "_ci95_lo", ci[it.key()][0]);
        t.set(it.key() + "_ci95_hi", ci[it.key()][1]);
      }
    }
    t.set_leaves("memory_bytes", v.value("memory_bytes", json::object()));
  }
}

}  // namespace

bool export_train_csv(const json& results, const std::function<void(const std::string&, const std::string&)>& write) {
  if (!results.is_object() || !results.contains("runs") || !results["runs"].is_array() || !results.contains("variants"))
    return false;
  CsvTable steps, summary, variants;
  for (const auto& run : results["runs"]) {
    steps_table(steps, run);
    summary_table(summary, run);
  }
  variants_table(variants, results["variants"]);
  write("train_steps.csv", steps.text());
  write("train_summary.csv", summary.text());
  write("train_variants.csv", variants.text());
  return true;
}

}  // namespace precsim
