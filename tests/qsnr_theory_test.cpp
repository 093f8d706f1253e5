// QSNR that follows from theory: for a plain format on N(0,1) data, the measured QSNR equals,
// within 0.05 dB, the value obtained by integrating the squared rounding error of the format's
// grid against the Gaussian density numerically. The grid here is built from the exponent range
// and mantissa width alone (not from the format library), and the closed form 13.80 + 6.02 M is
// shown to be only an approximation of the integral.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "precsim/formats/block_scaling.h"
#include "precsim/sim/core/random.h"

namespace precsim {
namespace {

double phi(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }

// 2 * integral over x > 0 of (x - nearest grid point)^2 phi(x), grid: uniform spacing 2^(emin-M)
// below 2^emin (subnormals) and 2^(E-M) in each binade [2^E, 2^(E+1)). Each half-cell is
// integrated with 8-point Gauss-Legendre, exact enough for a smooth density on cells this small.
double gaussian_noise_power(int man_bits, int emin) {
  static const double gx[] = {0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363};
  static const double gw[] = {0.3626837833783620, 0.3137066178786109, 0.2223810344533745, 0.1012285362903763};
  auto half_cell = [&](double a, double b, bool error_from_a) {
    const double m = (a + b) / 2, h = (b - a) / 2;
    double s = 0;
    for (int i = 0; i < 4; ++i)
      for (double sign : {-1.0, 1.0}) {
        const double x = m + sign * h * gx[i];
        const double e = error_from_a ? x - a : b - x;
        s += gw[i] * e * e * phi(x);
      }
    return s * h;
  };
  auto cells = [&](double lo, double hi, double step) {
    double s = 0;
    for (double v = lo; v < hi; v += step) {
      s += half_cell(v, v + step / 2, true);
      s += half_cell(v + step / 2, v + step, false);
    }
    return s;
  };
  double noise = cells(0, std::ldexp(1.0, emin), std::ldexp(1.0, emin - man_bits));
  for (int e = emin; e < 7; ++e)  // beyond 2^7 = 128 sigma nothing contributes
    noise += cells(std::ldexp(1.0, e), std::ldexp(1.0, e + 1), std::ldexp(1.0, e - man_bits));
  return 2 * noise;
}

TEST(QsnrTheory, PlainFormatsOnGaussianMatchTheIntegral) {
  std::vector<float> x(size_t{1} << 22);
  fill_normal(x, 2024, 0);
  std::vector<float> q(x.size());
  struct Case {
    const char* format;
    int man_bits, emin;
  };
  // Custom eXmY formats with 8 exponent bits have no range limit for N(0,1); the presets'
  // subnormal grids are part of the integral.
  for (const Case c : {Case{"e8m1", 1, -126}, Case{"e8m2", 2, -126}, Case{"e8m3", 3, -126}, Case{"e8m4", 4, -126},
                       Case{"e8m5", 5, -126}, Case{"bf16", 7, -126}, Case{"e4m3", 3, -6}, Case{"e5m2", 2, -14},
                       Case{"e2m3", 3, 0}, Case{"fp16", 10, -14}}) {
    const BlockScaling s = parse_block_scaling(c.format);
    block_fake_quantize(s, x, q, 1, x.size());
    const ErrorStats e = error_stats(x, q);
    const double theory = -10 * std::log10(gaussian_noise_power(c.man_bits, c.emin));
    EXPECT_NEAR(e.qsnr_db, theory, 0.05) << c.format;
    // The closed form is an approximation: about 0.13 to 0.35 dB above the integral where the
    // range is wide, and far off where subnormals hold much of the Gaussian (E2M3: 28.3 dB).
    const double closed = 13.80 + 6.02 * c.man_bits;
    if (c.emin <= -6) {
      EXPECT_GT(closed - theory, 0.1) << c.format;
      EXPECT_LT(closed - theory, 0.4) << c.format;
    } else {
      EXPECT_LT(theory, closed - 3) << c.format;
    }
  }
}

TEST(QsnrTheory, MxMeetsTorchaoRoundTripBounds) {
  // torchao test_mx_tensor.py: MX round-trip SQNR >= 18 dB for e4m3, >= 13 dB for the others.
  std::vector<float> x(size_t{1} << 16);
  fill_normal(x, 5, 0);
  std::vector<float> q(x.size());
  for (const char* s : {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4"}) {
    block_fake_quantize(parse_block_scaling(s), x, q, 64, 1024);
    EXPECT_GE(error_stats(x, q).qsnr_db, std::string(s) == "mxfp8_e4m3" ? 18.0 : 13.0) << s;
  }
}

}  // namespace
}  // namespace precsim
