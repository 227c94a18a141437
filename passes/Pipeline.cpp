// Pipeline model parallelism (--strategy pp=S[,microbatches=M,schedule=gpipe|1f1b|zb-h1|
// interleaved[,virtual-stages=V]]; DESIGN.md section 6), in two passes around autodiff:
//
// pipeline (after attach-loss, before autodiff): splits each rank's batch into M micro-batches
// and unrolls the forward graph once per micro-batch (GPipe, Huang et al. 2019): every data input
// x[M*b, ...] is cut by M Slice nodes, clone k of the forward graph computes micro-batch k, the
// loss is the mean of the M micro-batch losses (so autodiff sums each parameter's M gradient
// parts with weight 1/M: the gradient of the mean loss over the rank's batch) and the prediction
// is their concatenation. Running statistics chain from one micro-batch to the next, as
// single-device training with --grad-accum-steps M updates them. The forward nodes are cut into
// S contiguous stages of the topological order balanced by estimated time (ops/Cost.h), or S * V
// virtual stages with the interleaved schedule (virtual stage v runs on pipeline rank v % S as
// its model chunk v / S); the loss falls on the last stage. Autodiff then puts every backward node
// on its forward node's stage and micro-batch (ops/Gradient.cpp).
//
// pipeline-comm (after optimizer): places the remaining nodes (optimizer updates, gradient
// all-reduces) on the stage of their inputs, checks that every parameter and state lives on one
// stage, replaces every value that crosses from stage s to stage t by an ai.dtc.Send on s and an
// ai.dtc.Recv on t (one per value and consuming stage, activations forward and their gradients
// backward; a skip connection goes straight to its consumer), and orders each stage's nodes by
// its schedule (passes/PipelineSchedule.h): the forward (F) and backward (B) blocks of the
// micro-batches in the schedule's order, receives at the start of their block, sends right after
// their producer, per-step nodes (sums over micro-batches) as soon as they are ready, the
// optimizer last. The node list becomes stage 0's schedule, then stage 1's, and so on; lowering
// (compiler/plan) turns each stage into one program. A simulation of the stages' orders (each
// receive waits for its send) rejects a deadlock.
#include "ops/Cost.h"
#include "ops/OpDef.h"
#include "ops/comm/Collective.h"
#include "passes/Pass.h"
#include "passes/Passes.h"
#include "passes/PipelineSchedule.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace dtc::passes {
namespace {

bool isRuntimeFed(const ir::Value *v) {
  return v->name() == ir::kLrInput || v->name() == ir::kStepInput || v->name() == ir::kRngInput ||
         v->name() == ir::kTpRankInput || v->name() == ir::kDpRankInput;
}

/// Estimated time of a node in arbitrary units, for balancing: the larger of its FLOPs and 8x
/// its bytes moved (a roofline with a machine balance of 8 FLOPs per byte, typical of CPUs), so
/// memory-bound ops count too. Nodes whose cost is unknown count as 1.
double estimatedTime(const ir::Node &n) {
  auto c = ops::nodeCost(n);
  if (!c)
    return 1;
  return std::max(1.0, std::max(c->flops, 8 * c->bytes()));
}

ir::Value *int64Constant(ir::Graph &g, const std::string &base, std::vector<int64_t> values) {
  const std::string name = g.uniqueName(base);
  const int64_t n = static_cast<int64_t>(values.size());
  return g.addConstant(name, ir::TensorData::fromInt64s(name, {n}, std::move(values)));
}

class PipelinePass : public Pass {
public:
  std::string name() const override { return "pipeline"; }
  std::string description() const override {
    return "pipeline parallelism: unroll the forward graph over the micro-batches and cut it "
           "into balanced stages";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training || !graph.training().loss)
      return Status::error("pipeline", "needs a training compilation with a loss (attach-loss "
                                       "runs first)");
    const Mesh &mesh = ctx.training->mesh;
    if (mesh.pp <= 1)
      return Status::ok();
    ir::TrainingRoles &st = graph.training();
    if (!st.gradients.empty() || st.optimizerBegin)
      return Status::error("pipeline", "must run before autodiff");
    graph_ = &graph;
    diags_ = &ctx.diags;
    const std::vector<ir::Node *> forward = graph.nodes();
    // Interleaved schedules cut the model into pp * V virtual stages (Node::stage), virtual
    // stage v running on pipeline rank v % pp.
    DTC_RETURN_IF_ERROR(ctx.training->ppCuts.empty()
                            ? assignStages(forward, mesh.stages(), *ctx.training)
                            : assignCuts(forward, ctx.training->ppCuts));
    for (ir::Node *n : forward)
      n->setMicroBatch(0);
    if (mesh.microbatches > 1)
      DTC_RETURN_IF_ERROR(
          unroll(forward, st, mesh.microbatches, static_cast<int>(mesh.stages() - 1)));
    return shareTiedParameters();
  }

private:
  /// Cuts the forward nodes (topological order) into `stages` contiguous parts balanced by
  /// estimated time; with --device-memory, only among the splits whose every stage's estimated
  /// memory (stageMemory) fits.
  Status assignStages(const std::vector<ir::Node *> &forward, int64_t stages,
                      const TrainingConfig &cfg) {
    std::vector<double> costs;
    for (const ir::Node *n : forward)
      costs.push_back(estimatedTime(*n));
    std::function<bool(size_t, size_t, size_t)> fits;
    std::vector<double> weightBytes, activationBytes;
    if (cfg.deviceMemory > 0) {
      memoryPerNode(forward, cfg, weightBytes, activationBytes);
      fits = [&](size_t part, size_t begin, size_t end) {
        return stageMemory(cfg, part, begin, end, weightBytes, activationBytes) <=
               static_cast<double>(cfg.deviceMemory) / static_cast<double>(cfg.mesh.virtualStages);
      };
    }
    if (forward.size() < static_cast<size_t>(stages))
      return Status::error("--strategy pp=" + std::to_string(stages),
                           "the model has " + std::to_string(forward.size()) +
                               " forward nodes, fewer than the stages: a stage would have "
                               "nothing to do");
    auto firsts = balanceStages(costs, stages, fits);
    if (!firsts && fits && forward.size() >= static_cast<size_t>(stages)) {
      // For the message: the fullest stage of the split balanced by memory alone.
      double least = std::numeric_limits<double>::infinity();
      auto peak = [&](const std::vector<size_t> &split) {
        double most = 0;
        for (size_t k = 0; k < split.size(); ++k)
          most = std::max(most, stageMemory(cfg, k, split[k],
                                            k + 1 < split.size() ? split[k + 1] : forward.size(),
                                            weightBytes, activationBytes));
        return most;
      };
      if (auto byMemory = balanceStages(memoryCosts(weightBytes, activationBytes), stages))
        least = peak(*byMemory);
      char text[320];
      std::snprintf(text, sizeof text,
                    "no split of the %zu forward nodes into %lld stages fits: splitting by "
                    "estimated memory (weights, gradients, optimizer state, activations in "
                    "flight), the fullest stage needs about %.1f KiB%s",
                    forward.size(), static_cast<long long>(stages), least / 1024,
                    cfg.mesh.virtualStages > 1 ? " per chunk" : "");
      return Status::error("--device-memory", std::string(text) +
                                                  "; use more stages or micro-batches, or a "
                                                  "smaller --batch-size");
    }
    if (!firsts)
      return Status::error("--strategy pp=" + std::to_string(stages),
                           "the model has " + std::to_string(forward.size()) +
                               " forward nodes: " + firsts.status().message());
    for (size_t s = 0; s < firsts->size(); ++s) {
      const size_t end = s + 1 < firsts->size() ? (*firsts)[s + 1] : forward.size();
      for (size_t i = (*firsts)[s]; i < end; ++i)
        forward[i]->setStage(static_cast<int>(s));
    }
    return Status::ok();
  }

  /// Prefix sums over the forward nodes, in bytes: the weights each is the first to read, with
  /// their gradient and optimizer state (Adam 2, SGD with momentum 1, accumulation 1 more), and
  /// its outputs (the activations one micro-batch keeps for the backward pass).
  static void memoryPerNode(const std::vector<ir::Node *> &forward, const TrainingConfig &cfg,
                            std::vector<double> &weights, std::vector<double> &activations) {
    const double copies = 2.0 + (cfg.optimizer == "sgd" ? (cfg.momentum > 0 ? 1 : 0) : 2) +
                          (cfg.gradAccumSteps > 1 ? 1 : 0);
    std::unordered_set<const ir::Value *> seen;
    weights.assign(forward.size() + 1, 0);
    activations.assign(forward.size() + 1, 0);
    auto bytes = [](const ir::Value *v) {
      auto n = v->shape().isStatic() ? v->shape().numElements() : std::nullopt;
      return n ? static_cast<double>(*n) * static_cast<double>(ir::dtypeSize(v->dtype())) : 0.0;
    };
    for (size_t i = 0; i < forward.size(); ++i) {
      weights[i + 1] = weights[i];
      activations[i + 1] = activations[i];
      for (const ir::Value *v : forward[i]->inputs())
        if (v && v->isParameter() && seen.insert(v).second)
          weights[i + 1] += copies * bytes(v);
      for (const ir::Value *v : forward[i]->outputs())
        if (v)
          activations[i + 1] += bytes(v);
    }
  }

  /// Micro-batches whose activations stage `part` keeps at once: GPipe all M; 1F1B S - s
  /// (PipeDream-Flush), ZB-H1 one more; interleaved (virtual stages) all M, as a bound.
  static double inFlight(const TrainingConfig &cfg, size_t part) {
    const int64_t S = cfg.mesh.pp, M = cfg.mesh.microbatches, s = static_cast<int64_t>(part);
    switch (cfg.mesh.schedule) {
    case PipelineSchedule::k1F1B:
      return static_cast<double>(std::min(S - s, M));
    case PipelineSchedule::kZBH1:
      return static_cast<double>(std::min(S - s + 1, M));
    default:
      return static_cast<double>(M);
    }
  }

  /// Estimated bytes of stage `part` holding forward nodes [begin, end); `weights` and
  /// `activations` are prefix sums (entry i: nodes [0, i)).
  static double stageMemory(const TrainingConfig &cfg, size_t part, size_t begin, size_t end,
                            const std::vector<double> &weights,
                            const std::vector<double> &activations) {
    return weights[end] - weights[begin] +
           (activations[end] - activations[begin]) * inFlight(cfg, part);
  }

  /// Per-node memory as balancing costs (weights plus one micro-batch's activations), from the
  /// prefix sums.
  static std::vector<double> memoryCosts(const std::vector<double> &weights,
                                         const std::vector<double> &activations) {
    std::vector<double> out(weights.size() - 1);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = weights[i + 1] - weights[i] + activations[i + 1] - activations[i];
    return out;
  }

  /// Stages ending after the nodes `cuts` name (a node, or a tensor: its producer), which must
  /// come in topological order and leave every stage a node.
  Status assignCuts(const std::vector<ir::Node *> &forward, const std::vector<std::string> &cuts) {
    std::unordered_map<const ir::Node *, size_t> position;
    for (size_t i = 0; i < forward.size(); ++i)
      position[forward[i]] = i;
    std::vector<size_t> ends;
    for (const std::string &c : cuts) {
      // A node by its name (or, for BatchNormalization and Dropout, the name of the
      // training-mode node that replaced it), or the node computing a tensor.
      const ir::Node *n = graph_->findNode(c);
      if (!n)
        n = graph_->findNode(c + "/train");
      if (!n)
        if (const ir::Value *v = graph_->findValue(c))
          n = v->producer();
      if (!n || !position.count(n))
        return Status::error("--pp-cuts " + c,
                             "is neither a forward node nor a tensor a forward node computes "
                             "(nodes that compute constants are folded away at compile time)");
      const size_t end = position.at(n) + 1;
      if ((!ends.empty() && end <= ends.back()) || end >= forward.size())
        return Status::error("--pp-cuts " + c,
                             "leaves a stage without nodes (cuts go in topological order, and "
                             "the last stage needs the nodes after the last cut)");
      ends.push_back(end);
    }
    ends.push_back(forward.size());
    size_t begin = 0;
    for (size_t s = 0; s < ends.size(); ++s) {
      for (size_t i = begin; i < ends[s]; ++i)
        forward[i]->setStage(static_cast<int>(s));
      begin = ends[s];
    }
    return Status::ok();
  }

  /// A parameter read on several stages (tied input and output embeddings) stays one tensor on
  /// the first of them: the other stages read an Identity of it made there once per step (sent
  /// to them), so autodiff sums every stage's gradient into the one parameter, which one
  /// optimizer updates (single-copy semantics, as Megatron-LM's embedding group keeps them
  /// equal by all-reducing their gradients).
  Status shareTiedParameters() {
    ir::Graph &g = *graph_;
    for (ir::Value *p : g.initializers()) {
      if (!p->isParameter())
        continue;
      int home = -1;
      for (const ir::Use &u : p->uses())
        home = home < 0 ? u.node->stage() : std::min(home, u.node->stage());
      std::map<int, ir::Value *> copies;
      for (const ir::Use &u : std::vector<ir::Use>(p->uses())) {
        const int t = u.node->stage();
        if (t == home)
          continue;
        if (!copies.count(t)) {
          const std::string name = g.uniqueName(p->name() + "/for_stage" + std::to_string(t));
          ir::Node *id = g.insertNodeBefore(u.node, "Identity", {p}, {name}, "", name);
          id->setStage(home);
          DTC_RETURN_IF_ERROR(ops::inferNode(*id, *diags_));
          copies[t] = id->output(0);
          diags_->note("parameter '" + p->name() + "'",
                       "is used on pipeline stages " + std::to_string(home) + " and " +
                           std::to_string(t) + ": it lives on stage " + std::to_string(home) +
                           ", which sends it to stage " + std::to_string(t) +
                           " once per step and receives its gradient");
        }
        u.node->setInput(u.inputIndex, copies.at(t));
      }
    }
    return Status::ok();
  }

  /// The forward nodes become micro-batch 0; clones 1..M-1 follow; data inputs grow to M
  /// micro-batches and are sliced; loss and prediction combine the clones' (on `lastStage`).
  Status unroll(const std::vector<ir::Node *> &forward, ir::TrainingRoles &st, int64_t M,
                int lastStage) {
    ir::Graph &g = *graph_;
    // Data inputs: x[b, ...] becomes x[M*b, ...]; slice k feeds clone k.
    std::vector<std::pair<ir::Value *, std::vector<ir::Value *>>> slices;
    ir::Node *front = forward.empty() ? nullptr : forward.front();
    for (ir::Value *x : std::vector<ir::Value *>(g.inputs())) {
      if (x->isInitializer() || isRuntimeFed(x) || !x->hasUses())
        continue;
      if (!x->shape().isStatic() || x->shape().rank() < 1)
        return Status::error("input '" + x->name() + "'",
                             "has type " + x->type().str() +
                                 "; pipeline micro-batches split a static batch axis 0");
      std::vector<int64_t> dims = x->shape().staticSizes();
      const int64_t b = dims[0];
      const std::vector<ir::Use> uses = x->uses();
      dims[0] = b * M;
      x->setType(ir::TensorType{x->dtype(), ir::Shape::ofStatic(dims)});
      std::vector<ir::Value *> parts;
      for (int64_t k = 0; k < M; ++k) {
        const std::string name = g.uniqueName(x->name() + "/microbatch" + std::to_string(k));
        std::vector<ir::Value *> ins = {x, int64Constant(g, name + "/starts", {k * b}),
                                        int64Constant(g, name + "/ends", {(k + 1) * b}),
                                        int64Constant(g, name + "/axes", {0})};
        ir::Node *s = front ? g.insertNodeBefore(front, "Slice", ins, {name}, "", name)
                            : g.addNode("Slice", ins, {name}, "", name);
        s->setMicroBatch(static_cast<int>(k));
        int stage = lastStage;
        for (const ir::Use &u : uses)
          stage = std::min(stage, u.node->stage());
        s->setStage(stage);
        DTC_RETURN_IF_ERROR(ops::inferNode(*s, *diags_));
        parts.push_back(s->output(0));
      }
      for (const ir::Use &u : uses)
        u.node->setInput(u.inputIndex, parts[0]);
      slices.emplace_back(x, std::move(parts));
    }

    // Dropout: micro-batch k draws its own masks (stream numbers after every clone's before).
    int64_t streams = 0;
    for (const ir::Node *n : forward)
      if (n->domain() == ir::kDtcDomain && n->opType() == "DropoutTraining")
        streams = std::max(streams, n->attrInt("stream", 0) + 1);

    std::vector<ir::Value *> losses = {st.loss}, predictions = {st.prediction};
    std::unordered_map<const ir::Value *, ir::Value *> previous; // clone k-1's values
    for (const ir::Node *n : forward)
      for (ir::Value *o : n->outputs())
        if (o)
          previous[o] = o;
    for (int64_t k = 1; k < M; ++k) {
      const std::string suffix = "/microbatch" + std::to_string(k);
      std::unordered_map<const ir::Value *, ir::Value *> map;
      for (auto &[x, parts] : slices)
        map[parts[0]] = parts[static_cast<size_t>(k)];
      // Running statistics: micro-batch k reads what micro-batch k-1 left.
      for (const ir::StateUpdate &u : st.updates)
        map[u.state] = previous.at(u.next);
      std::unordered_map<const ir::Value *, ir::Value *> mine;
      for (const ir::Node *n : forward) {
        std::vector<ir::Value *> ins;
        for (ir::Value *v : n->inputs()) {
          auto it = v ? map.find(v) : map.end();
          ins.push_back(it != map.end() ? it->second : v);
        }
        std::vector<std::string> outs;
        for (const ir::Value *o : n->outputs())
          outs.push_back(o ? g.uniqueName(o->name() + suffix) : "");
        ir::Node *c =
            g.addNode(n->opType(), ins, outs, n->domain(), g.uniqueNodeName(n->name() + suffix));
        for (const auto &[key, a] : n->attributes())
          c->setAttr(key, a);
        if (n->domain() == ir::kDtcDomain && n->opType() == "DropoutTraining")
          c->setAttr("stream", ir::Attribute(n->attrInt("stream", 0) + k * streams));
        c->setPhase(n->phase());
        c->setStage(n->stage());
        c->setMicroBatch(static_cast<int>(k));
        for (size_t i = 0; i < n->numOutputs(); ++i)
          if (n->output(i)) {
            c->output(i)->setType(n->output(i)->type());
            map[n->output(i)] = c->output(i);
            mine[n->output(i)] = c->output(i);
          }
      }
      losses.push_back(map.at(st.loss));
      if (st.prediction)
        predictions.push_back(map.at(st.prediction));
      previous = std::move(mine);
    }
    for (ir::StateUpdate &u : st.updates)
      u.next = previous.at(u.next);

    // loss = (l_0 + ... + l_{M-1}) * (1/M), on the last stage, once per step.
    auto stepNode = [&](const std::string &op, const std::vector<ir::Value *> &ins,
                        const std::string &base) -> Expected<ir::Node *> {
      const std::string name = g.uniqueName(base);
      ir::Node *n = g.addNode(op, ins, {name}, "", name);
      n->setStage(lastStage);
      DTC_RETURN_IF_ERROR(ops::inferNode(*n, *diags_));
      return n;
    };
    if (st.loss->dtype() != ir::DType::kFloat32)
      return Status::error("loss '" + st.loss->name() + "'",
                           "is " + st.loss->type().str() + "; pipelines average f32 losses");
    ir::Value *sum = losses[0];
    for (size_t k = 1; k < losses.size(); ++k) {
      DTC_ASSIGN_OR_RETURN(
          ir::Node * add,
          stepNode("Add", {sum, losses[k]}, "pipeline/loss_sum/microbatch" + std::to_string(k)));
      sum = add->output(0);
    }
    const std::string invName = g.uniqueName("pipeline/inverse_microbatches");
    ir::Value *inv = g.addConstant(
        invName, ir::TensorData::fromFloats(invName, {}, {1.f / static_cast<float>(M)}));
    DTC_ASSIGN_OR_RETURN(ir::Node * mean, stepNode("Mul", {sum, inv}, "pipeline/loss"));
    ir::Value *prediction = nullptr;
    if (st.prediction && st.prediction->shape().rank() >= 1) {
      DTC_ASSIGN_OR_RETURN(ir::Node * cat, stepNode("Concat", predictions, "pipeline/prediction"));
      cat->setAttr("axis", ir::Attribute(int64_t{0}));
      DTC_RETURN_IF_ERROR(ops::inferNode(*cat, *diags_));
      prediction = cat->output(0);
    }
    std::vector<ir::Value *> outputs;
    for (ir::Value *o : g.outputs()) {
      if (o == st.loss)
        outputs.push_back(mean->output(0));
      else if (o == st.prediction && prediction)
        outputs.push_back(prediction);
      else if (o != st.prediction)
        return Status::error("output '" + o->name() + "'",
                             "pipelines combine the loss and the prediction over the "
                             "micro-batches, not other outputs");
    }
    g.setOutputs(outputs);
    st.loss = mean->output(0);
    st.prediction = prediction;
    return Status::ok();
  }

  ir::Graph *graph_ = nullptr;
  Diagnostics *diags_ = nullptr;
};

class PipelineCommPass : public Pass {
public:
  std::string name() const override { return "pipeline-comm"; }
  std::string description() const override {
    return "pipeline parallelism: send/recv where values cross stages, each stage's nodes in "
           "its schedule's order, deadlock check";
  }

  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("pipeline-comm", "runs on training graphs only (after optimizer)");
    const Mesh &mesh = ctx.training->mesh;
    if (mesh.pp <= 1)
      return Status::ok();
    const int S = static_cast<int>(mesh.pp), N = static_cast<int>(mesh.stages());
    DTC_RETURN_IF_ERROR(placeRemaining(graph, N));
    DTC_RETURN_IF_ERROR(checkResidence(graph));
    DTC_RETURN_IF_ERROR(insertTransfers(graph, S, N, graph.training(), ctx.diags));
    if (mesh.schedule == PipelineSchedule::kZBH1)
      markWeightGradients(graph);
    const PipelineScheduleTable table =
        makePipelineSchedule(mesh.schedule, mesh.pp, mesh.microbatches, mesh.virtualStages);
    DTC_ASSIGN_OR_RETURN(auto orders, scheduleStages(graph, S, N, table));
    DTC_RETURN_IF_ERROR(checkNoDeadlock(orders));
    std::vector<ir::Node *> all;
    for (const auto &o : orders)
      all.insert(all.end(), o.begin(), o.end());
    return graph.reorderNodes(all);
  }

private:
  /// Nodes added after the pipeline pass without a stage (optimizer updates, all-reduces) go to
  /// the stage of the parameter they read (an update runs where its parameter lives, receiving
  /// what it needs, such as a gradient-clipping scale), else to the latest stage among their
  /// inputs' producers, or else to the stage of the nodes that use their initializer inputs.
  static Status placeRemaining(ir::Graph &graph, int S) {
    std::unordered_map<const ir::Value *, int> home; // parameter -> its forward users' stage
    for (const ir::Node *n : graph.nodes())
      if (n->stage() >= 0 && n->phase() == ir::Phase::kForward)
        for (const ir::Value *v : n->inputs())
          if (v && v->isParameter())
            home.emplace(v, n->stage());
    for (ir::Node *n : graph.nodes()) {
      if (n->stage() >= 0)
        continue;
      int s = -1;
      for (const ir::Value *v : n->inputs())
        if (auto it = v ? home.find(v) : home.end(); it != home.end())
          s = std::max(s, it->second);
      if (s >= 0) {
        n->setStage(s);
        continue;
      }
      for (const ir::Value *v : n->inputs())
        if (v && v->producer() && v->producer()->stage() >= 0)
          s = std::max(s, v->producer()->stage());
      if (s < 0)
        for (const ir::Value *v : n->inputs())
          if (v && v->isInitializer())
            for (const ir::Use &u : v->uses())
              if (u.node->stage() >= 0)
                s = std::max(s, u.node->stage());
      if (s < 0)
        s = S - 1; // reads only runtime inputs and constants
      n->setStage(s);
    }
    return Status::ok();
  }

  /// A parameter, optimizer state or running statistic is stored on one stage: every node that
  /// reads it runs there.
  static Status checkResidence(const ir::Graph &graph) {
    for (const ir::Value *v : graph.initializers()) {
      if (!v->isParameter())
        continue;
      std::set<int> stages;
      std::string where;
      for (const ir::Use &u : v->uses())
        if (stages.insert(u.node->stage()).second)
          where += (where.empty() ? "" : ", ") + std::string("stage ") +
                   std::to_string(u.node->stage()) + " ('" + u.node->name() + "')";
      if (stages.size() > 1)
        return Status::error("parameter '" + v->name() + "'",
                             "is used on several pipeline stages: " + where +
                                 "; tied weights across stages are not supported yet (cut "
                                 "elsewhere, or use fewer stages)");
    }
    return Status::ok();
  }

  /// Send on the producer's rank, Recv on each other rank that consumes the value (placed on the
  /// earliest consuming virtual stage there; with interleaving a value between two chunks of one
  /// rank needs no transfer); graph outputs are read on the last virtual stage `N` - 1. Ranks:
  /// virtual stage v runs on rank v % `S`.
  static Status insertTransfers(ir::Graph &graph, int S, int N, ir::TrainingRoles &st,
                                Diagnostics &diags) {
    int64_t tag = 0;
    const std::unordered_set<const ir::Value *> outputs(graph.outputs().begin(),
                                                        graph.outputs().end());
    const int lastRank = (N - 1) % S;
    for (ir::Node *n : graph.nodes()) {
      if (ops::isCollectiveOp(n->domain(), n->opType()) &&
          (n->opType() == "Send" || n->opType() == "Recv"))
        continue;
      const int from = n->stage() % S;
      for (ir::Value *v : n->outputs()) {
        if (!v)
          continue;
        struct Consumers {
          int stage = std::numeric_limits<int>::max(); // earliest consuming virtual stage
          std::vector<ir::Use> uses;
        };
        std::map<int, Consumers> byRank;
        for (const ir::Use &u : v->uses())
          if (u.node->stage() % S != from) {
            Consumers &c = byRank[u.node->stage() % S];
            c.stage = std::min(c.stage, u.node->stage());
            c.uses.push_back(u);
          }
        const bool output = outputs.count(v) && from != lastRank;
        if (output) {
          Consumers &c = byRank[lastRank];
          c.stage = std::min(c.stage, N - 1);
        }
        for (auto &[rank, consumers] : byRank) {
          const int t = consumers.stage;
          if (tag > ops::kMaxTransferTag)
            return Status::error("pipeline", "more than " +
                                                 std::to_string(ops::kMaxTransferTag + 1) +
                                                 " values cross stages (the tag limit)");
          if (!v->shape().isStatic())
            return Status::error("value '" + v->name() + "'",
                                 "crosses from stage " + std::to_string(n->stage()) + " to stage " +
                                     std::to_string(t) + " without a static shape");
          const std::string base = v->name() + "/to_stage" + std::to_string(t);
          ir::Node *send =
              graph.addNode("Send", {v}, {}, ir::kDtcDomain, graph.uniqueNodeName(base + "/Send"));
          const std::string recvName = graph.uniqueName(v->name() + "/recv" + std::to_string(t));
          ir::Node *recv = graph.addNode("Recv", {}, {recvName}, ir::kDtcDomain,
                                         graph.uniqueNodeName(base + "/Recv"));
          for (ir::Node *x : {send, recv}) {
            x->setPhase(n->phase());
            x->setMicroBatch(n->microBatch());
            x->setAttr("tag", ir::Attribute(tag));
          }
          send->setStage(n->stage());
          send->setAttr("peer", ir::Attribute(static_cast<int64_t>(rank)));
          recv->setStage(t);
          recv->setAttr("peer", ir::Attribute(static_cast<int64_t>(from)));
          recv->setAttr("dtype", ir::Attribute(static_cast<int64_t>(v->dtype())));
          recv->setAttr("shape", ir::Attribute(v->shape().staticSizes()));
          DTC_RETURN_IF_ERROR(ops::inferNode(*send, diags));
          DTC_RETURN_IF_ERROR(ops::inferNode(*recv, diags));
          for (const ir::Use &u : consumers.uses)
            u.node->setInput(u.inputIndex, recv->output(0));
          if (output && rank == lastRank) {
            std::vector<ir::Value *> outs = graph.outputs();
            for (ir::Value *&o : outs)
              if (o == v)
                o = recv->output(0);
            graph.setOutputs(outs);
            for (ir::Value **p : {&st.loss, &st.prediction})
              if (*p == v)
                *p = recv->output(0);
          }
          ++tag;
        }
      }
    }
    return Status::ok();
  }

  /// Zero-bubble split (Qi et al. 2023): a micro-batch's backward nodes that the gradients it
  /// sends to earlier stages do not need are its W part; the rest (what those sends need) its B
  /// part. A stage that sends no gradient (the first) has only W.
  static void markWeightGradients(ir::Graph &graph) {
    std::unordered_set<const ir::Node *> needed;
    std::vector<const ir::Node *> work;
    for (const ir::Node *n : graph.nodes())
      if (n->opType() == "Send" && n->domain() == ir::kDtcDomain &&
          n->phase() == ir::Phase::kBackward && needed.insert(n).second)
        work.push_back(n);
    while (!work.empty()) {
      const ir::Node *n = work.back();
      work.pop_back();
      for (const ir::Value *v : n->inputs()) {
        const ir::Node *p = v ? v->producer() : nullptr;
        if (p && p->stage() == n->stage() && p->phase() == ir::Phase::kBackward &&
            needed.insert(p).second)
          work.push_back(p);
      }
    }
    for (ir::Node *n : graph.nodes())
      if (n->phase() == ir::Phase::kBackward && n->microBatch() >= 0 && !needed.count(n))
        n->setWeightGradient(true);
  }

  /// Each rank's nodes in its schedule's order (list scheduling: among the nodes whose
  /// same-rank producers are placed, the one of the earliest block first; ties: sends first,
  /// then the current order). A node of virtual stage v (of `N`) runs on rank v % `S` in the
  /// block of its pass of chunk v / S. A receive of a micro-batch's block is posted at the
  /// block's start; a receive of a per-step value (a gradient summed over the micro-batches)
  /// right before its first reader, since it may arrive only after this rank's own blocks.
  static Expected<std::vector<std::vector<ir::Node *>>>
  scheduleStages(const ir::Graph &graph, int S, int N, const PipelineScheduleTable &table) {
    const std::vector<ir::Node *> nodes = graph.nodes();
    std::vector<std::vector<ir::Node *>> orders(static_cast<size_t>(S));
    struct Key {
      int64_t block;
      int send;
      size_t position;
      bool operator>(const Key &o) const {
        return std::tie(block, send, position) > std::tie(o.block, o.send, o.position);
      }
    };
    constexpr int64_t kLast = 1 << 30;
    std::unordered_map<const ir::Node *, Key> key;
    std::unordered_map<const ir::Node *, size_t> pending;
    // Each rank's slots by (kind, micro-batch, chunk) -> their first position, looked up per
    // node (a search of the list per node is quadratic in the micro-batches).
    std::vector<std::map<std::tuple<int, int64_t, int64_t>, int64_t>> slotIndex(table.size());
    for (size_t r = 0; r < table.size(); ++r)
      for (size_t k = 0; k < table[r].size(); ++k)
        slotIndex[r].emplace(
            std::make_tuple(static_cast<int>(table[r][k].kind), table[r][k].microbatch,
                            table[r][k].chunk),
            static_cast<int64_t>(k));
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::Node *n = nodes[i];
      if (n->stage() < 0 || n->stage() >= N)
        return Status::error(n->where(), "has no pipeline stage");
      int64_t block = -1;
      if (n->phase() == ir::Phase::kOptimizer) {
        block = kLast;
      } else if (n->microBatch() >= 0) {
        const PipelineOp want{n->phase() == ir::Phase::kForward ? PipelineOp::kForward
                              : n->isWeightGradient()           ? PipelineOp::kWeight
                                                                : PipelineOp::kBackward,
                              n->microBatch(), n->stage() / S};
        const auto &slots = slotIndex[static_cast<size_t>(n->stage() % S)];
        auto it =
            slots.find(std::make_tuple(static_cast<int>(want.kind), want.microbatch, want.chunk));
        if (it == slots.end())
          return Status::error(n->where(), "its pass " + pipelineOpText(want) +
                                               " is not in stage " +
                                               std::to_string(n->stage() % S) + "'s schedule");
        block = it->second;
      }
      key[n] = Key{block, n->opType() == "Send" ? 0 : 1, i};
    }
    auto lazy = [&](const ir::Node *n) {
      return n->opType() == "Recv" && n->domain() == ir::kDtcDomain && key.at(n).block < 0;
    };
    for (const ir::Node *n : nodes) {
      std::unordered_set<const ir::Node *> producers;
      for (const ir::Value *v : n->inputs())
        if (v && v->producer() && !lazy(v->producer()))
          producers.insert(v->producer());
      pending[n] = producers.size();
    }
    using Entry = std::pair<Key, const ir::Node *>;
    auto cmp = [](const Entry &a, const Entry &b) { return a.first > b.first; };
    std::vector<std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)>> ready(
        static_cast<size_t>(S), std::priority_queue<Entry, std::vector<Entry>, decltype(cmp)>(cmp));
    for (const ir::Node *n : nodes)
      if (pending[n] == 0 && !lazy(n))
        ready[static_cast<size_t>(n->stage() % S)].push({key[n], n});
    std::unordered_set<const ir::Node *> placedLazy;
    for (int s = 0; s < S; ++s) {
      auto &q = ready[static_cast<size_t>(s)];
      while (!q.empty()) {
        const ir::Node *n = q.top().second;
        q.pop();
        for (const ir::Value *v : n->inputs())
          if (v && v->producer() && lazy(v->producer()) && placedLazy.insert(v->producer()).second)
            orders[static_cast<size_t>(s)].push_back(const_cast<ir::Node *>(v->producer()));
        orders[static_cast<size_t>(s)].push_back(const_cast<ir::Node *>(n));
        std::unordered_set<const ir::Node *> consumers;
        for (const ir::Value *out : n->outputs())
          if (out)
            for (const ir::Use &u : out->uses())
              consumers.insert(u.node);
        for (const ir::Node *c : consumers)
          if (--pending[c] == 0) {
            if (c->stage() % S != s)
              return Status::error(c->where(), "reads a value of stage " + std::to_string(s) +
                                                   " without a transfer");
            q.push({key[c], c});
          }
      }
      // Receives nothing on the stage reads (graph outputs) end the stage.
      for (const ir::Node *n : nodes)
        if (n->stage() % S == s && lazy(n) && placedLazy.insert(n).second)
          orders[static_cast<size_t>(s)].push_back(const_cast<ir::Node *>(n));
    }
    size_t placed = 0;
    for (const auto &o : orders)
      placed += o.size();
    if (placed != nodes.size())
      return Status::error("pipeline", "the graph has a cycle");
    return orders;
  }

  /// Runs the stages' orders as the runtime would (a send never blocks, a receive waits for its
  /// send); an error names what every blocked stage waits for.
  static Status checkNoDeadlock(const std::vector<std::vector<ir::Node *>> &orders) {
    std::set<int64_t> sent;
    std::vector<size_t> next(orders.size(), 0);
    size_t remaining = 0;
    for (const auto &o : orders)
      remaining += o.size();
    while (remaining > 0) {
      bool progressed = false;
      for (size_t s = 0; s < orders.size(); ++s)
        while (next[s] < orders[s].size()) {
          const ir::Node *n = orders[s][next[s]];
          if (n->opType() == "Recv" && !sent.count(n->attrInt("tag", -1)))
            break;
          if (n->opType() == "Send")
            sent.insert(n->attrInt("tag", -1));
          ++next[s];
          --remaining;
          progressed = true;
        }
      if (!progressed) {
        std::string what;
        for (size_t s = 0; s < orders.size(); ++s)
          if (next[s] < orders[s].size()) {
            const ir::Node *n = orders[s][next[s]];
            what += (what.empty() ? "" : "; ") + std::string("stage ") + std::to_string(s) +
                    " waits at '" + n->name() + "' for stage " +
                    std::to_string(n->attrInt("peer", -1));
          }
        return Status::error("pipeline schedule", "deadlocks: " + what);
      }
    }
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<Pass> createPipelinePass() { return std::make_unique<PipelinePass>(); }
std::unique_ptr<Pass> createPipelineCommPass() { return std::make_unique<PipelineCommPass>(); }

} // namespace dtc::passes
