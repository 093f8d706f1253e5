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

// GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
void gelu_forward(T* out, const T* inp, size_t n);
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, size_t n);

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
