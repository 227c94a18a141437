// Devices of the runtime (DESIGN.md section 8): a device owns one arena (sized by the plan's
// memory plan), copies between host memory and the arena, and makes the kernels that run on its
// compute stream. The CPU device runs kernels in order on the calling thread (oneDNN's in-order
// stream); a CUDA device would keep the same interface with a compute and a communication stream.
#pragma once

#include "compiler/support/Status.h"
#include "ops/cpu/Kernel.h"

#include <cstdint>
#include <memory>
#include <string>

namespace dtc::rt {

class Device {
public:
  virtual ~Device() = default;
  /// "cpu:0", "cuda:1".
  virtual std::string name() const = 0;
  /// Allocates the arena: `bytes` bytes (zero-filled) at an address aligned to `alignment`.
  /// Errors: out of memory (naming the size).
  virtual Status allocateArena(uint64_t bytes, uint64_t alignment) = 0;
  virtual uint64_t arenaBytes() const = 0;
  /// Device address of arena byte `offset` (offsets are validated against the plan beforehand).
  virtual void *arenaAt(uint64_t offset) = 0;
  /// Host -> arena and arena -> host copies of `bytes` bytes.
  virtual Status upload(uint64_t offset, const void *src, uint64_t bytes) = 0;
  virtual Status download(uint64_t offset, void *dst, uint64_t bytes) = 0;
  /// Makes a kernel for one instruction (errors name the node).
  virtual Expected<std::unique_ptr<ops::cpu::Kernel>>
  createKernel(const ops::cpu::KernelSpec &spec) = 0;
  /// The data-parallel group's collectives for kernels made from now on (synchronized
  /// BatchNormalization); null on one rank. Not owned.
  virtual void setCollectives(ops::cpu::KernelCollectives *collectives) = 0;
  /// Waits until every kernel submitted so far has finished.
  virtual Status synchronize() = 0;
};

/// The CPU device. `threads` > 0 sets the number of OpenMP threads oneDNN uses (0: the
/// OpenMP default, one per core, or OMP_NUM_THREADS).
std::unique_ptr<Device> createCpuDevice(int threads);

} // namespace dtc::rt
