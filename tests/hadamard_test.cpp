// The random Hadamard transform (formats/hadamard.h) against its closed form: the Sylvester matrix
// H_n[i][j] = (-1)^popcount(i & j), the signs on the input side and 1/sqrt(n), summed exactly in
// Boost.Multiprecision and rounded once to FP32.
#include <gtest/gtest.h>

#include <bit>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "precsim/formats/hadamard.h"
#include "precsim/formats/quantize.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

using Exact = boost::multiprecision::cpp_bin_float_100;

// Entry (i, j) of H = (1/sqrt(n)) S H_n, S = diag(signs).
Exact closed_form(const std::vector<double>& s, int i, int j) {
  const int n = static_cast<int>(s.size());
  const Exact h = (std::popcount(unsigned(i & j)) % 2 ? -1 : 1) * s[i];
  return h / boost::multiprecision::sqrt(Exact(n));
}

TEST(Hadamard, MatchesTheClosedFormAndIsOrthogonal) {
  for (int n : {2, 4, 8, 16, 32, 64}) {
    const std::vector<double> s = hadamard_signs(n, 7);
    // Row i of the identity becomes row i of H.
    std::vector<double> h(size_t(n) * n, 0.0);
    for (int i = 0; i < n; ++i) h[size_t(i) * n + i] = 1.0;
    random_hadamard_transform(std::span<double>(h), n, n, 1, s);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        EXPECT_NEAR(h[size_t(i) * n + j], static_cast<double>(closed_form(s, i, j)), 1e-16) << n << " " << i << "," << j;
        double dot = 0;
        for (int c = 0; c < n; ++c) dot += h[size_t(i) * n + c] * h[size_t(j) * n + c];
        EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 4e-16 * n) << n;
      }
  }
}

// FP32 output: the exact x H rounded once to FP32 (n = 16: every FP64 step exact for inputs
// within 2^29 of each other).
TEST(Hadamard, Fp32OutputIsTheExactTransformRoundedOnce) {
  const int n = 16;
  const std::vector<double> s = hadamard_signs(n, 11);
  const size_t rows = 64, cols = 64;
  std::vector<float> x(rows * cols);
  fill_normal(x, 5, 1, 0, 3);
  std::vector<float> y = x;
  random_hadamard_transform(std::span<float>(y), rows, cols, 1, s);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c0 = 0; c0 < cols; c0 += n)
      for (int j = 0; j < n; ++j) {
        Exact sum = 0;
        for (int i = 0; i < n; ++i) sum += Exact(x[r * cols + c0 + i]) * closed_form(s, i, j);
        ASSERT_EQ(y[r * cols + c0 + j], static_cast<float>(sum)) << r << " " << c0 + j;
      }
}

TEST(Hadamard, AxisZeroIsTheTransposeOfAxisOne) {
  const std::vector<double> s = hadamard_signs(16, 3);
  const size_t rows = 48, cols = 80;  // 80 columns: one full tile of 64 and a partial one
  std::vector<float> x(rows * cols), xt(rows * cols);
  fill_normal(x, 9, 2);
  // In even columns every fourth value of a run is 2^40 after its sign: the FP64 sums of the first
  // stages round (2^40 + x), and stage 4 cancels the 2^40s, leaving those roundings in the FP32
  // result; so the rows kernel (in registers) and the columns' tiles must make the same adds in
  // the same butterfly order (stage 4 before stage 2 fails here).
  for (size_t r = 0; r < rows; r += 4)
    for (size_t c = 0; c < cols; c += 2) x[r * cols + c] = float(0x1p40 * s[r % 16]);
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) xt[c * rows + r] = x[r * cols + c];
  random_hadamard_transform(std::span<float>(x), rows, cols, 0, s);   // down the 48 rows
  random_hadamard_transform(std::span<float>(xt), cols, rows, 1, s);  // along rows of the transpose
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) ASSERT_EQ(x[r * cols + c], xt[c * rows + r]) << r << "," << c;
}

// The FP32 kernels (hadamard_kernel.cpp: Pease's form along rows, whole-register butterflies in
// tiles of 64 columns down columns) on every compiled SIMD target against the generic FP64
// butterflies of the same transform rounded once to FP32, bit for bit. The data make FP64 sums
// round: every fourth value of a run is 2^40 (after its sign), so the first stages round 2^40 + x
// and the last cancel the 2^40s; a pairing or an order of stages other than the butterflies'
// changes those roundings. Shapes: widths that leave partial tiles and partial vectors, and a
// power-of-two width (rows 16 KB apart), NaN and Inf.
TEST(Hadamard, Fp32KernelsOnEveryTargetEqualTheFp64TransformRoundedOnce) {
  const std::vector<double> s = hadamard_signs(16, 17);
  struct Shape {
    size_t rows, cols;
  };
  for (const int axis : {0, 1})
    for (const Shape sh : {Shape{32, 100}, Shape{16, 4096}, Shape{48, 80}, Shape{16, 7}}) {
      if (axis == 1 && sh.cols % 16 != 0) continue;
      std::vector<float> x(sh.rows * sh.cols);
      fill_normal(x, 31, sh.cols);
      const size_t n_along = axis == 1 ? sh.cols : sh.rows;
      for (size_t r = 0; r < sh.rows; ++r)
        for (size_t c = 0; c < sh.cols; ++c) {
          const size_t k = axis == 1 ? c : r;  // index along the axis
          if (k % 4 == 0 && (r + c) % 3 != 0) x[r * sh.cols + c] = float(0x1p40 * s[k % 16]);
        }
      x[5] = NAN;
      x[x.size() - 2] = -INFINITY;
      (void)n_along;
      std::vector<double> want(x.begin(), x.end());
      random_hadamard_transform(std::span<double>(want), sh.rows, sh.cols, axis, s);
      for (const auto& target : quantize_simd_targets()) {
        force_quantize_simd_target(target);
        std::vector<float> got(x.size());
        random_hadamard_transform(std::span<const float>(x), std::span<float>(got), sh.rows, sh.cols, axis, s);
        std::vector<float> in_place = x;
        random_hadamard_transform(std::span<float>(in_place), sh.rows, sh.cols, axis, s);
        force_quantize_simd_target("");
        for (size_t i = 0; i < x.size(); ++i) {
          const float w = static_cast<float>(want[i]);
          const bool same = std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(w) ||
                            (std::isnan(got[i]) && std::isnan(w));
          const bool same_in_place = std::bit_cast<uint32_t>(in_place[i]) == std::bit_cast<uint32_t>(got[i]) ||
                                     (std::isnan(in_place[i]) && std::isnan(got[i]));
          ASSERT_TRUE(same && same_in_place) << target << " axis " << axis << " " << sh.rows << "x" << sh.cols
                                             << " element " << i << ": " << got[i] << " / in place " << in_place[i]
                                             << ", FP64 rounded " << w;
        }
      }
    }
}

TEST(Hadamard, InverseRecoversTheInputInFp64) {
  for (int axis : {0, 1})
    for (int n : {4, 16, 32}) {
      const std::vector<double> s = hadamard_signs(n, 21);
      const size_t rows = 64, cols = 96;
      std::vector<double> x(rows * cols);
      fill_normal(x, 13, 3);
      std::vector<double> y = x;
      random_hadamard_transform(std::span<double>(y), rows, cols, axis, s);
      inverse_random_hadamard_transform(std::span<double>(y), rows, cols, axis, s);
      for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(y[i], x[i], 1e-14 * (1 + std::fabs(x[i]))) << n << " " << i;
    }
}

// (A H)(B H)^T = A B^T: in FP64 to rounding, and with FP32 transformed operands within the
// rounding of each operand (relative 2^-24 per element).
TEST(Hadamard, ProductOfTransformedOperandsIsTheOriginalProduct) {
  const size_t m = 8, n = 8, k = 64;
  const std::vector<double> s = hadamard_signs(16, 5);
  std::vector<float> a(m * k), b(n * k);
  fill_normal(a, 1, 1);
  fill_normal(b, 1, 2);
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
  std::vector<float> af = a, bf = b;
  random_hadamard_transform(std::span<double>(ad), m, k, 1, s);
  random_hadamard_transform(std::span<double>(bd), n, k, 1, s);
  random_hadamard_transform(std::span<float>(af), m, k, 1, s);
  random_hadamard_transform(std::span<float>(bf), n, k, 1, s);
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      Exact exact = 0;
      double mag = 0, t64 = 0, t32 = 0;
      for (size_t c = 0; c < k; ++c) {
        exact += Exact(a[i * k + c]) * Exact(b[j * k + c]);
        mag += std::fabs(ad[i * k + c] * bd[j * k + c]);
        t64 += ad[i * k + c] * bd[j * k + c];
        t32 += double(af[i * k + c]) * double(bf[j * k + c]);
      }
      const double e = static_cast<double>(exact);
      EXPECT_NEAR(t64, e, 1e-14 * mag) << i << "," << j;
      EXPECT_NEAR(t32, e, 2.0 * std::ldexp(1.0, -24) * mag) << i << "," << j;
    }
}

TEST(Hadamard, SignsComeFromTheSeedAlone) {
  const std::vector<double> s = hadamard_signs(16, 42);
  EXPECT_EQ(hadamard_signs(16, 42), s);  // every layer and step asking with the run's seed
  EXPECT_NE(hadamard_signs(16, 43), s);
  int minus = 0;
  for (double v : s) {
    EXPECT_TRUE(v == 1.0 || v == -1.0);
    minus += v < 0;
  }
  EXPECT_GT(minus, 0);
  EXPECT_LT(minus, 16);
  // The first 16 signs of a longer vector are the same stream.
  const std::vector<double> l = hadamard_signs(64, 42);
  EXPECT_TRUE(std::equal(s.begin(), s.end(), l.begin()));
}

TEST(Hadamard, BadSizesAreRefusedWithTheValue) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message([] { hadamard_signs(12, 0); }).find("Hadamard size 12 is not allowed"), std::string::npos);
  std::vector<float> x(24);
  const std::vector<double> s = hadamard_signs(16, 0);
  EXPECT_NE(message([&] { random_hadamard_transform(std::span<float>(x), 1, 24, 1, s); })
                .find("size 16 does not divide the reduction dimension 24"),
            std::string::npos);
}

}  // namespace
}  // namespace precsim
