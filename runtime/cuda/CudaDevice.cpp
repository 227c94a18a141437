// The CUDA device (DESIGN.md section 8): one GPU with its CudaContext (compute stream, cuBLAS and
// cuDNN handles, shared workspace, error slot), the arena from one cudaMalloc, pinned staging
// buffers for host transfers, and the NCCL communicator for the plan's collectives.
#include "runtime/Device.h"

#include "ops/cuda/CudaKernel.h"
#include "runtime/DeviceComm.h"
#include "runtime/comm/Communicator.h"
#ifdef DTC_HAVE_NCCL_COMMUNICATOR
#include "runtime/cuda/NcclCommunicator.h"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace dtc::rt {

namespace {

using ops::cuda::cudaStatus;

/// Bytes of each of the two pinned staging buffers: host transfers are cut into chunks of this
/// size, copied between the caller's memory and one buffer while the GPU copies the other.
constexpr size_t kStagingBytes = size_t{8} << 20;

/// "123456789 bytes (117.7 MiB)".
std::string bytesText(uint64_t bytes) {
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return std::to_string(bytes) + " bytes (" + mib + " MiB)";
}

class CudaDevice final : public Device {
public:
  CudaDevice(int gpu, std::unique_ptr<ops::cuda::CudaContext> ctx)
      : gpu_(gpu), name_("cuda:" + std::to_string(gpu)), ctx_(std::move(ctx)) {}

  ~CudaDevice() override {
    // Collectives still writing into the arena finish first (a lost peer fails them within the
    // communicator's timeout); then nothing is in flight on the compute stream.
    if (comm_) {
      Status drained = comm_->waitAll();
      (void)drained; // the run's own error is the one reported
      comm_.reset();
    }
    cudaSetDevice(gpu_);
    cudaStreamSynchronize(ctx_->stream());
    for (int b = 0; b < 2; ++b) {
      if (staging_[b])
        cudaFreeHost(staging_[b]);
      if (stagingDone_[b])
        cudaEventDestroy(stagingDone_[b]);
    }
    if (allocation_)
      cudaFree(allocation_);
  }

  std::string name() const override { return name_; }
  ops::DeviceKind kind() const override { return ops::DeviceKind::kCuda; }

  Status allocateArena(uint64_t bytes, uint64_t alignment) override {
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaSetDevice(gpu_));
    if (allocation_) {
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaStreamSynchronize(ctx_->stream()));
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaFree(allocation_));
      allocation_ = nullptr;
      arena_ = nullptr;
    }
    bytes_ = bytes;
    // cudaMalloc returns 256-byte aligned memory; a larger alignment takes slack to round up.
    const uint64_t slack = alignment > 256 ? alignment - 256 : 0;
    uint64_t total = 0;
    if (__builtin_add_overflow(bytes, slack, &total))
      return Status::error(name_, "the arena size " + std::to_string(bytes) + " overflows");
    total = std::max<uint64_t>(total, 1);
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, total);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // not sticky: clear it
      size_t freeBytes = 0, totalBytes = 0;
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaMemGetInfo(&freeBytes, &totalBytes));
      return Status::error(name_, "out of GPU memory: the plan's arena needs " + bytesText(total) +
                                      ", " + bytesText(freeBytes) + " of the GPU's " +
                                      bytesText(totalBytes) +
                                      " are free (a smaller --batch-size needs less)");
    }
    if (e != cudaSuccess)
      return cudaStatus(e, name_, "cudaMalloc (the arena)");
    allocation_ = static_cast<uint8_t *>(p);
    const uintptr_t at = reinterpret_cast<uintptr_t>(allocation_);
    arena_ = allocation_ + ((alignment - at % alignment) % alignment);
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaMemsetAsync(allocation_, 0, total, ctx_->stream()));
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaStreamSynchronize(ctx_->stream()));
    return Status::ok();
  }
  uint64_t arenaBytes() const override { return bytes_; }
  void *arenaAt(uint64_t offset) override { return arena_ + offset; }

  Status upload(uint64_t offset, const void *src, uint64_t bytes) override {
    if (!bytes)
      return Status::ok();
    DTC_RETURN_IF_ERROR(ensureStaging());
    const auto *from = static_cast<const uint8_t *>(src);
    uint8_t *to = arena_ + offset;
    // Chunk k goes through buffer k % 2: once the GPU's copy out of that buffer (the previous
    // chunk but one, or an earlier call's) is done, the host fills it and queues its copy. The
    // caller's memory is free again when this returns; the copies run in stream order, before
    // any kernel submitted afterwards.
    uint64_t done = 0;
    for (int k = 0; done < bytes; ++k) {
      const int b = k & 1;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStagingBytes, bytes - done));
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaEventSynchronize(stagingDone_[b]));
      std::memcpy(staging_[b], from + done, n);
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaMemcpyAsync(to + done, staging_[b], n,
                                                      cudaMemcpyHostToDevice, ctx_->stream()));
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaEventRecord(stagingDone_[b], ctx_->stream()));
      done += n;
    }
    return Status::ok();
  }

  Status download(uint64_t offset, void *dst, uint64_t bytes) override {
    if (!bytes)
      return Status::ok();
    DTC_RETURN_IF_ERROR(ensureStaging());
    const uint8_t *from = arena_ + offset;
    auto *to = static_cast<uint8_t *>(dst);
    // The GPU copies chunk k + 1 into one buffer while the host copies chunk k out of the
    // other. Stream order puts the copies behind every kernel submitted so far (and behind an
    // upload's copies out of the same buffers).
    auto issue = [&](uint64_t at, int b) -> Status {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kStagingBytes, bytes - at));
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaMemcpyAsync(staging_[b], from + at, n,
                                                      cudaMemcpyDeviceToHost, ctx_->stream()));
      DTC_CUDA_RETURN_IF_ERROR(name_, cudaEventRecord(stagingDone_[b], ctx_->stream()));
      return Status::ok();
    };
    DTC_RETURN_IF_ERROR(issue(0, 0));
    for (uint64_t at = 0, k = 0; at < bytes; at += kStagingBytes, ++k) {
      const int b = static_cast<int>(k & 1);
      if (at + kStagingBytes < bytes)
        DTC_RETURN_IF_ERROR(issue(at + kStagingBytes, b ^ 1));
      cudaError_t e = cudaEventSynchronize(stagingDone_[b]);
      if (e != cudaSuccess)
        return asyncError(e, "cudaEventSynchronize (download)");
      std::memcpy(to + at, staging_[b],
                  static_cast<size_t>(std::min<uint64_t>(kStagingBytes, bytes - at)));
    }
    return Status::ok();
  }

  Status copy(void *dst, const void *src, uint64_t bytes) override {
    if (dst == src || !bytes)
      return Status::ok();
    const auto *s = static_cast<const uint8_t *>(src);
    auto *d = static_cast<uint8_t *>(dst);
    if (d < s + bytes && s < d + bytes) {
      // Overlapping ranges (cudaMemcpy's are undefined): through the shared workspace, which
      // no kernel uses between two instructions.
      DTC_ASSIGN_OR_RETURN(void *tmp, ctx_->workspace(bytes, name_ + ": copy"));
      DTC_CUDA_RETURN_IF_ERROR(
          name_, cudaMemcpyAsync(tmp, s, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()));
      DTC_CUDA_RETURN_IF_ERROR(
          name_, cudaMemcpyAsync(d, tmp, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()));
      return Status::ok();
    }
    DTC_CUDA_RETURN_IF_ERROR(
        name_, cudaMemcpyAsync(d, s, bytes, cudaMemcpyDeviceToDevice, ctx_->stream()));
    return Status::ok();
  }

  Expected<ops::KernelPtr> createKernel(const ops::KernelSpec &spec) override {
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaSetDevice(gpu_));
    return ops::cuda::createKernel(spec, *ctx_);
  }

  Status prepare() override {
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaSetDevice(gpu_));
    const size_t reserved = ctx_->reservedWorkspace();
    if (reserved > 0) {
      auto w = ctx_->workspace(reserved, name_ + ": the kernels' shared workspace");
      if (!w)
        return Status::error(w.status().message() + " (the plan also holds " + bytesText(bytes_) +
                             " of arena and " + bytesText(ctx_->allocatedBytes()) +
                             " of kernel buffers)");
    }
    cudaError_t e = cudaStreamSynchronize(ctx_->stream());
    if (e != cudaSuccess)
      return asyncError(e, "cudaStreamSynchronize (after making the kernels)");
    return Status::ok();
  }

  void setCollectives(ops::KernelCollectives *collectives) override {
    ctx_->collectives = collectives;
  }

  Expected<DeviceCommunicator *> createCommunicator(Communicator &host,
                                                    const std::vector<std::vector<int>> &groups,
                                                    const CommOptions &opts) override {
#ifdef DTC_HAVE_NCCL_COMMUNICATOR
    DTC_CUDA_RETURN_IF_ERROR(name_, cudaSetDevice(gpu_));
    DTC_ASSIGN_OR_RETURN(comm_, createNcclCommunicator(host, groups, *ctx_, opts));
    return comm_.get();
#else
    (void)host;
    (void)groups;
    (void)opts;
    return Status::error(name_, "the plan has collectives, and collectives on CUDA need the NCCL "
                                "communicator, which this dtc-run was built without");
#endif
  }

  Status synchronize() override {
    // With a communicator, a lost peer leaves an NCCL kernel on the stream that never ends: a
    // blocking cudaStreamSynchronize would hang before poll() could name the peer. Query the
    // stream and poll the communicator instead (yielding first, then sleeping 100 us).
    if (comm_) {
      const auto start = std::chrono::steady_clock::now();
      for (;;) {
        cudaError_t q = cudaStreamQuery(ctx_->stream());
        if (q == cudaSuccess)
          break;
        if (q != cudaErrorNotReady)
          return asyncError(q, "cudaStreamQuery");
        DTC_RETURN_IF_ERROR(comm_->poll());
        if (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1))
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    }
    cudaError_t e = cudaStreamSynchronize(ctx_->stream());
    if (e != cudaSuccess)
      return asyncError(e, "cudaStreamSynchronize");
    DTC_RETURN_IF_ERROR(ctx_->checkErrors());
    if (comm_)
      DTC_RETURN_IF_ERROR(comm_->poll());
    return Status::ok();
  }

private:
  /// The two pinned staging buffers and their events, made on first use.
  Status ensureStaging() {
    if (staging_[0])
      return Status::ok();
    for (int b = 0; b < 2; ++b) {
      cudaError_t e = cudaMallocHost(&staging_[b], kStagingBytes);
      if (e != cudaSuccess) {
        staging_[b] = nullptr;
        cudaGetLastError();
        if (b == 1) {
          cudaFreeHost(staging_[0]);
          staging_[0] = nullptr;
        }
        return cudaStatus(e, name_, "cudaMallocHost (2 x 8 MiB of pinned staging memory)");
      }
      if (!stagingDone_[b])
        DTC_CUDA_RETURN_IF_ERROR(
            name_, cudaEventCreateWithFlags(&stagingDone_[b], cudaEventDisableTiming));
    }
    return Status::ok();
  }

  /// An error of a kernel or copy that ran asynchronously: it cannot name the instruction, so
  /// the message says how to find it.
  Status asyncError(cudaError_t e, const char *call) const {
    return Status::error(cudaStatus(e, name_, call).message() +
                         "; a kernel or copy submitted earlier failed (dtc-run --profile "
                         "synchronizes after every instruction and names the failing one)");
  }

  int gpu_;
  std::string name_;
  std::unique_ptr<ops::cuda::CudaContext> ctx_;
  uint8_t *allocation_ = nullptr; // what cudaMalloc returned
  uint8_t *arena_ = nullptr;      // allocation_ rounded up to the plan's alignment
  uint64_t bytes_ = 0;
  void *staging_[2] = {nullptr, nullptr};
  cudaEvent_t stagingDone_[2] = {nullptr, nullptr};
  std::unique_ptr<DeviceCommunicator> comm_;
};

} // namespace

Expected<std::unique_ptr<Device>> createCudaDevice(int index, const DeviceOptions &opts) {
  const std::string where = "runs on cuda:" + std::to_string(index);
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count <= 0) {
    cudaGetLastError();
    return Status::error(where + " but no CUDA device is visible (cudaGetDeviceCount: " +
                         (e != cudaSuccess
                              ? std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)
                              : std::string("0 devices")) +
                         ")");
  }
  const int gpu = chooseGpu(index, opts.localRank, count);
  auto ctx = ops::cuda::CudaContext::create(gpu);
  if (!ctx)
    return Status::error(where + " (GPU " + std::to_string(gpu) + " of " + std::to_string(count) +
                         ") but it fails to start: " + ctx.status().message());
  (*ctx)->setWorkspaceLimit(opts.cudaWorkspaceLimit);
  return std::unique_ptr<Device>(std::make_unique<CudaDevice>(gpu, ctx.takeValue()));
}

} // namespace dtc::rt
