// optimizer: appends the optimizer step to a training graph after autodiff (DESIGN.md section 5):
// one ai.dtc SGD / Adam / AdamW node per trained parameter (ops/training/Optimizer.cpp) with its
// zero-initialized state, global-norm gradient clipping, and gradient accumulation over
// micro-batches; records everything lowering needs in the graph's training roles
// (compiler/ir/Training.h).
//
// Gradient accumulation (TrainingConfig::gradAccumSteps K > 1). Instructions before
// ir::TrainingRoles::optimizerBegin run once per micro-batch, the rest once per step. Per trained
// parameter p with micro-batch gradient g the pass adds an accumulator A ("<p>.grad_accum", zeros)
// and, before optimizerBegin,
//   A_next = Add(A, g)                    phase kBackward, ir::StateUpdate{A, A_next}
// so that A holds the sum of the micro-batch gradients when the optimizer phase starts. The
// update reads A_next with grad_scale 1/K (the loss is a per-micro-batch mean, so the step sees
// the mean gradient over the K micro-batches, as `loss / K` before backward() does in PyTorch),
// and afterwards
//   A_zero = ZeroGradient(A_next, p_out)  phase kOptimizer, ir::StateUpdate{A, A_zero}
// resets A for the next step (p_out orders the reset after the update that reads A_next).
// Accumulators are appended to ir::TrainingRoles::optimizerState[i] after the optimizer's own
// state.
//
// Clipping (clipGradNorm > 0): S = SumSquares(all update gradients), c = ClipGradNormScale(S,
// max_norm, input_scale = 1/K), and every update op takes c as grad_scale: no scaled copy of a
// gradient is made. On a mesh S counts every element once (globalSumSquares): per pipeline stage,
// tensor-parallel split gradients all-reduced over tp, ZeRO's blocks all-reduced over dp.
//
// ZeRO (TrainingConfig::zero 1 or 2, --strategy dp=N): one update per bucket of parameters on
// the rank's 1/N block of the flattened, zero-padded bucket, with state for that block only,
// then an all-gather of the updated blocks over dp (shardedStep below).
#include "ops/OpDef.h"
#include "passes/DataParallel.h"
#include "passes/Pass.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

namespace dtc::passes {
namespace {

Status checkConfig(const TrainingConfig &c) {
  auto bad = [](const std::string &flag, const std::string &what) {
    return Status::error(flag, what);
  };
  if (c.optimizer != "sgd" && c.optimizer != "adam" && c.optimizer != "adamw")
    return bad("--optimizer",
               "unknown optimizer '" + c.optimizer + "'; expected sgd, adam or adamw");
  if (!(c.lr >= 0.f) || !std::isfinite(c.lr))
    return bad("--lr", "must be a finite number >= 0, got " + std::to_string(c.lr));
  if (!(c.weightDecay >= 0.f) || !std::isfinite(c.weightDecay))
    return bad("--weight-decay",
               "must be a finite number >= 0, got " + std::to_string(c.weightDecay));
  if (!(c.clipGradNorm >= 0.f) || !std::isfinite(c.clipGradNorm))
    return bad("--clip-grad-norm",
               "must be a finite number >= 0 (0: off), got " + std::to_string(c.clipGradNorm));
  if (c.gradAccumSteps < 1)
    return bad("--grad-accum-steps", "must be >= 1, got " + std::to_string(c.gradAccumSteps));
  if (c.optimizer == "sgd") {
    if (!(c.momentum >= 0.f) || !std::isfinite(c.momentum))
      return bad("--momentum", "must be a finite number >= 0, got " + std::to_string(c.momentum));
    if (c.nesterov && c.momentum == 0.f)
      return bad("--nesterov", "Nesterov momentum needs --momentum > 0");
    return Status::ok();
  }
  if (!(c.beta1 >= 0.f && c.beta1 < 1.f))
    return bad("--beta1", "must be in [0, 1), got " + std::to_string(c.beta1));
  if (!(c.beta2 >= 0.f && c.beta2 < 1.f))
    return bad("--beta2", "must be in [0, 1), got " + std::to_string(c.beta2));
  if (!(c.eps >= 0.f) || !std::isfinite(c.eps))
    return bad("--eps", "must be a finite number >= 0, got " + std::to_string(c.eps));
  return Status::ok();
}

class OptimizerPass : public Pass {
public:
  std::string name() const override { return "optimizer"; }
  std::string description() const override {
    return "append the optimizer step (sgd, adam, adamw) with its state, gradient clipping and "
           "gradient accumulation";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("optimizer", "needs a training compilation (autodiff runs first)");
    const TrainingConfig &cfg = *ctx.training;
    ir::TrainingRoles &st = graph.training();
    DTC_RETURN_IF_ERROR(checkConfig(cfg));
    if (st.gradients.size() != st.parameters.size())
      return Status::error("optimizer",
                           "autodiff must run first: " + std::to_string(st.parameters.size()) +
                               " trained parameters but " + std::to_string(st.gradients.size()) +
                               " gradients");
    if (st.optimizerBegin)
      return Status::error("optimizer", "the graph already has an optimizer step");
    graph_ = &graph;
    diags_ = &ctx.diags;
    step_ = nullptr;
    phase_ = ir::Phase::kBackward;
    first_ = nullptr;

    DTC_ASSIGN_OR_RETURN(st.lr, runtimeInput(ir::kLrInput, ir::DType::kFloat32));
    DTC_ASSIGN_OR_RETURN(st.step, runtimeInput(ir::kStepInput, ir::DType::kInt64));
    st.optimizerState.assign(st.parameters.size(), {});

    const int64_t k = cfg.gradAccumSteps;
    std::vector<size_t> trained;
    std::vector<ir::Value *> grads(st.parameters.size(), nullptr);
    std::vector<ir::Value *> accums(st.parameters.size(), nullptr);
    for (size_t i = 0; i < st.parameters.size(); ++i) {
      ir::Value *p = st.parameters[i], *g = st.gradients[i];
      if (!g)
        continue; // grad = None in PyTorch: no update, no weight decay, no state
      if (!p->shape().isStatic() || p->type() != g->type())
        return Status::error("parameter '" + p->name() + "'",
                             "has type " + p->type().str() + " but its gradient '" + g->name() +
                                 "' " + g->type().str() + "; both must be equal and static");
      trained.push_back(i);
      grads[i] = g;
      if (k == 1)
        continue;
      // Accumulate micro-batch gradients (phase kBackward: runs before optimizerBegin).
      ir::Value *a = zeros(p->name() + ".grad_accum", *p);
      DTC_ASSIGN_OR_RETURN(ir::Node * add, emit("Add", p->name() + ".grad_accum/Add", {a, g},
                                                {p->name() + ".grad_accum/next"}, ""));
      // Pipelines: accumulated where the gradient is computed (buckets stay per stage).
      add->setStage(g->producer() ? g->producer()->stage() : -1);
      st.updates.push_back({a, add->output(0)});
      accums[i] = a;
      grads[i] = add->output(0);
    }

    phase_ = ir::Phase::kOptimizer;
    const bool allReduced = cfg.dataParallel() > 0 && (cfg.mesh.pp == 1 || cfg.mesh.dp > 1);
    if (k > 1 && allReduced && !trained.empty() && cfg.zero != 2) {
      // Data parallelism with accumulation: all-reduce the accumulated gradients once per step,
      // first thing in the optimizer phase (DDP's no_sync() for all micro-batches but the last;
      // the data-parallel pass leaves them alone). Buckets in reverse parameter order, as DDP.
      std::vector<ir::Value *> ready;
      for (size_t j = trained.size(); j-- > 0;)
        ready.push_back(grads[trained[j]]);
      DTC_ASSIGN_OR_RETURN(auto buckets, bucketGradients(ready, cfg.bucketMb));
      std::unordered_map<const ir::Value *, ir::Value *> reduced;
      for (size_t b = 0; b < buckets.size(); ++b) {
        DTC_ASSIGN_OR_RETURN(ir::Node * n, addBucketAllReduce(graph, buckets[b], b, nullptr,
                                                              ir::Phase::kOptimizer, *diags_));
        if (!first_)
          first_ = n;
        for (size_t j = 0; j < buckets[b].size(); ++j)
          reduced[buckets[b][j]] = n->output(j);
      }
      for (size_t i : trained)
        grads[i] = reduced.at(grads[i]);
    }
    const float invK = 1.f / static_cast<float>(k);
    if (cfg.zero > 0 && !trained.empty()) {
      DTC_RETURN_IF_ERROR(shardedStep(cfg, trained, grads, accums, invK));
      st.optimizerBegin = first_;
      return Status::ok();
    }
    ir::Value *scale = nullptr;
    // Loss scaling: the gradients carry the scale S; finite says whether all of them are finite.
    ir::Value *finite = nullptr, *invS = nullptr;
    const bool scaled = cfg.lossScaleMode() != "off" && !trained.empty();
    if (scaled) {
      DTC_ASSIGN_OR_RETURN(std::tie(finite, invS), checkScaledGradients(trained, grads));
    }
    if (cfg.clipGradNorm > 0.f && !trained.empty()) {
      std::vector<ir::Value *> values;
      std::vector<bool> split;
      for (size_t i : trained) {
        values.push_back(grads[i]);
        split.push_back(st.parameters[i]->shard().isSplit());
      }
      DTC_ASSIGN_OR_RETURN(ir::Value * sumSq, globalSumSquares(values, split, /*dpShards=*/false));
      if (scaled) { // the norm of the unscaled gradients: sum of squares / S^2
        DTC_ASSIGN_OR_RETURN(ir::Value * inv2,
                             binary("Mul", "optimizer/loss_scale/inv2", invS, invS));
        DTC_ASSIGN_OR_RETURN(sumSq,
                             binary("Mul", "optimizer/grad_sum_squares_unscaled", sumSq, inv2));
      }
      DTC_ASSIGN_OR_RETURN(ir::Node * clip,
                           emit("ClipGradNormScale", "optimizer/grad_clip_scale", {sumSq},
                                {"optimizer/grad_clip_scale"}, ir::kDtcDomain,
                                {{"max_norm", ir::Attribute(cfg.clipGradNorm)},
                                 {"input_scale", ir::Attribute(invK)}}));
      scale = clip->output(0);
      if (scaled) {
        DTC_ASSIGN_OR_RETURN(scale, binary("Mul", "optimizer/grad_scale", scale, invS));
      }
    } else if (scaled) {
      scale = invS;
    } else if (k > 1) {
      const std::string name = graph.uniqueName("optimizer/grad_scale");
      scale = graph.addConstant(name, ir::TensorData::fromFloats(name, {}, {invK}));
    }

    ir::Value *applied = nullptr; // loss scaling with Adam: the count of steps not skipped
    if (scaled && cfg.optimizer != "sgd") {
      applied = zerosOf(std::string(ir::kLossScaleValue) + ".applied_steps", ir::DType::kInt64);
      step_ = applied;
    }
    const size_t firstUpdate = st.updates.size();
    for (size_t i : trained) {
      ir::Value *p = st.parameters[i];
      std::vector<ir::Value *> state;
      DTC_ASSIGN_OR_RETURN(ir::Node * update, addUpdate(cfg, p, grads[i], scale, p->name(), state));
      st.updates.push_back({p, update->output(0)});
      for (size_t s = 0; s < state.size(); ++s)
        st.updates.push_back({state[s], update->output(s + 1)});
      if (accums[i]) {
        DTC_ASSIGN_OR_RETURN(ir::Node * reset,
                             emit("ZeroGradient", p->name() + ".grad_accum/ZeroGradient",
                                  {grads[i], update->output(0)}, {p->name() + ".grad_accum/zero"}));
        st.updates.push_back({accums[i], reset->output(0)});
        state.push_back(accums[i]);
      }
      st.optimizerState[i] = std::move(state);
    }
    if (scaled) {
      DTC_RETURN_IF_ERROR(skipAndUpdateScale(cfg, finite, firstUpdate, applied, trained[0]));
    }
    st.optimizerBegin = first_;
    return Status::ok();
  }

private:
  /// The update node of parameter (or parameter shard) `p` with gradient `g` (grad_scale
  /// `scale`, or none), named after `base` ("<base>/SGD"; state "<base>.momentum",
  /// "<base>.exp_avg", "<base>.exp_avg_sq", zeros of p's type, appended to `state`). Output 0 is
  /// the new p, output 1 + s the new state[s].
  Expected<ir::Node *> addUpdate(const TrainingConfig &cfg, ir::Value *p, ir::Value *g,
                                 ir::Value *scale, const std::string &base,
                                 std::vector<ir::Value *> &state) {
    const ir::TrainingRoles &st = graph_->training();
    if (cfg.optimizer == "sgd") {
      std::map<std::string, ir::Attribute> attrs = {
          {"momentum", ir::Attribute(cfg.momentum)},
          {"nesterov", ir::Attribute(int64_t{cfg.nesterov ? 1 : 0})},
          {"weight_decay", ir::Attribute(cfg.weightDecay)}};
      std::vector<std::string> outs = {p->name() + "/updated"};
      if (cfg.momentum != 0.f) {
        state.push_back(zeros(base + ".momentum", *p));
        outs.push_back(state.back()->name() + "/updated");
      }
      std::vector<ir::Value *> ins = {p, g, st.lr, state.empty() ? nullptr : state[0], scale};
      while (!ins.back())
        ins.pop_back();
      return emit("SGD", base + "/SGD", ins, outs, ir::kDtcDomain, attrs);
    }
    const std::string op = cfg.optimizer == "adam" ? "Adam" : "AdamW";
    state.push_back(zeros(base + ".exp_avg", *p));
    state.push_back(zeros(base + ".exp_avg_sq", *p));
    std::vector<ir::Value *> ins = {p, g, st.lr, step_ ? step_ : st.step, state[0], state[1]};
    if (scale)
      ins.push_back(scale);
    return emit(
        op, base + "/" + op, ins,
        {p->name() + "/updated", state[0]->name() + "/updated", state[1]->name() + "/updated"},
        ir::kDtcDomain,
        {{"beta1", ir::Attribute(cfg.beta1)},
         {"beta2", ir::Attribute(cfg.beta2)},
         {"epsilon", ir::Attribute(cfg.eps)},
         {"weight_decay", ir::Attribute(cfg.weightDecay)}});
  }

  /// Sets first_ to the first node appended since the graph had `before` nodes (helpers of
  /// passes/DataParallel.h append without emit()).
  void markFirst(size_t before) {
    if (!first_ && graph_->nodes().size() > before)
      first_ = graph_->nodes()[before];
  }

  /// Rank r's block of the flat bucket `flat` [parts * s]: Gather(Reshape(flat, [parts, s]),
  /// dtc::dp_rank) -> [s].
  Expected<ir::Value *> ownBlock(ir::Value *flat, int64_t parts, const std::string &name) {
    const int64_t s = *flat->shape().numElements() / parts;
    ir::Value *shape = constI64(name + "/blocks_shape", {parts, s});
    DTC_ASSIGN_OR_RETURN(ir::Node * r,
                         emit("Reshape", name + "/blocks", {flat, shape}, {name + "/blocks"}, ""));
    DTC_ASSIGN_OR_RETURN(ir::Node * g,
                         emit("Gather", name, {r->output(0), graph_->training().dpRank}, {name}, "",
                              {{"axis", ir::Attribute(int64_t{0})}}));
    return g->output(0);
  }

  ir::Value *constI64(const std::string &base, const std::vector<int64_t> &values) {
    const std::string name = graph_->uniqueName(base);
    return graph_->addConstant(
        name, ir::TensorData::fromInt64s(name, {static_cast<int64_t>(values.size())}, values));
  }

  /// ZeRO stages 1 and 2 (Rajbhandari et al., SC 2020; DeepSpeed's partitioned optimizer,
  /// PyTorch's ZeroRedundancyOptimizer and FSDP SHARD_GRAD_OP): the trained parameters go in
  /// buckets (stage 2 without accumulation: the data-parallel pass's reduce-scattered ones;
  /// otherwise bucketGradients over them in reverse order, as DDP). Per bucket of L elements,
  /// padded to Lp = N * s (N = dp): the flat gradient's block r on dp rank r (stage 1: of the
  /// all-reduced gradients, Gather of block dtc::dp_rank; stage 2: the reduce-scatter's result),
  /// the flat parameters' block r, one update with state of s elements ("zero/bucket<b>.*",
  /// listed as the optimizer state of the bucket's first parameter), then AllGather over dp of
  /// the updated blocks, split back into the parameters (their state updates). Clipping sums
  /// the squares of the shards (globalSumSquares: over dp, and over tp for buckets of split
  /// weights, which never share a bucket with replicated ones; padding is zeros in both); on a
  /// pipeline each bucket's update is placed on its stage.
  Status shardedStep(const TrainingConfig &cfg, const std::vector<size_t> &trained,
                     const std::vector<ir::Value *> &grads, const std::vector<ir::Value *> &accums,
                     float invK) {
    ir::TrainingRoles &st = graph_->training();
    const int64_t parts = cfg.mesh.dp;
    DTC_ASSIGN_OR_RETURN(st.dpRank, runtimeInput(ir::kDpRankInput, ir::DType::kInt64));
    std::vector<ir::GradientShard> buckets;
    if (cfg.zero == 2 && cfg.gradAccumSteps == 1) {
      buckets = st.gradientShards;
      size_t members = 0;
      for (const ir::GradientShard &b : buckets)
        members += b.members.size();
      if (members != trained.size())
        return Status::error("optimizer", "--zero 2: the data-parallel pass reduce-scattered " +
                                              std::to_string(members) + " gradients of " +
                                              std::to_string(trained.size()) +
                                              " trained parameters (it must run first)");
    } else {
      std::vector<size_t> order(trained.rbegin(), trained.rend());
      std::vector<ir::Value *> ready;
      std::vector<int> kinds; // tensor-parallel split or replicated parameter
      for (size_t i : order) {
        ready.push_back(grads[i]);
        kinds.push_back(st.parameters[i]->shard().isSplit() ? 1 : 0);
      }
      DTC_ASSIGN_OR_RETURN(auto groups, bucketGradients(ready, cfg.bucketMb, kinds));
      size_t next = 0;
      for (size_t b = 0; b < groups.size(); ++b) {
        ir::GradientShard shard;
        for (size_t j = 0; j < groups[b].size(); ++j)
          shard.members.push_back(order[next++]);
        const size_t before = graph_->nodes().size();
        if (cfg.zero == 2) {
          // Accumulated gradients, reduce-scattered once per step.
          DTC_ASSIGN_OR_RETURN(shard.shard,
                               addBucketReduceScatter(*graph_, groups[b], b, parts, nullptr,
                                                      ir::Phase::kOptimizer, *diags_));
          markFirst(before);
        } else {
          const std::string name = "zero/bucket" + std::to_string(b) + "/gradients";
          DTC_ASSIGN_OR_RETURN(ir::Value * flat,
                               flattenBucket(*graph_, groups[b], paddedBucketSize(groups[b], parts),
                                             name, nullptr, ir::Phase::kOptimizer, *diags_));
          markFirst(before);
          DTC_ASSIGN_OR_RETURN(shard.shard, ownBlock(flat, parts, name + "/shard"));
        }
        buckets.push_back(std::move(shard));
      }
    }

    ir::Value *scale = nullptr;
    if (cfg.clipGradNorm > 0.f) {
      // A bucket holds the gradients of split or of replicated parameters only (bucketGradients'
      // kinds), so its shard is one or the other.
      std::vector<ir::Value *> shards;
      std::vector<bool> split;
      for (const ir::GradientShard &b : buckets) {
        shards.push_back(b.shard);
        split.push_back(false);
        for (size_t j = 0; j < b.members.size(); ++j) {
          const bool s = st.parameters[b.members[j]]->shard().isSplit();
          if (j == 0)
            split.back() = s;
          else if (s != split.back())
            return Status::error("optimizer", "--clip-grad-norm with --zero: bucket " +
                                                  std::to_string(&b - buckets.data()) +
                                                  " mixes tensor-parallel split and replicated "
                                                  "parameters");
        }
      }
      DTC_ASSIGN_OR_RETURN(ir::Value * total, globalSumSquares(shards, split, /*dpShards=*/true));
      DTC_ASSIGN_OR_RETURN(ir::Node * clip,
                           emit("ClipGradNormScale", "optimizer/grad_clip_scale", {total},
                                {"optimizer/grad_clip_scale"}, ir::kDtcDomain,
                                {{"max_norm", ir::Attribute(cfg.clipGradNorm)},
                                 {"input_scale", ir::Attribute(invK)}}));
      scale = clip->output(0);
    } else if (cfg.gradAccumSteps > 1) {
      const std::string name = graph_->uniqueName("optimizer/grad_scale");
      scale = graph_->addConstant(name, ir::TensorData::fromFloats(name, {}, {invK}));
    }

    std::unordered_map<const ir::Value *, int> stageMemo;
    for (size_t b = 0; b < buckets.size(); ++b) {
      const std::vector<size_t> &members = buckets[b].members;
      const std::string base = "zero/bucket" + std::to_string(b);
      // Pipelines: the bucket's update runs on its stage (where its gradient shard is), not where
      // the clipping scale, read from the last stage, comes from.
      const int stage = stageOf(buckets[b].shard, stageMemo);
      const size_t bucketNodes = graph_->nodes().size();
      std::vector<ir::Value *> params;
      for (size_t i : members)
        params.push_back(st.parameters[i]);
      const int64_t padded = paddedBucketSize(params, parts);
      const size_t before = graph_->nodes().size();
      DTC_ASSIGN_OR_RETURN(ir::Value * flat,
                           flattenBucket(*graph_, params, padded, base + "/parameters", nullptr,
                                         ir::Phase::kOptimizer, *diags_));
      markFirst(before);
      DTC_ASSIGN_OR_RETURN(ir::Value * own, ownBlock(flat, parts, base + "/parameters/shard"));
      std::vector<ir::Value *> state;
      DTC_ASSIGN_OR_RETURN(ir::Node * update,
                           addUpdate(cfg, own, buckets[b].shard, scale, base, state));
      for (size_t s = 0; s < state.size(); ++s)
        st.updates.push_back({state[s], update->output(s + 1)});
      DTC_ASSIGN_OR_RETURN(ir::Node * gathered,
                           emit("AllGather", base + "/parameters/AllGather", {update->output(0)},
                                {base + "/parameters/gathered"}, ir::kDtcDomain,
                                {{"group", ir::Attribute("dp")}, {"parts", ir::Attribute(parts)}}));
      DTC_ASSIGN_OR_RETURN(ir::Node * whole,
                           emit("Reshape", base + "/parameters/updated",
                                {gathered->output(0), constI64(base + "/padded_shape", {padded})},
                                {base + "/parameters/updated"}, ""));
      // Back into the parameters: split off each one's elements (and the padding).
      std::vector<ir::Value *> pieces;
      int64_t total = 0;
      for (const ir::Value *p : params)
        total += *p->shape().numElements();
      if (params.size() == 1 && padded == total) {
        pieces.push_back(whole->output(0));
      } else {
        std::vector<int64_t> sizes;
        std::vector<std::string> outs;
        for (const ir::Value *p : params) {
          sizes.push_back(*p->shape().numElements());
          outs.push_back(p->name() + "/updated_flat");
        }
        if (padded > total) {
          sizes.push_back(padded - total);
          outs.push_back(base + "/padding/updated");
        }
        DTC_ASSIGN_OR_RETURN(ir::Node * split,
                             emit("Split", base + "/parameters/Split",
                                  {whole->output(0), constI64(base + "/split", sizes)}, outs, "",
                                  {{"axis", ir::Attribute(int64_t{0})}}));
        for (size_t j = 0; j < params.size(); ++j)
          pieces.push_back(split->output(j));
      }
      for (size_t j = 0; j < members.size(); ++j) {
        const size_t i = members[j];
        ir::Value *p = st.parameters[i];
        DTC_ASSIGN_OR_RETURN(ir::Node * r, emit("Reshape", p->name() + "/Reshape",
                                                {pieces[j], constI64(p->name() + "/shape",
                                                                     p->shape().staticSizes())},
                                                {p->name() + "/updated"}, ""));
        st.updates.push_back({p, r->output(0)});
        std::vector<ir::Value *> kept = j == 0 ? state : std::vector<ir::Value *>{};
        if (accums[i]) {
          DTC_ASSIGN_OR_RETURN(ir::Node * reset,
                               emit("ZeroGradient", p->name() + ".grad_accum/ZeroGradient",
                                    {grads[i], r->output(0)}, {p->name() + ".grad_accum/zero"}));
          st.updates.push_back({accums[i], reset->output(0)});
          kept.push_back(accums[i]);
        }
        st.optimizerState[i] = std::move(kept);
      }
      if (stage >= 0) {
        const std::vector<ir::Node *> nodes = graph_->nodes();
        for (size_t n = bucketNodes; n < nodes.size(); ++n)
          if (nodes[n]->stage() < 0)
            nodes[n]->setStage(stage);
      }
    }
    if (cfg.zero == 2)
      st.gradientShards = std::move(buckets);
    return Status::ok();
  }

  /// The squared global norm of `values` over the whole mesh, each distinct element counted
  /// once: `values` are gradients (or, with `dpShards`, ZeRO's blocks of the flat, zero-padded
  /// gradient buckets: dp rank r holds block r, so the sum is all-reduced over dp). split[i]:
  /// values[i] belongs to a tensor-parallel split parameter (every tp rank holds another part:
  /// those sums are all-reduced over tp); the others are replicated over tp (equal on every tp
  /// rank: counted once). Pipelines: each stage sums the squares of its own values and only the
  /// scalars go to the last stage (the pipeline pass places the Add there), so every element is
  /// counted once whichever stage holds it. Sum = AllReduce_dp(replicated + AllReduce_tp(split)),
  /// the outer all-reduce only with `dpShards` (the tp peers of one dp rank hold the same
  /// replicated blocks, so the sum over dp x tp counts them once).
  Expected<ir::Value *> globalSumSquares(const std::vector<ir::Value *> &values,
                                         const std::vector<bool> &split, bool dpShards) {
    const std::string base =
        dpShards ? "optimizer/grad_sum_squares_shard" : "optimizer/grad_sum_squares";
    // values by [split?][stage]
    std::map<int, std::vector<ir::Value *>> byStage[2];
    std::unordered_map<const ir::Value *, int> memo;
    for (size_t i = 0; i < values.size(); ++i)
      byStage[split[i] ? 1 : 0][stageOf(values[i], memo)].push_back(values[i]);
    ir::Value *sums[2] = {nullptr, nullptr};
    for (int k = 0; k < 2; ++k) {
      const std::string name = base + (k ? "_tp" : "");
      for (const auto &[stage, vs] : byStage[k]) {
        const std::string at =
            byStage[k].size() > 1 ? name + "/stage" + std::to_string(stage) : name;
        DTC_ASSIGN_OR_RETURN(ir::Node * sum, emit("SumSquares", at, vs, {at}));
        if (!sums[k]) {
          sums[k] = sum->output(0);
          continue;
        }
        // Added on the later stage (the pipeline pass sends the earlier stages' scalars).
        DTC_ASSIGN_OR_RETURN(ir::Node * add, emit("Add", at + "/Add", {sums[k], sum->output(0)},
                                                  {at + "/total"}, ""));
        sums[k] = add->output(0);
      }
    }
    ir::Value *sum = sums[0];
    if (sums[1]) {
      DTC_ASSIGN_OR_RETURN(ir::Node * reduced,
                           emit("AllReduce", base + "_tp/AllReduce", {sums[1]},
                                {base + "_tp/reduced"}, ir::kDtcDomain,
                                {{"op", ir::Attribute("sum")}, {"group", ir::Attribute("tp")}}));
      sum = reduced->output(0);
      if (sums[0]) {
        DTC_ASSIGN_OR_RETURN(
            ir::Node * total,
            emit("Add", base + "_total", {sums[0], reduced->output(0)}, {base + "_total"}, ""));
        sum = total->output(0);
      }
    }
    if (dpShards) {
      DTC_ASSIGN_OR_RETURN(ir::Node * total,
                           emit("AllReduce", "optimizer/grad_sum_squares_dp/AllReduce", {sum},
                                {"optimizer/grad_sum_squares"}, ir::kDtcDomain,
                                {{"op", ir::Attribute("sum")}, {"group", ir::Attribute("dp")}}));
      sum = total->output(0);
    }
    return sum;
  }

  /// The pipeline stage `v` is computed on: its producer's, or for a node the optimizer added
  /// (no stage yet) the latest of its inputs' stages, as the pipeline pass will place it; -1
  /// outside pipelines.
  static int stageOf(const ir::Value *v, std::unordered_map<const ir::Value *, int> &memo) {
    const ir::Node *p = v ? v->producer() : nullptr;
    if (!p)
      return -1;
    if (p->stage() >= 0)
      return p->stage();
    if (auto it = memo.find(v); it != memo.end())
      return it->second;
    memo[v] = -1; // a graph is acyclic; this only bounds the walk
    int s = -1;
    for (const ir::Value *in : p->inputs())
      s = std::max(s, stageOf(in, memo));
    memo[v] = s;
    return s;
  }

  /// The graph input `name` (f32[] or i64[] scalar), created when absent.
  Expected<ir::Value *> runtimeInput(const std::string &name, ir::DType dtype) {
    const ir::TensorType want{dtype, ir::Shape(std::vector<ir::Dim>{})};
    if (ir::Value *v = graph_->findValue(name)) {
      if (!v->isGraphInput() || v->type() != want)
        return Status::error("value '" + name + "'",
                             "the name is reserved for the runtime-fed " + want.str() +
                                 " graph input; the model uses it for a " + v->type().str() +
                                 (v->isGraphInput() ? " input" : " value"));
      return v;
    }
    ir::Value *v = graph_->createValue(name, want);
    graph_->addInput(v);
    return v;
  }

  /// A new trainable-state initializer named uniqueName(base) holding zeros of `like`'s type
  /// (never materialized by the compiler: the runtime zero-fills optimizer state).
  ir::Value *zeros(const std::string &base, const ir::Value &like) {
    const std::string name = graph_->uniqueName(base);
    ir::Value *v = graph_->createValue(name);
    graph_->setInitializer(
        v, ir::TensorData::zeros(name, like.dtype(), like.shape().staticSizes()),
        /*isConstant=*/false);
    return v;
  }

  /// Appends node `op` (phase phase_) named uniqueNodeName(nodeName) with outputs named
  /// uniqueName(outputs[k]), and infers its output types.
  Expected<ir::Node *> emit(const std::string &op, const std::string &nodeName,
                            const std::vector<ir::Value *> &inputs,
                            const std::vector<std::string> &outputs,
                            const std::string &domain = ir::kDtcDomain,
                            const std::map<std::string, ir::Attribute> &attrs = {}) {
    std::vector<std::string> names;
    for (const std::string &o : outputs)
      names.push_back(graph_->uniqueName(o));
    ir::Node *n = graph_->addNode(op, inputs, names, domain, nodeName);
    n->setPhase(phase_);
    for (const auto &[key, a] : attrs)
      n->setAttr(key, a);
    DTC_RETURN_IF_ERROR(ops::inferNode(*n, *diags_));
    if (phase_ == ir::Phase::kOptimizer && !first_)
      first_ = n;
    return n;
  }

  /// Loss scaling (torch.cuda.amp.GradScaler.unscale_ and step): the gradients of the trained
  /// parameters carry the scale S (ir::kLossScaleValue, made by autodiff). Returns (finite,
  /// 1/S): finite (bool[]) is true when every gradient element is finite, found from each
  /// gradient's max and min (an infinity or NaN anywhere makes max * 0 + min * 0 NaN); data
  /// parallelism checks the all-reduced gradients, the same on every rank.
  Expected<std::pair<ir::Value *, ir::Value *>>
  checkScaledGradients(const std::vector<size_t> &trained, const std::vector<ir::Value *> &grads) {
    ir::Value *s = graph_->findValue(ir::kLossScaleValue);
    if (!s)
      return Status::error("optimizer", "loss scaling: autodiff must run first (no '" +
                                            std::string(ir::kLossScaleValue) + "')");
    std::vector<ir::Value *> maxs, mins;
    const std::map<std::string, ir::Attribute> all = {{"keepdims", ir::Attribute(int64_t{0})}};
    for (size_t i : trained) {
      const std::string base = "optimizer/loss_scale/" + graph_->training().parameters[i]->name();
      DTC_ASSIGN_OR_RETURN(ir::Node * mx,
                           emit("ReduceMax", base + "/max", {grads[i]}, {base + "/max"}, "", all));
      DTC_ASSIGN_OR_RETURN(ir::Node * mn,
                           emit("ReduceMin", base + "/min", {grads[i]}, {base + "/min"}, "", all));
      maxs.push_back(mx->output(0));
      mins.push_back(mn->output(0));
    }
    DTC_ASSIGN_OR_RETURN(ir::Node * mx, emit("Max", "optimizer/loss_scale/max", maxs,
                                             {"optimizer/loss_scale/max"}, ""));
    DTC_ASSIGN_OR_RETURN(ir::Node * mn, emit("Min", "optimizer/loss_scale/min", mins,
                                             {"optimizer/loss_scale/min"}, ""));
    ir::Value *zero = constF32("optimizer/loss_scale/zero", 0.f);
    DTC_ASSIGN_OR_RETURN(ir::Value * a,
                         binary("Mul", "optimizer/loss_scale/max0", mx->output(0), zero));
    DTC_ASSIGN_OR_RETURN(ir::Value * b,
                         binary("Mul", "optimizer/loss_scale/min0", mn->output(0), zero));
    DTC_ASSIGN_OR_RETURN(ir::Value * z,
                         binary("Add", "optimizer/loss_scale/nan_if_overflow", a, b));
    DTC_ASSIGN_OR_RETURN(ir::Value * finite,
                         binary("Equal", "optimizer/loss_scale/finite", z, zero));
    DTC_ASSIGN_OR_RETURN(ir::Value * inv, binary("Div", "optimizer/loss_scale/inverse",
                                                 constF32("optimizer/loss_scale/one", 1.f), s));
    return std::make_pair(finite, inv);
  }

  /// Loss scaling after the updates: every update of a parameter or its optimizer state from
  /// st.updates[firstUpdate..] becomes Where(finite, new, old), so a skipped step leaves them
  /// (and Adam's step count `applied`) unchanged; the skipped-step count and, for a dynamic
  /// scale, GradScaler.update(): a skipped step halves the scale (log2 - 1, not below the
  /// smallest normal float) and resets the run
  /// of finite steps; `lossScaleWindow` finite steps in a row double it (log2 + 1). The counters
  /// are zero-initialized optimizer state listed with parameter `owner` (checkpointed with it);
  /// the count and the next scale are graph outputs (ir::kSkippedStepsOutput,
  /// ir::kLossScaleOutput) the trainer reports.
  Status skipAndUpdateScale(const TrainingConfig &cfg, ir::Value *finite, size_t firstUpdate,
                            ir::Value *applied, size_t owner) {
    ir::TrainingRoles &st = graph_->training();
    const std::string base = "optimizer/loss_scale";
    for (size_t u = firstUpdate, end = st.updates.size(); u < end; ++u) {
      ir::StateUpdate &up = st.updates[u];
      DTC_ASSIGN_OR_RETURN(ir::Node * w, emit("Where", up.state->name() + "/unless_skipped",
                                              {finite, up.next, up.state},
                                              {up.state->name() + "/unless_skipped"}, ""));
      st.updates[u].next = w->output(0);
    }
    std::vector<ir::Value *> &owned = st.optimizerState[owner];
    ir::Value *one = constF32(base + "/one", 1.f);
    DTC_ASSIGN_OR_RETURN(ir::Node * ff,
                         emit("Cast", base + "/finite_f32", {finite}, {base + "/finite_f32"}, "",
                              {{"to", ir::Attribute(int64_t{1})}}));
    DTC_ASSIGN_OR_RETURN(ir::Value * skipped1,
                         binary("Sub", base + "/skipped", one, ff->output(0)));
    if (applied) {
      DTC_ASSIGN_OR_RETURN(ir::Node * fi,
                           emit("Cast", base + "/finite_i64", {finite}, {base + "/finite_i64"}, "",
                                {{"to", ir::Attribute(int64_t{7})}}));
      DTC_ASSIGN_OR_RETURN(ir::Value * next,
                           binary("Add", applied->name() + "/next", applied, fi->output(0)));
      st.updates.push_back({applied, next});
      owned.push_back(applied);
    }
    ir::Value *count =
        zerosOf(std::string(ir::kSkippedStepsOutput) + ".count", ir::DType::kFloat32);
    DTC_ASSIGN_OR_RETURN(
        ir::Node * countNext,
        emit("Add", ir::kSkippedStepsOutput, {count, skipped1}, {ir::kSkippedStepsOutput}, ""));
    st.updates.push_back({count, countNext->output(0)});
    owned.push_back(count);
    graph_->addOutput(countNext->output(0));
    if (cfg.lossScaleMode() != "dynamic")
      return Status::ok();
    ir::Value *log2 = graph_->findValue(ir::kLossScaleLog2);
    if (!log2)
      return Status::error("optimizer", "loss scaling: autodiff must run first (no '" +
                                            std::string(ir::kLossScaleLog2) + "')");
    ir::Value *good =
        zerosOf(std::string(ir::kLossScaleValue) + ".good_steps", ir::DType::kFloat32);
    DTC_ASSIGN_OR_RETURN(ir::Value * good1, binary("Add", base + "/good_plus_one", good, one));
    DTC_ASSIGN_OR_RETURN(good1, binary("Mul", base + "/good_steps", good1, ff->output(0)));
    ir::Value *window = constF32(base + "/window", static_cast<float>(cfg.lossScaleWindow));
    DTC_ASSIGN_OR_RETURN(ir::Value * grow, binary("GreaterOrEqual", base + "/grow", good1, window));
    DTC_ASSIGN_OR_RETURN(ir::Node * goodNext,
                         emit("Where", base + "/good_steps_next",
                              {grow, constF32(base + "/zero_steps", 0.f), good1},
                              {base + "/good_steps_next"}, ""));
    DTC_ASSIGN_OR_RETURN(ir::Node * growF,
                         emit("Cast", base + "/grow_f32", {grow}, {base + "/grow_f32"}, "",
                              {{"to", ir::Attribute(int64_t{1})}}));
    DTC_ASSIGN_OR_RETURN(ir::Value * delta,
                         binary("Sub", base + "/log2_delta", growF->output(0), skipped1));
    // The scale never halves below the smallest normal float (FLT_MIN): dtc checks the scaled
    // gradients and folds 1/S into the update, so a scale that underflowed to 0 after a long run
    // of skipped steps (NaN batches under --allow-nonfinite-loss) would make every gradient 0,
    // "finite", and the update 0 * inf = NaN. init * 2^k >= FLT_MIN for k >= ceil(log2(FLT_MIN /
    // init)); TrainConfig keeps init >= FLT_MIN, so the bound is at most 0.
    const float minLog2 = static_cast<float>(std::ceil(
        std::log2(static_cast<double>(std::numeric_limits<float>::min()) / cfg.lossScaleInit)));
    // log2 + max(delta, min - log2): the state is read before its new value is computed.
    DTC_ASSIGN_OR_RETURN(ir::Value * room, binary("Sub", base + "/log2_room",
                                                  constF32(base + "/log2_min", minLog2), log2));
    DTC_ASSIGN_OR_RETURN(ir::Value * step, binary("Max", base + "/log2_step", delta, room));
    DTC_ASSIGN_OR_RETURN(ir::Value * log2Next, binary("Add", base + "/log2_next", log2, step));
    DTC_ASSIGN_OR_RETURN(ir::Value * factor,
                         binary("Pow", base + "/factor", constF32(base + "/two", 2.f), step));
    ir::Value *s = graph_->findValue(ir::kLossScaleValue);
    DTC_ASSIGN_OR_RETURN(ir::Node * sNext, emit("Mul", ir::kLossScaleOutput, {s, factor},
                                                {ir::kLossScaleOutput}, ""));
    graph_->addOutput(sNext->output(0));
    st.updates.push_back({good, goodNext->output(0)});
    st.updates.push_back({log2, log2Next});
    owned.push_back(good);
    owned.push_back(log2);
    return Status::ok();
  }

  /// op(a, b) of the default domain, one output named after the node.
  Expected<ir::Value *> binary(const std::string &op, const std::string &name, ir::Value *a,
                               ir::Value *b) {
    DTC_ASSIGN_OR_RETURN(ir::Node * n, emit(op, name, {a, b}, {name}, ""));
    return n->output(0);
  }

  ir::Value *constF32(const std::string &base, float v) {
    const std::string name = graph_->uniqueName(base);
    return graph_->addConstant(name, ir::TensorData::fromFloats(name, {}, {v}));
  }

  /// A zero-initialized scalar state of `dtype` (optimizer state: the runtime zero-fills it).
  ir::Value *zerosOf(const std::string &base, ir::DType dtype) {
    const std::string name = graph_->uniqueName(base);
    ir::Value *v = graph_->createValue(name);
    graph_->setInitializer(v, ir::TensorData::zeros(name, dtype, {}), /*isConstant=*/false);
    return v;
  }

  ir::Graph *graph_ = nullptr;
  Diagnostics *diags_ = nullptr;
  ir::Value *step_ = nullptr; ///< Adam's step input when not dtc::step (loss scaling)
  ir::Phase phase_ = ir::Phase::kBackward;
  ir::Node *first_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> createOptimizerPass() { return std::make_unique<OptimizerPass>(); }

} // namespace dtc::passes
