// Probe kernels: one warp evaluates d = c + sum_i a_i*b_i for one vector with a Tensor Core
// instruction chained over k, so that the host can apply the probing methodology of Khattak and
// Mikaitis (docs/reference/sources.md, TC 1.5) one block at a time. The vector
// sits in row 0 of A and column 0 of B, every other element is zero, and d is element (0, 0).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>
#include <string>

#include "cuda_check.h"
#include "wgmma_probe.h"

namespace precsim::gpu {
namespace {

using namespace nvcuda;

// Raw storage word of each operand type; the fragments read the same bytes as In.
template <class In> struct Raw;
template <> struct Raw<__half> { using type = uint16_t; };
template <> struct Raw<__nv_bfloat16> { using type = uint16_t; };
template <> struct Raw<float> { using type = uint32_t; };

// In: the element type in memory; Prec: the fragment's precision (tf32 reads float); Acc: float
// or __half; K: the instruction's k.
template <class In, class Prec, class Acc, int K>
__global__ void wmma_probe(const typename Raw<In>::type* a, const typename Raw<In>::type* b,
                           const typename Raw<Acc>::type* c, typename Raw<Acc>::type* d, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  using R = typename Raw<In>::type;
  using RA = typename Raw<Acc>::type;
  __shared__ __align__(32) R sa[16 * K];   // A tile, row-major 16 x K
  __shared__ __align__(32) R sb[K * 16];   // B tile, column-major K x 16
  __shared__ __align__(32) RA sc[16 * 16]; // C and D tile, row-major
  const int v = blockIdx.x, lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) sc[i] = 0;
  __syncwarp();
  if (lane == 0) sc[0] = c[v];
  __syncwarp();
  wmma::fragment<wmma::accumulator, 16, 16, K, Acc> acc;
  wmma::load_matrix_sync(acc, reinterpret_cast<const Acc*>(sc), 16, wmma::mem_row_major);
  for (int j = 0; j < k; j += K) {
    for (int i = lane; i < 16 * K; i += 32) {
      sa[i] = 0;
      sb[i] = 0;
    }
    __syncwarp();
    if (lane < K) {
      sa[lane] = a[static_cast<size_t>(v) * k + j + lane];  // row 0
      sb[lane] = b[static_cast<size_t>(v) * k + j + lane];  // column 0
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, K, Prec, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, K, Prec, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, reinterpret_cast<const In*>(sa), K);
    wmma::load_matrix_sync(fb, reinterpret_cast<const In*>(sb), K);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncwarp();
  }
  wmma::store_matrix_sync(reinterpret_cast<Acc*>(sc), acc, 16, wmma::mem_row_major);
  __syncwarp();
  if (lane == 0) d[v] = sc[0];
#endif
}

// mma.sync m16n8k32 with FP8 operands (sm_89+). Fragment layout (PTX ISA, "Matrix Fragments for
// mma.m16n8k32"): lane 4g+t holds in A register 0 row g, k = 4t..4t+3 and in register 2 row g,
// k = 16+4t..16+4t+3 (registers 1 and 3 hold row g+8); in B register 0 column g, k = 4t..4t+3 and
// in register 1 column g, k = 16+4t..; C element (g, 2t) is register 0. Row 0 and column 0 are
// therefore in lanes 0..3, the lowest k in the lowest byte.
template <bool E5M2>
__global__ void mma_fp8_probe(const uint8_t* a, const uint8_t* b, const uint32_t* c, uint32_t* d, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const int v = blockIdx.x, lane = threadIdx.x;
  float d0 = lane == 0 ? __uint_as_float(c[v]) : 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;
  auto pack = [&](const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
           static_cast<uint32_t>(p[3]) << 24;
  };
  for (int j = 0; j < k; j += 32) {
    uint32_t a0 = 0, a2 = 0, b0 = 0, b1 = 0;
    if (lane < 4) {
      const uint8_t* pa = a + static_cast<size_t>(v) * k + j;
      const uint8_t* pb = b + static_cast<size_t>(v) * k + j;
      a0 = pack(pa + 4 * lane);
      a2 = pack(pa + 16 + 4 * lane);
      b0 = pack(pb + 4 * lane);
      b1 = pack(pb + 16 + 4 * lane);
    }
    const uint32_t a1 = 0, a3 = 0;
    if constexpr (E5M2) {
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  if (lane == 0) d[v] = __float_as_uint(d0);
#endif
}

struct InstrInfo {
  const void* kernel;
  int k;
  int in_bytes, out_bytes;
  int min_arch;  // the kernel body exists only when compiled for at least this architecture
  const char* name;
  int threads = 32;         // a warp; a warpgroup for wgmma
  bool needs_sm90a = false;  // the body exists only in sm_90a code (wgmma_probe.h)
};

InstrInfo instr_info(int instr) {
  switch (instr) {
    case PRECSIM_GPU_WMMA_F16_F32:
      return {reinterpret_cast<const void*>(&wmma_probe<__half, __half, float, 16>), 16, 2, 4, 80, "wmma.m16n16k16.f32.f16"};
    case PRECSIM_GPU_WMMA_BF16_F32:
      return {reinterpret_cast<const void*>(&wmma_probe<__nv_bfloat16, __nv_bfloat16, float, 16>), 16, 2, 4, 80,
              "wmma.m16n16k16.f32.bf16"};
    case PRECSIM_GPU_WMMA_TF32_F32:
      return {reinterpret_cast<const void*>(&wmma_probe<float, wmma::precision::tf32, float, 8>), 8, 4, 4, 80,
              "wmma.m16n16k8.f32.tf32"};
    case PRECSIM_GPU_WMMA_F16_F16:
      return {reinterpret_cast<const void*>(&wmma_probe<__half, __half, __half, 16>), 16, 2, 2, 80, "wmma.m16n16k16.f16.f16"};
    case PRECSIM_GPU_MMA_E4M3_F32:
      return {reinterpret_cast<const void*>(&mma_fp8_probe<false>), 32, 1, 4, 89, "mma.sync.m16n8k32.f32.e4m3"};
    case PRECSIM_GPU_MMA_E5M2_F32:
      return {reinterpret_cast<const void*>(&mma_fp8_probe<true>), 32, 1, 4, 89, "mma.sync.m16n8k32.f32.e5m2"};
    case PRECSIM_GPU_WGMMA_F16_F32:
      return {wgmma_probe_kernel(instr), 16, 2, 4, 90, "wgmma.mma_async.m64n8k16.f32.f16", 128, true};
    case PRECSIM_GPU_WGMMA_BF16_F32:
      return {wgmma_probe_kernel(instr), 16, 2, 4, 90, "wgmma.mma_async.m64n8k16.f32.bf16", 128, true};
    case PRECSIM_GPU_WGMMA_E4M3_F32:
      return {wgmma_probe_kernel(instr), 32, 1, 4, 90, "wgmma.mma_async.m64n8k32.f32.e4m3", 128, true};
    case PRECSIM_GPU_WGMMA_E5M2_F32:
      return {wgmma_probe_kernel(instr), 32, 1, 4, 90, "wgmma.mma_async.m64n8k32.f32.e5m2", 128, true};
    default: throw Failure{PRECSIM_GPU_BAD_ARGUMENT, "unknown probe instruction " + std::to_string(instr)};
  }
}

// Whether the fatbinary holds this kernel for the current device, compiled for an architecture
// on which its body exists.
void check_support(int device, const InstrInfo& info) {
  select_device(device);
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  const int cc = p.major * 10 + p.minor;
  if (cc < info.min_arch)
    throw Failure{PRECSIM_GPU_UNSUPPORTED, std::string(info.name) + " needs compute capability " +
                                               std::to_string(info.min_arch / 10) + "." +
                                               std::to_string(info.min_arch % 10) + "; device " +
                                               std::to_string(device) + " (" + p.name + ") is " +
                                               std::to_string(p.major) + "." + std::to_string(p.minor)};
  cudaFuncAttributes attr{};
  const cudaError_t e = cudaFuncGetAttributes(&attr, info.kernel);
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction)
    throw Failure{PRECSIM_GPU_UNSUPPORTED, std::string("this build of libprecsim_gpu has no code for ") + p.name +
                                               " (compute capability " + std::to_string(p.major) + "." +
                                               std::to_string(p.minor) + "; compiled for " PRECSIM_CUDA_ARCHS
                                               "): CUDA error " + std::to_string(static_cast<int>(e)) + " (" +
                                               cudaGetErrorName(e) + ")"};
  check_cuda(e, "cudaFuncGetAttributes");
  if (attr.binaryVersion < info.min_arch && attr.ptxVersion < info.min_arch)
    throw Failure{PRECSIM_GPU_UNSUPPORTED, std::string(info.name) + " was compiled for sm_" +
                                               std::to_string(attr.binaryVersion) + ", which lacks it; rebuild with "
                                               "PRECSIM_CUDA_ARCHITECTURES including " +
                                               std::to_string(cc)};
  if (info.needs_sm90a && (cc != 90 || !wgmma_compiled(device)))
    throw Failure{PRECSIM_GPU_UNSUPPORTED, std::string(info.name) + " needs sm_90a code on a compute capability 9.0 "
                                               "device; this build of libprecsim_gpu (compiled for " PRECSIM_CUDA_ARCHS
                                               ") has none for " + p.name + " (" + std::to_string(p.major) + "." +
                                               std::to_string(p.minor) + "): rebuild with PRECSIM_CUDA_ARCHITECTURES "
                                               "including 90a"};
}

}  // namespace

int probe_support(int device, int instr, int* instr_k, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    const InstrInfo info = instr_info(instr);
    *instr_k = info.k;
    check_support(device, info);
  });
}

int probe(const PrecsimGpuProbeArgs* args, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    const PrecsimGpuProbeArgs& p = *args;
    const InstrInfo info = instr_info(p.instr);
    if (p.count <= 0 || p.k <= 0 || p.k % info.k != 0)
      throw Failure{PRECSIM_GPU_BAD_ARGUMENT, std::string(info.name) + ": the vector length " + std::to_string(p.k) +
                                                  " must be a positive multiple of " + std::to_string(info.k) +
                                                  " and the count positive"};
    check_support(p.device, info);
    const size_t count = p.count, k = p.k;
    DeviceBuffer da(count * k * info.in_bytes), db(count * k * info.in_bytes);
    DeviceBuffer dc(count * info.out_bytes), dd(count * info.out_bytes);
    da.upload(p.a);
    db.upload(p.b);
    dc.upload(p.c);
    void* pa = da.get();
    void* pb = db.get();
    void* pc = dc.get();
    void* pd = dd.get();
    int kk = p.k;
    void* kargs[] = {&pa, &pb, &pc, &pd, &kk};
    check_cuda(cudaLaunchKernel(info.kernel, dim3(p.count), dim3(info.threads), kargs, 0, nullptr),
               "probe kernel launch");
    check_cuda(cudaDeviceSynchronize(), "probe kernel");
    dd.download(p.d);
  });
}

}  // namespace precsim::gpu
