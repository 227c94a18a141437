// The CPU device: an aligned host arena, memcpy transfers, oneDNN kernels on one in-order stream.
#include "runtime/Device.h"

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

  Expected<std::unique_ptr<ops::cpu::Kernel>>
  createKernel(const ops::cpu::KernelSpec &spec) override {
    return ops::cpu::createKernel(spec, ctx_);
  }

  void setCollectives(ops::cpu::KernelCollectives *collectives) override {
    ctx_.collectives = collectives;
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

} // namespace dtc::rt
