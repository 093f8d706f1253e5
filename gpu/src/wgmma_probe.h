// wgmma probe kernels (Hopper's warpgroup MMA; sm_90a only): the same interface as the other probe
// kernels (probe_kernels.cu), one warpgroup of 128 threads per vector.
#pragma once

namespace precsim::gpu {

// The kernel of a PRECSIM_GPU_WGMMA_* instruction, or nullptr for any other instruction.
const void* wgmma_probe_kernel(int instr);
// Whether the code the driver loaded for `device` holds the wgmma bodies: they exist only where
// the library was compiled for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); compiled for plain sm_90, or
// for an older architecture run on a Hopper, the kernels are empty.
bool wgmma_compiled(int device);

}  // namespace precsim::gpu
