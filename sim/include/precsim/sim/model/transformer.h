// A decoder-only transformer (GPT-2 shape, llm.c style): token and position embeddings, pre-LayerNorm
// blocks of causal multi-head self-attention and a GELU MLP with residual connections, a final
// LayerNorm and a tied or separate output projection. All parameters live in one flat buffer carved
// into named views. Layers are free functions, outputs first, then inputs, then sizes; backward
// functions accumulate (+=) into parameter gradients (the linear layers' weights: overwritten, each is written once). Every matrix product goes through a
// Numerics (model/numerics.h), which the FP64 reference backs with gemm_f64 and a recipe with the
// emulated GEMM and its operand formats; the numerics also name every rounding point.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/data/batch.h"
#include "precsim/sim/model/numerics.h"

namespace precsim {

struct TransformerConfig {
  int layers = 2;
  int heads = 2;
  int width = 32;    // C, a multiple of heads
  int context = 32;  // T, the longest sequence
  int mlp_ratio = 4;
  bool tied = true;  // the output projection is the token embedding (GPT-2)
  double init_scale = 1.0;     // linear weights ~ N(0, init_scale^2 / fan_in); embeddings ~ N(0, (0.1 init_scale)^2)
  double qk_init_scale = 1.0;  // extra factor on the query and key weights (large: attention logits grow)
  // The input of every block's first MLP product at position 0 of each sequence is multiplied by this:
  // an injected massive activation (one token, every channel) that per-tensor scaling must span.
  double outlier_scale = 1.0;
  int outlier_layer = -1;  // the one block that gets the outlier; -1: every block
};

struct BlockSlots {
  size_t ln1_w, ln1_b;    // (C)
  size_t qkv_w, qkv_b;    // (3C,C), (3C)
  size_t proj_w, proj_b;  // (C,C), (C)
  size_t ln2_w, ln2_b;    // (C)
  size_t fc_w, fc_b;      // (H,C), (H) with H = mlp_ratio C
  size_t fcproj_w, fcproj_b;  // (C,H), (C)
};

struct TransformerLayout {
  int vocab = 0, context = 0, width = 0, heads = 0, hidden = 0;
  bool tied = true;
  double outlier_scale = 1.0;
  int outlier_layer = -1;
  size_t wte = 0, wpe = 0;  // (V,C), (T,C)
  std::vector<BlockSlots> blocks;
  size_t lnf_w = 0, lnf_b = 0;  // (C)
  size_t head = 0;              // (V,C): == wte when tied
  size_t param_count = 0;
  int head_size() const { return width / heads; }
};

// Throws std::invalid_argument naming the bad value (sizes < 1, width not a multiple of heads).
TransformerLayout make_transformer_layout(const TransformerConfig& c, int vocab);
// Initial parameters, each an FP32 value. The residual output projections are scaled by
// 1/sqrt(2 layers) (GPT-2); LayerNorm weights 1, biases 0.
std::vector<double> init_transformer(const TransformerLayout& l, const TransformerConfig& c, uint64_t seed);


// The matrix products of the model (GemmCall::site): the four linear layers of a block, the logits,
// and the two products of attention.
enum class TfSite : uint8_t { kQkv, kProj, kFc, kFcProj, kLogits, kScores, kAttnV, kCount };

// One stacked C = A B^T call of the model's products (GemmCall's default layout).
template <class T>
void tf_gemm(Numerics<T>& nx, TfSite site, GemmPass pass, int layer, T* c, const T* a, const T* b, int m, int n, int k,
             int batch) {
  nx.gemm(GemmCall{pass, int(site), layer, 0, m, n, k, batch, false, true}, c, a, b);
}

// Bytes the forward pass of `rows` sequences of `context` tokens stores for the backward pass
// (TransformerActs, no recomputation), each value at the width of its storage: act_bytes for the
// rounded activations (embedding and residual streams, QKV and its head-major Q, K, V, V^T copies,
// attention output, MLP hidden before and after GELU, logits), norm_bytes for LayerNorm outputs,
// score_bytes for attention scores and probabilities (B NH T T each), FP32 for what opmath keeps
// unrounded (LayerNorm mean and rstd, the softmax of the logits, per-token losses). The formula is
// in docs/reference/metrics.md.
double transformer_activation_bytes(const TransformerLayout& l, int rows, double act_bytes, double norm_bytes,
                                    double score_bytes);

// ---- layers ----

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. out is (B,T,C); tokens (B,T).
template <class T>
void embedding_forward(T* out, const int32_t* tokens, const T* wte, const T* wpe, int batch, int seq, int c);
template <class T>
void embedding_backward(T* dwte, T* dwpe, const T* dout, const int32_t* tokens, int batch, int seq, int c);

// Row softmax of scale * s over the keys j <= i with key_valid[j] (causal and padding mask); masked
// probabilities are 0. s, p are (rows = B*NH blocks of T, T); key_valid is (B,T), rows of one
// sequence share it (heads blocks per sequence). Every intermediate goes through nx.opmath.
template <class T>
void masked_softmax_forward(T* p, const T* s, const uint8_t* key_valid, T scale, int batch, int heads, int seq,
                            Numerics<T>& nx);
// ds = scale * p * (dp - sum_j p dp) (overwrites ds).
template <class T>
void masked_softmax_backward(T* ds, const T* p, const T* dp, T scale, int batch, int heads, int seq);

// Buffers of one attention layer kept from the forward pass for the backward pass.
template <class T>
struct AttentionSaved {
  std::vector<T> q, k, v;  // (B,NH,T,hs)
  std::vector<T> vt;       // (B,NH,hs,T)
  std::vector<T> scores;   // (B,NH,T,T) Q K^T as stored (masked entries 0)
  std::vector<T> probs;    // (B,NH,T,T)
};

// out (B,T,C) = the heads' softmax(Q K^T / sqrt(hs)) V, merged; qkv is (B,T,3C) as [q | k | v].
template <class T>
void attention_forward(T* out, AttentionSaved<T>& sv, const T* qkv, const uint8_t* key_valid, int batch, int seq,
                       int c, int heads, int layer, Numerics<T>& nx);
// dqkv (B,T,3C) += the gradient through attention of dout (B,T,C).
template <class T>
void attention_backward(T* dqkv, const T* dout, const AttentionSaved<T>& sv, int batch, int seq, int c, int heads,
                        int layer, Numerics<T>& nx);

// ---- the model ----

// Everything the forward pass keeps for the backward pass; sized by transformer_forward.
template <class T>
struct TransformerActs {
  int batch = 0, seq = 0;
  std::vector<std::vector<T>> resid;  // L+1 residual streams (B,T,C); resid[0] is the embedding
  std::vector<std::vector<T>> ln1, ln1_mean, ln1_rstd, qkv, atty, resid2, ln2, ln2_mean, ln2_rstd, fc, gelu;
  std::vector<std::vector<T>> gelu_tanh;  // GELU's tanh per element of fc, kept for the backward
  std::vector<AttentionSaved<T>> att;
  std::vector<T> lnf, lnf_mean, lnf_rstd;  // (B,T,C), (B,T)
  std::vector<T> logits, probs;            // (B,T,V)
  std::vector<T> losses;                   // (B,T) per-token cross-entropy
};

template <class T>
void transformer_forward(TransformerActs<T>& acts, const T* params, const TransformerLayout& l, const TokenBatch& b,
                         Numerics<T>& nx);
// grads (param_count) += d(sum_t mask_t loss_t * dloss) / d params; the loss gradient dlogits is
// rounded at kActGrad. Uses (and overwrites) scratch inside acts.
template <class T>
void transformer_backward(T* grads, TransformerActs<T>& acts, const T* params, const TransformerLayout& l,
                          const TokenBatch& b, T dloss, Numerics<T>& nx);

// The FP64 reference: gemm_f64 (sequential sums in increasing k), no rounding points.
class ReferenceNumerics final : public Numerics<double> {
 public:
  void gemm(const GemmCall& call, double* c, const double* a, const double* b) override;
  void round(const RoundAt&, std::span<double>) override {}
};

}  // namespace precsim
