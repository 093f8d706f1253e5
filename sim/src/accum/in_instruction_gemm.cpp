#include "in_instruction_gemm.h"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "precsim/formats/rounding.h"

namespace precsim::detail {
namespace {

// The block length along K the instruction takes: a divisor of its k that holds whole groups
// (mxf8f6f4: 32; mxf4nvf4: 16 or 32, 16 only with UE4M3 scales).
void check_block_k(const AccumModel& m, int64_t block_k) {
  const BlockFmaParams& b = m.block;
  const int64_t g = b.scale_group;
  const bool ok = g == 0 ? block_k == b.block_size
                         : block_k % g == 0 && b.block_size % block_k == 0 && (!b.scale_ue4m3 || block_k == g);
  if (!ok) {
    const std::string allowed = g == 0 ? std::to_string(b.block_size)
                                : b.scale_ue4m3 ? std::to_string(g)
                                                : fmt::format("a multiple of {} dividing {}", g, b.block_size);
    throw std::invalid_argument(fmt::format("gemm: model {} takes scale blocks of {} k, not {}", m.name, allowed,
                                            block_k));
  }
}

// Every scale of one operand is a value of the model's scale format.
void check_values(const AccumModel& m, const char* name, const BlockScales& s, int64_t rows, int64_t groups,
                  int64_t ld) {
  if (!s.scale) return;
  const Format f = format_by_name(m.block.scale_ue4m3 ? "e4m3" : "e8m0");
  const char* what = m.block.scale_ue4m3 ? "UE4M3 (a non-negative e4m3 value)" : "UE8M0 (a power of two, 2^-127..2^127)";
  for (int64_t r = 0; r < (rows + s.block_mn - 1) / s.block_mn; ++r)
    for (int64_t q = 0; q < groups; ++q) {
      const float v = s.scale[r * ld + q];
      if (!(v >= 0 && std::isfinite(v) && round_to(f, v) == v && (v > 0 || m.block.scale_ue4m3)))
        throw std::invalid_argument(fmt::format("gemm: {} scale [{}][{}] = {} ({:a}) is not a {} value, which model {} "
                                                "takes", name, r, q, v, v, what, m.name));
    }
}

}  // namespace

void in_instruction_scaled_gemm(const AccumEngine& eng, const KernelArgs& ka, const BlockScales& sa,
                                const BlockScales& sb, double* acc) {
  const AccumModel& m = eng.model();
  if (sa.scale && sb.scale && sa.block_k != sb.block_k)
    throw std::invalid_argument(fmt::format("gemm: A's scale blocks run over {} k but B's over {}", sa.block_k, sb.block_k));
  const int64_t block_k = sa.scale ? sa.block_k : sb.scale ? sb.block_k : m.block.block_size;
  if (sa.scale || sb.scale) check_block_k(m, block_k);
  if (sa.block_mn < 1 || sb.block_mn < 1)
    throw std::invalid_argument(fmt::format("gemm: scale blocks of {} and {} rows; both must be >= 1", sa.block_mn,
                                            sb.block_mn));
  const int64_t groups = (ka.k + block_k - 1) / block_k;
  const int64_t lda = sa.ld ? sa.ld : groups, ldb = sb.ld ? sb.ld : groups;
  if (lda < groups || ldb < groups)
    throw std::invalid_argument(fmt::format("gemm: scales ld={} / {} smaller than the {} blocks along K={}", lda, ldb,
                                            groups, ka.k));
  check_values(m, "A", sa, ka.m, groups, lda);
  check_values(m, "B", sb, ka.n, groups, ldb);
#pragma omp parallel for schedule(dynamic, 1) num_threads(ka.threads)
  for (int64_t i = 0; i < ka.m; ++i) {
    uint32_t st = 0;
    const float* row_scales = sa.scale ? sa.scale + (i / sa.block_mn) * lda : nullptr;
    for (int64_t j = 0; j < ka.n; ++j) {
      const DotOperands x{ka.a + i * ka.a_rs, ka.a_ks, ka.b + j * ka.b_cs, ka.b_ks, ka.k};
      const DotScales s{row_scales, sb.scale ? sb.scale + (j / sb.block_mn) * ldb : nullptr, block_k};
      acc[i * ka.n + j] = eng.scaled_dot(x, s, 0.0, st);
    }
  }
}

}  // namespace precsim::detail
