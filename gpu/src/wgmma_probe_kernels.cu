// wgmma probe kernels: d = c + sum_i a_i*b_i for one vector with wgmma.mma_async chained over k,
// on one warpgroup (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"). As in the
// mma.sync probes, the vector sits in row 0 of A and column 0 of B and d is element (0, 0).
//
// A comes from registers: the fragment of m64nNk16 (k32 for FP8) is mma.sync's m16n8k16 (m16n8k32)
// fragment for each warp's 16 rows, so row 0 is warp 0, lanes 0..3, registers 0 and 2 (lowest k in
// the lowest half or byte). B (K x 8, "column-major": K contiguous per column) comes from shared
// memory through a descriptor without swizzling: 8-row x 16-byte core matrices, the two halves of
// k in two core matrices 128 bytes apart (leading byte offset 128), the stride byte offset 256
// unused with N = 8. Column 0 is row 0 of each core matrix: bytes 0..15 and 128..143. These
// layouts are taken from the PTX ISA and have not yet run on a device (no GPU has been lent to
// this project); the probe evidence in the report shows whether they hold.
#include <cstdint>

#include "cuda_check.h"
#include "wgmma_probe.h"

namespace precsim::gpu {
namespace {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Matrix descriptor: start address, leading and stride byte offsets, each in units of 16 bytes;
// swizzle mode 0 (none).
__device__ uint64_t b_descriptor(const void* smem) {
  const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(128 >> 4) << 16) |
         (static_cast<uint64_t>(256 >> 4) << 32);
}

// Shared-memory writes of every thread visible to the async proxy, then one warpgroup fence.
__device__ void publish_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ void wait_wgmma() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  __syncthreads();
}
#endif

// One wgmma.mma_async with A from registers (a1 and a3, rows 8..15, are zero) and B from the
// descriptor; the accumulator is kept (scale-d 1), operands not negated, 16-bit B not transposed.
#define PRECSIM_WGMMA_RS(types, tail)                                                                   \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"                                             \
               "wgmma.mma_async.sync.aligned." types " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1" tail ";\n}\n" \
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)                                                 \
               : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "l"(desc), "r"(1))

template <int kInstr>
__device__ void wgmma_step(float& d0, float& d1, float& d2, float& d3, uint32_t a0, uint32_t a2, uint64_t desc) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (kInstr == PRECSIM_GPU_WGMMA_F16_F32) PRECSIM_WGMMA_RS("m64n8k16.f32.f16.f16", ", 0");
  else if constexpr (kInstr == PRECSIM_GPU_WGMMA_BF16_F32) PRECSIM_WGMMA_RS("m64n8k16.f32.bf16.bf16", ", 0");
  else if constexpr (kInstr == PRECSIM_GPU_WGMMA_E4M3_F32) PRECSIM_WGMMA_RS("m64n8k32.f32.e4m3.e4m3", "");
  else PRECSIM_WGMMA_RS("m64n8k32.f32.e5m2.e5m2", "");
#endif
}
#undef PRECSIM_WGMMA_RS

// Every instruction takes 32 bytes of a row of A and of a column of B (16 f16/bf16 or 32 FP8
// elements), laid out alike in bytes: A's registers 0 and 2 of lane t hold bytes 4t..4t+3 and
// 16+4t..19+4t, B's two core matrices bytes 0..15 and 16..31. kElemBytes: 2 or 1.
template <int kInstr, int kElemBytes>
__global__ void wgmma_probe(const uint8_t* a, const uint8_t* b, const uint32_t* c, uint32_t* d, int k) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(128) uint8_t sb[256];
  const int v = blockIdx.x, t = threadIdx.x;
  float d0 = t == 0 ? __uint_as_float(c[v]) : 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
  const uint64_t desc = b_descriptor(sb);
  const size_t bytes = static_cast<size_t>(k) * kElemBytes;
  auto pack = [](const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
  };
  for (size_t j = 0; j < bytes; j += 32) {
    const uint8_t* pa = a + v * bytes + j;
    const uint8_t* pb = b + v * bytes + j;
    sb[t] = 0;
    sb[128 + t] = 0;
    __syncthreads();
    if (t < 16) {
      sb[t] = pb[t];             // core matrix 0, row 0 (column 0 of B)
      sb[128 + t] = pb[16 + t];  // core matrix 1, row 0
    }
    // Row 0 of A: warp 0, lanes 0..3.
    const uint32_t a0 = t < 4 ? pack(pa + 4 * t) : 0u, a2 = t < 4 ? pack(pa + 16 + 4 * t) : 0u;
    publish_smem();
    wgmma_step<kInstr>(d0, d1, d2, d3, a0, a2, desc);
    wait_wgmma();
  }
  if (t == 0) d[v] = __float_as_uint(d0);
#endif
}

__global__ void wgmma_compiled_kernel(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 1;
#else
  *out = 0;
#endif
}

}  // namespace

const void* wgmma_probe_kernel(int instr) {
  switch (instr) {
    case PRECSIM_GPU_WGMMA_F16_F32: return reinterpret_cast<const void*>(&wgmma_probe<PRECSIM_GPU_WGMMA_F16_F32, 2>);
    case PRECSIM_GPU_WGMMA_BF16_F32: return reinterpret_cast<const void*>(&wgmma_probe<PRECSIM_GPU_WGMMA_BF16_F32, 2>);
    case PRECSIM_GPU_WGMMA_E4M3_F32: return reinterpret_cast<const void*>(&wgmma_probe<PRECSIM_GPU_WGMMA_E4M3_F32, 1>);
    case PRECSIM_GPU_WGMMA_E5M2_F32: return reinterpret_cast<const void*>(&wgmma_probe<PRECSIM_GPU_WGMMA_E5M2_F32, 1>);
    default: return nullptr;
  }
}

bool wgmma_compiled(int device) {
  select_device(device);
  DeviceBuffer flag(sizeof(int));
  int* p = static_cast<int*>(flag.get());
  wgmma_compiled_kernel<<<1, 1>>>(p);
  check_cuda(cudaGetLastError(), "wgmma availability kernel launch");
  check_cuda(cudaDeviceSynchronize(), "wgmma availability kernel");
  int host = 0;
  flag.download(&host);
  return host == 1;
}

}  // namespace precsim::gpu
