// A sweep: one base training configuration and axes over any of its paths. Each unit is one
// training run (run_training) with its resolved configuration; its id is the digest of that
// configuration, so a unit's report file names exactly what it ran and a rerun finds it again.
//
// Sweep file (JSON):
//   {"base": {...a train config...},
//    "grid": [{"path": "model.hidden", "values": [[16], [32]]}, {"path": "seed", "values": [1, 2, 3]}],
//    "list": [{"optimizer.lr": 0.01}, {"optimizer.lr": 0.03, "steps": 200}]}
// Units are every point of "list" (one empty point when absent) crossed with the grid (last axis
// fastest). Paths are dotted keys and array indices of the resolved base configuration, recipes
// written out in full ("recipes.0.forward.a.format" is a recipe key); "seed" is the axis the merge
// averages over.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

struct SweepUnit {
  size_t index = 0;        // position in plan order
  std::string id;          // 16 hex digits of the SHA-256 of the resolved config
  nlohmann::json point;    // {"path": value} for every axis of this unit
  nlohmann::json config;   // train_config_to_json of the resolved configuration
  double cost = 0;         // relative work estimate, only to hand out the longest units first
};

struct SweepPlan {
  nlohmann::json spec;             // the sweep file as given
  nlohmann::json base;             // the resolved base configuration
  std::vector<std::string> paths;  // every axis path, list keys first, then the grid's, in order
  std::vector<SweepUnit> units;
};

// The most units a sweep may have: each is a training run, and a grid over many axes multiplies
// past what could ever run (or past size_t) before one unit is resolved.
inline constexpr size_t kMaxSweepUnits = 100000;

// Validates everything before any unit runs: unknown keys, an unknown or duplicated axis path, an
// empty axis, more than kMaxSweepUnits units, a unit whose configuration is invalid, two units
// with the same configuration.
// Throws std::invalid_argument naming the bad entry and what is allowed.
SweepPlan plan_sweep(const nlohmann::json& spec);

// Indices of `todo` in dispatch order: the longest (cost) first, plan order among equals. Only the
// order of work depends on it, never a number.
std::vector<size_t> longest_first(const SweepPlan& plan, std::vector<size_t> todo);

}  // namespace precsim
