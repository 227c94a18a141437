// The tensor-parallel pass's rewrite of a cross-entropy loss whose scores arrive split by class
// (passes/TensorParallelLoss.cpp: Megatron-LM's vocab_parallel_cross_entropy), behind the small
// interface of the pass (passes/TensorParallel.cpp) that it builds with.
#pragma once

#include "compiler/ir/Graph.h"
#include "compiler/ir/Sharding.h"
#include "compiler/support/Diagnostics.h"
#include "compiler/support/Status.h"

#include <string>
#include <vector>

namespace dtc::passes::tp {

/// What the rewrite asks of the tensor-parallel pass.
class GraphBuilder {
public:
  virtual ~GraphBuilder() = default;
  virtual ir::Graph &graph() = 0;
  virtual Diagnostics &diags() = 0;
  /// A forward node `op` (in `domain`) inserted before `before`, its one output named after
  /// `base`; the pass does not visit it.
  virtual ir::Node *insert(ir::Node *before, const std::string &op,
                           const std::vector<ir::Value *> &in, const std::string &base,
                           const std::string &domain) = 0;
  /// Marks a node the rewrite made itself (not through insert) as the pass's own.
  virtual void adopt(ir::Node *n) = 0;
  /// An int64 constant [values] (or a scalar when `scalar`), named after `base`.
  virtual ir::Value *constI64(const std::string &base, const std::vector<int64_t> &values,
                              bool scalar) = 0;
  /// The runtime-fed tp rank (int64 scalar), added as an input when first asked for.
  virtual Expected<ir::Value *> tpRank() = 0;
  /// The layout the pass gave `v` (replicated when it gave none).
  virtual ir::Sharding layoutOf(const ir::Value *v) const = 0;
  /// This tp index's first row of an axis of `size` split unevenly by `s` (an int64 scalar
  /// computed before `before` from the runtime-fed tp rank); `rows` becomes the range's length.
  virtual Expected<ir::Value *> unevenFirst(int64_t size, const ir::Sharding &s,
                                            const std::string &base, int64_t &rows,
                                            ir::Node *before) = 0;
};

/// Whether `n` is a SoftmaxCrossEntropyLoss (f32) whose scores arrive split along the class axis
/// (layout `scores`: the logits of a vocabulary-split tied output projection), without class
/// weights or a used log_prob output.
bool isVocabParallelLoss(const ir::Node *n, const ir::Sharding &scores);

/// Rewrites the loss node `n` (isVocabParallelLoss) into the vocabulary-parallel form with
/// all-reduces over tp, checks its labels (ai.dtc.CheckLabels) and makes the predicted class the
/// training prediction (formulas in TensorParallelLoss.cpp). Errors: a reduction other than
/// none, sum or mean, naming the node.
Status rewriteVocabParallelLoss(ir::Node *n, GraphBuilder &b);

} // namespace dtc::passes::tp
