#include "precsim/sim/parallel/allreduce.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "precsim/formats/name_table.h"
#include "precsim/formats/rounding.h"

namespace precsim {
namespace {

// The simulated buffers hold doubles: every value of an accepted buffer format (FP64 included) is
// a double, so each rank's values are exactly what its buffer would hold, and only the end of the
// all-reduce rounds back to FP32 (exact for formats no wider than FP32).
//
// One hop's add in the buffer format, round-to-nearest-even as NCCL's __hadd / float adds. The
// double sum rounds once more first; that is innocuous for formats of at most 24 significand bits
// (53 >= 2*24 + 2, Figueroa 1995) and is the FP64 add itself for fp64, the only formats accepted.
// Every rounding a rank performs is counted in `stats` (status of the rounding, non-zero finite
// inputs in `nonzero`), except casting an FP32 value into a buffer that holds it (FP32, FP64): no
// rounding at all.
struct Buffer {
  Format f;
  bool fp8 = false;  // NCCL sums fp8 through half: RN_fp8(RN_fp16(a + b))
  bool holds_fp32 = false;
  bool wider_than_fp32 = false;  // values need a rounding back to FP32 at the end
  Format half = format_by_name("fp16");
  Format fp32 = format_by_name("fp32");
  Format op = fp32;  // PyTorch's opmath: FP32, FP64 for an FP64 buffer
  QuantStats* stats = nullptr;
  uint64_t* nonzero = nullptr;

  void note(double in, uint32_t status) const {
    stats->add(status);
    *nonzero += in != 0 && std::isfinite(in);
  }
  double rounded(const Format& to, double v) const {
    uint32_t s = 0;
    const double r = round_to(to, v, {}, &s);
    note(v, s);
    return r;
  }
  // An FP32 value into the buffer.
  double put(float v) const { return holds_fp32 ? v : rounded(f, v); }
  // An arithmetic result (exact in double, or the FP64 operation itself) rounded to the buffer.
  double cast(double v) const { return rounded(f, v); }
  // An opmath result (exact in double, or correctly rounded through it) rounded to opmath.
  double opmath(double v) const { return rounded(op, v); }
  double add(double a, double b) const {
    const double s = a + b;
    if (!fp8) return cast(s);
    uint32_t s1 = 0, s2 = 0;
    const double r = round_to(f, round_to(half, s, {}, &s1), {}, &s2);
    note(s, s1 | s2);
    return r;
  }
  // A final buffer value back in FP32: the one rounding left for a buffer wider than FP32.
  float result(double v) const { return static_cast<float>(wider_than_fp32 ? rounded(fp32, v) : v); }
};

using Buffers = std::vector<std::vector<double>>;

void check_buffer_format(const Format& f) {
  if (!is_allreduce_buffer_format(f))
    throw std::invalid_argument("all-reduce buffer format '" + f.name +
                                "' is not supported; allowed: fp64, fp32, bf16, fp16, fp8 (e4m3, e5m2) or a signed float with at most 23 mantissa bits");
}

// Literal simulation of NCCL's ring: the buffer is cut into W contiguous chunks; at reduce-scatter
// step s rank p sends chunk (p - 1 - s) mod W, and the receiver adds its own copy of that chunk;
// after W - 1 steps rank c holds chunk c complete, and the all-gather forwards it unchanged.
void ring(Buffers& buf, const Buffer& b, bool fp32_accum) {
  const int w = static_cast<int>(buf.size());
  const size_t n = buf[0].size();
  auto chunk_begin = [&](int c) { return n * static_cast<size_t>(c) / static_cast<size_t>(w); };
  // send[p] is the partial that rank p sends next (for its current chunk), in opmath when the
  // accumulator is FP32 (it holds values of the buffer formats narrower than it exactly).
  Buffers send(w);
  for (int p = 0; p < w; ++p) {
    const int c = ((p - 1) % w + w) % w;
    send[p].assign(buf[p].begin() + chunk_begin(c), buf[p].begin() + chunk_begin(c + 1));
  }
  for (int s = 1; s < w; ++s) {
    Buffers next(w);
    for (int p = 0; p < w; ++p) {
      const int from = (p - 1 + w) % w;
      const int c = (((p - 1 - s) % w) + w) % w;  // the chunk arriving from `from` at step s
      const size_t b0 = chunk_begin(c);
      next[p] = send[from];
      for (size_t i = 0; i < next[p].size(); ++i) {
        const double own = buf[p][b0 + i];
        next[p][i] = fp32_accum ? b.opmath(next[p][i] + own) : b.add(next[p][i], own);
      }
    }
    send.swap(next);
  }
  // Rank p now holds chunk (p - 1 - (w - 1)) = p complete; cast once for the FP32 accumulator.
  for (int p = 0; p < w; ++p) {
    for (double& v : send[p]) v = fp32_accum && !b.wider_than_fp32 ? b.put(static_cast<float>(v)) : v;
    std::copy(send[p].begin(), send[p].end(), buf[p].begin() + chunk_begin(p));
  }
  for (int p = 0; p < w; ++p)      // all-gather: chunk p travels the ring unchanged
    for (int q = 0; q < w; ++q)
      if (q != p) std::copy(send[p].begin(), send[p].end(), buf[q].begin() + chunk_begin(p));
}

std::vector<double> tree_sum(const Buffers& buf, int lo, int hi, const Buffer& b) {
  if (hi - lo == 1) return buf[lo];
  const int mid = lo + (hi - lo + 1) / 2;
  std::vector<double> l = tree_sum(buf, lo, mid, b);
  const std::vector<double> r = tree_sum(buf, mid, hi, b);
  for (size_t i = 0; i < l.size(); ++i) l[i] = b.add(l[i], r[i]);
  return l;
}

}  // namespace

int fsdp_predivide_factor(int w) {
  int f = 1;
  while (w % f == 0 && w / f > f) f *= 2;
  return f;
}

namespace {

// Into the buffer, with the pre-sum part of the averaging. The multipliers are NCCL's and DDP's
// 1/W: FP32's for buffers up to FP32 (NCCL rounds it once more to the buffer format), FP64's for
// an FP64 buffer.
Buffers into_buffers(const std::vector<std::span<const float>>& grads, const AllReduceConfig& cfg, const Buffer& b,
                     double scale) {
  const int w = cfg.workers;
  const size_t n = grads[0].size();
  const int fsdp_f = fsdp_predivide_factor(w);
  const double inv_w = b.op.man_bits > 23 ? 1.0 / w : double(static_cast<float>(1.0 / w));
  const double nccl_mult = round_to(b.f, inv_w);  // W = 3, bf16: 0.333984375
  Buffers buf(w, std::vector<double>(n));
  for (int p = 0; p < w; ++p) {
    for (size_t i = 0; i < n; ++i) {
      const float g = grads[p][i];
      if (cfg.hook != CompressHook::kNone) {
        buf[p][i] = b.cast(b.put(g) / w);  // cast, then div_ in the low format
        continue;
      }
      double v = g;
      switch (cfg.average) {
        case AverageMode::kDdp: v = b.opmath(v * inv_w); break;  // opmath multiply, as DDP's mul_out
        case AverageMode::kFsdp: v = b.opmath(v / fsdp_f); break;
        default: break;
      }
      if (b.fp8) v = b.opmath(v * scale);
      // v is an FP32 value unless the buffer (and so opmath) is FP64, which holds it as it is.
      v = b.wider_than_fp32 ? v : b.put(static_cast<float>(v));
      if (cfg.average == AverageMode::kNcclAvg) v = b.cast(v * nccl_mult);
      buf[p][i] = v;
    }
  }
  return buf;
}

void reduce(Buffers& buf, AllReduceAlgorithm algorithm, const Buffer& b) {
  switch (algorithm) {
    case AllReduceAlgorithm::kRing: ring(buf, b, false); break;
    case AllReduceAlgorithm::kFp32Accumulate: ring(buf, b, true); break;
    case AllReduceAlgorithm::kTree:
    case AllReduceAlgorithm::kNaive: {
      std::vector<double> total;
      if (algorithm == AllReduceAlgorithm::kTree) {
        total = tree_sum(buf, 0, static_cast<int>(buf.size()), b);
      } else {
        total = buf[0];
        for (size_t p = 1; p < buf.size(); ++p)
          for (size_t i = 0; i < total.size(); ++i) total[i] = b.add(total[i], buf[p][i]);
      }
      for (auto& r : buf) r = total;
      break;
    }
  }
}

// Post-sum part of the averaging, in the buffer format, then back to FP32.
std::vector<std::vector<float>> out_of_buffers(const Buffers& buf, const AllReduceConfig& cfg, const Buffer& b,
                                               double scale) {
  const int w = cfg.workers;
  const int fsdp_f = fsdp_predivide_factor(w);
  std::vector<std::vector<float>> out(buf.size());
  for (size_t p = 0; p < buf.size(); ++p) {
    out[p].resize(buf[p].size());
    for (size_t i = 0; i < buf[p].size(); ++i) {
      double v = buf[p][i];
      if (cfg.hook == CompressHook::kNone) {
        if (cfg.average == AverageMode::kPostDivide) v = b.cast(v / w);
        if (cfg.average == AverageMode::kFsdp) v = b.cast(v / (double(w) / fsdp_f));
      }
      if (b.fp8) v = b.opmath(v / scale);
      out[p][i] = b.result(v);
    }
  }
  return out;
}

}  // namespace

bool is_allreduce_buffer_format(const Format& f) {
  static const Format fp64 = format_by_name("fp64");
  return f.kind == FormatKind::kFloat && f.is_signed && f.has_zero && (f.man_bits <= 23 || same_encoding(f, fp64));
}

AllReduceResult allreduce(const std::vector<std::span<const float>>& grads, const AllReduceConfig& cfg) {
  const int w = cfg.workers;
  if (w < 1) throw std::invalid_argument("all-reduce: workers must be >= 1, got " + std::to_string(w));
  if (static_cast<int>(grads.size()) != w)
    throw std::invalid_argument("all-reduce: " + std::to_string(grads.size()) + " gradients for " +
                                std::to_string(w) + " workers");
  const size_t n = grads[0].size();
  for (const auto& g : grads) {
    if (g.size() != n) throw std::invalid_argument("all-reduce: workers' gradients differ in length");
    for (float v : g)
      if (!std::isfinite(v)) throw std::invalid_argument("all-reduce: non-finite gradient value");
  }
  Buffer b;
  b.f = cfg.hook == CompressHook::kBf16 ? format_by_name("bf16")
        : cfg.hook == CompressHook::kFp16 ? format_by_name("fp16")
                                          : cfg.buffer;
  check_buffer_format(b.f);
  b.fp8 = b.f.bits() == 8;
  b.holds_fp32 = b.f.exp_bits >= 8 && b.f.man_bits >= 23 && b.f.subnormals;
  b.wider_than_fp32 = b.f.exp_bits > 8 || b.f.man_bits > 23;
  if (b.f.man_bits > 23) b.op = format_by_name("fp64");
  AllReduceResult res;
  b.stats = &res.stats;
  b.nonzero = &res.nonzero_inputs;
  // FP8 buffers carry a per-tensor scale from the global amax (synchronised across workers) with
  // headroom for the sum of W values, so that no partial sum can overflow: W * amax maps to max.
  if (b.fp8) {
    double amax = 0;
    for (const auto& g : grads)
      for (float v : g) amax = std::max(amax, double(std::fabs(v)));
    res.scale = amax > 0 ? static_cast<float>(b.f.max_finite() / (amax * w)) : 1.0;
  }
  const double scale = static_cast<float>(res.scale);
  Buffers buf = into_buffers(grads, cfg, b, scale);
  reduce(buf, cfg.algorithm, b);
  res.ranks = out_of_buffers(buf, cfg, b, scale);
  // Compared before the rounding back to FP32, so that ranks that differ only there still count.
  for (int p = 1; p < w; ++p)
    if (std::memcmp(buf[p].data(), buf[0].data(), n * sizeof(double)) != 0) res.ranks_identical = false;
  res.reduced = res.ranks[0];
  return res;
}

namespace {
constexpr auto kAlgos = name_table<AllReduceAlgorithm>(
    {{AllReduceAlgorithm::kRing, "ring"}, {AllReduceAlgorithm::kTree, "tree"},
     {AllReduceAlgorithm::kNaive, "naive"}, {AllReduceAlgorithm::kFp32Accumulate, "fp32-accumulate"}});
constexpr auto kAverages = name_table<AverageMode>(
    {{AverageMode::kSum, "sum"}, {AverageMode::kDdp, "ddp"}, {AverageMode::kNcclAvg, "nccl-avg"},
     {AverageMode::kPostDivide, "post-divide"}, {AverageMode::kFsdp, "fsdp"}});
constexpr auto kHooks = name_table<CompressHook>(
    {{CompressHook::kNone, "none"}, {CompressHook::kBf16, "bf16"}, {CompressHook::kFp16, "fp16"}});
}  // namespace

std::string_view to_string(AllReduceAlgorithm a) { return kAlgos.name(a); }
std::string_view to_string(AverageMode a) { return kAverages.name(a); }
std::string_view to_string(CompressHook h) { return kHooks.name(h); }
AllReduceAlgorithm parse_allreduce_algorithm(std::string_view s) { return kAlgos.parse(s, "all-reduce algorithm"); }
AverageMode parse_average_mode(std::string_view s) { return kAverages.parse(s, "averaging mode"); }
CompressHook parse_compress_hook(std::string_view s) { return kHooks.parse(s, "compression hook"); }

}  // namespace precsim
