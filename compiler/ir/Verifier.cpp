// Graph verifier.
#include "compiler/ir/Verifier.h"

#include <unordered_set>

namespace dtc::ir {

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
  return Status::ok();
}

} // namespace dtc::ir
