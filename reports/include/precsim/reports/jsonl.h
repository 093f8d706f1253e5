// JSON Lines streaming (--jsonl): one record per line while a run goes, so that a long run can be
// watched (tail -f) and what finished survives a crash. Each line goes out in one write(2) of the
// whole line, so readers see whole lines; a kill in the middle of a write can leave at most one
// incomplete last line, which read_jsonl reports and skips.
//
// The first line is a header: {"schema": "precsim.jsonl/1", "kind": ..., "config": ..., "seeds": ...};
// then one record per step, e.g. {"step": 10, "variant": "bf16-amp", "loss": 2.31, ...}, numbers
// through json_number ("nan", "inf", "-inf" as strings, as in reports).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace precsim {

inline constexpr std::string_view kJsonlSchema = "precsim.jsonl/1";

class JsonlWriter {
 public:
  // Creates or truncates `path` and writes the header line: `header` with "schema" added. The
  // path "-" is standard output. Throws std::runtime_error naming the path.
  JsonlWriter(const std::filesystem::path& path, nlohmann::json header);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;

  void write(const nlohmann::json& record);  // one compact line
  size_t lines() const { return lines_; }

 private:
  void write_line(const nlohmann::json& j);
  std::filesystem::path path_;
  int fd_ = -1;
  size_t lines_ = 0;
};

struct JsonlContents {
  nlohmann::json header;
  std::vector<nlohmann::json> records;
  bool truncated = false;  // the last line was incomplete (a killed writer) and was skipped
};
// Throws std::invalid_argument naming the file and line on a missing file, a bad header or a
// malformed complete line.
JsonlContents read_jsonl(const std::filesystem::path& path);

}  // namespace precsim
