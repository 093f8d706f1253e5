// A training variant's matrix products on cuBLASLt, through the GPU library (gpu_train.h).
#include "precsim/sim/hw/gpu_train.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "precsim/formats/rounding.h"
#include "precsim/sim/accum/gemm.h"
#include "precsim/sim/hw/gpu_device.h"

namespace precsim {
namespace {

constexpr const char* kPassNames[] = {"forward", "dgrad", "wgrad"};
constexpr int kFp8Align = 16;  // cuBLASLt's FP8 alignment of m, n and k (gpu/src/cublaslt_gemm.cpp)

bool is_fp8(const GpuType& t) { return t.abi == PRECSIM_GPU_E4M3 || t.abi == PRECSIM_GPU_E5M2; }

const GpuType* device_type(const OperandSpec& op) {
  for (const auto& t : gpu_types())
    if (t.format == op.fmt.format) return &t;
  return nullptr;
}

bool per_tensor(Scaling s) { return s == Scaling::kTensorCurrent || s == Scaling::kTensorDelayed; }

int64_t padded(int64_t x, bool fp8) { return fp8 ? (x + kFp8Align - 1) / kFp8Align * kFp8Align : x; }

}  // namespace

Fp8Operand split_fp8_operand(std::span<const float> v, const Format& element) {
  Fp8Operand out;
  out.elements.resize(v.size());
  float amax = 0;
  for (float x : v)
    if (std::isfinite(x)) amax = std::max(amax, std::abs(x));
  // Every element under the decode scale d, or false at the first that d does not reproduce.
  auto fits = [&](float d) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) {
        out.elements[i] = std::numeric_limits<float>::quiet_NaN();
        continue;
      }
      const auto q = static_cast<float>(round_to(element, static_cast<double>(v[i]) / d));
      if (q * d != v[i] || std::signbit(q) != std::signbit(v[i])) return false;
      out.elements[i] = q;
    }
    return true;
  };
  if (amax == 0) {
    fits(1.0f);
    return out;
  }
  // The largest magnitude is q_max x d rounded once, q_max the largest element: max(element) for
  // amax scaling, less with a margin or a power-of-two scale. Largest candidates first; within an
  // ulp or two of amax / q_max.
  std::vector<double> tops;
  for (uint64_t code = 1; code <= element.max_finite_code(); ++code)
    if (const double q = decode(element, code); std::isfinite(q) && q > 0) tops.push_back(q);
  std::sort(tops.rbegin(), tops.rend());
  for (const double q_max : tops) {
    const auto base = static_cast<float>(amax / q_max);
    float up = base, down = base;
    for (int step = 0; step <= 4; ++step) {
      if (fits(up)) {
        out.decode_scale = up;
        return out;
      }
      if (step > 0 && down > 0 && fits(down)) {
        out.decode_scale = down;
        return out;
      }
      up = std::nextafter(up, std::numeric_limits<float>::infinity());
      down = std::nextafter(down, 0.0f);
    }
  }
  throw std::invalid_argument(fmt::format(
      "the operand is not a per-tensor scaled {} tensor: no FP32 decode scale reproduces all its {} values "
      "(largest magnitude {})",
      element.name, v.size(), amax));
}

void check_cuda_recipe(const Recipe& r, const PrecsimGpuDevice& dev) {
  const int cc = dev.major * 10 + dev.minor;
  auto refuse = [&](const std::string& what) {
    throw GpuError(GpuErrorKind::kUnsupported,
                   fmt::format("recipe '{}': {}; device {} ({}) has compute capability {}.{}", r.name, what, dev.index,
                               dev.name, dev.major, dev.minor));
  };
  const GemmSpec* specs[] = {&r.forward, &r.dgrad, &r.wgrad};
  for (int p = 0; p < 3; ++p) {
    const GpuType* types[2] = {nullptr, nullptr};
    for (int o = 0; o < 2; ++o) {
      const OperandSpec& op = o == 0 ? specs[p]->a : specs[p]->b;
      const std::string on = fmt::format("gemm.{}.{} ({}, scaling {})", kPassNames[p], o == 0 ? "a" : "b",
                                         op.fmt.format.name, to_string(op.scaling));
      if (op.scaling != Scaling::kNone && !per_tensor(op.scaling))
        refuse(on + " has no path in the GPU library, which runs scaling none, tensor-current and tensor-delayed "
                    "(MX and NVFP4 have no Tensor Core path before Blackwell, compute capability 10.0)");
      const GpuType* t = device_type(op);
      if (t == nullptr) refuse(on + " is no cuBLASLt operand type; allowed: fp32, tf32, fp16, bf16, e4m3, e5m2");
      if (per_tensor(op.scaling) && !is_fp8(*t)) refuse(on + ": per-tensor scaling needs an FP8 element (e4m3, e5m2)");
      const int need = is_fp8(*t) ? 89 : t->abi == PRECSIM_GPU_F32 ? 0 : 80;
      if (cc < need) refuse(on + fmt::format(" needs compute capability {}.{} or newer", need / 10, need % 10));
      types[o] = t;
    }
    const std::string prod = fmt::format("gemm.{} ({} x {})", kPassNames[p], types[0]->name, types[1]->name);
    if (is_fp8(*types[0]) != is_fp8(*types[1]) || (!is_fp8(*types[0]) && types[0] != types[1]))
      refuse(prod + ": cuBLASLt needs both operands of one type, or both FP8");
    if (types[0]->abi == PRECSIM_GPU_E5M2 && types[1]->abi == PRECSIM_GPU_E5M2)
      refuse(prod + ": cuBLASLt has no e5m2 x e5m2 product; one operand must be e4m3");
  }
}

bool cuda_fp8_fast_accum(GemmPass pass) { return pass == GemmPass::kForward; }

CublasGemmExecutor::CublasGemmExecutor(std::shared_ptr<const GpuLibrary> gpu, const PrecsimGpuDevice& dev, const Recipe& r)
    : gpu_(std::move(gpu)), device_(dev.index), specs_{r.forward, r.dgrad, r.wgrad} {
  check_cuda_recipe(r, dev);
  for (auto& a : algorithms_) a = nlohmann::json::array();
}

void CublasGemmExecutor::gemm(GemmPass pass, const AccumModel&, const GemmArgs& g, const float* a, const float* b,
                           float* c) {
  if (g.lda || g.ldb || g.ldc || g.alpha != 1.0 || g.beta != 0.0 || g.a_scales.scale || g.b_scales.scale)
    throw std::logic_error("CublasGemmExecutor: packed operands, alpha 1, beta 0 and no block scales only");
  const auto p = static_cast<size_t>(pass);
  const GemmSpec& spec = specs_[p];
  const GpuType& ta = *device_type(spec.a);
  const GpuType& tb = *device_type(spec.b);
  const bool fp8 = is_fp8(ta);
  const int64_t m = g.m, n = g.n, k = g.k, mp = padded(m, fp8), np = padded(n, fp8), kp = padded(k, fp8);
  // op(A) and op(B) row-major, zero-padded.
  std::vector<float> av(size_t(mp * kp), 0.0f), bv(size_t(kp * np), 0.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l) av[i * kp + l] = g.trans_a ? a[l * m + i] : a[i * k + l];
  for (int64_t l = 0; l < k; ++l)
    for (int64_t j = 0; j < n; ++j) bv[l * np + j] = g.trans_b ? b[j * k + l] : b[l * n + j];
  DeviceGemmSpec s;
  s.device = device_;
  s.m = mp;
  s.n = np;
  s.k = kp;
  s.a_type = ta.name;
  s.b_type = tb.name;
  if (fp8) {
    s.fast_accum = cuda_fp8_fast_accum(pass);
    if (spec.a.scaling != Scaling::kNone) {
      Fp8Operand q = split_fp8_operand(av, ta.format);
      av = std::move(q.elements);
      s.scale_a = q.decode_scale;
    }
    if (spec.b.scaling != Scaling::kNone) {
      Fp8Operand q = split_fp8_operand(bv, tb.format);
      bv = std::move(q.elements);
      s.scale_b = q.decode_scale;
    }
  }
  PrecsimGpuGemmResult res{};
  const std::vector<double> d = device_gemm(*gpu_, s, av, bv, &res);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(d[size_t(i * np + j)]);
  ++calls_[p];
  const nlohmann::json algo = to_json(res);
  auto& seen = algorithms_[p];
  if (std::find(seen.begin(), seen.end(), algo) == seen.end()) seen.push_back(algo);
}

nlohmann::json CublasGemmExecutor::report() const {
  nlohmann::json j = nlohmann::json::object();
  for (size_t p = 0; p < 3; ++p) j[kPassNames[p]] = {{"gemm_calls", calls_[p]}, {"algorithms", algorithms_[p]}};
  return j;
}

nlohmann::json cuda_train_choices_json() {
  nlohmann::json fast = nlohmann::json::object();
  for (int p = 0; p < 3; ++p) fast[kPassNames[p]] = cuda_fp8_fast_accum(static_cast<GemmPass>(p));
  return {{"fp8_fast_accum", fast}, {"fp8_padding", kFp8Align}};
}

}  // namespace precsim
