// The transformer's forward and backward passes: embedding, pre-LN blocks, final LayerNorm, logits
// and per-token cross-entropy, every product through Numerics::gemm and every stored tensor
// through its rounding point.
#include <cmath>

#include "precsim/sim/model/layers.h"
#include "precsim/sim/model/linear.h"
#include "precsim/sim/model/transformer.h"

namespace precsim {
namespace {

LinearAt tf_linear(TfSite site, int layer) { return LinearAt{int(site), layer, 0, LinearOperands::kTransposed}; }

// LayerNorm with every intermediate (each partial sum, the mean, variance, rstd and each output)
// rounded by nx.opmath: what computing it in a 16-bit format instead of FP32 opmath does.
template <class T>
void layernorm_forward_low(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias, int rows, int c,
                           Numerics<T>& nx) {
  const double eps = 1e-5;
  for (int r = 0; r < rows; ++r) {
    const T* x = inp + size_t(r) * c;
    T s = 0;
    for (int i = 0; i < c; ++i) s = nx.opmath(s + x[i]);
    const T m = nx.opmath(s / T(c));
    T v = 0;
    for (int i = 0; i < c; ++i) v = nx.opmath(v + nx.opmath(nx.opmath(x[i] - m) * nx.opmath(x[i] - m)));
    v = nx.opmath(v / T(c));
    const T rs = nx.opmath(static_cast<T>(1.0 / std::sqrt(double(v) + eps)));
    for (int i = 0; i < c; ++i) out[size_t(r) * c + i] = nx.opmath(nx.opmath(nx.opmath(x[i] - m) * rs) * weight[i] + bias[i]);
    mean[r] = m;
    rstd[r] = rs;
  }
}

template <class T>
void layernorm(std::vector<T>& out, std::vector<T>& mean, std::vector<T>& rstd, const std::vector<T>& inp, const T* w,
               const T* b, int rows, int c, int layer, Numerics<T>& nx) {
  out.resize(size_t(rows) * c);
  mean.resize(rows);
  rstd.resize(rows);
  if (nx.low_opmath()) layernorm_forward_low(out.data(), mean.data(), rstd.data(), inp.data(), w, b, rows, c, nx);
  else layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), w, b, rows, c);
  nx.round(RoundPoint::kNormOut, layer, out);
}

template <class T>
std::vector<T>& sized(std::vector<T>& v, size_t n) {
  v.resize(n);
  return v;
}

}  // namespace

template <class T>
void transformer_forward(TransformerActs<T>& a, const T* p, const TransformerLayout& l, const TokenBatch& b,
                         Numerics<T>& nx) {
  const int B = b.batch, S = b.seq, C = l.width, H = l.hidden, V = l.vocab, rows = B * S;
  const size_t L = l.blocks.size(), n = size_t(rows) * C;
  a.batch = B;
  a.seq = S;
  for (auto* v : {&a.ln1, &a.ln1_mean, &a.ln1_rstd, &a.qkv, &a.atty, &a.resid2, &a.ln2, &a.ln2_mean, &a.ln2_rstd, &a.fc,
                  &a.gelu, &a.gelu_tanh})
    v->resize(L);
  a.resid.resize(L + 1);
  a.att.resize(L);
  embedding_forward(sized(a.resid[0], n).data(), b.tokens, p + l.wte, p + l.wpe, B, S, C);
  nx.round(RoundPoint::kActivation, -1, a.resid[0]);
  std::vector<T> tmp(n);
  for (size_t li = 0; li < L; ++li) {
    const BlockSlots& s = l.blocks[li];
    const int id = int(li);
    layernorm(a.ln1[li], a.ln1_mean[li], a.ln1_rstd[li], a.resid[li], p + s.ln1_w, p + s.ln1_b, rows, C, id, nx);
    linear_forward(sized(a.qkv[li], size_t(rows) * 3 * C).data(), a.ln1[li].data(), p + s.qkv_w, p + s.qkv_b, rows, C,
                   3 * C, tf_linear(TfSite::kQkv, id), nx);
    nx.round(RoundPoint::kActivation, id, a.qkv[li]);
    attention_forward(sized(a.atty[li], n).data(), a.att[li], a.qkv[li].data(), b.valid, B, S, C, l.heads, id, nx);
    nx.round(RoundPoint::kActivation, id, a.atty[li]);
    linear_forward(tmp.data(), a.atty[li].data(), p + s.proj_w, p + s.proj_b, rows, C, C, tf_linear(TfSite::kProj, id), nx);
    nx.round(RoundPoint::kActivation, id, tmp);
    residual_forward(sized(a.resid2[li], n).data(), a.resid[li].data(), tmp.data(), n);
    nx.round(RoundPoint::kActivation, id, a.resid2[li]);
    layernorm(a.ln2[li], a.ln2_mean[li], a.ln2_rstd[li], a.resid2[li], p + s.ln2_w, p + s.ln2_b, rows, C, id, nx);
    if (l.outlier_scale != 1.0 && (l.outlier_layer < 0 || l.outlier_layer == int(li)))
      for (int bi = 0; bi < B; ++bi)
        for (int i = 0; i < C; ++i) a.ln2[li][size_t(bi) * S * C + i] *= static_cast<T>(l.outlier_scale);
    linear_forward(sized(a.fc[li], size_t(rows) * H).data(), a.ln2[li].data(), p + s.fc_w, p + s.fc_b, rows, C, H,
                   tf_linear(TfSite::kFc, id), nx);
    nx.round(RoundPoint::kActivation, id, a.fc[li]);
    gelu_forward(sized(a.gelu[li], size_t(rows) * H).data(), a.fc[li].data(), size_t(rows) * H,
                 sized(a.gelu_tanh[li], size_t(rows) * H).data());
    nx.round(RoundPoint::kActivation, id, a.gelu[li]);
    linear_forward(tmp.data(), a.gelu[li].data(), p + s.fcproj_w, p + s.fcproj_b, rows, H, C, tf_linear(TfSite::kFcProj, id), nx);
    nx.round(RoundPoint::kActivation, id, tmp);
    residual_forward(sized(a.resid[li + 1], n).data(), a.resid2[li].data(), tmp.data(), n);
    nx.round(RoundPoint::kActivation, id, a.resid[li + 1]);
  }
  layernorm(a.lnf, a.lnf_mean, a.lnf_rstd, a.resid[L], p + l.lnf_w, p + l.lnf_b, rows, C, int(L), nx);
  linear_forward(sized(a.logits, size_t(rows) * V).data(), a.lnf.data(), p + l.head, static_cast<const T*>(nullptr),
                 rows, C, V, tf_linear(TfSite::kLogits, int(L)), nx);
  nx.round(RoundPoint::kActivation, int(L), a.logits);
  softmax_xent_forward(sized(a.losses, rows).data(), sized(a.probs, size_t(rows) * V).data(), a.logits.data(),
                       b.targets, rows, V);
}

template <class T>
void transformer_backward(T* g, TransformerActs<T>& a, const T* p, const TransformerLayout& l, const TokenBatch& b,
                          T dloss, Numerics<T>& nx) {
  const int B = b.batch, S = b.seq, C = l.width, H = l.hidden, V = l.vocab, rows = B * S;
  const size_t L = l.blocks.size(), n = size_t(rows) * C;
  std::vector<T> dlogits(size_t(rows) * V, T(0)), dx(n, T(0)), dres(n), dtmp, dh;
  for (int r = 0; r < rows; ++r)
    if (b.loss_mask[r])
      softmax_xent_backward(dlogits.data() + size_t(r) * V, a.probs.data() + size_t(r) * V, b.targets + r, dloss, 1, V);
  nx.round_grad(RoundAt{RoundPoint::kActGrad, int(L)}, dlogits);
  std::vector<T> dlnf(n, T(0));
  linear_backward(dlnf.data(), g + l.head, static_cast<T*>(nullptr), dlogits.data(), a.lnf.data(), p + l.head, rows, C, V,
                  tf_linear(TfSite::kLogits, int(L)), nx);
  nx.round_grad(RoundAt{RoundPoint::kActGrad, int(L)}, dlnf);
  layernorm_backward(dx.data(), g + l.lnf_w, g + l.lnf_b, dlnf.data(), a.resid[L].data(), p + l.lnf_w,
                     a.lnf_mean.data(), a.lnf_rstd.data(), rows, C);
  nx.round_grad(RoundAt{RoundPoint::kActGrad, int(L)}, dx);
  for (size_t li = L; li-- > 0;) {
    const BlockSlots& s = l.blocks[li];
    const int id = int(li);
    // dx is the gradient of resid[li+1] = resid2 + fcproj(gelu(fc(ln2(resid2)))).
    dh.assign(size_t(rows) * H, T(0));
    linear_backward(dh.data(), g + s.fcproj_w, g + s.fcproj_b, dx.data(), a.gelu[li].data(), p + s.fcproj_w, rows, H,
                    C, tf_linear(TfSite::kFcProj, id), nx);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dh);
    dtmp.assign(size_t(rows) * H, T(0));
    gelu_backward(dtmp.data(), a.fc[li].data(), dh.data(), size_t(rows) * H, a.gelu_tanh[li].data());
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dtmp);
    dh.assign(n, T(0));
    linear_backward(dh.data(), g + s.fc_w, g + s.fc_b, dtmp.data(), a.ln2[li].data(), p + s.fc_w, rows, C, H,
                    tf_linear(TfSite::kFc, id), nx);
    if (l.outlier_scale != 1.0 && (l.outlier_layer < 0 || l.outlier_layer == int(li)))
      for (int bi = 0; bi < B; ++bi)
        for (int i = 0; i < C; ++i) dh[size_t(bi) * S * C + i] *= static_cast<T>(l.outlier_scale);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dh);
    dres = dx;  // the residual path
    layernorm_backward(dres.data(), g + s.ln2_w, g + s.ln2_b, dh.data(), a.resid2[li].data(), p + s.ln2_w,
                       a.ln2_mean[li].data(), a.ln2_rstd[li].data(), rows, C);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dres);
    // dres is the gradient of resid2 = resid[li] + proj(attention(qkv(ln1(resid[li])))).
    dh.assign(n, T(0));
    linear_backward(dh.data(), g + s.proj_w, g + s.proj_b, dres.data(), a.atty[li].data(), p + s.proj_w, rows, C, C,
                    tf_linear(TfSite::kProj, id), nx);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dh);
    dtmp.assign(size_t(rows) * 3 * C, T(0));
    attention_backward(dtmp.data(), dh.data(), a.att[li], B, S, C, l.heads, id, nx);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dtmp);
    dh.assign(n, T(0));
    linear_backward(dh.data(), g + s.qkv_w, g + s.qkv_b, dtmp.data(), a.ln1[li].data(), p + s.qkv_w, rows, C, 3 * C,
                    tf_linear(TfSite::kQkv, id), nx);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dh);
    dx = dres;
    layernorm_backward(dx.data(), g + s.ln1_w, g + s.ln1_b, dh.data(), a.resid[li].data(), p + s.ln1_w,
                       a.ln1_mean[li].data(), a.ln1_rstd[li].data(), rows, C);
    nx.round_grad(RoundAt{RoundPoint::kActGrad, id}, dx);
  }
  embedding_backward(g + l.wte, g + l.wpe, dx.data(), b.tokens, B, S, C);
  nx.round(RoundPoint::kWeightGrad, -1, std::span<T>(g, l.param_count));
}

template void transformer_forward<float>(TransformerActs<float>&, const float*, const TransformerLayout&,
                                         const TokenBatch&, Numerics<float>&);
template void transformer_forward<double>(TransformerActs<double>&, const double*, const TransformerLayout&,
                                          const TokenBatch&, Numerics<double>&);
template void transformer_backward<float>(float*, TransformerActs<float>&, const float*, const TransformerLayout&,
                                          const TokenBatch&, float, Numerics<float>&);
template void transformer_backward<double>(double*, TransformerActs<double>&, const double*, const TransformerLayout&,
                                           const TokenBatch&, double, Numerics<double>&);

}  // namespace precsim
