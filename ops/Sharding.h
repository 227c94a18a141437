// The sharding facet of an operator (DESIGN.md sections 4 and 6, `tp=T`): a ShardFn, kept in
// the op's own file, says for one node which layout (ir::Sharding: replicated, split along an
// axis, partial sum) each input must have and which layout each output then has, given the
// layouts its inputs arrive in. The tensor-parallel pass (passes/TensorParallel.cpp) walks the
// forward graph in order, asks each node's rule, inserts a conversion where an input's layout
// differs from the one required (partial -> replicated: all-reduce; split -> replicated:
// all-gather; replicated -> split: each rank takes its slice), and decides the layout of each
// weight the first time a rule asks for it. Gradients follow from the collectives' own
// gradient rules (ops/comm/TensorParallel.cpp), as in Megatron-LM's f and g operators
// (Shoeybi et al. 2019, section 3).
//
// A rule must be a pure function of what the context shows: the pass also runs rules on
// hypothetical layouts to look ahead (keepsSplit), and applies recorded rewrites only for the
// layouts it commits to. Inputs a rule does not mention must be replicated; outputs it does
// not set are replicated.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/ir/Sharding.h"
#include "compiler/support/Status.h"

#include <functional>
#include <optional>
#include <vector>

namespace dtc::ops {

class ShardingContext {
public:
  /// Answers "may output `value` stay in layout `s` with every consumer" (the pass's look-ahead).
  using LookAhead = std::function<bool(const ir::Value *value, const ir::Sharding &s)>;

  ShardingContext(const ir::Node &node, std::vector<ir::Sharding> inputs,
                  std::vector<bool> freeWeights, std::vector<std::vector<int64_t>> inputDims,
                  std::vector<std::vector<int64_t>> outputDims, int64_t parts,
                  LookAhead lookAhead);

  const ir::Node &node() const { return node_; }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputDims_.size(); }
  bool hasInput(size_t i) const { return node_.input(i) != nullptr; }
  /// The layout input i arrives in (replicated for an omitted input).
  const ir::Sharding &input(size_t i) const { return inputs_.at(i); }
  /// Input i is a weight whose layout nobody chose yet: requiring a split splits the weight
  /// itself (each rank then holds only its shard), with no communication.
  bool isFreeWeight(size_t i) const { return freeWeights_.at(i); }
  /// Global (whole-tensor) dims, static.
  const std::vector<int64_t> &inputDims(size_t i) const { return inputDims_.at(i); }
  const std::vector<int64_t> &outputDims(size_t j) const { return outputDims_.at(j); }
  /// The tensor-parallel degree T.
  int64_t parts() const { return parts_; }
  /// The int64 contents of constant input i, or nullopt.
  std::optional<std::vector<int64_t>> constantInts(size_t i) const;

  /// Input i must arrive in layout `s`.
  void require(size_t i, const ir::Sharding &s);
  /// Input i (replicated) feeds a split computation: its gradient is partial over the group, so
  /// the pass routes it through ai.dtc.TensorParallelCopy (identity forward, all-reduce
  /// backward: Megatron's f). Implies require(i, replicated).
  void requireReplicatedCopy(size_t i);
  void setOutput(size_t j, const ir::Sharding &s);
  /// Whether output j may be produced in layout `s` without any consumer converting it.
  bool keepsSplit(size_t j, const ir::Sharding &s) const;
  /// Replaces constant input i by a new int64 constant of the same rank (Reshape targets, Split
  /// sizes that carry a now-local size).
  void replaceConstant(size_t i, std::vector<int64_t> values);
  /// Gather along axis 0 of a weight split by rows (vocabulary-parallel embedding): each rank
  /// looks up only the ids in its row range and writes zeros elsewhere, so the output is a
  /// partial sum (Megatron's VocabParallelEmbedding).
  void setMaskedGather() { maskedGather_ = true; }
  /// Input i (a bias) must be added after the all-reduce of output 0 rather than by every rank
  /// (row-parallel Gemm and Conv): the pass removes it from the node and adds it after.
  void addAfterReduce(size_t i) { addAfterReduce_ = static_cast<int>(i); }

  // Results, read by the pass.
  const ir::Sharding &required(size_t i) const { return required_.at(i); }
  bool copyRequired(size_t i) const { return copy_.at(i); }
  const ir::Sharding &output(size_t j) const { return outputs_.at(j); }
  const std::vector<std::pair<size_t, std::vector<int64_t>>> &constants() const {
    return constants_;
  }
  bool maskedGather() const { return maskedGather_; }
  int addAfterReduceInput() const { return addAfterReduce_; }

private:
  const ir::Node &node_;
  std::vector<ir::Sharding> inputs_;
  std::vector<bool> freeWeights_;
  std::vector<std::vector<int64_t>> inputDims_;
  std::vector<std::vector<int64_t>> outputDims_;
  int64_t parts_;
  LookAhead lookAhead_;
  std::vector<ir::Sharding> required_;
  std::vector<bool> copy_;
  std::vector<ir::Sharding> outputs_;
  std::vector<std::pair<size_t, std::vector<int64_t>>> constants_;
  bool maskedGather_ = false;
  int addAfterReduce_ = -1;
};

/// A sharding rule; errors only for malformed nodes (a layout a rule cannot handle is answered
/// by requiring replicated inputs, which is always correct).
using ShardFn = std::function<Status(ShardingContext &)>;

// Family rules shared by many ops.

/// Every input replicated, every output replicated: ops that mix all elements (losses, shape
/// computations) or whose split would change results (random masks).
ShardFn replicatedSharding();
/// Numpy-broadcasting elementwise ops (ONNX Broadcasting.md): the output follows the first
/// split input; every other input is split on the aligned axis, or replicated where it
/// broadcasts along it. A partial input is all-reduced first.
ShardFn elementwiseSharding();
/// Ops that work along some axes and treat the others independently (Softmax, LayerNorm,
/// reductions, pooling over spatial axes): a split on an independent axis passes through (moved
/// when `keepdims` is 0 for reductions). `axesOf` lists the axes the op mixes (non-negative,
/// input rank given); `removesAxes` is true when the output drops them. `paramAxis` >= 0 means
/// inputs 1.. are per-channel parameters along that input axis (BatchNormalization's channel
/// axis 1), split with it.
ShardFn independentAxesSharding(std::function<std::vector<int64_t>(const ShardingContext &)> axesOf,
                                bool removesAxes = false, int64_t paramAxis = -1);
/// Reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze): the split axis keeps its place if
/// the reshape neither merges it with an earlier axis nor splits it unevenly. When
/// `rewritesTarget`, input 1 is the target shape constant and its entry for the split axis is
/// replaced by the local size.
ShardFn reshapeSharding(bool rewritesTarget);

/// The split of output `out` along `axis` (of global size `size`) that a column-parallel op
/// should produce, or nullopt to stay replicated: the first of 1, 2, 3, 4 blocks (fused
/// projections: gate/up pairs, Q/K/V triples) that divides and that every consumer keeps, else
/// an uneven unblocked split (ir::splitRange) when size >= T and every consumer keeps it.
std::optional<ir::Sharding> columnSplit(const ShardingContext &ctx, size_t out, int64_t axis,
                                        int64_t size);
/// Output follows input 0 (unary ops; CastLike's second input only carries a type).
ShardFn unarySharding();

// independentAxesSharding for the common families.
/// Softmax, LogSoftmax: attribute `axis` (default -1).
ShardFn softmaxSharding();
/// LayerNormalization: axes `axis` (default -1) to the last; scale and bias replicated.
ShardFn layerNormSharding();
/// ReduceMean/Sum/Max: axes from input 1 (absent: all), keepdims (default 1).
ShardFn reduceSharding();
/// ArgMax, ArgMin: attribute `axis` (default 0), keepdims (default 1).
ShardFn argReduceSharding();
/// CumSum: axis from input 1.
ShardFn cumSumSharding();
/// Pooling: the spatial axes 2.. are mixed, batch and channels independent.
ShardFn poolingSharding();
/// BatchNormalization: channel axis 1 independent, with the per-channel inputs and outputs.
ShardFn batchNormSharding();

/// The output axis a split of input axis `axis` maps to under a reshape from `in` to `out`
/// (global dims), or -1 when it does not stay a contiguous split into `parts` * `blocks`.
int64_t reshapeSplitAxis(const std::vector<int64_t> &in, const std::vector<int64_t> &out,
                         int64_t axis, int64_t parts, int64_t blocks);

} // namespace dtc::ops
