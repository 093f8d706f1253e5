// FP64 central finite-difference checks of every transformer layer and of the whole model: the
// analytic gradient of a scalar loss must match (f(x+h) - f(x-h)) / 2h for every parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "precsim/sim/core/random.h"
#include "precsim/sim/data/seq_data.h"
#include "precsim/sim/model/transformer.h"
#include "support/finite_difference.h"

namespace precsim {
namespace {

std::vector<double> normal(size_t n, uint64_t stream, double sd = 1.0) {
  std::vector<double> v(n);
  fill_normal(std::span<double>(v), 7, stream, 0.0, sd);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

void expect_gradient(std::vector<double>& x, const std::vector<double>& analytic, const std::function<double()>& f,
                     const char* what) {
  ASSERT_EQ(x.size(), analytic.size());
  EXPECT_LT(test_support::fd_check(x, analytic, f), 1e-5) << what;
}

TEST(TransformerGrad, Embedding) {
  const int B = 2, T = 4, C = 3, V = 5;
  std::vector<double> wte = normal(V * C, 1), wpe = normal(T * C, 2), r = normal(B * T * C, 3), out(B * T * C);
  const std::vector<int32_t> tokens = {0, 3, 3, 1, 4, 2, 0, 0};
  auto f = [&] {
    embedding_forward(out.data(), tokens.data(), wte.data(), wpe.data(), B, T, C);
    return dot(out, r);
  };
  std::vector<double> dwte(V * C, 0.0), dwpe(T * C, 0.0);
  embedding_backward(dwte.data(), dwpe.data(), r.data(), tokens.data(), B, T, C);
  expect_gradient(wte, dwte, f, "wte");
  expect_gradient(wpe, dwpe, f, "wpe");
  // Token 3 appears twice: its row gathers both positions' gradients.
  EXPECT_DOUBLE_EQ(dwte[3 * C], r[1 * C] + r[2 * C]);
}

TEST(TransformerGrad, MaskedSoftmaxRowsAreDistributionsOverAllowedKeys) {
  const int B = 1, NH = 2, T = 4;
  const std::vector<uint8_t> valid = {1, 1, 0, 1};
  const std::vector<double> s = normal(B * NH * T * T, 4, 3.0);
  std::vector<double> p(s.size());
  ReferenceNumerics nx;
  masked_softmax_forward(p.data(), s.data(), valid.data(), 0.5, B, NH, T, nx);
  for (int h = 0; h < NH; ++h)
    for (int i = 0; i < T; ++i) {
      double z = 0, sum = 0;
      for (int j = 0; j <= i; ++j)
        if (valid[j]) z += std::exp(0.5 * s[(h * T + i) * T + j]);
      for (int j = 0; j < T; ++j) {
        const double got = p[(h * T + i) * T + j];
        const double want = j <= i && valid[j] ? std::exp(0.5 * s[(h * T + i) * T + j]) / z : 0.0;
        EXPECT_NEAR(got, want, 1e-15) << "head " << h << " query " << i << " key " << j;
        sum += got;
      }
      EXPECT_NEAR(sum, 1.0, 1e-15);
    }
}

TEST(TransformerGrad, Attention) {
  const int B = 2, T = 5, C = 6, NH = 2;
  std::vector<double> qkv = normal(B * T * 3 * C, 5), r = normal(B * T * C, 6), out(B * T * C);
  std::vector<uint8_t> valid(B * T, 1);
  valid[T + 3] = valid[T + 4] = 0;  // the second sequence is padded after 3 tokens
  ReferenceNumerics nx;
  AttentionSaved<double> sv;
  auto f = [&] {
    attention_forward(out.data(), sv, qkv.data(), valid.data(), B, T, C, NH, 0, nx);
    return dot(out, r);
  };
  f();
  std::vector<double> dqkv(qkv.size(), 0.0);
  attention_backward(dqkv.data(), r.data(), sv, B, T, C, NH, 0, nx);
  expect_gradient(qkv, dqkv, f, "qkv");
  // A padded key is never attended by a real query, so no real output depends on it; the first
  // query attends only to itself, so its query vector has no effect.
  for (int i = 0; i < C; ++i) EXPECT_EQ(dqkv[0 * 3 * C + i], 0.0);
}

struct ModelCase {
  bool tied;
  double outlier_scale;
};

class TransformerModelGrad : public ::testing::TestWithParam<ModelCase> {};

TEST_P(TransformerModelGrad, EveryParameter) {
  TransformerConfig c;
  c.layers = 2;
  c.heads = 2;
  c.width = 4;
  c.context = 6;
  c.mlp_ratio = 2;
  c.tied = GetParam().tied;
  c.outlier_scale = GetParam().outlier_scale;
  SeqDataConfig dc;
  dc.kind = SeqTask::kReverse;
  dc.symbols = 3;
  dc.min_length = 1;
  dc.max_length = 3;
  dc.train_size = 3;
  dc.heldout_size = 1;
  const SeqDataset d = make_seq_dataset(dc, c.context, 3);
  const TransformerLayout l = make_transformer_layout(c, d.vocab);
  std::vector<double> p = init_transformer(l, c, 11);
  // Perturb every parameter (LayerNorm weights and biases included) so no gradient is trivially 0.
  const std::vector<double> noise = normal(p.size(), 8, 0.3);
  for (size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  SeqBatch batch;
  gather_rows(batch, d, {0, 1, 2});
  const TokenBatch b = batch.view(3, c.context);
  ASSERT_LT(batch.counted(), 3 * c.context);  // padding and unscored positions present
  const double dloss = 1.0 / double(batch.counted());
  ReferenceNumerics nx;
  TransformerActs<double> acts;
  auto f = [&] {
    transformer_forward(acts, p.data(), l, b, nx);
    double s = 0;
    for (int i = 0; i < 3 * c.context; ++i) s += b.loss_mask[i] ? acts.losses[i] * dloss : 0.0;
    return s;
  };
  f();
  std::vector<double> g(l.param_count, 0.0);
  transformer_backward(g.data(), acts, p.data(), l, b, dloss, nx);
  expect_gradient(p, g, f, "params");
}

INSTANTIATE_TEST_SUITE_P(Shapes, TransformerModelGrad,
                         ::testing::Values(ModelCase{true, 1.0}, ModelCase{false, 1.0}, ModelCase{true, 4.0}),
                         [](const auto& info) {
                           return std::string(info.param.tied ? "Tied" : "Separate") +
                                  (info.param.outlier_scale != 1.0 ? "Outlier" : "");
                         });

}  // namespace
}  // namespace precsim
