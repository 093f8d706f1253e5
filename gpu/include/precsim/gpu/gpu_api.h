/* The C interface of the GPU library, libprecsim_gpu.so. precsim dlopens the library only when a
   GPU command runs and takes one symbol, precsim_gpu_api(), which returns a table of function
   pointers; so CPU commands never load the CUDA runtime or cuBLASLt, and precsim starts where no
   driver exists. Plain C so that the two sides may be built by different compilers. Every call
   returns 0 on success or a PrecsimGpuStatus, and writes a message with the CUDA or cuBLAS error
   string into err (at most err_len bytes, NUL-terminated). */
#ifndef PRECSIM_GPU_API_H
#define PRECSIM_GPU_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PRECSIM_GPU_ABI_VERSION 2

enum PrecsimGpuStatus {
  PRECSIM_GPU_OK = 0,
  PRECSIM_GPU_NO_DEVICE = 1,     /* no driver, an insufficient driver, or no device (CUDA 35, 100) */
  PRECSIM_GPU_UNSUPPORTED = 2,   /* the request is not available on this device or build */
  PRECSIM_GPU_BAD_ARGUMENT = 3,  /* a shape, type or option the library does not accept */
  PRECSIM_GPU_CUDA_ERROR = 4,    /* any other CUDA runtime or cuBLASLt failure */
};

/* Element types of operands. Values travel as their codes: 4 bytes for F32/TF32, 2 for F16/BF16,
   1 for the FP8 types. TF32 operands are F32 codes whose low 13 mantissa bits are zero. */
enum PrecsimGpuType {
  PRECSIM_GPU_F32 = 0,
  PRECSIM_GPU_TF32 = 1,
  PRECSIM_GPU_F16 = 2,
  PRECSIM_GPU_BF16 = 3,
  PRECSIM_GPU_E4M3 = 4,
  PRECSIM_GPU_E5M2 = 5,
};

typedef struct {
  int index;
  char name[256];
  int major, minor;          /* compute capability */
  uint64_t total_memory;     /* bytes */
  int multiprocessors;
  char pci_bus_id[32];
} PrecsimGpuDevice;

typedef struct {
  int driver_version;        /* as cudaDriverGetVersion: 13000 for 13.0; 0 without a driver */
  int runtime_version;
  int cublaslt_version;      /* cublasLtGetVersion() */
  int device_count;
  char compiled_architectures[128]; /* the fatbinary's targets, e.g. "90a" */
} PrecsimGpuSystem;

/* A GEMM through cuBLASLt: D (m x n, column-major, out_type) = scale_a*scale_b * A (m x k,
   row-major, a_type) * B (k x n, column-major, b_type). This is cuBLASLt's "TN" layout, the one
   every type on Hopper (FP8 included) accepts. */
enum PrecsimGpuCompute {
  PRECSIM_GPU_COMPUTE_32F = 0,
  PRECSIM_GPU_COMPUTE_32F_FAST_TF32 = 1,
  PRECSIM_GPU_COMPUTE_16F = 2,
  PRECSIM_GPU_COMPUTE_32F_PEDANTIC = 3,
};

typedef struct {
  int device;
  int m, n, k;
  int a_type, b_type, out_type;   /* PrecsimGpuType; out_type F32 or F16 */
  int compute;                    /* PrecsimGpuCompute */
  int fast_accum;                 /* FP8 only: CUBLASLT_MATMUL_DESC_FAST_ACCUM */
  float scale_a, scale_b;         /* FP8 only: per-tensor dequantisation scales */
  int algo_id;                    /* -1: the first heuristic result with split-K 1 and no reduction */
  int tile_id, stages_id;         /* used with algo_id >= 0; -1 leaves the algorithm's default */
  const void* a;
  const void* b;
  void* d;
} PrecsimGpuGemmArgs;

typedef struct {
  int algo_id, tile_id, stages_id, splitk_num, reduction_scheme, cta_swizzling, custom_option;
  int inner_shape_id, cluster_shape_id;
  uint64_t workspace_bytes;
  int heuristic_results;          /* how many algorithms the heuristic offered */
  float milliseconds;             /* one timed run after one warm-up */
} PrecsimGpuGemmResult;

/* Probe instructions: one warp (a warpgroup for wgmma) evaluates d = c + sum_i a_i*b_i for one
   vector of length k with the Tensor Core instruction chained over k (k a multiple of the instruction's k). Each vector
   sits in row 0 of A and column 0 of B; every other element is zero. */
enum PrecsimGpuInstr {
  PRECSIM_GPU_WMMA_F16_F32 = 0,   /* wmma m16n16k16 f16 x f16 + f32 */
  PRECSIM_GPU_WMMA_BF16_F32 = 1,  /* wmma m16n16k16 bf16 x bf16 + f32 */
  PRECSIM_GPU_WMMA_TF32_F32 = 2,  /* wmma m16n16k8 tf32 x tf32 + f32 */
  PRECSIM_GPU_WMMA_F16_F16 = 3,   /* wmma m16n16k16 f16 x f16 + f16 */
  PRECSIM_GPU_MMA_E4M3_F32 = 4,   /* mma.sync m16n8k32 e4m3 x e4m3 + f32 (sm_89+) */
  PRECSIM_GPU_MMA_E5M2_F32 = 5,   /* mma.sync m16n8k32 e5m2 x e5m2 + f32 (sm_89+) */
  PRECSIM_GPU_WGMMA_F16_F32 = 6,  /* wgmma.mma_async m64n8k16 f16 x f16 + f32 (sm_90a) */
  PRECSIM_GPU_WGMMA_BF16_F32 = 7, /* wgmma.mma_async m64n8k16 bf16 x bf16 + f32 (sm_90a) */
  PRECSIM_GPU_WGMMA_E4M3_F32 = 8, /* wgmma.mma_async m64n8k32 e4m3 x e4m3 + f32 (sm_90a) */
  PRECSIM_GPU_WGMMA_E5M2_F32 = 9, /* wgmma.mma_async m64n8k32 e5m2 x e5m2 + f32 (sm_90a) */
  PRECSIM_GPU_INSTR_COUNT = 10,
};

typedef struct {
  int device;
  int instr;                      /* PrecsimGpuInstr */
  int count;                      /* vectors */
  int k;                          /* length of each vector */
  const void* a;                  /* count x k codes of the input type */
  const void* b;                  /* count x k codes */
  const void* c;                  /* count codes of the output type (F32 or F16) */
  void* d;                        /* count codes of the output type */
} PrecsimGpuProbeArgs;

typedef struct {
  int abi_version;                /* PRECSIM_GPU_ABI_VERSION */
  int (*system_info)(PrecsimGpuSystem* sys, PrecsimGpuDevice* devices, int max_devices, char* err,
                     size_t err_len);
  int (*gemm)(const PrecsimGpuGemmArgs* args, PrecsimGpuGemmResult* result, char* err, size_t err_len);
  int (*probe)(const PrecsimGpuProbeArgs* args, char* err, size_t err_len);
  /* Instruction k (16, 8 or 32) and whether this build and device can run it: 0 yes, else a
     PrecsimGpuStatus with the reason in err. */
  int (*probe_support)(int device, int instr, int* instr_k, char* err, size_t err_len);
} PrecsimGpuApi;

typedef const PrecsimGpuApi* (*PrecsimGpuApiEntry)(void);
#define PRECSIM_GPU_ENTRY_SYMBOL "precsim_gpu_api"

#ifdef __cplusplus
}
#endif

#endif
