// GEMMs through cuBLASLt with the algorithm pinned: no split-K, reduction scheme none, and the
// algorithm's id, tile and stages reported so a run can be repeated and compared bit for bit
// (docs/reference/sources.md, TC 2.4 and TC 3.1).
#include <cuda_fp16.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_check.h"

namespace precsim::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kHeuristicResults = 16;

cudaDataType_t data_type(int type) {
  switch (type) {
    case PRECSIM_GPU_F32:
    case PRECSIM_GPU_TF32: return CUDA_R_32F;
    case PRECSIM_GPU_F16: return CUDA_R_16F;
    case PRECSIM_GPU_BF16: return CUDA_R_16BF;
    case PRECSIM_GPU_E4M3: return CUDA_R_8F_E4M3;
    case PRECSIM_GPU_E5M2: return CUDA_R_8F_E5M2;
    default: throw Failure{PRECSIM_GPU_BAD_ARGUMENT, "unknown element type " + std::to_string(type)};
  }
}

bool is_fp8(int type) { return type == PRECSIM_GPU_E4M3 || type == PRECSIM_GPU_E5M2; }

cublasComputeType_t compute_type(int compute) {
  switch (compute) {
    case PRECSIM_GPU_COMPUTE_32F: return CUBLAS_COMPUTE_32F;
    case PRECSIM_GPU_COMPUTE_32F_FAST_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case PRECSIM_GPU_COMPUTE_16F: return CUBLAS_COMPUTE_16F;
    case PRECSIM_GPU_COMPUTE_32F_PEDANTIC: return CUBLAS_COMPUTE_32F_PEDANTIC;
    default: throw Failure{PRECSIM_GPU_BAD_ARGUMENT, "unknown compute type " + std::to_string(compute)};
  }
}

void validate(const PrecsimGpuGemmArgs& a) {
  auto bad = [](const std::string& m) { throw Failure{PRECSIM_GPU_BAD_ARGUMENT, m}; };
  if (a.m <= 0 || a.n <= 0 || a.k <= 0) bad("m, n and k must be positive");
  if (a.a == nullptr || a.b == nullptr || a.d == nullptr) bad("null operand pointer");
  if ((a.a_type == PRECSIM_GPU_TF32) != (a.b_type == PRECSIM_GPU_TF32) ||
      (a.a_type == PRECSIM_GPU_TF32) != (a.compute == PRECSIM_GPU_COMPUTE_32F_FAST_TF32))
    bad("tf32 needs tf32 for both operands and the 32F_FAST_TF32 compute type");
  if (is_fp8(a.a_type) != is_fp8(a.b_type)) bad("FP8 needs FP8 for both operands");
  if (!is_fp8(a.a_type) && a.a_type != a.b_type) bad("both operands must have the same type unless both are FP8");
  if (a.compute == PRECSIM_GPU_COMPUTE_16F && (a.a_type != PRECSIM_GPU_F16 || a.out_type != PRECSIM_GPU_F16))
    bad("FP16 accumulation (compute 16F) needs f16 operands and an f16 output");
  if (a.out_type != PRECSIM_GPU_F32 && a.out_type != PRECSIM_GPU_F16) bad("the output type must be f32 or f16");
  if (is_fp8(a.a_type) && (a.m % 16 || a.n % 16 || a.k % 16))
    bad("FP8 GEMMs need m, n and k to be multiples of 16 (cuBLASLt alignment)");
}

template <class T>
void get_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T* value) {
  size_t written = 0;
  check_cublas(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, value, sizeof(T), &written),
               "cublasLtMatmulAlgoConfigGetAttribute");
}

template <class T>
void set_config(cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr, T value) {
  check_cublas(cublasLtMatmulAlgoConfigSetAttribute(&algo, attr, &value, sizeof(T)),
               "cublasLtMatmulAlgoConfigSetAttribute");
}

struct LtHandles {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtHandles() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (desc) cublasLtMatmulDescDestroy(desc);
    if (handle) cublasLtDestroy(handle);
  }
};

void record(const cublasLtMatmulAlgo_t& algo, PrecsimGpuGemmResult* r) {
  int32_t id = 0, splitk = 0;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
  get_config(algo, CUBLASLT_ALGO_CONFIG_ID, &id);
  get_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile);
  get_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages);
  get_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk);
  get_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction);
  get_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle);
  get_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom);
  get_config(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &inner);
  get_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster);
  r->algo_id = id;
  r->tile_id = static_cast<int>(tile);
  r->stages_id = static_cast<int>(stages);
  r->splitk_num = splitk;
  r->reduction_scheme = static_cast<int>(reduction);
  r->cta_swizzling = static_cast<int>(swizzle);
  r->custom_option = static_cast<int>(custom);
  r->inner_shape_id = inner;
  r->cluster_shape_id = cluster;
}

// FP8: the per-tensor scales (device pointers into `dscale`) and fast accumulation.
void set_fp8_options(const PrecsimGpuGemmArgs& a, LtHandles& h, DeviceBuffer& dscale) {
  const float scales[2] = {a.scale_a, a.scale_b};
  dscale.upload(scales);
  const void* sa = dscale.get();
  const void* sb = static_cast<const float*>(dscale.get()) + 1;
  check_cublas(cublasLtMatmulDescSetAttribute(h.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)),
               "set A_SCALE_POINTER");
  check_cublas(cublasLtMatmulDescSetAttribute(h.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)),
               "set B_SCALE_POINTER");
  const int8_t fast = a.fast_accum ? 1 : 0;
  check_cublas(cublasLtMatmulDescSetAttribute(h.desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)),
               "set FAST_ACCUM");
}

// The algorithm the caller pinned (id, tile, stages; never split-K); returns its workspace size.
size_t pinned_algo(const PrecsimGpuGemmArgs& a, const LtHandles& h, cublasComputeType_t ct, cudaDataType_t scale_t,
                   cudaDataType_t at, cudaDataType_t bt, cudaDataType_t ot, cublasLtMatmulAlgo_t& algo) {
  check_cublas(cublasLtMatmulAlgoInit(h.handle, ct, scale_t, at, bt, ot, ot, a.algo_id, &algo),
               "cublasLtMatmulAlgoInit");
  if (a.tile_id >= 0) set_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, static_cast<uint32_t>(a.tile_id));
  if (a.stages_id >= 0) set_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, static_cast<uint32_t>(a.stages_id));
  set_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, int32_t{1});
  set_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_NONE));
  cublasLtMatmulHeuristicResult_t check{};
  check_cublas(cublasLtMatmulAlgoCheck(h.handle, h.desc, h.la, h.lb, h.lc, h.ld, &algo, &check),
               "cublasLtMatmulAlgoCheck (the pinned algorithm does not fit this problem)");
  return check.workspaceSize;
}

// The first heuristic result without split-K (the count of results into *returned); returns its
// workspace size.
size_t heuristic_algo(LtHandles& h, cublasLtMatmulAlgo_t& algo, int* returned) {
  check_cublas(cublasLtMatmulPreferenceCreate(&h.pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(h.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
               "set MAX_WORKSPACE_BYTES");
  const uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(h.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask,
                                                    sizeof(mask)),
               "set REDUCTION_SCHEME_MASK");
  std::vector<cublasLtMatmulHeuristicResult_t> found(kHeuristicResults);
  *returned = 0;
  check_cublas(cublasLtMatmulAlgoGetHeuristic(h.handle, h.desc, h.la, h.lb, h.lc, h.ld, h.pref, kHeuristicResults,
                                              found.data(), returned),
               "cublasLtMatmulAlgoGetHeuristic");
  for (int i = 0; i < *returned; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    int32_t splitk = 0;
    get_config(found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk);
    if (splitk > 1) continue;
    algo = found[i].algo;
    return found[i].workspaceSize;
  }
  throw Failure{PRECSIM_GPU_UNSUPPORTED, "cuBLASLt offers no algorithm without split-K for this problem (" +
                                             std::to_string(*returned) + " heuristic results)"};
}

}  // namespace

int gemm(const PrecsimGpuGemmArgs* args, PrecsimGpuGemmResult* result, char* err, size_t err_len) {
  return guarded(err, err_len, [&] {
    const PrecsimGpuGemmArgs& a = *args;
    *result = PrecsimGpuGemmResult{};
    validate(a);
    select_device(a.device);
    const cudaDataType_t at = data_type(a.a_type), bt = data_type(a.b_type), ot = data_type(a.out_type);
    const cublasComputeType_t ct = compute_type(a.compute);
    const cudaDataType_t scale_t = a.compute == PRECSIM_GPU_COMPUTE_16F ? CUDA_R_16F : CUDA_R_32F;

    LtHandles h;
    check_cublas(cublasLtCreate(&h.handle), "cublasLtCreate");
    check_cublas(cublasLtMatmulDescCreate(&h.desc, ct, scale_t), "cublasLtMatmulDescCreate");
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(h.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)), "set TRANSA");
    check_cublas(cublasLtMatmulDescSetAttribute(h.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)), "set TRANSB");

    const size_t m = a.m, n = a.n, k = a.k;
    DeviceBuffer da(m * k * type_bytes(a.a_type)), db(k * n * type_bytes(a.b_type));
    DeviceBuffer dd(m * n * type_bytes(a.out_type));
    DeviceBuffer dscale(2 * sizeof(float));
    da.upload(a.a);
    db.upload(a.b);
    check_cuda(cudaMemset(dd.get(), 0, dd.bytes()), "cudaMemset");
    if (is_fp8(a.a_type)) set_fp8_options(a, h, dscale);
    // A is row-major m x k, which cuBLASLt reads as a column-major k x m matrix transposed.
    check_cublas(cublasLtMatrixLayoutCreate(&h.la, at, k, m, k), "cublasLtMatrixLayoutCreate(A)");
    check_cublas(cublasLtMatrixLayoutCreate(&h.lb, bt, k, n, k), "cublasLtMatrixLayoutCreate(B)");
    check_cublas(cublasLtMatrixLayoutCreate(&h.lc, ot, m, n, m), "cublasLtMatrixLayoutCreate(C)");
    check_cublas(cublasLtMatrixLayoutCreate(&h.ld, ot, m, n, m), "cublasLtMatrixLayoutCreate(D)");

    cublasLtMatmulAlgo_t algo{};
    size_t workspace = 0;
    if (a.algo_id >= 0) {
      workspace = pinned_algo(a, h, ct, scale_t, at, bt, ot, algo);
      result->heuristic_results = 0;
    } else {
      workspace = heuristic_algo(h, algo, &result->heuristic_results);
    }
    record(algo, result);
    result->workspace_bytes = workspace;
    if (result->splitk_num > 1 || result->reduction_scheme != CUBLASLT_REDUCTION_SCHEME_NONE)
      throw Failure{PRECSIM_GPU_UNSUPPORTED, "the chosen algorithm uses split-K or a reduction scheme"};

    DeviceBuffer dws(workspace);
    const float alpha32 = 1.0f, beta32 = 0.0f;
    const __half alpha16 = __float2half(1.0f), beta16 = __float2half(0.0f);
    const void* alpha = scale_t == CUDA_R_16F ? static_cast<const void*>(&alpha16) : &alpha32;
    const void* beta = scale_t == CUDA_R_16F ? static_cast<const void*>(&beta16) : &beta32;
    auto run = [&] {
      check_cublas(cublasLtMatmul(h.handle, h.desc, alpha, da.get(), h.la, db.get(), h.lb, beta, dd.get(), h.lc,
                                  dd.get(), h.ld, &algo, dws.get(), workspace, nullptr),
                   "cublasLtMatmul");
    };
    run();
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize after cublasLtMatmul");
    cudaEvent_t t0, t1;
    check_cuda(cudaEventCreate(&t0), "cudaEventCreate");
    check_cuda(cudaEventCreate(&t1), "cudaEventCreate");
    cudaEventRecord(t0);
    run();
    cudaEventRecord(t1);
    check_cuda(cudaEventSynchronize(t1), "cudaEventSynchronize");
    cudaEventElapsedTime(&result->milliseconds, t0, t1);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    dd.download(a.d);
  });
}

}  // namespace precsim::gpu
