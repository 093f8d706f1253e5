// Error plumbing inside the GPU library: every CUDA or cuBLASLt failure becomes a status and a message
// that names the call and carries the library's own error string.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <string>

#include "precsim/gpu/gpu_api.h"

namespace precsim::gpu {

struct Failure {
  int status;
  std::string message;
};

inline void write_error(char* err, size_t err_len, const std::string& msg) {
  if (err == nullptr || err_len == 0) return;
  std::snprintf(err, err_len, "%s", msg.c_str());
}

inline bool is_no_device(cudaError_t e) {
  return e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice || e == cudaErrorStubLibrary ||
         e == cudaErrorDevicesUnavailable;
}

inline void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string msg = std::string(what) + " failed: CUDA error " + std::to_string(static_cast<int>(e)) +
                          " (" + cudaGetErrorName(e) + "): " + cudaGetErrorString(e);
  throw Failure{is_no_device(e) ? PRECSIM_GPU_NO_DEVICE : PRECSIM_GPU_CUDA_ERROR, msg};
}

inline void check_cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string msg = std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)) +
                          " (" + cublasLtGetStatusName(s) + "): " + cublasLtGetStatusString(s);
  throw Failure{s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH ? PRECSIM_GPU_UNSUPPORTED
                                                                                      : PRECSIM_GPU_CUDA_ERROR,
                msg};
}

// Runs `body`, turning a Failure (or any exception) into a status and a message.
template <class F>
int guarded(char* err, size_t err_len, F&& body) {
  try {
    body();
    write_error(err, err_len, "");
    return PRECSIM_GPU_OK;
  } catch (const Failure& f) {
    write_error(err, err_len, f.message);
    return f.status;
  } catch (const std::exception& e) {
    write_error(err, err_len, e.what());
    return PRECSIM_GPU_CUDA_ERROR;
  }
}

// Device memory that frees itself.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) check_cuda(cudaMalloc(&ptr_, bytes_), "cudaMalloc");
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src) { check_cuda(cudaMemcpy(ptr_, src, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy to device"); }
  void download(void* dst) const {
    check_cuda(cudaMemcpy(dst, ptr_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Selects the device and fails with NO_DEVICE when none can be used.
void select_device(int device);

size_t type_bytes(int type);

}  // namespace precsim::gpu
