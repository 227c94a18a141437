// Internal helpers of the CPU kernels (not a public interface): the per-op check/create
// declarations generated from Kernels.def, spec checks shared by the op families, and a small
// adapter that binds kernel operands to oneDNN memories and runs one primitive.
#pragma once

#include "ops/cpu/Kernel.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtc::ops::cpu {

// One `check*`, `create*` and in-place rule per Kernels.def line (shared by several ops).
#define DTC_CPU_KERNEL(domain, op, check, create, inPlace, view, channelsLast)                     \
  Status check(const KernelSpec &spec);                                                            \
  Expected<KernelPtr> create(const KernelSpec &spec, CpuContext &ctx);                             \
  int inPlace(const KernelSpec &spec);
#include "ops/cpu/Kernels.def"
#undef DTC_CPU_KERNEL
// noInPlace (declared above through the table): the rule of ops that never write over an input.

/// Errors unless the spec has between minIn and maxIn inputs (present or omitted) and exactly
/// `outs` outputs, and inputs [0, minIn) are present.
Status checkArity(const KernelSpec &spec, size_t minIn, size_t maxIn, size_t outs);
/// Errors unless input (or output) `index` has one of `allowed` dtypes:
/// "input 0 has dtype f64; the CPU kernel supports f32".
Status checkDType(const KernelSpec &spec, bool input, size_t index,
                  const std::vector<ir::DType> &allowed);
/// Mixed precision (--precision bf16): errors unless every present operand of a dense oneDNN op
/// (MatMul, Gemm, MatMulT, Conv and its gradients) has one dtype, f32 or bf16 (bf16 operands,
/// f32 accumulation inside oneDNN). f16 is refused naming the node: oneDNN 2.6 has no f16
/// matmul/convolution on CPUs ("fp16 compute needs a CPU with AVX512-FP16 or a GPU (use
/// --precision bf16)").
Status checkDenseFloatDTypes(const KernelSpec &spec);
/// The oneDNN data type of an f32, bf16 or f16 operand (f32 for any other dtype).
dnnl::memory::data_type dnnlFloatType(ir::DType t);
/// Errors unless every dim of every operand is >= 0, every present operand's element count
/// and byte size fit in int64, and ranks are at most `maxRank`.
Status checkShapes(const KernelSpec &spec, size_t maxRank = 12);
/// Errors unless output 0 has exactly `expected` as shape.
Status checkOutputShape(const KernelSpec &spec, const std::vector<int64_t> &expected);
/// Numpy (ONNX multidirectional) broadcast of two shapes; false when incompatible.
bool broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b,
                     std::vector<int64_t> &out);
/// Row-major strides (in elements) of `shape`.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);
/// The oneDNN dims of a shape; a scalar (rank 0) becomes [1].
dnnl::memory::dims dnnlDims(const std::vector<int64_t> &shape);
/// A dense row-major oneDNN memory descriptor of `shape` (rank 0 becomes [1]).
dnnl::memory::desc plainDesc(const std::vector<int64_t> &shape,
                             dnnl::memory::data_type dt = dnnl::memory::data_type::f32);
/// The dims of `t` in memory order: the shape for row-major; (N, D1, ..., Dk, C) for
/// channels-last (rank >= 3).
std::vector<int64_t> physicalShape(const TensorDesc &t);
/// The memory-order position of logical axis `axis` (in [0, rank)) of a tensor with `layout`
/// and `rank` dims: channels-last maps 0 -> 0, 1 -> rank - 1 and a >= 2 -> a - 1.
size_t physicalAxis(size_t axis, Layout layout, size_t rank);
/// A dense oneDNN memory descriptor of `t` over its logical dims honouring its layout: plainDesc
/// for row-major (abc, abcd, abcde, ...); channels-last gets the strides of acb, acdb, acdeb (any
/// rank >= 3). Zero-sized dims count as 1 in the strides.
dnnl::memory::desc layoutDesc(const TensorDesc &t,
                              dnnl::memory::data_type dt = dnnl::memory::data_type::f32);
/// Errors unless operands `a` and `b` (each "input i" or "output i" by kind) have one layout:
/// "input 0 is channels-last but output 0 is row-major; the CPU kernel needs one layout".
Status checkSameLayout(const KernelSpec &spec, bool aInput, size_t a, bool bInput, size_t b);
/// Turns a oneDNN exception into "<where>: oneDNN: <what> (status N)".
Status dnnlStatus(const KernelSpec &spec, const dnnl::error &e);

/// The operands of one oneDNN primitive: each bound to a kernel input, a kernel output, or a
/// memory the kernel owns (scratch). Memories are made once; run() only sets data handles.
class PrimitiveRunner {
public:
  PrimitiveRunner() = default;
  PrimitiveRunner(dnnl::primitive prim, CpuContext &ctx) : prim_(std::move(prim)), ctx_(&ctx) {}
  /// Binds oneDNN argument `arg` to kernel input `index` with layout `md`.
  void input(int arg, const dnnl::memory::desc &md, size_t index);
  /// Binds `arg` to kernel output `index`.
  void output(int arg, const dnnl::memory::desc &md, size_t index);
  /// Binds `arg` to a memory that is not a kernel operand (scratch, reordered weights).
  void fixed(int arg, const dnnl::memory &mem);
  /// Sets the data handles from `args` and executes the primitive (no stream wait).
  /// May throw dnnl::error; callers catch.
  void execute(const KernelArgs &args);

private:
  struct Operand {
    int arg;
    enum class Kind { kInput, kOutput, kFixed } kind;
    size_t index;
    dnnl::memory mem;
  };
  dnnl::primitive prim_;
  CpuContext *ctx_ = nullptr;
  std::vector<Operand> operands_;
  std::unordered_map<int, dnnl::memory> argMap_;
};

/// One operand that a primitive wants in another layout than the plan's: a kernel-owned scratch
/// memory and the reorder between the two.
struct Reordered {
  dnnl::memory user, scratch;
  dnnl::reorder reorder;
};

/// The inputs a primitive reads through a reorder (format_tag::any picked another layout), run
/// before the primitive. An input marked constant (TensorDesc::constant: weights of an
/// inference plan) is reordered on the first run only, and again only if its address changes.
class InputReorders {
public:
  /// Binds kernel input `index` as primitive argument `arg`: directly when `user` == `want`,
  /// otherwise through a reorder into scratch memory owned by this object.
  void bind(PrimitiveRunner &runner, CpuContext &ctx, int arg, const dnnl::memory::desc &user,
            const dnnl::memory::desc &want, size_t index, bool constant);
  /// Runs the reorders that are due (may throw dnnl::error; callers catch).
  void run(const KernelArgs &args, dnnl::stream &stream);

private:
  struct Entry {
    size_t index;
    bool constant;
    const void *doneFor = nullptr; ///< constant input already reordered from this address
    Reordered r;
  };
  std::vector<Entry> entries_;
};

/// A kernel that runs one primitive bound by a PrimitiveRunner.
class SinglePrimitiveKernel : public Kernel {
public:
  SinglePrimitiveKernel(const KernelSpec &spec, CpuContext &ctx, PrimitiveRunner runner)
      : where_(spec.where()), ctx_(ctx), runner_(std::move(runner)) {}
  Status run(const KernelArgs &args) override;

private:
  std::string where_;
  CpuContext &ctx_;
  PrimitiveRunner runner_;
};

/// Runs `fn` (which builds oneDNN objects) and turns a dnnl::error into a Status naming the node.
template <typename Fn> Expected<KernelPtr> buildKernel(const KernelSpec &spec, Fn &&fn) {
  try {
    return fn();
  } catch (const dnnl::error &e) {
    return dnnlStatus(spec, e);
  }
}

} // namespace dtc::ops::cpu
