// The CPU kernel interface (DESIGN.md section 8): a kernel is made once per plan instruction
// from a KernelSpec (op, attributes, static input/output types), then run on every step with
// pointers into the rank's arena. Kernels are looked up by (domain, op) in ops/cpu/Kernels.def.
#pragma once

#include "compiler/ir/Attribute.h"
#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"
#include "ops/cpu/Collectives.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtc::ops::cpu {

/// Order of a tensor's bytes in memory. The shape is always the logical ONNX shape (N, C, D1,
/// ..., Dk); only the order of the bytes differs.
enum class Layout : uint8_t {
  kRowMajor,     ///< dense row-major over the logical shape (ONNX's order)
  kChannelsLast, ///< rank >= 3: N, D1, ..., Dk, C (NWC, NHWC, NDHWC): what oneDNN's fastest
                 ///< convolutions and pools use on AVX-512
};
const char *layoutName(Layout l); ///< "row-major", "channels-last"

/// Static type of one kernel operand. An omitted optional input has dtype kUndefined.
struct TensorDesc {
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  Layout layout = Layout::kRowMajor;
  /// The operand holds the same bytes at the same address on every run (a weight of an
  /// inference plan, or a constant): a kernel may keep work derived from it (re-laid-out
  /// convolution weights) from the first run on.
  bool constant = false;

  bool present() const { return dtype != ir::DType::kUndefined; }
  int64_t numElements() const;
  int64_t byteSize() const { return numElements() * ir::dtypeSize(dtype); }
  /// "f32[2,3]", or "f32[2,3,4,4] channels-last".
  std::string str() const;
};

/// Everything a kernel is built from. Shapes are static: the plan binds every symbolic dim.
struct KernelSpec {
  std::string op;
  std::string domain; ///< "" for ai.onnx
  std::string node;   ///< IR node name, for messages
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::map<std::string, ir::Attribute> attrs;

  /// "node 'conv1' (Conv)": the `where` part of errors.
  std::string where() const;
  /// Attribute accessors with defaults (the canonical forms in ops/ set every attribute a
  /// kernel needs, so defaults matter only for hand-written plans and tests). An attribute of
  /// the wrong kind yields the default and is recorded in attrKindError, which checkKernel and
  /// createKernel turn into an error naming the node and the attribute.
  int64_t attrInt(const std::string &name, int64_t dflt) const;
  float attrFloat(const std::string &name, float dflt) const;
  std::string attrString(const std::string &name, const std::string &dflt) const;
  std::vector<int64_t> attrInts(const std::string &name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attrFloats(const std::string &name, std::vector<float> dflt = {}) const;
  /// An error "<where>: <what>".
  Status error(const std::string &what) const { return Status::error(where(), what); }
  /// The first attribute-kind mismatch an accessor met ("attribute 'alpha' is string, expected
  /// float"); empty when none.
  mutable std::string attrKindError;
};

/// The CPU device a kernel runs on: one oneDNN engine and one in-order stream per rank.
struct CpuContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  /// The data-parallel group's collectives (synchronized BatchNormalization), or null when the
  /// plan runs on one rank. Not owned.
  KernelCollectives *collectives = nullptr;
};

/// Operand pointers for one run. inputs[i] is nullptr for an omitted optional input. Every
/// pointer is 64-byte aligned (the plan's arena alignment). An output may alias an input when
/// the plan chose in-place reuse (KernelDef::inPlaceInput) or a view.
struct KernelArgs {
  const void *const *inputs;
  size_t numInputs;
  void *const *outputs;
  size_t numOutputs;
};

class Kernel {
public:
  virtual ~Kernel() = default;
  /// Computes the outputs from the inputs. Not reentrant: one kernel object runs on one
  /// stream at a time. Errors only for data-dependent failures (an index
  /// out of range); shape and dtype problems are caught when the kernel is made.
  virtual Status run(const KernelArgs &args) = 0;
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
