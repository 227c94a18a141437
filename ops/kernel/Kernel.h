// The backend-neutral kernel interface (DESIGN.md sections 6a and 8): a kernel is made once per
// plan instruction from a KernelSpec (op, attributes, static input/output types), then run on
// every step with pointers into the rank's arena (host memory on the CPU, device memory on a
// GPU). The CPU kernels (ops/cpu) and the CUDA kernels (ops/cuda) implement it; the compiler
// asks a Target (ops/kernel/Target.h) what a backend supports. Nothing here includes a kernel
// library (oneDNN, CUDA).
#pragma once

#include "compiler/ir/Attribute.h"
#include "compiler/ir/Types.h"
#include "compiler/support/Status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtc::ops {

/// Order of a tensor's bytes in memory. The shape is always the logical ONNX shape (N, C, D1,
/// ..., Dk); only the order of the bytes differs.
enum class Layout : uint8_t {
  kRowMajor,     ///< dense row-major over the logical shape (ONNX's order)
  kChannelsLast, ///< rank >= 3: N, D1, ..., Dk, C (NWC, NHWC, NDHWC): what oneDNN's fastest
                 ///< convolutions and pools use on AVX-512
};
const char *layoutName(Layout l); ///< "row-major", "channels-last"

/// "[2,3]".
std::string shapeStr(const std::vector<int64_t> &shape);

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
  /// the wrong kind yields the default and is recorded in attrKindError, which the targets'
  /// checkKernel and the backends' createKernel turn into an error naming the node and the
  /// attribute.
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

/// Operand pointers for one run (device addresses on a GPU). inputs[i] is nullptr for an
/// omitted optional input. Every pointer is aligned to the target's arena alignment (64 bytes
/// on the CPU, 256 on CUDA). An output may alias an input when the plan chose in-place reuse
/// (Target::inPlaceInput) or a view.
struct KernelArgs {
  const void *const *inputs;
  size_t numInputs;
  void *const *outputs;
  size_t numOutputs;
};

class Kernel {
public:
  virtual ~Kernel() = default;
  /// Computes the outputs from the inputs (CPU: before it returns; CUDA: enqueued on the
  /// device's compute stream). Not reentrant: one kernel object runs on one stream at a time.
  /// Errors only for data-dependent failures (an index out of range; on CUDA reported at the
  /// next synchronization) and launch failures; shape and dtype problems are caught when the
  /// kernel is made.
  virtual Status run(const KernelArgs &args) = 0;
};

using KernelPtr = std::unique_ptr<Kernel>;

/// What every backend's registry returns for a spec its target accepted: the kernel `create`
/// makes (not called when every output is empty: nothing to compute), wrapped so that each run
/// first checks its operand pointers against the spec (a missing buffer is an error naming the
/// node, never a kernel on a null pointer) and passes an input array as long as spec.inputs
/// (omitted trailing optional inputs as nullptr). An attribute-kind mismatch that `create` met
/// is an error naming the node.
Expected<KernelPtr> makeCheckedKernel(const KernelSpec &spec,
                                      const std::function<Expected<KernelPtr>()> &create);

/// Collectives a kernel may call while it runs: synchronized BatchNormalization
/// (--sync-batchnorm) sums its per-channel statistics over the data-parallel group. The
/// runtime's communicator implements this interface (runtime/comm/Communicator.h); kernels see
/// it through their backend's context, where it is null on one rank.
class KernelCollectives {
public:
  virtual ~KernelCollectives() = default;
  /// Replaces `data[0..count)` (host memory) on every rank of the group by its element-wise sum
  /// over the group. Blocking; every rank must make the same calls in the same order (they do:
  /// every rank runs the same instruction list). `what` names the caller for errors and traces
  /// ("node 'bn1' (BatchNormTraining)"). Errors: a lost or unresponsive peer (naming it).
  virtual Status allReduceSum(double *data, size_t count, const std::string &what) = 0;
  /// Number of ranks in the group (1: nothing to reduce).
  virtual int groupSize() const = 0;
};

} // namespace dtc::ops
