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
// gradient is made.
#include "ops/OpDef.h"
#include "passes/DataParallel.h"
#include "passes/Pass.h"

#include <unordered_map>

#include <cmath>

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
    if (k > 1 && allReduced && !trained.empty()) {
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
    ir::Value *scale = nullptr;
    if (cfg.clipGradNorm > 0.f && !trained.empty()) {
      // Tensor parallelism: a split gradient's squares are summed over the tp group (each
      // rank holds one shard); a replicated one's are the same on every rank, counted once.
      std::vector<ir::Value *> all, split;
      for (size_t i : trained)
        (st.parameters[i]->shard().isSplit() ? split : all).push_back(grads[i]);
      ir::Value *sumSq = nullptr;
      if (!all.empty()) {
        DTC_ASSIGN_OR_RETURN(ir::Node * sum, emit("SumSquares", "optimizer/grad_sum_squares", all,
                                                  {"optimizer/grad_sum_squares"}));
        sumSq = sum->output(0);
      }
      ir::Value *const replicatedSum = sumSq;
      if (!split.empty()) {
        DTC_ASSIGN_OR_RETURN(ir::Node * part, emit("SumSquares", "optimizer/grad_sum_squares_tp",
                                                   split, {"optimizer/grad_sum_squares_tp"}));
        DTC_ASSIGN_OR_RETURN(ir::Node * reduced,
                             emit("AllReduce", "optimizer/grad_sum_squares_tp/AllReduce",
                                  {part->output(0)}, {"optimizer/grad_sum_squares_tp/reduced"},
                                  ir::kDtcDomain,
                                  {{"op", ir::Attribute("sum")}, {"group", ir::Attribute("tp")}}));
        sumSq = reduced->output(0);
        if (!all.empty()) {
          DTC_ASSIGN_OR_RETURN(ir::Node * total, emit("Add", "optimizer/grad_sum_squares_total",
                                                      {replicatedSum, reduced->output(0)},
                                                      {"optimizer/grad_sum_squares_total"}, ""));
          sumSq = total->output(0);
        }
      }
      DTC_ASSIGN_OR_RETURN(ir::Node * clip,
                           emit("ClipGradNormScale", "optimizer/grad_clip_scale", {sumSq},
                                {"optimizer/grad_clip_scale"}, ir::kDtcDomain,
                                {{"max_norm", ir::Attribute(cfg.clipGradNorm)},
                                 {"input_scale", ir::Attribute(invK)}}));
      scale = clip->output(0);
    } else if (k > 1) {
      const std::string name = graph.uniqueName("optimizer/grad_scale");
      scale = graph.addConstant(name, ir::TensorData::fromFloats(name, {}, {invK}));
    }

    for (size_t i : trained) {
      ir::Value *p = st.parameters[i];
      std::vector<ir::Value *> state;
      ir::Node *update = nullptr;
      if (cfg.optimizer == "sgd") {
        std::map<std::string, ir::Attribute> attrs = {
            {"momentum", ir::Attribute(cfg.momentum)},
            {"nesterov", ir::Attribute(int64_t{cfg.nesterov ? 1 : 0})},
            {"weight_decay", ir::Attribute(cfg.weightDecay)}};
        std::vector<std::string> outs = {p->name() + "/updated"};
        if (cfg.momentum != 0.f) {
          state.push_back(zeros(p->name() + ".momentum", *p));
          outs.push_back(state.back()->name() + "/updated");
        }
        std::vector<ir::Value *> ins = {p, grads[i], st.lr, state.empty() ? nullptr : state[0],
                                        scale};
        while (!ins.back())
          ins.pop_back();
        DTC_ASSIGN_OR_RETURN(update,
                             emit("SGD", p->name() + "/SGD", ins, outs, ir::kDtcDomain, attrs));
      } else {
        const std::string op = cfg.optimizer == "adam" ? "Adam" : "AdamW";
        state.push_back(zeros(p->name() + ".exp_avg", *p));
        state.push_back(zeros(p->name() + ".exp_avg_sq", *p));
        std::vector<ir::Value *> ins = {p, grads[i], st.lr, st.step, state[0], state[1]};
        if (scale)
          ins.push_back(scale);
        DTC_ASSIGN_OR_RETURN(update, emit(op, p->name() + "/" + op, ins,
                                          {p->name() + "/updated", state[0]->name() + "/updated",
                                           state[1]->name() + "/updated"},
                                          ir::kDtcDomain,
                                          {{"beta1", ir::Attribute(cfg.beta1)},
                                           {"beta2", ir::Attribute(cfg.beta2)},
                                           {"epsilon", ir::Attribute(cfg.eps)},
                                           {"weight_decay", ir::Attribute(cfg.weightDecay)}}));
      }
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
    st.optimizerBegin = first_;
    return Status::ok();
  }

private:
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

  ir::Graph *graph_ = nullptr;
  Diagnostics *diags_ = nullptr;
  ir::Phase phase_ = ir::Phase::kBackward;
  ir::Node *first_ = nullptr;
};

} // namespace

std::unique_ptr<Pass> createOptimizerPass() { return std::make_unique<OptimizerPass>(); }

} // namespace dtc::passes
