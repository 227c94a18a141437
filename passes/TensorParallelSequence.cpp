// --sequence-parallel (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models"): the tensor-parallel pass's handling of the per-token regions between a
// row-parallel layer and the next column-parallel one, which run split along the sequence axis
// with reduce-scatters and all-gathers in place of the tp all-reduces (TensorParallel.cpp says
// how). Members of tp::TensorParallelPass (TensorParallelPass.h).
#include "passes/TensorParallelPass.h"

namespace dtc::passes::tp {

/// Contractions end a sequence-parallel region: their weights are split (column- and
/// row-parallel layers) or, replicated, mix every token's activations into one gradient
/// (the output projection before the loss), so they read the whole sequence.
bool TensorParallelPass::endsSequenceRegion(const ir::Node *n) {
  static const std::unordered_set<std::string> kContractions = {
      "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "MatMulInteger"};
  return !n->domain().empty() || kContractions.count(n->opType()) > 0;
}

/// The batch size of the graph (the first axis of its data inputs), or -1.
int64_t TensorParallelPass::dataBatch() const {
  for (const ir::Value *v : graph_->inputs()) {
    if (v->isInitializer() || v->name() == ir::kTpRankInput || v->shape().rank() < 1)
      continue;
    const std::vector<int64_t> d = staticDims(v);
    if (!d.empty() && d[0] > 0)
      return d[0];
  }
  return -1;
}

/// The sequence axis of a row-parallel output `v` ([B, S, H] or [S, B, H]): the one axis
/// that is neither the last (hidden) one nor of the batch's size. When S equals B the two
/// cannot be told apart, and either split is exact (the region's ops treat every sample and
/// every token alike): axis 1. Errors name `v` when there is no such axis or several, or its
/// size does not divide by T.
Expected<int64_t> TensorParallelPass::sequenceAxis(const ir::Value *v) const {
  const std::vector<int64_t> d = staticDims(v);
  const int64_t batch = dataBatch();
  const std::string where = "value '" + v->name() + "'";
  const std::string shape = v->type().str();
  if (d.size() < 3)
    return Status::error(where, "--sequence-parallel: cannot determine the sequence axis of " +
                                    shape +
                                    " (expected [batch, sequence, hidden] or "
                                    "[sequence, batch, hidden] activations)");
  std::vector<int64_t> candidates;
  for (size_t a = 0; a + 1 < d.size(); ++a)
    if (d[a] != batch && d[a] > 1)
      candidates.push_back(static_cast<int64_t>(a));
  if (candidates.empty() && d.size() == 3 && d[0] == batch && d[1] == batch && batch > 1)
    candidates.push_back(1);
  if (candidates.size() != 1)
    return Status::error(where, "--sequence-parallel: cannot determine the sequence axis of " +
                                    shape + " (batch " + std::to_string(batch) + "; " +
                                    (candidates.empty() ? "no axis" : "several axes") +
                                    " besides the batch and hidden ones)");
  const int64_t a = candidates[0];
  if (d[static_cast<size_t>(a)] % parts_ != 0)
    return Status::error(where, "--sequence-parallel: the sequence axis " + std::to_string(a) +
                                    " of " + shape + " (size " +
                                    std::to_string(d[static_cast<size_t>(a)]) +
                                    ") does not divide by tp=" + std::to_string(parts_));
  return a;
}

/// With --sequence-parallel: a node that reads a sequence-split value or a partial sum joins
/// the sequence-parallel region when it is not a contraction and its rule keeps the
/// sequence split without splitting a weight (per-token ops: LayerNorm, elementwise ops,
/// residual and bias adds); otherwise its sequence-split inputs are gathered first (with a
/// reduce-scatter gradient where the rule wanted Megatron's f) and it is visited as usual.
Status TensorParallelPass::visitSequenceParallel(ir::Node *n) {
  std::map<size_t, Sharding> assumed;
  bool seqInput = false;
  for (size_t i = 0; i < n->numInputs(); ++i) {
    const ir::Value *v = n->input(i);
    if (!v)
      continue;
    if (seqSplit_.count(v)) {
      assumed[i] = layoutOf(v);
      seqInput = true;
    }
  }
  if (!endsSequenceRegion(n)) {
    for (size_t i = 0; i < n->numInputs(); ++i) {
      const ir::Value *v = n->input(i);
      if (!v || assumed.count(i) || !layoutOf(v).isPartial())
        continue;
      DTC_ASSIGN_OR_RETURN(int64_t axis, sequenceAxis(v));
      assumed[i] = Sharding::split(axis, parts_);
    }
    if (!assumed.empty()) {
      DTC_ASSIGN_OR_RETURN(ops::ShardingContext sc, ask(n, assumed));
      if (keepsSequence(n, sc, assumed))
        return sequenceNode(n, sc, assumed);
    }
  }
  if (!seqInput)
    return visit(n);
  // Leaving the region: the rule sees the whole sequence.
  std::map<size_t, Sharding> whole;
  for (const auto &[i, s] : assumed)
    if (seqSplit_.count(n->input(i)))
      whole[i] = Sharding::replicated();
  DTC_ASSIGN_OR_RETURN(ops::ShardingContext sc, ask(n, whole));
  for (const auto &[i, s] : whole) {
    ir::Value *v = n->input(i), *x = nullptr;
    if (sc.copyRequired(i)) {
      DTC_ASSIGN_OR_RETURN(x, gatherSequence(v, n));
    } else {
      DTC_ASSIGN_OR_RETURN(x, convert(v, Sharding::replicated(), n));
    }
    n->setInput(i, x);
  }
  return visit(n);
}

/// The rule's answer keeps every assumed input in its sequence split, splits no weight and
/// no other input except along the sequence, and needs no rewrite.
bool TensorParallelPass::keepsSequence(const ir::Node *n, const ops::ShardingContext &sc,
                                       const std::map<size_t, Sharding> &assumed) const {
  if (sc.maskedGather() || sc.addAfterReduceInput() >= 0 || !sc.constants().empty())
    return false;
  for (size_t i = 0; i < n->numInputs(); ++i) {
    const ir::Value *v = n->input(i);
    if (!v)
      continue;
    auto a = assumed.find(i);
    if (a != assumed.end()) {
      if (sc.required(i) != a->second || sc.copyRequired(i))
        return false;
    } else if (sc.required(i).isSplit() && (isFree(v) || layoutOf(v).isSplit())) {
      return false; // a weight would be split, or another split would be re-sliced
    } else if (sc.required(i).isPartial()) {
      return false;
    }
  }
  bool split = false;
  for (size_t j = 0; j < n->numOutputs(); ++j)
    split = split || (n->output(j) && sc.output(j).isSplit());
  return split;
}

/// Applies the rule's answer to a node of the sequence-parallel region: partial inputs are
/// reduce-scattered along the sequence, replicated activations sliced (through
/// TensorParallelCopy), and replicated float inputs that carry a gradient (LayerNorm
/// weights, biases) go through TensorParallelCopy, whose gradient all-reduces what each rank
/// summed over its own tokens.
Status TensorParallelPass::sequenceNode(ir::Node *n, const ops::ShardingContext &sc,
                                        const std::map<size_t, Sharding> &assumed) {
  for (size_t i = 0; i < n->numInputs(); ++i) {
    ir::Value *v = n->input(i);
    if (!v)
      continue;
    const Sharding &want = sc.required(i);
    ir::Value *x = v;
    if (assumed.count(i)) {
      if (layoutOf(v).isPartial()) {
        DTC_ASSIGN_OR_RETURN(x, reduceScatterSequence(v, want, n));
      }
    } else {
      if (isFree(v))
        decide(v, Sharding::replicated());
      else if (layoutOf(x).isReplicated() && want.isSplit()) {
        DTC_ASSIGN_OR_RETURN(x, scatterSequence(x, want, n));
      } else if (layoutOf(x) != want) {
        DTC_ASSIGN_OR_RETURN(x, convert(x, want, n));
      }
      if (want.isReplicated() && ir::isFloat(x->dtype()) && !x->isConstant()) {
        DTC_ASSIGN_OR_RETURN(x, copyOf(x, n));
      }
    }
    if (x != v)
      n->setInput(i, x);
  }
  for (size_t j = 0; j < n->numOutputs(); ++j) {
    if (!n->output(j))
      continue;
    layout_[n->output(j)] = sc.output(j);
    if (sc.output(j).isSplit())
      seqSplit_.insert(n->output(j));
  }
  return Status::ok();
}

/// Partial -> split along the sequence axis `s.axis` (g of Korthikanti et al. 2022): the
/// axis moved first ([pre, T, S/T, post] -> [T, pre, S/T, post]), flattened, reduce-scattered
/// (rank r keeps block r of the sum) and reshaped to the local [pre, S/T, post]. Its gradient
/// is an all-gather (ops/comm/ReduceScatter.cpp).
Expected<ir::Value *> TensorParallelPass::reduceScatterSequence(ir::Value *v, const Sharding &s,
                                                                ir::Node *before) {
  const std::string key = v->name() + "|" + s.text();
  auto it = seqScattered_.find(key);
  if (it != seqScattered_.end())
    return it->second;
  const std::vector<int64_t> whole = staticDims(v);
  const int64_t a = s.axis, T = s.parts;
  const int64_t numel =
      std::accumulate(whole.begin(), whole.end(), int64_t{1}, std::multiplies<int64_t>());
  std::vector<int64_t> split, local = whole;
  for (int64_t d = 0; d < static_cast<int64_t>(whole.size()); ++d) {
    if (d == a) {
      split.push_back(T);
      split.push_back(whole[static_cast<size_t>(d)] / T);
    } else {
      split.push_back(whole[static_cast<size_t>(d)]);
    }
  }
  local[static_cast<size_t>(a)] /= T;
  ir::Value *x = v;
  if (a > 0) {
    ir::Node *r1 = insert(before, "Reshape", {x, constI64(v->name() + "/sp_blocks", split)},
                          v->name() + "/sp_blocks");
    std::vector<int64_t> perm{a};
    for (int64_t d = 0; d < static_cast<int64_t>(split.size()); ++d)
      if (d != a)
        perm.push_back(d);
    ir::Node *tr = insert(before, "Transpose", {r1->output(0)}, v->name() + "/sp_rank_major");
    tr->setAttr("perm", ir::Attribute(perm));
    x = tr->output(0);
  }
  ir::Node *flat = insert(before, "Reshape", {x, constI64(v->name() + "/sp_flat", {numel})},
                          v->name() + "/sp_flat");
  ir::Node *rs = insert(before, "ReduceScatter", {flat->output(0)},
                        v->name() + "/sp_reduce_scattered", ir::kDtcDomain);
  rs->setAttr("op", ir::Attribute("sum"));
  rs->setAttr("group", ir::Attribute("tp"));
  rs->setAttr("parts", ir::Attribute(T));
  ir::Node *out =
      insert(before, "Reshape", {rs->output(0), constI64(v->name() + "/sp_local", local)},
             v->name() + "/sp_local");
  ir::Value *r = typed(out, v->type(), s);
  seqSplit_.insert(r);
  seqScattered_[key] = r;
  return r;
}

/// Replicated -> split along the sequence where the region reads a replicated activation
/// (the first block's residual input): the rank's slice of a TensorParallelCopy that only
/// the slice reads, whose gradient is then an all-gather of the slices' gradients rather than
/// an all-reduce (Megatron-LM's scatter_to_sequence_parallel_region).
Expected<ir::Value *> TensorParallelPass::scatterSequence(ir::Value *v, const Sharding &s,
                                                          ir::Node *before) {
  const std::string key = v->name() + "|" + s.text();
  auto it = seqScattered_.find(key);
  if (it != seqScattered_.end())
    return it->second;
  if (!ir::isFloat(v->dtype()))
    return convert(v, s, before); // no gradient to gather
  ir::Node *c = insert(before, "TensorParallelCopy", {v}, v->name() + "/sp_copy", ir::kDtcDomain);
  c->setAttr("sliced_axis", ir::Attribute(s.axis));
  c->setAttr("parts", ir::Attribute(s.parts));
  ir::Value *x = typed(c, v->type(), Sharding::replicated());
  DTC_ASSIGN_OR_RETURN(x, slice(x, s, before));
  seqSplit_.insert(x);
  seqScattered_[key] = x;
  return x;
}

/// Sequence-split -> replicated for a column-parallel reader (g-bar): the all-gather of
/// gather() whose gradient is a reduce-scatter (reduce_scatter_grad), which also sums the
/// partial gradients of the split computation that follows, so no TensorParallelCopy (f) is
/// added after it.
Expected<ir::Value *> TensorParallelPass::gatherSequence(ir::Value *v, ir::Node *before) {
  auto it = seqGathered_.find(v);
  if (it != seqGathered_.end())
    return it->second;
  DTC_ASSIGN_OR_RETURN(ir::Value * x, gather(v, layoutOf(v), before));
  ir::Node *ag = x->producer();
  while (ag && !(ag->opType() == "AllGather" && ag->domain() == ir::kDtcDomain))
    ag = ag->input(0) ? ag->input(0)->producer() : nullptr;
  if (!ag)
    return Status::error("value '" + v->name() + "'", "internal: no all-gather to mark");
  ag->setAttr("reduce_scatter_grad", ir::Attribute(int64_t{1}));
  copies_[x] = x; // the gather's gradient already sums over the group
  seqGathered_[v] = x;
  return x;
}

} // namespace dtc::passes::tp
