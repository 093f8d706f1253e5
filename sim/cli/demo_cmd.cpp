// precsim demo: the embedded default experiment (scripts/demo.sh): classic mixed-precision effects
// side by side in under a minute on two cores.
#include <nlohmann/json.hpp>

#include "train_runner.h"

namespace precsim::cli {

// The demo's configuration; tests/demo_test.cpp holds each effect it shows above a threshold.
extern const char* const kDemoConfig;
const char* const kDemoConfig = R"({
  "steps": 300, "batch": 128, "seed": 1, "shadow_every": 20,
  "data": {"kind": "gaussian-mixture", "features": 32, "classes": 10, "train_size": 4096,
           "heldout_size": 1024, "separation": 1.0, "noise": 1.0},
  "model": {"hidden": [64, 64], "activation": "relu"},
  "optimizer": {"kind": "sgd", "lr": 0.01, "momentum": 0.9},
  "recipes": ["fp32", "bf16-amp", "fp16-noscale", "fp16-amp", "bf16-pure", "bf16-pure-sr",
              "fp8-delayed", "mxfp8", "mxfp4"]
})";

namespace {

struct Args {
  int64_t steps = 0;
  int threads = 0;
  std::string jsonl;
  OutputOptions out;
};

const Registrar reg(61, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("demo", "run the embedded default experiment and write demo-report.json");
  auto a = std::make_shared<Args>();
  a->out.out = "demo-report.json";
  cmd->add_option("--steps", a->steps, kStepsHelp)->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  add_threads_option(cmd, a->threads);
  add_jsonl_option(cmd, a->jsonl);
  add_output_options(cmd, a->out);
  cmd->callback([a] {
    nlohmann::json j = nlohmann::json::parse(kDemoConfig);
    if (a->steps > 0) j["steps"] = a->steps;
    if (a->out.json && a->out.out == "demo-report.json") a->out.out.clear();
    run_train_report(parse_train_config(j, "demo"), a->out, a->jsonl);
  });
});

}  // namespace
}  // namespace precsim::cli
