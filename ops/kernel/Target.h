// Targets (DESIGN.md section 6a): what the lowering asks a backend — which ops it has kernels
// for and with which dtypes, layouts and attributes, its arena alignment, which ops are views or
// may run in place, which layouts and fusions it prefers. A target only answers questions; it
// makes no kernel, so the compiler links no kernel library through it.
#pragma once

#include "ops/kernel/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dtc::ops {

/// The device kinds a plan can run on (plan.proto DeviceType).
enum class DeviceKind : uint8_t { kCpu, kCuda };
/// "cpu", "cuda".
const char *deviceKindName(DeviceKind kind);

class Target {
public:
  virtual ~Target() = default;
  virtual DeviceKind kind() const = 0;
  /// "cpu", "cuda" (as --device spells it).
  const char *name() const { return deviceKindName(kind()); }
  /// Alignment in bytes of every arena buffer the target's kernels rely on (a power of two).
  virtual uint64_t alignment() const = 0;
  /// True when (domain, op) has a kernel on this target at all ("ai.onnx" is "").
  virtual bool hasKernel(const std::string &domain, const std::string &op) const = 0;
  /// Checks that a kernel exists for the spec and supports its dtypes, layouts and attributes:
  /// an unsupported op is a compile-time error naming the node, the op and the target.
  virtual Status checkKernel(const KernelSpec &spec) const = 0;
  /// Input index whose buffer output 0 may overwrite in place (same dtype and size), or -1.
  /// The memory planner uses it only when that input is dead after the instruction.
  virtual int inPlaceInput(const KernelSpec &spec) const = 0;
  /// True for ops whose output 0 is a view of input 0 (same bytes, new shape): Reshape,
  /// Flatten, Squeeze, Unsqueeze, Identity. Their kernels copy only when the planner could not
  /// alias.
  virtual bool isViewOp(const std::string &domain, const std::string &op) const = 0;
  /// True when the target's fastest kernel for `op` produces channels-last outputs (the
  /// lowering then keeps activations channels-last between such ops).
  virtual bool prefersChannelsLast(const std::string &op) const = 0;
  /// Every op with a kernel, sorted, ai.onnx first ("Add", "Conv", ...).
  virtual std::vector<std::string> kernelOpNames() const = 0;
};

/// The CPU target (oneDNN kernels and hand-written loops, ops/cpu).
const Target &cpuTarget();
/// The CUDA target (cuBLAS, cuDNN and CUDA kernels, ops/cuda). Available in every build: a
/// machine without CUDA still compiles plans for one.
const Target &cudaTarget();
/// The target of a device kind.
const Target &targetFor(DeviceKind kind);
/// "cpu" or "cuda" to a kind; anything else is an error naming the accepted values.
Expected<DeviceKind> parseDeviceKind(const std::string &name);

} // namespace dtc::ops
