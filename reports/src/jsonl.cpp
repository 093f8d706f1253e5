#include "precsim/reports/jsonl.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace precsim {

JsonlWriter::JsonlWriter(const std::filesystem::path& path, nlohmann::json header) : path_(path) {
  fd_ = path == "-" ? ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0)
                    : ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
  if (fd_ < 0) throw std::runtime_error("cannot write '" + path.string() + "': " + std::strerror(errno));
  header["schema"] = kJsonlSchema;
  write_line(header);
}

JsonlWriter::~JsonlWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlWriter::write(const nlohmann::json& record) { write_line(record); }

void JsonlWriter::write_line(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = ::write(fd_, line.data() + done, line.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot write '" + path_.string() + "': " + std::strerror(errno));
    }
    done += static_cast<size_t>(w);
  }
  ++lines_;
}

JsonlContents read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("'" + path.string() + "': cannot open (missing or unreadable)");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  JsonlContents c;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    ++line_no;
    if (nl == std::string::npos) {  // no newline: the writer died mid-line
      c.truncated = true;
      break;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text.begin() + static_cast<ptrdiff_t>(pos), text.begin() + static_cast<ptrdiff_t>(nl));
    } catch (const nlohmann::json::parse_error& e) {
      throw std::invalid_argument("'" + path.string() + "' line " + std::to_string(line_no) + ": not JSON (" + e.what() + ")");
    }
    pos = nl + 1;
    if (line_no == 1) {
      if (!j.is_object() || !j.contains("schema") || j["schema"] != std::string(kJsonlSchema))
        throw std::invalid_argument("'" + path.string() + "': the first line is not a " + std::string(kJsonlSchema) + " header");
      c.header = std::move(j);
    } else {
      c.records.push_back(std::move(j));
    }
  }
  if (line_no == 0 || (line_no == 1 && c.truncated))
    throw std::invalid_argument("'" + path.string() + "': empty, no " + std::string(kJsonlSchema) + " header");
  return c;
}

}  // namespace precsim
