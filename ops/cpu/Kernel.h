// The CPU kernels (DESIGN.md section 8): the backend-neutral interface of ops/kernel/Kernel.h
// implemented with oneDNN primitives and hand-written loops, looked up by (domain, op) in
// ops/cpu/Kernels.def. The compiler asks cpuTarget() (ops/kernel/Target.h) what they support.
#pragma once

#include "compiler/support/Status.h"
#include "ops/cpu/Collectives.h"
#include "ops/kernel/Kernel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtc::ops::cpu {

// The backend-neutral types, under their CPU names (ops/kernel/Kernel.h).
using ops::KernelArgs;
using ops::KernelPtr;
using ops::KernelSpec;
using ops::Layout;
using ops::layoutName;
using ops::shapeStr;
using ops::TensorDesc;
using Kernel = ops::Kernel;

/// The CPU device a kernel runs on: one oneDNN engine and one in-order stream per rank.
struct CpuContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  /// The data-parallel group's collectives (synchronized BatchNormalization), or null when the
  /// plan runs on one rank. Not owned.
  KernelCollectives *collectives = nullptr;
};

/// Checks that a kernel exists for the spec and supports its dtypes, layouts and attributes; used
/// by the compiler so that an unsupported op is a compile-time error naming the node, and by the
/// compiler's layout assignment to ask whether a kernel takes channels-last operands.
Status checkKernel(const KernelSpec &spec);
/// Makes the kernel (checkKernel first). Errors name the node.
Expected<std::unique_ptr<Kernel>> createKernel(const KernelSpec &spec, CpuContext &ctx);
/// True when (domain, op) has a CPU kernel at all.
bool hasKernel(const std::string &domain, const std::string &op);
/// Input index whose buffer the output 0 may overwrite in place (same dtype and size), or -1.
/// The memory planner uses it only when that input is dead after the instruction.
int inPlaceInput(const KernelSpec &spec);
/// True for ops whose output 0 is a view of input 0 (same bytes, new shape): Reshape, Flatten,
/// Squeeze, Unsqueeze, Identity. Their kernels copy only when the planner could not alias.
bool isViewOp(const std::string &domain, const std::string &op);
/// Every (op) with a CPU kernel, sorted ("Add", "Conv", ...), ai.onnx domain first.
std::vector<std::string> kernelOpNames();

} // namespace dtc::ops::cpu
