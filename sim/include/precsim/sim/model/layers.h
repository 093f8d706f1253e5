// Layers as forward/backward pairs of free functions in the style of llm.c: outputs first, then
// inputs, then sizes (the linear layer's products go through gemm(), sim/gemm.h); backward functions accumulate (+=) into their gradient outputs. Each op
// computes in its element type T (float: FP32 opmath of a low-precision variant; double: the
// reference) and rounds nothing itself: the recipe's rounding points are applied by the caller.
// Transcendentals come from the C library in double and are rounded once to T.
#pragma once

#include <cstddef>
#include <cstdint>

namespace precsim {

// out = inp weight^T + bias, with the product already formed by a GEMM: out holds inp weight^T
// on entry. out is (B,OC), bias is (OC) or null.
template <class T>
void bias_forward(T* out, const T* bias, int batch, int oc);
// dbias += sum over the batch of dout, in order b = 0..B-1. dout is (B,OC).
template <class T>
void bias_backward(T* dbias, const T* dout, int batch, int oc);

template <class T>
void relu_forward(T* out, const T* inp, size_t n);
template <class T>
void relu_backward(T* dinp, const T* inp, const T* dout, size_t n);

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). The forward can keep each
// tanh (tanh_out, n values) for a backward over the same inp (tanh_in): the bits of computing it
// again, without the second call to the double tanh, which is most of GELU's time.
template <class T>
void gelu_forward(T* out, const T* inp, size_t n, T* tanh_out = nullptr);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n, const T* tanh_in = nullptr);

// out, inp are (B,C); weight, bias (C); mean, rstd (B), saved for the backward pass.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int batch,
                       int c, double eps = 1e-5);
template <class T>
void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const T* mean, const T* rstd, int batch, int c);

// BatchNorm in training mode: per channel, the mean and biased variance over the B rows of this
// call (so a micro-batch normalises by its own statistics). out, inp are (B,C); weight, bias, mean,
// var (biased), rstd (C).
template <class T>
void batchnorm_forward(T* out, T* mean, T* var, T* rstd, const T* inp, const T* weight, const T* bias, int batch,
                       int c, double eps = 1e-5);
template <class T>
void batchnorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                        const T* mean, const T* rstd, int batch, int c);
// Evaluation mode: the given (running) mean and variance.
template <class T>
void batchnorm_inference(T* out, const T* inp, const T* weight, const T* bias, const T* mean, const T* var, int batch,
                         int c, double eps = 1e-5);

// The pieces of the two passes, for statistics shared by row groups that live on different workers
// (SyncBatchNorm): batchnorm_forward is stats then normalize, batchnorm_backward is sums then
// apply with count = batch.
// Per channel, the mean and biased variance of the B rows (two passes, rows in order).
template <class T>
void batchnorm_stats(T* mean, T* var, const T* inp, int batch, int c);
// out = (inp - mean) rstd weight + bias, rstd = 1 / sqrt(var + eps) (stored, (C)).
template <class T>
void batchnorm_normalize(T* out, T* rstd, const T* inp, const T* weight, const T* bias, const T* mean, const T* var,
                         int batch, int c, double eps = 1e-5);
// Mean and biased variance of the union of G row groups from each group's own (group_mean,
// group_var are (G,C); counts (G)), groups combined in order by Chan, Golub and LeVeque's pairwise
// update: n = n_a + n_b, d = mean_b - mean_a, mean = mean_a + d n_b / n,
// M2 = M2_a + M2_b + d^2 n_a n_b / n.
template <class T>
void batchnorm_combine_stats(T* mean, T* var, const T* group_mean, const T* group_var, const int* counts, int groups,
                             int c);
// Per channel over the B rows: sum_dnorm = sum weight dout, sum_dnorm_norm = sum weight dout xhat.
template <class T>
void batchnorm_backward_sums(T* sum_dnorm, T* sum_dnorm_norm, const T* dout, const T* inp, const T* weight,
                             const T* mean, const T* rstd, int batch, int c);
// The rest of the backward for B rows whose statistics were taken over `count` rows, given the sums
// over all those rows: dinp += (dnorm - sum_dnorm / count - xhat sum_dnorm_norm / count) rstd;
// dweight, dbias += this call's rows' own contributions.
template <class T>
void batchnorm_backward_apply(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                              const T* mean, const T* rstd, const T* sum_dnorm, const T* sum_dnorm_norm, int count,
                              int batch, int c);

// Per-row loss; probs (B,V) saved; targets are class indices.
template <class T>
void softmax_xent_forward(T* losses, T* probs, const T* logits, const int32_t* targets, int batch, int v);
// dlogits += (probs - onehot) * dloss; dloss is the gradient of the total loss with respect to each
// row's loss (1/B for a mean, times the loss scale).
template <class T>
void softmax_xent_backward(T* dlogits, const T* probs, const int32_t* targets, T dloss, int batch, int v);

// Per-row mean squared error over V outputs.
template <class T>
void mse_forward(T* losses, const T* pred, const T* target, int batch, int v);
template <class T>
void mse_backward(T* dpred, const T* pred, const T* target, T dloss, int batch, int v);

// out = a + b; the backward adds dout to both.
template <class T>
void residual_forward(T* out, const T* a, const T* b, size_t n);
template <class T>
void residual_backward(T* da, T* db, const T* dout, size_t n);

}  // namespace precsim
