#include "precsim/formats/quantize.h"

#include <omp.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "precsim/formats/rounding.h"
#include "quantize_f32_plan.h"

namespace precsim {
namespace {

// Work is cut into fixed chunks so the partition (and so any per-chunk state) never depends on
// the thread count; statistics are integer counts, whose sum is order-independent.
constexpr size_t kChunk = 1 << 16;

template <typename Fn>
void parallel_chunks(size_t n, QuantStats* stats, Fn&& fn) {
  const int64_t chunks = static_cast<int64_t>((n + kChunk - 1) / kChunk);
  QuantStats total;
#pragma omp parallel if (chunks > 1)
  {
    QuantStats local;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const size_t begin = static_cast<size_t>(c) * kChunk;
      const size_t end = std::min(n, begin + kChunk);
      fn(begin, end, stats ? &local : nullptr);
    }
#pragma omp critical
    total += local;
  }
  if (stats) *stats += total;
}

void check_sizes(size_t a, size_t b) {
  if (a != b)
    throw std::invalid_argument("quantize: input has " + std::to_string(a) + " elements, output " +
                                std::to_string(b));
}

void store_code(void* codes, size_t width, size_t i, uint64_t c) {
  auto* p = static_cast<unsigned char*>(codes) + i * width;
  for (size_t b = 0; b < width; ++b) p[b] = static_cast<unsigned char>(c >> (8 * b));
}

uint64_t load_code(const void* codes, size_t width, size_t i) {
  const auto* p = static_cast<const unsigned char*>(codes) + i * width;
  uint64_t c = 0;
  for (size_t b = 0; b < width; ++b) c |= uint64_t{p[b]} << (8 * b);
  return c;
}

template <typename T>
void encode_any(const Format& f, std::span<const T> in, void* codes, const QuantOptions& o,
                QuantStats* stats, uint64_t base) {
  const size_t w = code_bytes(f);
  parallel_chunks(in.size(), stats, [&](size_t b, size_t e, QuantStats* st) {
    for (size_t i = b; i < e; ++i) {
      const Rounded r = encode(f, static_cast<double>(in[i]), o, base + i);
      store_code(codes, w, i, r.code);
      if (st) st->add(r.status);
    }
  });
}

template <typename T>
void decode_any(const Format& f, const void* codes, std::span<T> out) {
  const size_t w = code_bytes(f);
  parallel_chunks(out.size(), nullptr, [&](size_t b, size_t e, QuantStats*) {
    for (size_t i = b; i < e; ++i) out[i] = static_cast<T>(decode(f, load_code(codes, w, i)));
  });
}

}  // namespace

size_t code_bytes(const Format& f) {
  const int b = f.bits();
  return b <= 8 ? 1 : b <= 16 ? 2 : b <= 32 ? 4 : 8;
}

void quantize_reference(const Format& f, std::span<const float> in, std::span<float> out,
                        const QuantOptions& o, QuantStats* stats, uint64_t base) {
  check_sizes(in.size(), out.size());
  parallel_chunks(in.size(), stats, [&](size_t b, size_t e, QuantStats* st) {
    for (size_t i = b; i < e; ++i) {
      uint32_t s = 0;
      out[i] = static_cast<float>(round_to(f, in[i], o, &s, base + i));
      if (st) st->add(s);
    }
  });
}

void quantize(const Format& f, std::span<const float> in, std::span<float> out,
              const QuantOptions& o, QuantStats* stats, uint64_t base) {
  check_sizes(in.size(), out.size());
  const std::optional<F32Plan> plan = make_f32_plan(f, o);
  if (!plan) {
    quantize_reference(f, in, out, o, stats, base);
    return;
  }
  parallel_chunks(in.size(), stats, [&](size_t b, size_t e, QuantStats* st) {
    quantize_f32_span(*plan, o.sr_key, in.data() + b, out.data() + b, e - b, st, base + b);
  });
}

bool quantize_is_vectorised(const Format& f, const QuantOptions& o) {
  return make_f32_plan(f, o).has_value();
}

void quantize(const Format& f, std::span<const double> in, std::span<double> out,
              const QuantOptions& o, QuantStats* stats, uint64_t base) {
  check_sizes(in.size(), out.size());
  parallel_chunks(in.size(), stats, [&](size_t b, size_t e, QuantStats* st) {
    for (size_t i = b; i < e; ++i) {
      uint32_t s = 0;
      out[i] = round_to(f, in[i], o, &s, base + i);
      if (st) st->add(s);
    }
  });
}

void encode_array(const Format& f, std::span<const float> in, void* codes, const QuantOptions& o,
                  QuantStats* stats, uint64_t base) {
  encode_any(f, in, codes, o, stats, base);
}
void encode_array(const Format& f, std::span<const double> in, void* codes, const QuantOptions& o,
                  QuantStats* stats, uint64_t base) {
  encode_any(f, in, codes, o, stats, base);
}
void decode_array(const Format& f, const void* codes, std::span<float> out) { decode_any(f, codes, out); }
void decode_array(const Format& f, const void* codes, std::span<double> out) { decode_any(f, codes, out); }

void pack_nibbles(std::span<const uint8_t> codes, std::span<uint8_t> packed) {
  if (packed.size() != (codes.size() + 1) / 2)
    throw std::invalid_argument("pack_nibbles: " + std::to_string(codes.size()) + " codes need " +
                                std::to_string((codes.size() + 1) / 2) + " bytes");
  for (size_t i = 0; i < packed.size(); ++i) {
    const uint8_t lo = codes[2 * i] & 0xf;
    const uint8_t hi = 2 * i + 1 < codes.size() ? codes[2 * i + 1] & 0xf : 0;
    packed[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void unpack_nibbles(std::span<const uint8_t> packed, std::span<uint8_t> codes) {
  if (packed.size() != (codes.size() + 1) / 2)
    throw std::invalid_argument("unpack_nibbles: " + std::to_string(codes.size()) + " codes need " +
                                std::to_string((codes.size() + 1) / 2) + " bytes");
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = (packed[i / 2] >> (4 * (i % 2))) & 0xf;
}

}  // namespace precsim
