// `precsim report diff A.json B.json`: what differs between two reports, in configuration and
// seeds and in results, metric by metric; a series is one line (how many entries differ, the
// largest difference and where).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

struct DiffEntry {
  std::string path;
  std::string a, b;  // the two sides as text ("absent" when missing); for series a description
};

struct ReportDiff {
  std::vector<DiffEntry> envelope;  // kind, schema, status
  std::vector<DiffEntry> tool;      // version, commit... (shown, not counted as a difference)
  std::vector<DiffEntry> config;    // config.* and seeds.*
  std::vector<DiffEntry> results;
  bool same() const { return envelope.empty() && config.empty() && results.empty(); }
};

// Both documents must have passed check_envelope.
ReportDiff diff_reports(const nlohmann::json& a, const nlohmann::json& b);
std::string format_diff(const ReportDiff& d, const std::string& a_name, const std::string& b_name);

}  // namespace precsim
