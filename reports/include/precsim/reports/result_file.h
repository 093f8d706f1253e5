// Writing a finished result so that it is never lost: a report or an array that the run spent
// minutes or hours on goes somewhere even when its destination refuses it at the end.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

namespace precsim {

// A finished result (a report, an array) written with write_file_atomic; when that fails (a full
// disk, a file system that refuses it only at write time), written to precsim-PID-NAME in the
// temporary directory instead, and std::runtime_error names both: "cannot write 'PATH': No space
// left on device; the finished result is saved in /tmp/precsim-PID-NAME instead". emit_report
// (report.h, --out of every command) and write_npy (npy.h) write through it.
void write_result_file(const std::filesystem::path& path, std::string_view content);
void write_result_file(const std::filesystem::path& path, std::span<const std::string_view> parts);

}  // namespace precsim
