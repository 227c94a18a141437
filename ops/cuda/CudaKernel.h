// The CUDA kernels (DESIGN.md section 8): the backend-neutral interface of ops/kernel/Kernel.h
// on one GPU, with cuBLAS, cuDNN and hand-written CUDA kernels, looked up by (domain, op) in
// ops/cuda/Kernels.def. A kernel is made once per plan instruction and enqueues its work on the
// device's compute stream on every run; nothing in run() synchronizes with the host.
#pragma once

#include "ops/kernel/Kernel.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace dtc::ops::cuda {

/// Device memory freed with cudaFree when the owner goes.
struct CudaFree {
  void operator()(void *p) const;
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

/// The GPU a kernel runs on: its compute stream and the library handles bound to it. Made and
/// owned by the runtime's CUDA device (runtime/cuda); kernels keep a reference.
class CudaContext {
public:
  /// Binds to `device` (cudaSetDevice) and creates the compute stream, the cuBLAS and cuDNN
  /// handles on it and the error slot. Errors: no such device, a library that fails to start.
  static Expected<std::unique_ptr<CudaContext>> create(int device);
  ~CudaContext();
  CudaContext(const CudaContext &) = delete;
  CudaContext &operator=(const CudaContext &) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }

  /// Upper bound, in bytes, on the workspace a kernel may ask cuDNN to use when it chooses an
  /// algorithm (dtc-run --cuda-workspace-mb; default 256 MiB).
  size_t workspaceLimit() const { return workspaceLimit_; }
  void setWorkspaceLimit(size_t bytes) { workspaceLimit_ = bytes; }
  /// A kernel says at creation how much shared scratch its runs need; the device allocates the
  /// largest request once before the first run.
  void reserveWorkspace(size_t bytes);
  /// The shared scratch (kernels run one at a time on the compute stream, so they may share
  /// it), at least `bytes` bytes; grows (stream-ordered) when a run needs more than was
  /// reserved. Errors: out of device memory, naming `where` and the bytes.
  Expected<void *> workspace(size_t bytes, const std::string &where);
  size_t reservedWorkspace() const { return reserved_; }
  /// Device memory a kernel keeps for its lifetime (counted in allocatedBytes()). Errors: out
  /// of device memory, naming `what`, the bytes asked for and the bytes free.
  Expected<DeviceBuffer> allocate(size_t bytes, const std::string &what);
  size_t allocatedBytes() const { return allocated_; }

  /// Data-dependent errors (an index out of range) cannot stop a kernel: it writes the id of an
  /// error site into errorSlot() (atomicCAS from 0, so the first one wins) and the device
  /// reports the site's message at its next synchronization (checkErrors()).
  /// Registers a message ("node 'g' (Gather): an index is out of range") and returns its id.
  int addErrorSite(std::string message);
  int *errorSlot() const { return errorSlot_; }
  /// Reads the slot (the caller has synchronized the stream): the message of the recorded
  /// site, then clears it; ok when none.
  Status checkErrors();

  /// The data-parallel group's collectives (synchronized BatchNormalization), or null on one
  /// rank. Not owned.
  KernelCollectives *collectives = nullptr;

private:
  CudaContext() = default;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  int *errorSlot_ = nullptr;
  std::vector<std::string> errorSites_;
  size_t workspaceLimit_ = size_t{256} << 20;
  size_t reserved_ = 0;
  DeviceBuffer workspace_;
  size_t workspaceBytes_ = 0;
  size_t allocated_ = 0;
};

/// Makes the kernel for a spec (the CUDA target's check first). Errors name the node.
Expected<KernelPtr> createKernel(const KernelSpec &spec, CudaContext &ctx);

/// Errors of the CUDA runtime and libraries as dtc errors: "<where>: <call>: <message>".
Status cudaStatus(cudaError_t e, const std::string &where, const char *call);
Status cublasStatus(cublasStatus_t e, const std::string &where, const char *call);
Status cudnnStatus(cudnnStatus_t e, const std::string &where, const char *call);

/// The launch error of the last kernel launch (cudaGetLastError), as a Status naming `where`.
Status lastLaunchError(const std::string &where);

// One `create*` per Kernels.def line (shared by several ops).
#define DTC_CUDA_KERNEL(domain, op, check, create, inPlace, view)                                  \
  Expected<KernelPtr> create(const KernelSpec &spec, CudaContext &ctx);
#include "ops/cuda/Kernels.def"
#undef DTC_CUDA_KERNEL

} // namespace dtc::ops::cuda

/// Evaluates a CUDA runtime call; on failure returns its error naming `where` and the call.
#define DTC_CUDA_RETURN_IF_ERROR(where, call)                                                      \
  do {                                                                                             \
    cudaError_t dtc_cuda_e_ = (call);                                                              \
    if (dtc_cuda_e_ != cudaSuccess)                                                                \
      return ::dtc::ops::cuda::cudaStatus(dtc_cuda_e_, where, #call);                             \
  } while (0)
#define DTC_CUBLAS_RETURN_IF_ERROR(where, call)                                                    \
  do {                                                                                             \
    cublasStatus_t dtc_cublas_e_ = (call);                                                         \
    if (dtc_cublas_e_ != CUBLAS_STATUS_SUCCESS)                                                    \
      return ::dtc::ops::cuda::cublasStatus(dtc_cublas_e_, where, #call);                         \
  } while (0)
#define DTC_CUDNN_RETURN_IF_ERROR(where, call)                                                     \
  do {                                                                                             \
    cudnnStatus_t dtc_cudnn_e_ = (call);                                                           \
    if (dtc_cudnn_e_ != CUDNN_STATUS_SUCCESS)                                                      \
      return ::dtc::ops::cuda::cudnnStatus(dtc_cudnn_e_, where, #call);                           \
  } while (0)
