// Private to formats/: the random Hadamard transform of size 16 on FP32 data (the NVFP4 recipe's
// case) on pieces of an array, for passes that transform a piece and use it while it is in cache
// (block_fused.cpp). Same arithmetic, same bits as random_hadamard_transform (hadamard.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace precsim {

// `runs` runs of 16 consecutive floats; signs: the 16 signs. out may alias in.
void rht16_runs(const float* in, float* out, size_t runs, const double* signs);
// w columns of 16 rows `stride` floats apart, each column one vector. With amax (not null), the
// largest |y| of column c as float bits goes to amax[c]. out may alias in.
void rht16_columns(const float* in, float* out, size_t stride, size_t w, const double* signs, uint32_t* amax);

}  // namespace precsim
