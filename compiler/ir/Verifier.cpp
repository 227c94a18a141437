// Graph verifier.
#include "compiler/ir/Verifier.h"

#include <unordered_set>

namespace dtc::ir {

namespace {

/// The training roles refer to values of this graph of the kinds each role needs.
Status verifyTraining(const Graph &g, const std::unordered_set<const Value *> &defined) {
  const TrainingRoles &t = g.training();
  if (t.empty())
    return Status::ok();
  Status bad = Status::ok();
  t.forEachSlot([&](Value *const &v) {
    if (v && bad.isOk() && !defined.count(v))
      bad = Status::error("training role value '" + v->name() + "'",
                          "is not defined in the graph");
  });
  DTC_RETURN_IF_ERROR(bad);
  for (const GradientShard &b : t.gradientShards)
    for (size_t m : b.members)
      if (m >= t.parameters.size())
        return Status::error(
            "gradient shard '" + (b.shard ? b.shard->name() : std::string("?")) + "'",
            "names parameter " + std::to_string(m) + " of " + std::to_string(t.parameters.size()));
  for (const Value *v : {t.label, t.lr, t.step, t.rng, t.tpRank, t.dpRank})
    if (v && !v->isGraphInput())
      return Status::error("training input '" + v->name() + "'", "is not a graph input");
  if (!t.gradients.empty() && t.gradients.size() != t.parameters.size())
    return Status::error("training roles", std::to_string(t.parameters.size()) +
                                               " trained parameters but " +
                                               std::to_string(t.gradients.size()) + " gradients");
  if (!t.optimizerState.empty() && t.optimizerState.size() != t.parameters.size())
    return Status::error("training roles",
                         std::to_string(t.parameters.size()) + " trained parameters but " +
                             std::to_string(t.optimizerState.size()) + " optimizer-state lists");
  for (size_t i = 0; i < t.parameters.size(); ++i) {
    const Value *p = t.parameters[i];
    if (!p || !p->isParameter())
      return Status::error("trained parameter '" + (p ? p->name() : std::string("?")) + "'",
                           "is not a parameter initializer");
    const Value *grad = i < t.gradients.size() ? t.gradients[i] : nullptr;
    if (grad && grad->type().dtype != p->type().dtype)
      return Status::error("gradient '" + grad->name() + "'",
                           "has dtype " + grad->type().str() + " but its parameter '" +
                               p->name() + "' is " + p->type().str());
  }
  for (const ir::StateUpdate &u : t.updates) {
    if (!u.state || !u.next)
      return Status::error("training roles", "a state update without its state or next value");
    if (!u.state->isInitializer())
      return Status::error("state '" + u.state->name() + "'", "is updated but not an initializer");
    if (u.state->type().dtype != u.next->type().dtype)
      return Status::error("state '" + u.state->name() + "'",
                           "is " + u.state->type().str() + " but its update '" + u.next->name() +
                               "' is " + u.next->type().str());
  }
  if (t.optimizerBegin && g.findNode(t.optimizerBegin->name()) != t.optimizerBegin)
    return Status::error("training roles", "the first optimizer node is not in the graph");
  return Status::ok();
}

} // namespace

Status verifyGraph(const Graph &g) {
  std::unordered_set<const Value *> defined;
  std::unordered_set<std::string> names;
  for (const Value *v : g.values()) {
    if (!names.insert(v->name()).second)
      return Status::error("value '" + v->name() + "'", "name defined twice");
    if (v->isGraphInput() || v->isInitializer())
      defined.insert(v);
    if (v->isInitializer() && v->producer())
      return Status::error("value '" + v->name() + "'", "initializer also produced by a node");
    for (const Use &u : v->uses())
      if (u.inputIndex >= u.node->numInputs() || u.node->input(u.inputIndex) != v)
        return Status::error("value '" + v->name() + "'", "use list out of sync with " +
                                                               u.node->where());
  }
  std::unordered_set<std::string> nodeNames;
  for (const Node *n : g.nodes()) {
    if (!nodeNames.insert(n->name()).second)
      return Status::error(n->where(), "node name used twice");
    for (size_t i = 0; i < n->numInputs(); ++i) {
      const Value *v = n->input(i);
      if (!v)
        continue;
      if (!defined.count(v)) {
        if (!v->producer() && !v->isGraphInput() && !v->isInitializer())
          return Status::error(n->where(), "input '" + v->name() +
                                               "' is not a graph input, an initializer or "
                                               "the output of any node");
        return Status::error(n->where(), "input '" + v->name() +
                                             "' is used before the node that produces it");
      }
    }
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const Value *v = n->output(i);
      if (v->producer() != n || v->producerIndex() != i)
        return Status::error(n->where(), "output '" + v->name() + "' has a wrong producer link");
      if (defined.count(v))
        return Status::error(n->where(), "output '" + v->name() + "' is defined twice");
      defined.insert(v);
    }
  }
  for (const Value *v : g.outputs())
    if (!defined.count(v))
      return Status::error("graph output '" + v->name() + "'", "is never defined");
  return verifyTraining(g, defined);
}

} // namespace dtc::ir
