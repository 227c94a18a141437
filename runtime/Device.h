// Devices of the runtime (DESIGN.md section 8): a device owns one arena (sized by the plan's
// memory plan), copies between host memory and the arena and inside the arena, and makes the
// kernels (ops/kernel/Kernel.h) that run on its compute stream. The CPU device runs kernels in
// order on the calling thread (oneDNN's in-order stream); the CUDA device (runtime/cuda) enqueues
// them on a CUDA stream and runs the plan's collectives through a DeviceCommunicator (NCCL).
#pragma once

#include "compiler/support/Status.h"
#include "ops/kernel/Kernel.h"
#include "ops/kernel/Target.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtc::rt {

class Communicator;
class DeviceCommunicator;
struct CommOptions;

class Device {
public:
  virtual ~Device() = default;
  /// "cpu:0", "cuda:1".
  virtual std::string name() const = 0;
  virtual ops::DeviceKind kind() const = 0;
  /// Allocates the arena: `bytes` bytes (zero-filled) at an address aligned to `alignment` (a
  /// power of two). Errors: out of memory (naming the size, and on a GPU the free memory).
  virtual Status allocateArena(uint64_t bytes, uint64_t alignment) = 0;
  virtual uint64_t arenaBytes() const = 0;
  /// Device address of arena byte `offset` (offsets are validated against the plan
  /// beforehand). On a GPU the host must not dereference it: use upload/download/copy.
  virtual void *arenaAt(uint64_t offset) = 0;
  /// Host -> arena and arena -> host copies of `bytes` bytes, the only paths between host
  /// memory and the arena, ordered after every kernel and copy submitted so far. upload()
  /// returns once `src` may be reused (on a GPU the bytes are staged in pinned memory and
  /// reach the arena before any kernel submitted afterwards runs); download() returns with the
  /// bytes in `dst`.
  virtual Status upload(uint64_t offset, const void *src, uint64_t bytes) = 0;
  virtual Status download(uint64_t offset, void *dst, uint64_t bytes) = 0;
  /// Arena -> arena copy of `bytes` bytes between device addresses from arenaAt(), on the
  /// compute stream (after the kernels submitted before it; asynchronous on a GPU). The ranges
  /// may overlap (memmove semantics).
  virtual Status copy(void *dst, const void *src, uint64_t bytes) = 0;
  /// Makes a kernel for one instruction (errors name the node).
  virtual Expected<ops::KernelPtr> createKernel(const ops::KernelSpec &spec) = 0;
  /// Called once after every kernel was made and before the first run: the CUDA device
  /// allocates the kernels' shared workspace here (out of memory names the bytes needed and
  /// free). Nothing to do on the CPU.
  virtual Status prepare() { return Status::ok(); }
  /// The data-parallel group's collectives for kernels made from now on (synchronized
  /// BatchNormalization); null on one rank. Not owned.
  virtual void setCollectives(ops::KernelCollectives *collectives) = 0;
  /// The device's communicator for the plan's Collective instructions, made collectively by
  /// every rank (`groups`: the plan's groups as world-rank lists, as given to
  /// Communicator::createGroups; `host` bootstraps it). Owned by the device, which polls it in
  /// synchronize(). Returns null when the executor runs collectives on the host communicator
  /// itself (the CPU: the arena is host memory). Errors: a CUDA build without the NCCL
  /// communicator, an NCCL failure.
  virtual Expected<DeviceCommunicator *>
  createCommunicator(Communicator &host, const std::vector<std::vector<int>> &groups,
                     const CommOptions &opts) = 0;
  /// Waits until every kernel and copy submitted so far has finished. On a GPU it also reports
  /// the first data-dependent kernel error (an index out of range, naming its node) and the
  /// device communicator's asynchronous failures.
  virtual Status synchronize() = 0;
};

struct DeviceOptions {
  /// CPU: the number of OpenMP threads oneDNN uses (0: the OpenMP default, one per core, or
  /// OMP_NUM_THREADS).
  int threads = 0;
  /// CUDA: the upper bound on the workspace a kernel may ask cuDNN for (dtc-run
  /// --cuda-workspace-mb), in bytes.
  size_t cudaWorkspaceLimit = size_t{256} << 20;
  /// CUDA: the process's rank among the ranks on its host, added to the plan's device index so
  /// that `mpirun -n 2` on a 2-GPU host uses both; -1 reads OMPI_COMM_WORLD_LOCAL_RANK (0 when
  /// unset).
  int localRank = -1;
};

/// The CPU device. `threads` > 0 sets the number of OpenMP threads oneDNN uses (0: the
/// OpenMP default, one per core, or OMP_NUM_THREADS).
std::unique_ptr<Device> createCpuDevice(int threads);

/// The device of a plan's rank: the CPU device, or for kCuda the GPU (`index` + the local rank)
/// modulo the number of GPUs. Errors (the caller adds the plan and rank): "runs on cuda:<index>
/// but this dtc-run was built without CUDA (DTC_ENABLE_CUDA=OFF)", "runs on cuda:<index> but no
/// CUDA device is visible (cudaGetDeviceCount: ...)", a GPU that fails to start.
Expected<std::unique_ptr<Device>> createDevice(ops::DeviceKind kind, int index,
                                               const DeviceOptions &opts);

#ifdef DTC_HAVE_CUDA
/// The CUDA device (runtime/cuda/CudaDevice.cpp); createDevice's CUDA branch, same errors.
Expected<std::unique_ptr<Device>> createCudaDevice(int index, const DeviceOptions &opts);
#endif

/// The GPU a rank uses: (`index` + `localRank`) modulo `deviceCount` (> 0); `localRank` -1
/// reads OMPI_COMM_WORLD_LOCAL_RANK (0 when unset or not a number).
int chooseGpu(int index, int localRank, int deviceCount);

} // namespace dtc::rt
