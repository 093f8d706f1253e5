// The linear layer, and the exact FP64 product of a GemmCall.
#include "precsim/sim/model/linear.h"

#include <vector>

#include "precsim/sim/model/layers.h"

namespace precsim {
namespace {

template <class T>
void transpose_into(std::vector<T>& out, const T* in, int rows, int cols) {
  out.resize(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(c) * rows + r] = in[size_t(r) * cols + c];
}

}  // namespace

GemmArgs gemm_call_args(const GemmCall& call) {
  GemmArgs args;
  args.m = call.m;
  args.n = call.n;
  args.k = call.k;
  args.trans_a = call.trans_a;
  args.trans_b = call.trans_b;
  if (int64_t(call.m) * call.n * call.k < kSerialGemmMacs) args.threads = 1;
  return args;
}

void gemm_call_f64(const GemmCall& call, double* c, const double* a, const double* b) {
  const GemmArgs args = gemm_call_args(call);
  const size_t sa = size_t(call.m) * call.k, sb = size_t(call.n) * call.k, sc = size_t(call.m) * call.n;
  for (int i = 0; i < call.batch; ++i) gemm_f64(args, a + i * sa, b + i * sb, c + i * sc);
}

template <class T>
void linear_forward(T* out, const T* inp, const T* w, const T* bias, int rows, int ic, int oc, const LinearAt& at,
                    Numerics<T>& nx) {
  nx.observe_linear_input(at.site, at.layer, std::span<const T>(inp, size_t(rows) * ic));
  nx.gemm(GemmCall{GemmPass::kForward, at.site, at.layer, at.group, rows, oc, ic, 1, false, true}, out, inp, w);
  if (bias) bias_forward(out, bias, rows, oc);
}

template <class T>
void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int rows, int ic, int oc,
                     const LinearAt& at, Numerics<T>& nx) {
  const GemmCall wgrad{GemmPass::kWgrad, at.site, at.layer, at.group, oc, ic, rows, 1, false, true};
  const GemmCall dgrad{GemmPass::kDgrad, at.site, at.layer, at.group, rows, ic, oc, 1, false, true};
  if (at.operands == LinearOperands::kStored) {
    // dW = dout^T inp: A = dout stored (rows,oc), B = inp stored (rows,ic); dX = dout W, W stored (oc,ic).
    nx.gemm(GemmCall{wgrad.pass, at.site, at.layer, at.group, oc, ic, rows, 1, true, false}, dw, dout, inp);
    if (dbias) bias_backward(dbias, dout, rows, oc);
    if (dinp) nx.gemm(GemmCall{dgrad.pass, at.site, at.layer, at.group, rows, ic, oc, 1, false, false}, dinp, dout, w);
    return;
  }
  std::vector<T> at_, bt;
  transpose_into(at_, dout, rows, oc);
  transpose_into(bt, inp, rows, ic);
  nx.gemm(wgrad, dw, at_.data(), bt.data());
  if (dbias) bias_backward(dbias, dout, rows, oc);
  if (!dinp) return;
  transpose_into(bt, w, oc, ic);
  nx.gemm(dgrad, dinp, dout, bt.data());
}

#define PRECSIM_LINEAR(T)                                                                                    \
  template void linear_forward<T>(T*, const T*, const T*, const T*, int, int, int, const LinearAt&,          \
                                  Numerics<T>&);                                                             \
  template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int, int, int, const LinearAt&, \
                                   Numerics<T>&);
PRECSIM_LINEAR(float)
PRECSIM_LINEAR(double)

}  // namespace precsim
