// Probing a matrix unit: test vectors in the manner of Khattak and Mikaitis (HPEC 2025; docs/reference/sources.md,
// TC 1.5) that reveal, one block at a time, the parameters of
// the block-FMA model (section 2.1), and the inference of those parameters from the results. The
// vectors are evaluated by a ProbeRunner: a Tensor Core instruction or a cuBLASLt GEMM on a device,
// or, in tests, an emulated model; nothing here touches a device.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "precsim/formats/format.h"
#include "precsim/sim/accum/accum_model.h"

namespace precsim {

// What the probed unit computes: d = c + sum_i a_i * b_i over vectors of length k.
struct ProbeTarget {
  std::string name;   // e.g. "wmma-f16", "cublaslt-e4m3-fast"
  Format in;          // both operands
  Format out;         // format of c and d (fp32; fp16 for FP16 accumulation)
  bool has_c = true;  // false where the unit has no accumulator input (a library GEMM)
  int k = 32;         // length of every vector (a multiple of the instruction's k)
};

struct ProbeVector {
  std::vector<double> a, b;  // values of target.in, length target.k
  double c = 0;              // a value of target.out (0 where the target has no c)
};

// Evaluates vectors; returns d for each, as exact doubles.
using ProbeRunner = std::function<std::vector<double>(const std::vector<ProbeVector>&)>;

struct ProbeResult {
  int frac_bits = -1;               // F: fraction bits kept after alignment (-1: not determined)
  bool frac_bits_at_least = false;  // F is at least frac_bits (the vectors ran out of range)
  std::string align_rounding;       // toward-zero | down | nearest | unknown | n/a
  int out_frac_bits = -1;           // fraction bits of the result
  bool out_frac_bits_limited = false;  // equal to F: the result may hold more than the sum keeps
  std::string out_rounding;         // toward-zero | down | up | nearest-even | nearest-away | n/a
  int block_size = -1;              // n (-1: not determined)
  bool block_size_at_least = false; // no block boundary within k
  std::string block_pattern;        // one character per slot j >= 2: '.' same block as slot 0, '|' not
  std::string input_subnormals;     // kept | flushed | unknown
  std::string output_subnormals;    // kept | flushed | unknown | n/a
  std::string monotonic;            // no | not-shown | n/a
  int promotion_interval = -1;      // products per promotion to a wider sum; 0: none within k; -1: n/a
  std::string promotion_pattern;    // per block start j = n, 2n, ...: '.' absorbed, '|' kept
  nlohmann::json evidence = nlohmann::json::array();  // every vector: test, a, b, c, d, expected
};

ProbeResult run_probes(const ProbeTarget& target, const ProbeRunner& run);

// The block-FMA model the findings describe, named "probed-<target>", marked calibrated; its JSON
// (to_json) is a spec that `precsim dot --model` and `precsim gemm --model` accept.
AccumModel model_from_probe(const ProbeTarget& target, const ProbeResult& r, const std::string& source);

nlohmann::json to_json(const ProbeResult& r);

}  // namespace precsim
