// The roles values play in a training step (DESIGN.md sections 3 and 5), kept in the IR: the
// training passes (training-mode, attach-loss, pipeline, autodiff, data-parallel, optimizer,
// pipeline-comm) fill them, the printer shows them (`--emit ir`, `--print-after`), the verifier
// checks them, and lowering reads them from the graph alone. A role is a reference like a use:
// Value::replaceAllUsesWith moves it to the replacement, and a value with a role is never
// deleted as dead.
#pragma once

#include <cstddef>
#include <vector>

namespace dtc::ir {

class Node;
class Value;

/// Reserved names of the runtime-fed inputs of training graphs.
inline constexpr const char *kLrInput = "dtc::lr";     ///< f32[], learning rate of this step
inline constexpr const char *kStepInput = "dtc::step"; ///< i64[], optimizer step, 0-based
inline constexpr const char *kRngInput = "dtc::rng";   ///< i64[3], {seed, step, rank}
/// i64[], the rank's index in its tensor-parallel group (tp plans only).
inline constexpr const char *kTpRankInput = "dtc::tp_rank";
/// i64[], the rank's index in its data-parallel group (ZeRO plans only: --zero 1 or 2).
inline constexpr const char *kDpRankInput = "dtc::dp_rank";

/// Loss scaling (--loss-scale; passes/Autodiff.cpp and passes/Optimizer.cpp): the scale the
/// backward pass starts from (f32[]), the dynamic scale's state (log2 of scale / initial scale,
/// f32[], zero-initialized optimizer state), and the graph outputs the trainer reports after each
/// step: the count of skipped steps so far and the scale for the next step (both f32[]).
inline constexpr const char *kLossScaleValue = "dtc::loss_scale";
inline constexpr const char *kLossScaleLog2 = "dtc::loss_scale.log2";
inline constexpr const char *kSkippedStepsOutput = "dtc::skipped_steps";
inline constexpr const char *kLossScaleOutput = "dtc::loss_scale/next";

/// A state tensor the step overwrites: `state` (a parameter, optimizer state or running
/// statistic) takes the value of `next` at the end of the step.
struct StateUpdate {
  Value *state = nullptr;
  Value *next = nullptr;
};

/// ZeRO stage 2 (--zero 2; Rajbhandari et al. 2020): one gradient bucket reduce-scattered over
/// the data-parallel group. The gradients of `members` (indices into
/// TrainingRoles::parameters) are flattened and concatenated in this order, zero-padded to a
/// multiple of the group size N, and reduced (mean); `shard` is this rank's slice of the result
/// (f32[padded / N]): slice r belongs to dp rank r.
struct GradientShard {
  std::vector<std::size_t> members;
  Value *shard = nullptr;
};

/// Everything the training passes record about the step. Empty (no loss) in inference graphs.
struct TrainingRoles {
  Value *loss = nullptr;       ///< f32[] mean loss of the batch (a graph output)
  Value *prediction = nullptr; ///< the model output the loss reads (a graph output)
  Value *label = nullptr;      ///< the label graph input (nullptr for loss "model")
  /// Trained parameters in graph order, and the gradient of each (same index; nullptr when the
  /// loss does not depend on it: it is left unchanged).
  std::vector<Value *> parameters;
  std::vector<Value *> gradients;
  /// Optimizer state per trained parameter (same index; momentum buffer, or Adam's m and v,
  /// then the gradient accumulator). Initializers holding zeros, created by the optimizer pass.
  std::vector<std::vector<Value *>> optimizerState;
  std::vector<StateUpdate> updates;
  /// Runtime-fed inputs (graph inputs named kLrInput, kStepInput, kRngInput), or nullptr.
  Value *lr = nullptr;
  Value *step = nullptr;
  Value *rng = nullptr;
  Value *tpRank = nullptr; ///< graph input kTpRankInput, or nullptr
  Value *dpRank = nullptr; ///< graph input kDpRankInput, or nullptr
  /// ZeRO stage 2: the reduce-scattered gradient buckets (the data-parallel pass fills them, the
  /// optimizer pass updates each rank's shard from them). Empty otherwise.
  std::vector<GradientShard> gradientShards;
  /// First node of the optimizer phase (nullptr: none). Nodes before it run once per
  /// micro-batch, the rest once per step.
  Node *optimizerBegin = nullptr;

  /// True when no pass recorded anything (an inference graph, or before training-mode).
  bool empty() const {
    return !loss && !prediction && !label && parameters.empty() && gradients.empty() &&
           optimizerState.empty() && updates.empty() && !lr && !step && !rng && !tpRank &&
           !dpRank && gradientShards.empty() && !optimizerBegin;
  }
  /// Calls `fn(Value *&)` on every value slot (null slots included), so callers can repoint
  /// them; the const form calls `fn(Value *const &)`.
  template <class F> void forEachSlot(F &&fn) { visit(*this, fn); }
  template <class F> void forEachSlot(F &&fn) const { visit(*this, fn); }
  /// True when `v` (non-null) holds any role. O(number of roles).
  bool references(const Value *v) const {
    bool found = false;
    forEachSlot([&](Value *const &slot) { found |= slot == v; });
    return found;
  }

private:
  template <class Self, class F> static void visit(Self &s, F &fn) {
    fn(s.loss);
    fn(s.prediction);
    fn(s.label);
    fn(s.lr);
    fn(s.step);
    fn(s.rng);
    fn(s.tpRank);
    fn(s.dpRank);
    for (auto &b : s.gradientShards)
      fn(b.shard);
    for (auto &v : s.parameters)
      fn(v);
    for (auto &v : s.gradients)
      fn(v);
    for (auto &state : s.optimizerState)
      for (auto &v : state)
        fn(v);
    for (auto &u : s.updates) {
      fn(u.state);
      fn(u.next);
    }
  }
};

} // namespace dtc::ir
