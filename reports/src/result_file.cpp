#include "precsim/reports/result_file.h"

#include <unistd.h>

#include <stdexcept>
#include <string>

#include "precsim/reports/report.h"

namespace precsim {

void write_result_file(const std::filesystem::path& path, std::string_view content) {
  write_result_file(path, std::span<const std::string_view>(&content, 1));
}

void write_result_file(const std::filesystem::path& path, std::span<const std::string_view> parts) {
  try {
    write_file_atomic(path, parts);
  } catch (const std::runtime_error& e) {
    // The run has finished: its result goes to the temporary directory rather than nowhere.
    std::error_code ec;
    std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
    if (ec) tmp = "/tmp";
    const std::filesystem::path saved =
        tmp / ("precsim-" + std::to_string(::getpid()) + "-" + path.filename().string());
    try {
      write_file_atomic(saved, parts);
    } catch (const std::runtime_error& again) {
      throw std::runtime_error(std::string(e.what()) +
                               "; saving it in the temporary directory failed too: " + again.what());
    }
    throw std::runtime_error(std::string(e.what()) + "; the finished result is saved in " + saved.string() +
                             " instead");
  }
}

}  // namespace precsim
