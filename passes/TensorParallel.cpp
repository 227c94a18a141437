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
#include "passes/TensorParallelPass.h"

#include <pthread.h>

#include <cstdint>

namespace dtc::passes {
namespace tp {

bool isTrainableFloat(const ir::Value *v) { return v->isParameter() && ir::isFloat(v->dtype()); }

std::vector<int64_t> staticDims(const ir::Value *v) {
  std::vector<int64_t> d;
  for (const ir::Dim &x : v->shape().dims())
    d.push_back(x.isStatic() ? x.value() : -1);
  return d;
}

Status TensorParallelPass::run(ir::Graph &graph, PassContext &ctx) {
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

/// A tp degree no weight could be split by (every splittable axis shorter than T, as a
/// 10-feature MLP at tp=11) leaves every tp rank computing the whole model: say so, naming the
/// largest weight, rather than running T copies silently.
void TensorParallelPass::warnIfNothingSplit() {
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

bool TensorParallelPass::deferredTranspose(ir::Node *n) {
  if (n->opType() != "Transpose" || !n->domain().empty() || !n->input(0) || !isFree(n->input(0)) ||
      virtual_.count(n->input(0)))
    return false;
  std::vector<int64_t> perm = n->attrInts("perm");
  if (perm.empty())
    for (int64_t i = static_cast<int64_t>(n->input(0)->shape().rank()) - 1; i >= 0; --i)
      perm.push_back(i);
  virtual_[n->output(0)] = {n->input(0), perm};
  return true;
}

bool TensorParallelPass::isFree(const ir::Value *v) const {
  auto it = virtual_.find(v);
  if (it != virtual_.end())
    return isFree(it->second.weight);
  return isTrainableFloat(v) && !decided_.count(v);
}

Sharding TensorParallelPass::layoutOf(const ir::Value *v) const {
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

void TensorParallelPass::decide(ir::Value *v, const Sharding &s) {
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

Status TensorParallelPass::applyUserShards() {
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

namespace {

/// The calling thread's stack size in bytes (glibc's pthread_getattr_np: the main thread's from
/// its rlimit, another thread's as created), read once per thread; 8 MiB if unknown.
size_t threadStackBytes() {
  thread_local const size_t bytes = [] {
    size_t size = size_t{8} << 20;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr = nullptr;
      size_t got = 0;
      if (pthread_attr_getstack(&attr, &addr, &got) == 0 && got > 0)
        size = got;
      pthread_attr_destroy(&attr);
    }
    return size;
  }();
  return bytes;
}

} // namespace

Expected<ops::ShardingContext>
TensorParallelPass::ask(const ir::Node *n, const std::map<size_t, Sharding> &assumed) const {
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
bool TensorParallelPass::keepsSplit(const ir::Value *v, const Sharding &s) const {
  const std::string key = v->name() + "|" + s.text();
  auto memo = lookAhead_.find(key);
  if (memo != lookAhead_.end())
    return memo->second;
  const char here = 0;
  const auto at = reinterpret_cast<uintptr_t>(&here);
  if (lookAheadDepth_ == 0)
    lookAheadBase_ = at;
  const uintptr_t used = at > lookAheadBase_ ? at - lookAheadBase_ : lookAheadBase_ - at;
  if (lookAheadDepth_ >= kMaxLookAhead || used > threadStackBytes() / 2)
    return false;          // not memoized: asked from nearer, the same value may keep its split
  lookAhead_[key] = false; // no cycles in a DAG; a safe answer while recursing
  struct Depth {
    int &d;
    explicit Depth(int &depth) : d(++depth) {}
    ~Depth() { --d; }
  } depth(lookAheadDepth_);
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

Status TensorParallelPass::visit(ir::Node *n) {
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

ir::Node *TensorParallelPass::insert(ir::Node *before, const std::string &op,
                                     const std::vector<ir::Value *> &in, const std::string &base,
                                     const std::string &domain) {
  const std::string out = graph_->uniqueName(base);
  ir::Node *n =
      before ? graph_->insertNodeBefore(before, op, in, {out}, domain, graph_->uniqueNodeName(base))
             : graph_->addNode(op, in, {out}, domain, graph_->uniqueNodeName(base));
  n->setPhase(ir::Phase::kForward);
  inserted_.insert(n);
  return n;
}

ir::Value *TensorParallelPass::constI64(const std::string &base, const std::vector<int64_t> &values,
                                        bool scalar) {
  const std::vector<int64_t> dims =
      scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(values.size())};
  return graph_->addConstant(base, ir::TensorData::fromInt64s(base, dims, values));
}

Expected<ir::Value *> TensorParallelPass::tpRank() {
  ir::TrainingRoles &st = graph_->training();
  if (st.tpRank)
    return st.tpRank;
  if (graph_->findValue(ir::kTpRankInput))
    return Status::error("value '" + std::string(ir::kTpRankInput) + "'",
                         "the name is reserved for the runtime-fed tensor-parallel rank");
  st.tpRank =
      graph_->createValue(ir::kTpRankInput, {ir::DType::kInt64, ir::Shape(std::vector<ir::Dim>{})});
  graph_->addInput(st.tpRank);
  return st.tpRank;
}

/// The value of `v` (global type `t`) set to type `t` for the rest of the walk (the final
/// re-inference gives every value its local type).
ir::Value *TensorParallelPass::typed(ir::Node *n, const ir::TensorType &t, const Sharding &s) {
  ir::Value *out = n->output(0);
  out->setType(t);
  layout_[out] = s;
  return out;
}

Expected<ir::Value *> TensorParallelPass::convert(ir::Value *v, const Sharding &want,
                                                  ir::Node *before) {
  const std::string key = v->name() + "|" + want.text();
  auto it = converted_.find(key);
  if (it != converted_.end())
    return it->second;
  const Sharding have = layoutOf(v);
  ir::Value *x = v;
  if (have.isPartial()) {
    ir::Node *ar = insert(before, "AllReduce", {x}, v->name() + "/tp_all_reduced", ir::kDtcDomain);
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
Expected<ir::Value *> TensorParallelPass::gather(ir::Value *v, const Sharding &s,
                                                 ir::Node *before) {
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
Expected<ir::Value *> TensorParallelPass::slice(ir::Value *v, const Sharding &s, ir::Node *before) {
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

Expected<ir::Value *> TensorParallelPass::copyOf(ir::Value *v, ir::Node *before) {
  auto it = copies_.find(v);
  if (it != copies_.end())
    return it->second;
  ir::Node *c = insert(before, "TensorParallelCopy", {v}, v->name() + "/tp_copy", ir::kDtcDomain);
  ir::Value *out = typed(c, v->type(), Sharding::replicated());
  copies_[v] = out;
  return out;
}

/// Gather(W split by rows, ids): ids outside the rank's rows [r*V/T, (r+1)*V/T) read row 0
/// and are zeroed after, so the sum over the group is the whole lookup.
Status TensorParallelPass::maskGather(ir::Node *n) {
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
  ir::Node *ge =
      insert(n, "GreaterOrEqual", {local->output(0), constI64(b + "_zero", {0}, true)}, b + "_ge");
  ir::Node *lt =
      insert(n, "Less", {local->output(0), constI64(b + "_end", {rows}, true)}, b + "_lt");
  ir::Node *in = insert(n, "And", {ge->output(0), lt->output(0)}, b + "_in_range");
  ir::Node *safe =
      insert(n, "Where", {in->output(0), local->output(0), constI64(b + "_zero_id", {0}, true)},
             b + "_safe_ids");
  n->setInput(1, safe->output(0));
  ir::Node *mask =
      insert(after, "Unsqueeze", {in->output(0), constI64(b + "_axis", {-1})}, b + "_mask");
  ir::Value *zero =
      graph_->addConstant(b + "_zero_row", ir::TensorData::fromFloats(b + "_zero_row", {}, {0.0f}));
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
Status TensorParallelPass::biasAfterReduce(ir::Node *n, size_t i) {
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

/// This tp index's first row of an axis of `size` split unevenly by `s` (an int64 scalar
/// computed before `before` from the runtime-fed tp rank r: r * (q + 1) for the ranks below
/// size % T, r * q + size % T for the others, q = size / T); `rows` becomes the range's length.
Expected<ir::Value *> TensorParallelPass::unevenFirst(int64_t size, const Sharding &s,
                                                      const std::string &base, int64_t &rows,
                                                      ir::Node *before) {
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
Expected<ir::Value *> TensorParallelPass::unevenSlice(ir::Value *v, const Sharding &s,
                                                      ir::Node *before) {
  int64_t rows = 0;
  const std::string b = v->name() + "/tp_range";
  DTC_ASSIGN_OR_RETURN(ir::Value * first,
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
Status TensorParallelPass::unevenGatherError(const ir::Value *v, const Sharding &s) const {
  const std::vector<int64_t> whole = staticDims(v);
  return Status::error("value '" + v->name() + "' (" + v->type().str() + ")",
                       "dimension " + std::to_string(s.axis) + " of size " +
                           std::to_string(whole[static_cast<size_t>(s.axis)]) +
                           " is split unevenly over tp=" + std::to_string(s.parts) +
                           " and would need an all-gather of unequal parts, which tensor "
                           "parallelism does not do; choose a divisor of it");
}

ir::Node *TensorParallelPass::next(ir::Node *n) const {
  const std::vector<ir::Node *> all = graph_->nodes();
  for (size_t k = 0; k + 1 < all.size(); ++k)
    if (all[k] == n)
      return all[k + 1];
  return nullptr;
}

Status TensorParallelPass::finishOutputs() {
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

Status TensorParallelPass::finishWeights() {
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

} // namespace tp

std::unique_ptr<Pass> createTensorParallelPass() {
  return std::make_unique<tp::TensorParallelPass>();
}

} // namespace dtc::passes
