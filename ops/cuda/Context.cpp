// CudaContext: the compute stream, the library handles, scratch memory and the error slot.
#include "ops/cuda/CudaKernel.h"

namespace dtc::ops::cuda {

void CudaFree::operator()(void *p) const {
  if (p)
    cudaFree(p);
}

Status cudaStatus(cudaError_t e, const std::string &where, const char *call) {
  return Status::error(where, std::string(call) + ": " + cudaGetErrorName(e) + " (" +
                                  cudaGetErrorString(e) + ")");
}

Status cublasStatus(cublasStatus_t e, const std::string &where, const char *call) {
  return Status::error(where, std::string(call) + ": " + cublasGetStatusName(e) + " (" +
                                  cublasGetStatusString(e) + ")");
}

Status cudnnStatus(cudnnStatus_t e, const std::string &where, const char *call) {
  return Status::error(where, std::string(call) + ": " + cudnnGetErrorString(e));
}

Status lastLaunchError(const std::string &where) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? Status::ok() : cudaStatus(e, where, "kernel launch");
}

Expected<std::unique_ptr<CudaContext>> CudaContext::create(int device) {
  const std::string where = "cuda:" + std::to_string(device);
  std::unique_ptr<CudaContext> ctx(new CudaContext);
  ctx->device_ = device;
  DTC_CUDA_RETURN_IF_ERROR(where, cudaSetDevice(device));
  DTC_CUDA_RETURN_IF_ERROR(where, cudaStreamCreateWithFlags(&ctx->stream_, cudaStreamNonBlocking));
  DTC_CUBLAS_RETURN_IF_ERROR(where, cublasCreate(&ctx->cublas_));
  DTC_CUBLAS_RETURN_IF_ERROR(where, cublasSetStream(ctx->cublas_, ctx->stream_));
  // fp32 stays fp32: no TF32 tensor-core rounding unless a plan asks for it (the parity tests
  // compare against the CPU at fp32 tolerances).
  DTC_CUBLAS_RETURN_IF_ERROR(where, cublasSetMathMode(ctx->cublas_, CUBLAS_DEFAULT_MATH));
  DTC_CUDNN_RETURN_IF_ERROR(where, cudnnCreate(&ctx->cudnn_));
  DTC_CUDNN_RETURN_IF_ERROR(where, cudnnSetStream(ctx->cudnn_, ctx->stream_));
  DTC_CUDA_RETURN_IF_ERROR(where, cudaMalloc(reinterpret_cast<void **>(&ctx->errorSlot_), sizeof(int)));
  // On the compute stream: cudaMemset runs on the legacy default stream, which a non-blocking
  // stream does not wait for, so a kernel could record an error before the slot is cleared.
  DTC_CUDA_RETURN_IF_ERROR(where, cudaMemsetAsync(ctx->errorSlot_, 0, sizeof(int), ctx->stream_));
  DTC_CUDA_RETURN_IF_ERROR(where, cudaStreamSynchronize(ctx->stream_));
  return ctx;
}

CudaContext::~CudaContext() {
  if (stream_)
    cudaStreamSynchronize(stream_);
  workspace_.reset();
  if (errorSlot_)
    cudaFree(errorSlot_);
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (cublas_)
    cublasDestroy(cublas_);
  if (stream_)
    cudaStreamDestroy(stream_);
}

void CudaContext::reserveWorkspace(size_t bytes) { reserved_ = std::max(reserved_, bytes); }

Expected<void *> CudaContext::workspace(size_t bytes, const std::string &where) {
  bytes = std::max(bytes, reserved_);
  if (bytes <= workspaceBytes_)
    return workspace_.get();
  // Stream-ordered: the old scratch is freed after the kernels already enqueued that use it.
  if (workspace_) {
    DTC_CUDA_RETURN_IF_ERROR(where, cudaFreeAsync(workspace_.release(), stream_));
    workspaceBytes_ = 0;
  }
  void *p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, bytes, stream_);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    return Status::error(where, "out of GPU memory: the kernel's workspace needs " +
                                    std::to_string(bytes) + " bytes, " +
                                    std::to_string(freeBytes) + " are free");
  }
  // cudaMallocAsync memory is freed with cudaFreeAsync; keep it in a buffer whose deleter
  // synchronizes through cudaFree (legal for pool memory once the stream is idle).
  workspace_.reset(p);
  workspaceBytes_ = bytes;
  return p;
}

Expected<DeviceBuffer> CudaContext::allocate(size_t bytes, const std::string &what) {
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 1));
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t freeBytes = 0, total = 0;
    cudaMemGetInfo(&freeBytes, &total);
    return Status::error(what, "out of GPU memory: needs " + std::to_string(bytes) + " bytes, " +
                                   std::to_string(freeBytes) + " are free");
  }
  allocated_ += bytes;
  return DeviceBuffer(p);
}

int CudaContext::addErrorSite(std::string message) {
  errorSites_.push_back(std::move(message));
  return static_cast<int>(errorSites_.size()); // ids start at 1; 0 means no error
}

Status CudaContext::checkErrors() {
  int site = 0;
  DTC_CUDA_RETURN_IF_ERROR("cuda:" + std::to_string(device_),
                           cudaMemcpy(&site, errorSlot_, sizeof(int), cudaMemcpyDeviceToHost));
  if (site == 0)
    return Status::ok();
  // Stream-ordered before every kernel enqueued after this call (see create()).
  DTC_CUDA_RETURN_IF_ERROR("cuda:" + std::to_string(device_),
                           cudaMemsetAsync(errorSlot_, 0, sizeof(int), stream_));
  if (site < 1 || site > static_cast<int>(errorSites_.size()))
    return Status::error("cuda:" + std::to_string(device_),
                         "a kernel reported unknown error site " + std::to_string(site));
  return Status::error(errorSites_[site - 1]);
}

} // namespace dtc::ops::cuda
