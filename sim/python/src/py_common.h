// What every binding file shares: array types and the rounding options as Python passes them (JSON
// values cross through py_json.h).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "precsim/formats/format.h"
#include "precsim/formats/quant_options.h"

namespace precsim {
struct TrainConfig;
}

namespace precsim::py {

namespace nb = nanobind;

// C-contiguous CPU arrays of one dtype; Python (precsim/_arrays.py) converts or refuses anything
// else before the call, so these never copy.
template <class T>
using Array = nb::ndarray<T, nb::c_contig, nb::device::cpu>;
using AnyArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

// (step, tensor, role) of the stochastic-rounding stream (formats/quant_options.h SrKey).
using KeyTuple = std::tuple<uint64_t, uint32_t, uint32_t>;

// The options of quantize(), checked with the CLI's messages (rounding and overflow name the
// allowed values; sr_bits 1..32). Throws std::invalid_argument (ValueError).
QuantOptions make_options(const std::string& rounding, const std::string& overflow, bool flush_subnormals,
                          int sr_bits, uint64_t seed, const KeyTuple& key);

// A train config: a dict (keys as `precsim train --config-help` lists them) or the path of a JSON
// file, read by C++; every error a ValueError beginning "config" (a missing file: FileNotFoundError).
TrainConfig train_config_of(nb::handle config);

// A NumPy array that takes ownership of `v` (freed when Python drops the array).
template <class T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T> v, std::vector<size_t> shape) {
  auto* data = new std::vector<T>(std::move(v));
  nb::capsule del(data, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(data->data(), shape.size(), shape.data(), del);
}

// The number of elements of an array (the product of its shape).
size_t element_count(const AnyArray& a);

void bind_json(nb::module_& m);
void bind_recipe(nb::module_& m);
void bind_formats(nb::module_& m);
void bind_arrays(nb::module_& m);
void bind_block(nb::module_& m);
void bind_gemm(nb::module_& m);
void bind_allreduce(nb::module_& m);
void bind_reports(nb::module_& m);
void bind_linear(nb::module_& m);
void bind_optim(nb::module_& m);

}  // namespace precsim::py
