// Embeddings and causal multi-head self-attention. The two attention products run as stacked
// GEMMs over (batch, head), both operands laid out along the reduction dimension, so a recipe
// quantizes each along K exactly as it does a linear layer's operands.
#include <cmath>

#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {
namespace {

// out (rows,cols) = in^T for `batch` stacked (cols,rows) matrices.
template <class T>
void transpose(T* out, const T* in, int rows, int cols, int batch) {
  for (int b = 0; b < batch; ++b) {
    const T* src = in + size_t(b) * rows * cols;
    T* dst = out + size_t(b) * rows * cols;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) dst[size_t(r) * cols + c] = src[size_t(c) * rows + r];
  }
}

bool allowed(const uint8_t* key_valid, int i, int j) { return j <= i && key_valid[j]; }

}  // namespace

template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int batch, int seq, int c) {
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      T* o = out + (size_t(b) * seq + t) * c;
      const T* e = wte + size_t(tokens[size_t(b) * seq + t]) * c;
      const T* p = wpe + size_t(t) * c;
      for (int i = 0; i < c; ++i) o[i] = e[i] + p[i];
    }
}

template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int batch, int seq, int c) {
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t) {
      const T* d = dout + (size_t(b) * seq + t) * c;
      T* e = dwte + size_t(tokens[size_t(b) * seq + t]) * c;
      T* p = dwpe + size_t(t) * c;
      for (int i = 0; i < c; ++i) {
        e[i] += d[i];
        p[i] += d[i];
      }
    }
}

template <class T>
void masked_softmax_forward(T* p, const T* s, const uint8_t* key_valid, T scale, int batch, int heads, int seq,
                            Numerics<T>& nx) {
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i) {
        const uint8_t* kv = key_valid + size_t(b) * seq;
        const size_t row = ((size_t(b) * heads + h) * seq + i) * seq;
        const T* z = s + row;
        T* out = p + row;
        T maxv = -INFINITY;
        bool any = false;
        for (int j = 0; j < seq; ++j)
          if (allowed(kv, i, j)) {
            const T v = nx.opmath(scale * z[j]);
            maxv = !any || v > maxv ? v : maxv;
            any = true;
          }
        T sum = 0;
        for (int j = 0; j < seq; ++j) {
          out[j] = allowed(kv, i, j) ? nx.opmath(static_cast<T>(std::exp(double(nx.opmath(nx.opmath(scale * z[j]) - maxv))))) : T(0);
          sum = nx.opmath(sum + out[j]);
        }
        // A row with no key (a padding query before any real token) attends to nothing.
        for (int j = 0; j < seq; ++j) out[j] = any ? nx.opmath(out[j] / sum) : T(0);
      }
}

template <class T>
void masked_softmax_backward(T* ds, const T* p, const T* dp, T scale, int batch, int heads, int seq) {
  for (size_t r = 0; r < size_t(batch) * heads * seq; ++r) {
    const T* pr = p + r * seq;
    const T* dr = dp + r * seq;
    T dot = 0;
    for (int j = 0; j < seq; ++j) dot += pr[j] * dr[j];
    for (int j = 0; j < seq; ++j) ds[r * seq + j] = scale * pr[j] * (dr[j] - dot);
  }
}

template <class T>
void attention_forward(T* out, AttentionSaved<T>& sv, const T* qkv, const uint8_t* key_valid, int batch, int seq,
                       int c, int heads, int layer, Numerics<T>& nx) {
  const int hs = c / heads, bh = batch * heads;
  const size_t head_elems = size_t(bh) * seq * hs, score_elems = size_t(bh) * seq * seq;
  sv.q.resize(head_elems);
  sv.k.resize(head_elems);
  sv.v.resize(head_elems);
  sv.vt.resize(head_elems);
  sv.scores.resize(score_elems);
  sv.probs.resize(score_elems);
  // Split (B,T,3C) into head-major (B,NH,T,hs).
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hs; ++i) {
          const T* src = qkv + (size_t(b) * seq + t) * 3 * c + size_t(h) * hs + i;
          const size_t dst = ((size_t(b) * heads + h) * seq + t) * hs + i;
          sv.q[dst] = src[0];
          sv.k[dst] = src[c];
          sv.v[dst] = src[2 * c];
        }
  transpose(sv.vt.data(), sv.v.data(), hs, seq, bh);
  tf_gemm(nx, TfSite::kScores, GemmPass::kForward, layer, sv.scores.data(), sv.q.data(), sv.k.data(), seq, seq, hs, bh);
  // Masked scores are never read: zero them so that statistics and roundings see only real logits.
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i)
        for (int j = 0; j < seq; ++j)
          if (!allowed(key_valid + size_t(b) * seq, i, j)) sv.scores[((size_t(b) * heads + h) * seq + i) * seq + j] = T(0);
  nx.observe_scores(layer, sv.scores);
  nx.round(RoundPoint::kScores, layer, sv.scores);
  const T scale = static_cast<T>(1.0 / std::sqrt(double(hs)));
  masked_softmax_forward(sv.probs.data(), sv.scores.data(), key_valid, scale, batch, heads, seq, nx);
  nx.round(RoundPoint::kScores, layer, sv.probs);
  std::vector<T> y(head_elems);  // (B,NH,T,hs)
  tf_gemm(nx, TfSite::kAttnV, GemmPass::kForward, layer, y.data(), sv.probs.data(), sv.vt.data(), seq, hs, seq, bh);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hs; ++i)
          out[(size_t(b) * seq + t) * c + size_t(h) * hs + i] = y[((size_t(b) * heads + h) * seq + t) * hs + i];
}

template <class T>
void attention_backward(T* dqkv, const T* dout, const AttentionSaved<T>& sv, int batch, int seq, int c, int heads,
                        int layer, Numerics<T>& nx) {
  const int hs = c / heads, bh = batch * heads;
  const size_t head_elems = size_t(bh) * seq * hs, score_elems = size_t(bh) * seq * seq;
  std::vector<T> dy(head_elems), dyt(head_elems), tmp(score_elems), dp(score_elems), ds(score_elems);
  std::vector<T> dq(head_elems), dk(head_elems), dvt(head_elems), kt(head_elems), qt(head_elems);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hs; ++i)
          dy[((size_t(b) * heads + h) * seq + t) * hs + i] = dout[(size_t(b) * seq + t) * c + size_t(h) * hs + i];
  // dP = dY V^T (dgrad); dV^T = dY^T P (wgrad: the gradient is operand A).
  tf_gemm(nx, TfSite::kAttnV, GemmPass::kDgrad, layer, dp.data(), dy.data(), sv.v.data(), seq, seq, hs, bh);
  transpose(dyt.data(), dy.data(), hs, seq, bh);
  transpose(tmp.data(), sv.probs.data(), seq, seq, bh);
  tf_gemm(nx, TfSite::kAttnV, GemmPass::kWgrad, layer, dvt.data(), dyt.data(), tmp.data(), hs, seq, seq, bh);
  nx.round_grad(RoundAt{RoundPoint::kActGrad, layer}, dp);
  const T scale = static_cast<T>(1.0 / std::sqrt(double(hs)));
  masked_softmax_backward(ds.data(), sv.probs.data(), dp.data(), scale, batch, heads, seq);
  nx.round_grad(RoundAt{RoundPoint::kActGrad, layer}, ds);
  // dQ = dS K (dgrad); dK = dS^T Q (wgrad).
  transpose(kt.data(), sv.k.data(), hs, seq, bh);
  tf_gemm(nx, TfSite::kScores, GemmPass::kDgrad, layer, dq.data(), ds.data(), kt.data(), seq, hs, seq, bh);
  transpose(tmp.data(), ds.data(), seq, seq, bh);
  transpose(qt.data(), sv.q.data(), hs, seq, bh);
  tf_gemm(nx, TfSite::kScores, GemmPass::kWgrad, layer, dk.data(), tmp.data(), qt.data(), seq, hs, seq, bh);
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < hs; ++i) {
          T* d = dqkv + (size_t(b) * seq + t) * 3 * c + size_t(h) * hs + i;
          const size_t bht = (size_t(b) * heads + h) * seq;
          d[0] += dq[(bht + t) * hs + i];
          d[c] += dk[(bht + t) * hs + i];
          d[2 * c] += dvt[(bht * hs) + size_t(i) * seq + t];
        }
}

void ReferenceNumerics::gemm(const GemmCall& call, double* c, const double* a, const double* b) {
  gemm_call_f64(call, c, a, b);
}

#define PRECSIM_ATTENTION(T)                                                                                  \
  template void embedding_forward<T>(T*, const int32_t*, const T*, const T*, int, int, int);                 \
  template void embedding_backward<T>(T*, T*, const T*, const int32_t*, int, int, int);                      \
  template void masked_softmax_forward<T>(T*, const T*, const uint8_t*, T, int, int, int, Numerics<T>&);   \
  template void masked_softmax_backward<T>(T*, const T*, const T*, T, int, int, int);                        \
  template void attention_forward<T>(T*, AttentionSaved<T>&, const T*, const uint8_t*, int, int, int, int, int, \
                                     Numerics<T>&);                                                         \
  template void attention_backward<T>(T*, const T*, const AttentionSaved<T>&, int, int, int, int, int,       \
                                      Numerics<T>&);
PRECSIM_ATTENTION(float)
PRECSIM_ATTENTION(double)

}  // namespace precsim
