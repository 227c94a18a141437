// One program per pipeline stage (detail::lowerPipeline, see LoweringInternal.h): each stage
// becomes a graph of its own (the pipeline-comm pass replaced every value crossing stages by
// Send/Recv), lowered like a single program; the plan then checks that every send has its
// receive.
#include "compiler/plan/LoweringInternal.h"
#include "compiler/plan/Parallel.h"

#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

namespace dtc::plan {

namespace {

/// The nodes of pipeline rank `s` (`nodes`: those of its virtual stages s, s + pp, ...; in graph
/// order, which the pipeline-comm pass made the rank's schedule) with the inputs, initializers
/// and outputs they use. Values crossing ranks were replaced by Send/Recv, so a rank reads only its
/// own values, initializers and inputs. The stage graph's training roles are the graph's restricted
/// to the rank.
Expected<std::unique_ptr<ir::Graph>> extractStage(const ir::Graph &graph, int s,
                                                  const std::vector<const ir::Node *> &nodes) {
  const ir::TrainingRoles &st = graph.training();
  auto out = std::make_unique<ir::Graph>();
  ir::Graph &g = *out;
  g.setName(graph.name() + "/stage" + std::to_string(s));
  g.modelInfo() = graph.modelInfo();
  for (const auto &[domain, version] : graph.opsets())
    g.setOpset(domain, version);
  std::unordered_map<const ir::Value *, ir::Value *> map;
  auto use = [&](ir::Value *v, const ir::Node &n) -> Expected<ir::Value *> {
    if (!v)
      return static_cast<ir::Value *>(nullptr);
    if (auto it = map.find(v); it != map.end())
      return it->second;
    if (!v->isInitializer() && !v->isGraphInput())
      return Status::error(n.where(), "stage " + std::to_string(s) + " reads '" + v->name() +
                                          "' of another stage without a transfer");
    ir::Value *c = g.createValue(v->name(), v->type());
    if (v->isInitializer()) {
      g.setInitializer(c, v->initializer(), v->isConstant());
      // A tensor-parallel shard keeps its local type (the initializer holds the whole tensor).
      c->setType(v->type());
      c->setShard(v->shard());
    }
    map[v] = c;
    return c;
  };
  for (const ir::Node *n : nodes) {
    std::vector<ir::Value *> ins;
    for (ir::Value *v : n->inputs()) {
      DTC_ASSIGN_OR_RETURN(ir::Value * c, use(v, *n));
      ins.push_back(c);
    }
    std::vector<std::string> outs;
    for (const ir::Value *o : n->outputs())
      outs.push_back(o ? o->name() : "");
    ir::Node *c = g.addNode(n->opType(), ins, outs, n->domain(), n->name());
    for (const auto &[key, a] : n->attributes())
      c->setAttr(key, a);
    c->setPhase(n->phase());
    c->setStage(n->stage());
    c->setMicroBatch(n->microBatch());
    c->setWeightGradient(n->isWeightGradient());
    for (size_t i = 0; i < n->numOutputs(); ++i)
      if (n->output(i)) {
        c->output(i)->setType(n->output(i)->type());
        map[n->output(i)] = c->output(i);
      }
  }
  for (ir::Value *v : graph.inputs())
    if (!v->isInitializer() && map.count(v))
      g.addInput(map.at(v));
  for (ir::Value *v : graph.outputs())
    if (map.count(v))
      g.addOutput(map.at(v));
  auto mapped = [&](const ir::Value *v) -> ir::Value * {
    auto it = v ? map.find(v) : map.end();
    return it == map.end() ? nullptr : it->second;
  };
  ir::TrainingRoles &t = g.training();
  t.loss = mapped(st.loss);
  t.prediction = mapped(st.prediction);
  t.label = mapped(st.label);
  t.lr = mapped(st.lr);
  t.step = mapped(st.step);
  t.rng = mapped(st.rng);
  t.tpRank = mapped(st.tpRank);
  t.dpRank = mapped(st.dpRank);
  std::unordered_map<size_t, size_t> index; // parameter index in st -> in t
  for (size_t i = 0; i < st.parameters.size(); ++i) {
    ir::Value *p = mapped(st.parameters[i]);
    if (!p)
      continue;
    index[i] = t.parameters.size();
    ir::Value *grad = st.gradients[i] ? mapped(st.gradients[i]) : nullptr;
    if (st.gradients[i] && !grad)
      return Status::error("parameter '" + p->name() + "'", "lives on stage " + std::to_string(s) +
                                                                ", its gradient on another stage");
    t.parameters.push_back(p);
    t.gradients.push_back(grad);
    std::vector<ir::Value *> states;
    if (i < st.optimizerState.size())
      for (const ir::Value *v : st.optimizerState[i])
        if (ir::Value *m = mapped(v))
          states.push_back(m);
    t.optimizerState.push_back(std::move(states));
  }
  for (const ir::StateUpdate &u : st.updates)
    if (ir::Value *state = mapped(u.state)) {
      ir::Value *next = mapped(u.next);
      if (!next)
        return Status::error("state '" + u.state->name() + "'",
                             "lives on stage " + std::to_string(s) + ", its new value '" +
                                 u.next->name() + "' on another stage");
      t.updates.push_back({state, next});
    }
  // ZeRO stage 2: this stage's reduce-scattered buckets (a bucket holds one stage's gradients).
  for (const ir::GradientShard &b : st.gradientShards)
    if (ir::Value *shard = mapped(b.shard)) {
      ir::GradientShard local{{}, shard};
      for (size_t m : b.members) {
        if (!index.count(m))
          return Status::error("gradient shard '" + b.shard->name() + "'",
                               "lives on stage " + std::to_string(s) + ", parameter '" +
                                   st.parameters[m]->name() + "' on another stage");
        local.members.push_back(index.at(m));
      }
      t.gradientShards.push_back(std::move(local));
    }
  for (ir::Node *n : g.nodes())
    if (n->phase() == ir::Phase::kOptimizer) {
      t.optimizerBegin = n;
      break;
    }
  return out;
}

/// Every send of a stage's program has its receive, of the same size, in the peer stage's
/// program (pp groups list the stages in order: the peer is the stage's program index).
Status checkTransfers(const Plan &plan) {
  struct End {
    int from, to;
    int64_t tag;
    bool operator<(const End &o) const {
      return std::tie(from, to, tag) < std::tie(o.from, o.to, o.tag);
    }
  };
  std::map<End, uint64_t> sends, recvs;
  for (int s = 0; s < plan.programs_size(); ++s) {
    const RankProgram &p = plan.programs(s);
    for (const Instruction &in : p.instructions()) {
      if (!in.has_collective())
        continue;
      const Collective &c = in.collective();
      if (c.kind() == COLLECTIVE_SEND)
        sends[{s, c.peer(), c.tag()}] = p.buffers(c.inputs(0)).size_bytes();
      else if (c.kind() == COLLECTIVE_RECV)
        recvs[{c.peer(), s, c.tag()}] = p.buffers(c.outputs(0)).size_bytes();
    }
  }
  for (const auto &[e, bytes] : sends) {
    auto it = recvs.find(e);
    if (it == recvs.end() || it->second != bytes)
      return Status::error(
          "pipeline",
          "stage " + std::to_string(e.from) + " sends tag " + std::to_string(e.tag) + " to stage " +
              std::to_string(e.to) +
              (it == recvs.end() ? ", which does not receive it" : " with another size"));
  }
  if (sends.size() != recvs.size())
    return Status::error("pipeline", "a stage receives a value no stage sends");
  return Status::ok();
}

} // namespace

Expected<Plan> detail::lowerPipeline(const ir::Graph &graph, const TrainingConfig &cfg,
                                     const LowerOptions &opts) {
  const int pp = static_cast<int>(cfg.mesh.pp);
  std::vector<std::vector<const ir::Node *>> nodesOf(static_cast<size_t>(pp));
  for (const ir::Node *n : graph.nodes())
    if (n->stage() >= 0)
      nodesOf[static_cast<size_t>(n->stage() % pp)].push_back(n);
  // The stages are extracted and lowered on several threads (each reads the graph and writes
  // only its own plan); errors are reported as the first failing stage's, as when in order.
  std::vector<std::optional<Plan>> lowered(static_cast<size_t>(pp));
  DTC_RETURN_IF_ERROR(parallelFor(lowered.size(), compileThreads(), [&](size_t s) -> Status {
    const std::string where = "pipeline stage " + std::to_string(s);
    if (nodesOf[s].empty())
      return Status::error(where, "has nothing to do");
    DTC_ASSIGN_OR_RETURN(std::unique_ptr<ir::Graph> stage,
                         extractStage(graph, static_cast<int>(s), nodesOf[s]));
    auto p = detail::lowerProgram(*stage, opts, &cfg, /*finish=*/false);
    if (!p)
      return Status::error(where, p.status().message());
    lowered[s] = std::move(*p);
    return Status::ok();
  }));
  Plan plan;
  int collectives = 0;
  for (size_t s = 0; s < lowered.size(); ++s) {
    Plan &p = *lowered[s];
    RankProgram rp = std::move(*p.mutable_programs(0));
    Training &tr = *rp.mutable_training();
    // Forward and backward passes of the micro-batches interleave: validation runs the whole
    // micro-batch part (forward_end 0); a stage without parameters has an empty optimizer part.
    tr.set_forward_end(0);
    if (tr.optimizer_begin() < 0)
      tr.set_optimizer_begin(rp.instructions_size());
    for (const Instruction &in : rp.instructions())
      collectives += in.has_collective();
    if (s == 0) { // the plan-wide parts, without copying stage 0's program
      p.clear_programs();
      plan = std::move(p);
    }
    *plan.add_programs() = std::move(rp);
  }
  DTC_RETURN_IF_ERROR(checkTransfers(plan));
  DTC_RETURN_IF_ERROR(
      detail::finishPlan(plan, graph, opts, &cfg, collectives,
                         [](const MeshCoord &c) { return static_cast<int>(c.pp); }));
  return plan;
}

} // namespace dtc::plan
