// Internal to the tensor-parallel pass: the pass's class, shared by TensorParallel.cpp (what the
// pass does, its walk, conversions, rewrites and uneven splits) and TensorParallelSequence.cpp
// (--sequence-parallel regions).
#pragma once

#include "compiler/ir/Sharding.h"
#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "passes/Pass.h"
#include "passes/Passes.h"
#include "passes/TensorParallelLoss.h"

#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace dtc::passes::tp {

using ir::Sharding;

/// Whether `v` is a float parameter (a weight the pass may split).
bool isTrainableFloat(const ir::Value *v);
/// `v`'s dims, -1 for a dim that is not static.
std::vector<int64_t> staticDims(const ir::Value *v);

class TensorParallelPass : public Pass, private GraphBuilder {
public:
  std::string name() const override { return "tensor-parallel"; }
  std::string description() const override {
    return "split weights over the tp group by the ops' sharding rules and insert all-reduce, "
           "all-gather and slices where layouts meet (Megatron-LM column/row parallelism)";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override;

private:
  /// A tp degree no weight could be split by (every splittable axis shorter than T, as a
  /// 10-feature MLP at tp=11) leaves every tp rank computing the whole model: say so, naming the
  /// largest weight, rather than running T copies silently.
  void warnIfNothingSplit();

  // ---- layouts -------------------------------------------------------------------------------

  /// A Transpose of a free weight is not converted: its output stands for the weight (rules
  /// see a free weight), and requiring a split of it splits the weight along the permuted axis.
  struct VirtualWeight {
    ir::Value *weight;
    std::vector<int64_t> perm;
  };

  bool deferredTranspose(ir::Node *n);

  bool isFree(const ir::Value *v) const;

  Sharding layoutOf(const ir::Value *v) const override;

  void decide(ir::Value *v, const Sharding &s);

  Status applyUserShards();

  // ---- rules ---------------------------------------------------------------------------------

  Expected<ops::ShardingContext> ask(const ir::Node *n,
                                     const std::map<size_t, Sharding> &assumed) const;

  /// Look-ahead: every consumer of `v` accepts layout `s` without converting it, and carries
  /// any split it produces on to consumers that do the same (a partial result ends the chain:
  /// it costs the one all-reduce the pattern needs anyway). It recurses once per op of such a
  /// chain; past kMaxLookAhead ops, or past half of the thread's stack (sanitizer builds have
  /// larger frames), it answers no (the value is converted there: correct, one collective
  /// more) instead of overflowing the stack (a chain of about 17,000 ops did at 8 MiB).
  bool keepsSplit(const ir::Value *v, const Sharding &s) const;
  static constexpr int kMaxLookAhead = 4096;

  Status visit(ir::Node *n);

  // ---- sequence parallelism (--sequence-parallel) -------------------------------------------

  Status visitNode(ir::Node *n) {
    return cfg_->sequenceParallel ? visitSequenceParallel(n) : visit(n);
  }

  /// Contractions end a sequence-parallel region: their weights are split (column- and
  /// row-parallel layers) or, replicated, mix every token's activations into one gradient
  /// (the output projection before the loss), so they read the whole sequence.
  static bool endsSequenceRegion(const ir::Node *n);

  /// The batch size of the graph (the first axis of its data inputs), or -1.
  int64_t dataBatch() const;

  /// The sequence axis of a row-parallel output `v` ([B, S, H] or [S, B, H]): the one axis
  /// that is neither the last (hidden) one nor of the batch's size. When S equals B the two
  /// cannot be told apart, and either split is exact (the region's ops treat every sample and
  /// every token alike): axis 1. Errors name `v` when there is no such axis or several, or its
  /// size does not divide by T.
  Expected<int64_t> sequenceAxis(const ir::Value *v) const;

  /// With --sequence-parallel: a node that reads a sequence-split value or a partial sum joins
  /// the sequence-parallel region when it is not a contraction and its rule keeps the
  /// sequence split without splitting a weight (per-token ops: LayerNorm, elementwise ops,
  /// residual and bias adds); otherwise its sequence-split inputs are gathered first (with a
  /// reduce-scatter gradient where the rule wanted Megatron's f) and it is visited as usual.
  Status visitSequenceParallel(ir::Node *n);

  /// The rule's answer keeps every assumed input in its sequence split, splits no weight and
  /// no other input except along the sequence, and needs no rewrite.
  bool keepsSequence(const ir::Node *n, const ops::ShardingContext &sc,
                     const std::map<size_t, Sharding> &assumed) const;

  /// Applies the rule's answer to a node of the sequence-parallel region: partial inputs are
  /// reduce-scattered along the sequence, replicated activations sliced (through
  /// TensorParallelCopy), and replicated float inputs that carry a gradient (LayerNorm
  /// weights, biases) go through TensorParallelCopy, whose gradient all-reduces what each rank
  /// summed over its own tokens.
  Status sequenceNode(ir::Node *n, const ops::ShardingContext &sc,
                      const std::map<size_t, Sharding> &assumed);

  /// Partial -> split along the sequence axis `s.axis` (g of Korthikanti et al. 2022): the
  /// axis moved first ([pre, T, S/T, post] -> [T, pre, S/T, post]), flattened, reduce-scattered
  /// (rank r keeps block r of the sum) and reshaped to the local [pre, S/T, post]. Its gradient
  /// is an all-gather (ops/comm/ReduceScatter.cpp).
  Expected<ir::Value *> reduceScatterSequence(ir::Value *v, const Sharding &s, ir::Node *before);

  /// Replicated -> split along the sequence where the region reads a replicated activation
  /// (the first block's residual input): the rank's slice of a TensorParallelCopy that only
  /// the slice reads, whose gradient is then an all-gather of the slices' gradients rather than
  /// an all-reduce (Megatron-LM's scatter_to_sequence_parallel_region).
  Expected<ir::Value *> scatterSequence(ir::Value *v, const Sharding &s, ir::Node *before);

  /// Sequence-split -> replicated for a column-parallel reader (g-bar): the all-gather of
  /// gather() whose gradient is a reduce-scatter (reduce_scatter_grad), which also sums the
  /// partial gradients of the split computation that follows, so no TensorParallelCopy (f) is
  /// added after it.
  Expected<ir::Value *> gatherSequence(ir::Value *v, ir::Node *before);

  // ---- conversions ---------------------------------------------------------------------------

  // tp::GraphBuilder (the vocabulary-parallel loss, passes/TensorParallelLoss.cpp, builds with
  // these and insert, constI64, tpRank, layoutOf, unevenFirst).
  ir::Graph &graph() override { return *graph_; }
  Diagnostics &diags() override { return *diags_; }
  void adopt(ir::Node *n) override { inserted_.insert(n); }

  ir::Node *insert(ir::Node *before, const std::string &op, const std::vector<ir::Value *> &in,
                   const std::string &base, const std::string &domain = "") override;

  ir::Value *constI64(const std::string &base, const std::vector<int64_t> &values,
                      bool scalar = false) override;

  Expected<ir::Value *> tpRank() override;

  /// The value of `v` (global type `t`) set to type `t` for the rest of the walk (the final
  /// re-inference gives every value its local type).
  ir::Value *typed(ir::Node *n, const ir::TensorType &t, const Sharding &s);

  Expected<ir::Value *> convert(ir::Value *v, const Sharding &want, ir::Node *before);

  /// [T, local...] from every rank, then back to the global tensor: with the split axis `a` of
  /// local size B*p (B blocks), reshape to [T, pre.., B, p, post..], move T before p, merge.
  Expected<ir::Value *> gather(ir::Value *v, const Sharding &s, ir::Node *before);

  /// The rank's slice of a replicated value: Gather along the axis with indices
  /// base + tp_rank * p (base lists the first part of every block).
  Expected<ir::Value *> slice(ir::Value *v, const Sharding &s, ir::Node *before);

  Expected<ir::Value *> copyOf(ir::Value *v, ir::Node *before);

  // ---- rewrites ------------------------------------------------------------------------------

  /// Gather(W split by rows, ids): ids outside the rank's rows [r*V/T, (r+1)*V/T) read row 0
  /// and are zeroed after, so the sum over the group is the whole lookup.
  Status maskGather(ir::Node *n);

  /// Row-parallel Gemm/Conv: the bias (input i) leaves the node and is added once after the
  /// all-reduce (every rank adding it would count it T times).
  Status biasAfterReduce(ir::Node *n, size_t i);

  // ---- uneven splits ---------------------------------------------------------------------------
  // A split whose axis does not divide by T (ir::splitRange: the first size % T ranks hold one
  // more) gives tp ranks different shapes, so the graph is built for the class of one tp index
  // (cfg_->tpIndex: the ranks holding ceil(size / T) rows, or those holding floor) and dtc-compile
  // compiles one index per class. Within a class a rank's first row is linear in its runtime-fed
  // tp rank, so every rank of the class runs the same program.

  /// This tp index's first row of an axis of `size` split unevenly by `s` (an int64 scalar
  /// computed before `before` from the runtime-fed tp rank r: r * (q + 1) for the ranks below
  /// size % T, r * q + size % T for the others, q = size / T); `rows` becomes the range's length.
  Expected<ir::Value *> unevenFirst(int64_t size, const Sharding &s, const std::string &base,
                                    int64_t &rows, ir::Node *before) override;

  /// The rank's uneven slice of a replicated value: Gather of its range's indices (0..rows-1
  /// plus the runtime first row).
  Expected<ir::Value *> unevenSlice(ir::Value *v, const Sharding &s, ir::Node *before);

  /// Unequal parts are not all-gathered (that would need an all-gather of varying sizes):
  /// uneven splits only end in a row-parallel contraction (a partial sum, all-reduced).
  Status unevenGatherError(const ir::Value *v, const Sharding &s) const;

  ir::Node *next(ir::Node *n) const;

  // ---- the end -------------------------------------------------------------------------------

  Status finishOutputs();

  Status finishWeights();

  TrainingConfig *cfg_ = nullptr;
  int64_t parts_ = 1;
  ir::Graph *graph_ = nullptr;
  Diagnostics *diags_ = nullptr;
  std::unordered_map<const ir::Value *, Sharding> layout_;
  std::map<const ir::Value *, Sharding> decided_;
  std::unordered_map<const ir::Value *, VirtualWeight> virtual_;
  std::unordered_map<std::string, ir::Value *> converted_;
  std::unordered_map<const ir::Value *, ir::Value *> copies_;
  std::unordered_set<const ir::Node *> inserted_;
  mutable std::unordered_map<std::string, bool> lookAhead_;
  mutable int lookAheadDepth_ = 0;              ///< keepsSplit's current recursion depth
  mutable uintptr_t lookAheadBase_ = 0;         ///< its outermost frame's address
  // --sequence-parallel: values split along the sequence, and the conversions made for it.
  std::unordered_set<const ir::Value *> seqSplit_;
  std::unordered_map<std::string, ir::Value *> seqScattered_;
  std::unordered_map<const ir::Value *, ir::Value *> seqGathered_;
};

} // namespace dtc::passes::tp
