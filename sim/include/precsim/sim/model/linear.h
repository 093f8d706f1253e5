// The linear layer of every model: forward = product + bias, backward = weight gradient + bias
// gradient + input gradient, each product through Numerics::gemm.
#pragma once

#include <cstdint>

#include "precsim/sim/model/numerics.h"

namespace precsim {

// How the backward products read their operands. A quantized operand's stochastic-rounding bits
// follow its storage order, so each model keeps the layout its results were made with.
enum class LinearOperands : uint8_t {
  kStored,      // dout, x and W as stored, with transpose flags (the MLP)
  kTransposed,  // copies of dout^T, x^T and W^T, so that every product is A B^T (the transformer)
};

// Which linear layer: GemmCall's site, layer and row group, and its backward operand layout.
struct LinearAt {
  int site = 0;
  int layer = 0;
  int group = 0;
  LinearOperands operands = LinearOperands::kStored;
};

// out (rows,oc) = inp (rows,ic) W^T + bias; W is (oc,ic), bias (oc) or null. Observes the input.
template <class T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int rows, int ic, int oc, const LinearAt& at,
                    Numerics<T>& nx);
// dw (oc,ic) = dout^T inp (overwritten); dbias += column sums of dout in row order (null: no bias);
// dinp (rows,ic) = dout W (overwritten; null: not needed).
template <class T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int rows, int ic, int oc,
                     const LinearAt& at, Numerics<T>& nx);

}  // namespace precsim
