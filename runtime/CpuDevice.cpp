// The CPU device: an aligned host arena, memcpy transfers, oneDNN kernels on one in-order stream;
// and createDevice, which picks the CPU or the CUDA device for a plan's rank.
#include "runtime/Device.h"

#include "ops/cpu/Kernel.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace dtc::rt {

namespace {

/// Sets the OpenMP thread count of whichever OpenMP runtime oneDNN was linked with (libgomp
/// for Debian's libdnnl), without compiling dtc itself with -fopenmp.
void setOpenMpThreads(int threads) {
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    fn(threads);
}

class CpuDevice final : public Device {
public:
  explicit CpuDevice(int threads) {
    if (threads > 0)
      setOpenMpThreads(threads);
  }
  ~CpuDevice() override { std::free(arena_); }

  std::string name() const override { return "cpu:0"; }
  ops::DeviceKind kind() const override { return ops::DeviceKind::kCpu; }

  Status allocateArena(uint64_t bytes, uint64_t alignment) override {
    std::free(arena_);
    arena_ = nullptr;
    bytes_ = bytes;
    // aligned_alloc needs a size that is a multiple of the alignment (and non-zero).
    uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
    if (rounded == 0)
      rounded = alignment;
    // The arena is zero-filled: more than the machine's memory would only end in the OOM killer.
    const long pages = ::sysconf(_SC_PHYS_PAGES), pageBytes = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && pageBytes > 0 &&
        rounded > static_cast<uint64_t>(pages) * static_cast<uint64_t>(pageBytes))
      return Status::error(name(), "the arena needs " + std::to_string(rounded) +
                                       " bytes, more than this machine's " +
                                       std::to_string(static_cast<uint64_t>(pages) *
                                                      static_cast<uint64_t>(pageBytes)) +
                                       " bytes of memory");
    arena_ = static_cast<uint8_t *>(std::aligned_alloc(alignment, rounded));
    if (!arena_)
      return Status::error(name(),
                           "cannot allocate the arena (" + std::to_string(bytes) + " bytes)");
    std::memset(arena_, 0, rounded);
    return Status::ok();
  }
  uint64_t arenaBytes() const override { return bytes_; }
  void *arenaAt(uint64_t offset) override { return arena_ + offset; }

  Status upload(uint64_t offset, const void *src, uint64_t bytes) override {
    if (bytes)
      std::memcpy(arena_ + offset, src, bytes);
    return Status::ok();
  }
  Status download(uint64_t offset, void *dst, uint64_t bytes) override {
    if (bytes)
      std::memcpy(dst, arena_ + offset, bytes);
    return Status::ok();
  }

  Status copy(void *dst, const void *src, uint64_t bytes) override {
    if (dst != src && bytes)
      std::memmove(dst, src, bytes);
    return Status::ok();
  }

  Expected<ops::KernelPtr> createKernel(const ops::KernelSpec &spec) override {
    return ops::cpu::createKernel(spec, ctx_);
  }

  void setCollectives(ops::KernelCollectives *collectives) override {
    ctx_.collectives = collectives;
  }

  /// The executor runs the plan's collectives on the host communicator: the arena is host
  /// memory.
  Expected<DeviceCommunicator *> createCommunicator(Communicator &,
                                                    const std::vector<std::vector<int>> &,
                                                    const CommOptions &) override {
    return static_cast<DeviceCommunicator *>(nullptr);
  }

  Status synchronize() override {
    try {
      ctx_.stream.wait();
    } catch (const dnnl::error &e) {
      return Status::error(name(), std::string("stream wait failed: ") + e.what());
    }
    return Status::ok();
  }

private:
  ops::cpu::CpuContext ctx_;
  uint8_t *arena_ = nullptr;
  uint64_t bytes_ = 0;
};

} // namespace

std::unique_ptr<Device> createCpuDevice(int threads) {
  return std::make_unique<CpuDevice>(threads);
}

int chooseGpu(int index, int localRank, int deviceCount) {
  if (localRank < 0) {
    localRank = 0;
    // Open MPI's mpirun sets the first, Slurm's srun the second.
    for (const char *var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
      if (const char *v = std::getenv(var)) {
        char *end = nullptr;
        const long r = std::strtol(v, &end, 10);
        if (end != v && *end == '\0' && r >= 0 && r < (1L << 20)) {
          localRank = static_cast<int>(r);
          break;
        }
      }
  }
  if (deviceCount <= 0)
    return 0;
  return static_cast<int>((static_cast<int64_t>(index) + localRank) % deviceCount);
}

Expected<std::unique_ptr<Device>> createDevice(ops::DeviceKind kind, int index,
                                               const DeviceOptions &opts) {
  if (kind == ops::DeviceKind::kCpu)
    return createCpuDevice(opts.threads);
#ifdef DTC_HAVE_CUDA
  return createCudaDevice(index, opts);
#else
  return Status::error("runs on cuda:" + std::to_string(index) +
                       " but this dtc-run was built without CUDA (DTC_ENABLE_CUDA=OFF)");
#endif
}

} // namespace dtc::rt
