// A device GEMM against the emulation (`precsim gpu gemm`): one operand set on the device and
// through each accumulation model, with the bit-for-bit agreement of each; the models ranked by how
// well they reproduce the device.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "precsim/sim/accum/accum_model.h"
#include "precsim/sim/hw/gpu_compare.h"
#include "precsim/sim/hw/gpu_device.h"
#include "precsim/sim/hw/gpu_library.h"

namespace precsim {

struct EmulatedPreset {
  std::string preset;  // as the user named it
  AccumModel model;
};

struct DeviceGemmCheck {
  std::string operands;               // the operand set's name
  std::vector<float> a, b;            // row-major m x k and k x n
  std::vector<double> device;         // the device's D, row-major m x n
  PrecsimGpuGemmResult algorithm{};   // what cuBLASLt ran
  std::vector<PresetScore> scores;    // in the order of the presets given
};

// Operands of `operand_set` (make_operands with `seed`), D on the device, then D under each preset
// (alpha = the FP32 product scale_a * scale_b, as cuBLASLt applies it). GpuError from the device
// passes through. `progress` hears one line per step (e.g. "random operands, emulating a100").
DeviceGemmCheck check_device_gemm(const GpuLibrary& gpu, const DeviceGemmSpec& spec, const std::string& operand_set,
                                  const std::vector<EmulatedPreset>& presets, uint64_t seed,
                                  const std::function<void(const std::string&)>& progress = {});

// The preset with the most exact matches summed over `checks` (the first in `presets` on ties).
std::string best_preset(const std::vector<std::string>& presets, const std::vector<DeviceGemmCheck>& checks);

// Whether `preset` matched the device bit for bit on every check it was part of.
bool matches_everywhere(const std::string& preset, const std::vector<DeviceGemmCheck>& checks);

}  // namespace precsim
