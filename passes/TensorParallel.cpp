// tensor-parallel: intra-layer model parallelism (--strategy tp=T; DESIGN.md section 6). Runs
// on the forward graph with its loss (after attach-loss, before the pipeline and autodiff), so
// backward follows from the gradient rules of the collectives it inserts.
//
// The pass walks the nodes in order and asks each op's sharding rule (ops/Sharding.h) what
// layout its inputs need and what layout its outputs get. A weight's layout is decided by the
// first rule that reads it: a rule may split it (each rank then holds only its shard, and its
// gradient and optimizer state are sharded with it), or it stays replicated. Where a value
// arrives in a layout other than the one required, the pass converts it:
//   partial -> replicated   ai.dtc.AllReduce(sum, tp)          (Megatron's g; backward: identity)
//   split   -> replicated   ai.dtc.AllGather + Transpose/Reshape (backward: own slice)
//   replicated -> split     ai.dtc.TensorParallelCopy + Gather of the rank's slice
// and a replicated value that feeds a split computation goes through TensorParallelCopy
// (identity forward, all-reduce backward: Megatron's f). A rule chooses to split a weight only
// when the look-ahead shows the split reaches a consumer that ends it without gathering (a
// row-parallel MatMul), so a column-parallel and a row-parallel layer cost one all-reduce
// forward and one backward (Shoeybi et al. 2019).
//
// With --sequence-parallel (Korthikanti et al. 2022) the per-token regions between a
// row-parallel layer and the next column-parallel one run split along the sequence axis: a
// partial sum that a LayerNorm, residual or bias add reads is reduce-scattered along the
// sequence (g) instead of all-reduced, and a sequence-split value that a column-parallel layer
// reads is all-gathered with a reduce-scatter as its gradient (g-bar) in place of f; replicated
// parameters those regions read (LayerNorm weights, biases) go through TensorParallelCopy, so
// their gradients, summed over each rank's tokens, are all-reduced over tp.
//
// At the end every value gets its local type (a split tensor's type is its shard's), split
// weights record their sharding (Value::shard) and keep their whole initializer, which the
// runtime slices when it loads them, and graph outputs and state updates are made replicated
// or consistent with their state.
#include "compiler/ir/Sharding.h"
#include "ops/Gradient.h"
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "passes/Pass.h"
#include "passes/Passes.h"
#include "passes/TensorParallelLoss.h"

#include <functional>
#include <map>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace dtc::passes {
namespace {

using ir::Sharding;

bool isTrainableFloat(const ir::Value *v) { return v->isParameter() && ir::isFloat(v->dtype()); }

std::vector<int64_t> staticDims(const ir::Value *v) {
  std::vector<int64_t> d;
  for (const ir::Dim &x : v->shape().dims())
    d.push_back(x.isStatic() ? x.value() : -1);
  return d;
}

class TensorParallelPass : public Pass, private tp::GraphBuilder {
public:
  std::string name() const override { return "tensor-parallel"; }
  std::string description() const override {
    return "split weights over the tp group by the ops' sharding rules and insert all-reduce, "
           "all-gather and slices where layouts meet (Megatron-LM column/row parallelism)";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("tensor-parallel", "runs on training graphs only (after attach-loss)");
    cfg_ = ctx.training;
    parts_ = cfg_->mesh.tp;
    graph_ = &graph;
    diags_ = &ctx.diags;
    if (parts_ <= 1 && cfg_->tpShard.empty())
      return Status::ok();
    if (parts_ <= 1)
      return Status::error("--tp-shard", "needs --strategy with tp > 1");
    if (graph.training().optimizerBegin || !graph.training().gradients.empty())
      return Status::error("tensor-parallel", "must run before autodiff");
    for (const ir::Value *v : graph.values())
      if (!v->shape().isStatic() && (v->producer() || v->hasUses()))
        return Status::error("value '" + v->name() + "'",
                             "has no static shape; tensor parallelism needs static shapes "
                             "(give --batch-size)");
    DTC_RETURN_IF_ERROR(applyUserShards());
    // Transposes of weights first, so that the look-ahead sees every weight behind one.
    const std::vector<ir::Node *> order = graph.nodes();
    std::unordered_set<const ir::Node *> deferred;
    for (ir::Node *n : order)
      if (deferredTranspose(n))
        deferred.insert(n);
    for (ir::Node *n : order)
      if (!deferred.count(n))
        DTC_RETURN_IF_ERROR(visitNode(n));
    DTC_RETURN_IF_ERROR(finishOutputs());
    DTC_RETURN_IF_ERROR(finishWeights());
    warnIfNothingSplit();
    // Local types: every node re-inferred in order from its (now local) inputs.
    for (ir::Node *n : graph.nodes())
      DTC_RETURN_IF_ERROR(ops::inferNode(*n, *diags_));
    return Status::ok();
  }

private:
  /// A tp degree no weight could be split by (every splittable axis shorter than T, as a
  /// 10-feature MLP at tp=11) leaves every tp rank computing the whole model: say so, naming the
  /// largest weight, rather than running T copies silently.
  void warnIfNothingSplit() {
    const ir::Value *largest = nullptr;
    int64_t largestSize = -1;
    for (const ir::Value *v : graph_->values()) {
      if (!isTrainableFloat(v))
        continue;
      if (layoutOf(v).isSplit())
        return;
      int64_t size = 1;
      for (int64_t d : staticDims(v))
        size *= d;
      if (size > largestSize) {
        largest = v;
        largestSize = size;
      }
    }
    if (largest)
      diags_->warning("--strategy " + cfg_->mesh.text(),
                      "no weight is split over the tp group (no sharding rule found an axis of "
                      "at least " +
                          std::to_string(parts_) + " elements to split; the largest weight is '" +
                          largest->name() + "' " + largest->shape().str() +
                          "): every tp rank computes the whole model; use a smaller tp or "
                          "--tp-shard NAME=AXIS");
  }

  // ---- layouts -------------------------------------------------------------------------------

  /// A Transpose of a free weight is not converted: its output stands for the weight (rules
  /// see a free weight), and requiring a split of it splits the weight along the permuted axis.
  struct VirtualWeight {
    ir::Value *weight;
    std::vector<int64_t> perm;
  };

  bool deferredTranspose(ir::Node *n) {
    if (n->opType() != "Transpose" || !n->domain().empty() || !n->input(0) ||
        !isFree(n->input(0)) || virtual_.count(n->input(0)))
      return false;
    std::vector<int64_t> perm = n->attrInts("perm");
    if (perm.empty())
      for (int64_t i = static_cast<int64_t>(n->input(0)->shape().rank()) - 1; i >= 0; --i)
        perm.push_back(i);
    virtual_[n->output(0)] = {n->input(0), perm};
    return true;
  }

  bool isFree(const ir::Value *v) const {
    auto it = virtual_.find(v);
    if (it != virtual_.end())
      return isFree(it->second.weight);
    return isTrainableFloat(v) && !decided_.count(v);
  }

  Sharding layoutOf(const ir::Value *v) const override {
    auto vt = virtual_.find(v);
    if (vt != virtual_.end()) {
      const Sharding w = layoutOf(vt->second.weight);
      if (!w.isSplit())
        return w;
      const std::vector<int64_t> &perm = vt->second.perm;
      for (size_t k = 0; k < perm.size(); ++k)
        if (perm[k] == w.axis)
          return Sharding::split(static_cast<int64_t>(k), w.parts, w.blocks);
      return Sharding::replicated();
    }
    auto d = decided_.find(v);
    if (d != decided_.end())
      return d->second;
    auto it = layout_.find(v);
    return it == layout_.end() ? Sharding::replicated() : it->second;
  }

  void decide(ir::Value *v, const Sharding &s) {
    auto vt = virtual_.find(v);
    if (vt == virtual_.end()) {
      decided_[v] = s;
      return;
    }
    Sharding w = s;
    if (s.isSplit())
      w.axis = vt->second.perm[static_cast<size_t>(s.axis)];
    decided_[vt->second.weight] = w;
  }

  Status applyUserShards() {
    for (const auto &[name, axis] : cfg_->tpShard) {
      ir::Value *v = graph_->findValue(name);
      if (!v || !isTrainableFloat(v))
        return Status::error("--tp-shard " + name + "=" + std::to_string(axis),
                             "'" + name + "' is not a trainable float initializer of the model");
      const int64_t rank = static_cast<int64_t>(v->shape().rank());
      const int64_t a = axis < 0 ? axis + rank : axis;
      if (a < 0 || a >= rank)
        return Status::error("--tp-shard " + name + "=" + std::to_string(axis),
                             "axis out of range for " + v->type().str());
      auto local = ir::shardDimsOf(staticDims(v), Sharding::split(a, parts_), cfg_->tpIndex);
      if (!local.hasValue())
        return Status::error("--tp-shard " + name + "=" + std::to_string(axis),
                             "dimension " + std::to_string(a) + " of " + v->type().str() +
                                 " has fewer elements than tp=" + std::to_string(parts_) +
                                 " (an uneven split leaves no rank empty)");
      decided_[v] = Sharding::split(a, parts_);
    }
    return Status::ok();
  }

  // ---- rules ---------------------------------------------------------------------------------

  Expected<ops::ShardingContext> ask(const ir::Node *n,
                                     const std::map<size_t, Sharding> &assumed) const {
    const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
    if (!def || !def->sharding)
      return Status::error(n->where(), "the operator has no sharding rule");
    std::vector<Sharding> in;
    std::vector<bool> free;
    std::vector<std::vector<int64_t>> inDims, outDims;
    for (size_t i = 0; i < n->numInputs(); ++i) {
      const ir::Value *v = n->input(i);
      auto a = assumed.find(i);
      in.push_back(a != assumed.end() ? a->second : (v ? layoutOf(v) : Sharding::replicated()));
      free.push_back(v && a == assumed.end() && isFree(v));
      inDims.push_back(v ? staticDims(v) : std::vector<int64_t>{});
    }
    for (size_t j = 0; j < n->numOutputs(); ++j)
      outDims.push_back(n->output(j) ? staticDims(n->output(j)) : std::vector<int64_t>{});
    ops::ShardingContext sc(
        *n, in, free, inDims, outDims, parts_,
        [this](const ir::Value *v, const Sharding &s) { return keepsSplit(v, s); });
    DTC_RETURN_IF_ERROR(def->sharding(sc));
    return sc;
  }

  /// Look-ahead: every consumer of `v` accepts layout `s` without converting it, and carries
  /// any split it produces on to consumers that do the same (a partial result ends the chain:
  /// it costs the one all-reduce the pattern needs anyway).
  bool keepsSplit(const ir::Value *v, const Sharding &s) const {
    const std::string key = v->name() + "|" + s.text();
    auto memo = lookAhead_.find(key);
    if (memo != lookAhead_.end())
      return memo->second;
    lookAhead_[key] = false; // no cycles in a DAG; a safe answer while recursing
    // A state's next value (BatchNormalization's running statistics) may stay split when its
    // state can take the same layout; other roles and graph outputs need the whole tensor.
    const ir::TrainingRoles &st = graph_->training();
    bool isNext = false, ok = true;
    for (const ir::StateUpdate &u : st.updates)
      if (u.next == v) {
        isNext = true;
        ok = ok && (isFree(u.state) || layoutOf(u.state) == s);
      }
    if (v->isGraphOutput() || (!isNext && graph_->isLiveRoot(v)))
      ok = false;
    for (const ir::Use &u : v->uses()) {
      if (!ok)
        break;
      auto sc = ask(u.node, {{u.inputIndex, s}});
      if (!sc.hasValue() || sc->required(u.inputIndex) != s || sc->copyRequired(u.inputIndex)) {
        ok = false;
        break;
      }
      for (size_t j = 0; j < u.node->numOutputs() && ok; ++j) {
        const Sharding &o = sc->output(j);
        if (o.isSplit() && u.node->output(j))
          ok = keepsSplit(u.node->output(j), o);
      }
    }
    lookAhead_[key] = ok;
    return ok;
  }

  Status visit(ir::Node *n) {
    if (n->numInputs() > 0 && n->input(0) && tp::isVocabParallelLoss(n, layoutOf(n->input(0))))
      return tp::rewriteVocabParallelLoss(n, *this);
    DTC_ASSIGN_OR_RETURN(ops::ShardingContext sc, ask(n, {}));
    for (size_t i = 0; i < n->numInputs(); ++i) {
      ir::Value *v = n->input(i);
      if (!v)
        continue;
      const Sharding &want = sc.required(i);
      if (isFree(v)) {
        if (want.isPartial())
          return Status::error(n->where(), "internal: a weight cannot be required partial");
        decide(v, want);
        continue;
      }
      ir::Value *x = v;
      if (layoutOf(x) != want) {
        DTC_ASSIGN_OR_RETURN(x, convert(x, want, n));
      }
      if (sc.copyRequired(i)) {
        DTC_ASSIGN_OR_RETURN(x, copyOf(x, n));
      }
      if (x != v)
        n->setInput(i, x);
    }
    for (const auto &[i, values] : sc.constants()) {
      ir::Value *c = graph_->addConstant(
          n->name() + "/tp_local",
          ir::TensorData::fromInt64s(n->name() + "/tp_local", {static_cast<int64_t>(values.size())},
                                     values));
      n->setInput(i, c);
    }
    for (size_t j = 0; j < n->numOutputs(); ++j)
      if (n->output(j))
        layout_[n->output(j)] = sc.output(j);
    if (sc.maskedGather())
      DTC_RETURN_IF_ERROR(maskGather(n));
    if (sc.addAfterReduceInput() >= 0)
      DTC_RETURN_IF_ERROR(biasAfterReduce(n, static_cast<size_t>(sc.addAfterReduceInput())));
    return Status::ok();
  }

  // ---- sequence parallelism (--sequence-parallel) -------------------------------------------

  Status visitNode(ir::Node *n) {
    return cfg_->sequenceParallel ? visitSequenceParallel(n) : visit(n);
  }

  /// Contractions end a sequence-parallel region: their weights are split (column- and
  /// row-parallel layers) or, replicated, mix every token's activations into one gradient
  /// (the output projection before the loss), so they read the whole sequence.
  static bool endsSequenceRegion(const ir::Node *n) {
    static const std::unordered_set<std::string> kContractions = {
        "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "MatMulInteger"};
    return !n->domain().empty() || kContractions.count(n->opType()) > 0;
  }

  /// The batch size of the graph (the first axis of its data inputs), or -1.
  int64_t dataBatch() const {
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
  Expected<int64_t> sequenceAxis(const ir::Value *v) const {
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
  Status visitSequenceParallel(ir::Node *n) {
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
  bool keepsSequence(const ir::Node *n, const ops::ShardingContext &sc,
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
  Status sequenceNode(ir::Node *n, const ops::ShardingContext &sc,
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
  Expected<ir::Value *> reduceScatterSequence(ir::Value *v, const Sharding &s, ir::Node *before) {
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
  Expected<ir::Value *> scatterSequence(ir::Value *v, const Sharding &s, ir::Node *before) {
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
  Expected<ir::Value *> gatherSequence(ir::Value *v, ir::Node *before) {
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

  // ---- conversions ---------------------------------------------------------------------------

  // tp::GraphBuilder (the vocabulary-parallel loss, passes/TensorParallelLoss.cpp, builds with
  // these and insert, constI64, tpRank, layoutOf, unevenFirst).
  ir::Graph &graph() override { return *graph_; }
  Diagnostics &diags() override { return *diags_; }
  void adopt(ir::Node *n) override { inserted_.insert(n); }

  ir::Node *insert(ir::Node *before, const std::string &op, const std::vector<ir::Value *> &in,
                   const std::string &base, const std::string &domain = "") override {
    const std::string out = graph_->uniqueName(base);
    ir::Node *n = before ? graph_->insertNodeBefore(before, op, in, {out}, domain,
                                                    graph_->uniqueNodeName(base))
                         : graph_->addNode(op, in, {out}, domain, graph_->uniqueNodeName(base));
    n->setPhase(ir::Phase::kForward);
    inserted_.insert(n);
    return n;
  }

  ir::Value *constI64(const std::string &base, const std::vector<int64_t> &values,
                      bool scalar = false) override {
    const std::vector<int64_t> dims =
        scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(values.size())};
    return graph_->addConstant(base, ir::TensorData::fromInt64s(base, dims, values));
  }

  Expected<ir::Value *> tpRank() override {
    ir::TrainingRoles &st = graph_->training();
    if (st.tpRank)
      return st.tpRank;
    if (graph_->findValue(ir::kTpRankInput))
      return Status::error("value '" + std::string(ir::kTpRankInput) + "'",
                           "the name is reserved for the runtime-fed tensor-parallel rank");
    st.tpRank = graph_->createValue(ir::kTpRankInput,
                                    {ir::DType::kInt64, ir::Shape(std::vector<ir::Dim>{})});
    graph_->addInput(st.tpRank);
    return st.tpRank;
  }

  /// The value of `v` (global type `t`) set to type `t` for the rest of the walk (the final
  /// re-inference gives every value its local type).
  ir::Value *typed(ir::Node *n, const ir::TensorType &t, const Sharding &s) {
    ir::Value *out = n->output(0);
    out->setType(t);
    layout_[out] = s;
    return out;
  }

  Expected<ir::Value *> convert(ir::Value *v, const Sharding &want, ir::Node *before) {
    const std::string key = v->name() + "|" + want.text();
    auto it = converted_.find(key);
    if (it != converted_.end())
      return it->second;
    const Sharding have = layoutOf(v);
    ir::Value *x = v;
    if (have.isPartial()) {
      ir::Node *ar =
          insert(before, "AllReduce", {x}, v->name() + "/tp_all_reduced", ir::kDtcDomain);
      ar->setAttr("op", ir::Attribute("sum"));
      ar->setAttr("group", ir::Attribute("tp"));
      x = typed(ar, v->type(), Sharding::replicated());
    } else if (have.isSplit()) {
      DTC_ASSIGN_OR_RETURN(x, gather(v, have, before));
    }

    if (want.isSplit()) {
      DTC_ASSIGN_OR_RETURN(x, copyOf(x, before));
      DTC_ASSIGN_OR_RETURN(x, slice(x, want, before));
    } else if (want.isPartial()) {
      return Status::error("value '" + v->name() + "'",
                           "internal: no conversion to a partial layout");
    }
    converted_[key] = x;
    return x;
  }

  /// [T, local...] from every rank, then back to the global tensor: with the split axis `a` of
  /// local size B*p (B blocks), reshape to [T, pre.., B, p, post..], move T before p, merge.
  Expected<ir::Value *> gather(ir::Value *v, const Sharding &s, ir::Node *before) {
    const std::vector<int64_t> whole = staticDims(v);
    if (ir::isUnevenSplit(whole, s))
      return unevenGatherError(v, s);
    // The all-gather's gradient takes this rank's row: the runtime-fed tp rank must exist.
    DTC_RETURN_IF_ERROR(tpRank().status());
    const int64_t T = s.parts, B = s.blocks, a = s.axis;
    const int64_t p = whole[static_cast<size_t>(a)] / (T * B);
    ir::Node *ag = insert(before, "AllGather", {v}, v->name() + "/tp_gathered", ir::kDtcDomain);
    ag->setAttr("group", ir::Attribute("tp"));
    ag->setAttr("parts", ir::Attribute(T));
    std::vector<int64_t> stacked{T};
    for (size_t d = 0; d < whole.size(); ++d) {
      if (static_cast<int64_t>(d) == a) {
        stacked.push_back(B);
        stacked.push_back(p);
      } else {
        stacked.push_back(whole[d]);
      }
    }
    ir::Node *r1 =
        insert(before, "Reshape", {ag->output(0), constI64(v->name() + "/tp_stack", stacked)},
               v->name() + "/tp_stacked");
    // perm: pre axes, B, T, p, post axes (indices into `stacked`: T is 0, axis d < a is d + 1,
    // B is a + 1, p is a + 2, d > a is d + 2).
    std::vector<int64_t> perm;
    for (int64_t d = 0; d < a; ++d)
      perm.push_back(d + 1);
    perm.push_back(a + 1);
    perm.push_back(0);
    perm.push_back(a + 2);
    for (int64_t d = a + 1; d < static_cast<int64_t>(whole.size()); ++d)
      perm.push_back(d + 2);
    ir::Node *tr = insert(before, "Transpose", {r1->output(0)}, v->name() + "/tp_ordered");
    tr->setAttr("perm", ir::Attribute(perm));
    ir::Node *r2 =
        insert(before, "Reshape", {tr->output(0), constI64(v->name() + "/tp_whole", whole)},
               v->name() + "/tp_whole");
    return typed(r2, v->type(), Sharding::replicated());
  }

  /// The rank's slice of a replicated value: Gather along the axis with indices
  /// base + tp_rank * p (base lists the first part of every block).
  Expected<ir::Value *> slice(ir::Value *v, const Sharding &s, ir::Node *before) {
    const std::vector<int64_t> whole = staticDims(v);
    if (ir::isUnevenSplit(whole, s))
      return unevenSlice(v, s, before);
    const int64_t n = whole[static_cast<size_t>(s.axis)];
    const int64_t block = n / s.blocks, p = block / s.parts;
    std::vector<int64_t> base;
    for (int64_t k = 0; k < s.blocks; ++k)
      for (int64_t j = 0; j < p; ++j)
        base.push_back(k * block + j);
    DTC_ASSIGN_OR_RETURN(ir::Value * rank, tpRank());
    ir::Node *off = insert(before, "Mul", {rank, constI64(v->name() + "/tp_part", {p}, true)},
                           v->name() + "/tp_offset");
    ir::Node *idx = insert(before, "Add", {constI64(v->name() + "/tp_base", base), off->output(0)},
                           v->name() + "/tp_indices");
    ir::Node *g = insert(before, "Gather", {v, idx->output(0)}, v->name() + "/tp_slice");
    g->setAttr("axis", ir::Attribute(s.axis));
    return typed(g, v->type(), s);
  }

  Expected<ir::Value *> copyOf(ir::Value *v, ir::Node *before) {
    auto it = copies_.find(v);
    if (it != copies_.end())
      return it->second;
    ir::Node *c = insert(before, "TensorParallelCopy", {v}, v->name() + "/tp_copy", ir::kDtcDomain);
    ir::Value *out = typed(c, v->type(), Sharding::replicated());
    copies_[v] = out;
    return out;
  }

  // ---- rewrites ------------------------------------------------------------------------------

  /// Gather(W split by rows, ids): ids outside the rank's rows [r*V/T, (r+1)*V/T) read row 0
  /// and are zeroed after, so the sum over the group is the whole lookup.
  Status maskGather(ir::Node *n) {
    ir::Value *w = n->input(0), *ids = n->input(1), *out = n->output(0);
    const Sharding s = layoutOf(w);
    int64_t rows = staticDims(w)[0] / s.parts;
    ir::Node *after = next(n);
    const std::string b = n->name() + "/tp";
    ir::Value *firstRow = nullptr;
    if (ir::isUnevenSplit(staticDims(w), s)) {
      DTC_ASSIGN_OR_RETURN(firstRow, unevenFirst(staticDims(w)[0], s, b, rows, n));
    } else {
      DTC_ASSIGN_OR_RETURN(ir::Value * rank, tpRank());
      firstRow =
          insert(n, "Mul", {rank, constI64(b + "_rows", {rows}, true)}, b + "_first")->output(0);
    }
    ir::Node *local = insert(n, "Sub", {ids, firstRow}, b + "_local_ids");
    ir::Node *ge = insert(n, "GreaterOrEqual", {local->output(0), constI64(b + "_zero", {0}, true)},
                          b + "_ge");
    ir::Node *lt =
        insert(n, "Less", {local->output(0), constI64(b + "_end", {rows}, true)}, b + "_lt");
    ir::Node *in = insert(n, "And", {ge->output(0), lt->output(0)}, b + "_in_range");
    ir::Node *safe =
        insert(n, "Where", {in->output(0), local->output(0), constI64(b + "_zero_id", {0}, true)},
               b + "_safe_ids");
    n->setInput(1, safe->output(0));
    ir::Node *mask =
        insert(after, "Unsqueeze", {in->output(0), constI64(b + "_axis", {-1})}, b + "_mask");
    ir::Value *zero = graph_->addConstant(b + "_zero_row",
                                          ir::TensorData::fromFloats(b + "_zero_row", {}, {0.0f}));
    ir::Node *masked = insert(after, "Where", {mask->output(0), out, zero}, b + "_masked");
    const ir::TensorType t = out->type();
    out->replaceAllUsesWith(masked->output(0));
    masked->setInput(1, out); // replaceAllUsesWith also moved the Where's own use
    if (firstRow->producer())
      DTC_RETURN_IF_ERROR(ops::inferNode(*firstRow->producer(), *diags_));
    for (ir::Node *m : {local, ge, lt, in, safe, mask})
      DTC_RETURN_IF_ERROR(ops::inferNode(*m, *diags_));
    typed(masked, t, Sharding::partial(s.parts));
    return Status::ok();
  }

  /// Row-parallel Gemm/Conv: the bias (input i) leaves the node and is added once after the
  /// all-reduce (every rank adding it would count it T times).
  Status biasAfterReduce(ir::Node *n, size_t i) {
    ir::Value *bias = n->input(i), *out = n->output(0);
    const ir::TensorType t = out->type();
    ir::Node *after = next(n);
    n->truncateInputs(i);
    ir::Value *b = bias;
    if (n->opType() == "Gemm") {
      const float beta = n->attrFloat("beta", 1.0f);
      if (beta != 1.0f) {
        ir::Value *k = graph_->addConstant(
            n->name() + "/tp_beta", ir::TensorData::fromFloats(n->name() + "/tp_beta", {}, {beta}));
        b = insert(after, "Mul", {bias, k}, n->name() + "/tp_scaled_bias")->output(0);
      }
      n->removeAttr("beta");
    } else { // Conv: bias [C] against [N, C, spatial...]
      std::vector<int64_t> shape{staticDims(bias)[0]};
      for (size_t d = 2; d < t.shape.rank(); ++d)
        shape.push_back(1);
      b = insert(after, "Reshape", {bias, constI64(n->name() + "/tp_bias_shape", shape)},
                 n->name() + "/tp_bias")
              ->output(0);
    }
    if (b != bias)
      DTC_RETURN_IF_ERROR(ops::inferNode(*b->producer(), *diags_));
    ir::Node *add = insert(after, "Add", {out, b}, n->name() + "/tp_biased");
    out->replaceAllUsesWith(add->output(0));
    add->setInput(0, out);
    add->output(0)->setType(t);
    // The Add runs on the reduced value: visit it now, like any node of the model.
    inserted_.erase(add);
    return visitNode(add);
  }

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
                                    int64_t &rows, ir::Node *before) override {
    const ir::SplitRange r = ir::splitRange(size, s.parts, cfg_->tpIndex);
    rows = r.length;
    cfg_->tpUneven = true;
    cfg_->tpUnevenSizes.push_back(size);
    const int64_t rem = size % s.parts;
    DTC_ASSIGN_OR_RETURN(ir::Value * rank, tpRank());
    ir::Value *first =
        insert(before, "Mul", {rank, constI64(base + "_rows", {rows}, true)}, base + "_first")
            ->output(0);
    if (cfg_->tpIndex >= rem) // past the longer ranges: size % T rows more
      first = insert(before, "Add", {first, constI64(base + "_longer_rows", {rem}, true)},
                     base + "_first_row")
                  ->output(0);
    return first;
  }

  /// The rank's uneven slice of a replicated value: Gather of its range's indices (0..rows-1
  /// plus the runtime first row).
  Expected<ir::Value *> unevenSlice(ir::Value *v, const Sharding &s, ir::Node *before) {
    int64_t rows = 0;
    const std::string b = v->name() + "/tp_range";
    DTC_ASSIGN_OR_RETURN(
        ir::Value * first,
        unevenFirst(staticDims(v)[static_cast<size_t>(s.axis)], s, b, rows, before));
    std::vector<int64_t> idx(static_cast<size_t>(rows));
    std::iota(idx.begin(), idx.end(), 0);
    ir::Node *range = insert(before, "Add", {constI64(b + "_offsets", idx, false), first}, b);
    ir::Node *g = insert(before, "Gather", {v, range->output(0)}, v->name() + "/tp_slice");
    g->setAttr("axis", ir::Attribute(s.axis));
    return typed(g, v->type(), s);
  }

  /// Unequal parts are not all-gathered (that would need an all-gather of varying sizes):
  /// uneven splits only end in a row-parallel contraction (a partial sum, all-reduced).
  Status unevenGatherError(const ir::Value *v, const Sharding &s) const {
    const std::vector<int64_t> whole = staticDims(v);
    return Status::error("value '" + v->name() + "' (" + v->type().str() + ")",
                         "dimension " + std::to_string(s.axis) + " of size " +
                             std::to_string(whole[static_cast<size_t>(s.axis)]) +
                             " is split unevenly over tp=" + std::to_string(s.parts) +
                             " and would need an all-gather of unequal parts, which tensor "
                             "parallelism does not do; choose a divisor of it");
  }

  ir::Node *next(ir::Node *n) const {
    const std::vector<ir::Node *> all = graph_->nodes();
    for (size_t k = 0; k + 1 < all.size(); ++k)
      if (all[k] == n)
        return all[k + 1];
    return nullptr;
  }

  // ---- the end -------------------------------------------------------------------------------

  Status finishOutputs() {
    // Conversions of graph outputs and state updates go at the end (insert() appends when
    // there is no node to insert before).
    std::vector<ir::Value *> outs = graph_->outputs();
    for (size_t k = 0; k < outs.size(); ++k) {
      if (layoutOf(outs[k]).isReplicated())
        continue;
      DTC_ASSIGN_OR_RETURN(ir::Value * r, convert(outs[k], Sharding::replicated(), nullptr));
      graph_->setOutput(k, r);
      ir::TrainingRoles &st = graph_->training();
      if (st.prediction == outs[k])
        st.prediction = r;
    }
    // A state (running statistic) takes its update's value: both in the state's layout.
    ir::TrainingRoles &st = graph_->training();
    for (ir::StateUpdate &u : st.updates) {
      if (isFree(u.state))
        decide(u.state, Sharding::replicated());
      if (layoutOf(u.next) == layoutOf(u.state))
        continue;
      DTC_ASSIGN_OR_RETURN(u.next, convert(u.next, layoutOf(u.state), nullptr));
    }
    return Status::ok();
  }

  Status finishWeights() {
    for (const auto &[v, s] : decided_) {
      if (!s.isSplit())
        continue;
      ir::Value *w = const_cast<ir::Value *>(v);
      if (ir::isUnevenSplit(staticDims(w), s)) {
        cfg_->tpUneven = true; // this graph holds the shapes of tpIndex's class only
        cfg_->tpUnevenSizes.push_back(staticDims(w)[static_cast<size_t>(s.axis)]);
      }
      auto localDims = ir::shardDimsOf(staticDims(w), s, cfg_->tpIndex);
      if (!localDims.hasValue())
        return Status::error("weight '" + w->name() + "' (" + w->type().str() + ")",
                             localDims.status().message());
      std::vector<int64_t> local = *localDims;
      w->setShard(s);
      w->setType({w->dtype(), ir::Shape::ofStatic(local)});
    }
    return Status::ok();
  }

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
  // --sequence-parallel: values split along the sequence, and the conversions made for it.
  std::unordered_set<const ir::Value *> seqSplit_;
  std::unordered_map<std::string, ir::Value *> seqScattered_;
  std::unordered_map<const ir::Value *, ir::Value *> seqGathered_;
};

} // namespace

std::unique_ptr<Pass> createTensorParallelPass() { return std::make_unique<TensorParallelPass>(); }

} // namespace dtc::passes
