// training-mode: converts an inference export for training, as PyTorch's model.train() does.
// BatchNormalization uses batch statistics and updates its running statistics
// (ai.dtc.BatchNormTraining; the running mean/var become state updates, not trained weights);
// Dropout with a non-zero ratio becomes active (ai.dtc.DropoutTraining, fed a counter-based RNG
// key {seed, step, rank} by the runtime through the dtc::rng input).
#include "ops/OpDef.h"
#include "passes/Passes.h"

namespace dtc::passes {
namespace {

Status requireUnused(const ir::Node &n, size_t from) {
  for (size_t o = from; o < n.numOutputs(); ++o)
    if (n.output(o) && (n.output(o)->hasUses() || n.output(o)->isGraphOutput()))
      return Status::error(n.where(), "output " + std::to_string(o) + " ('" +
                                          n.output(o)->name() +
                                          "') is used; training mode supports only output 0");
  return Status::ok();
}

/// Replaces `old` by `repl` (already inferred): output 0's uses move over, `old` is erased.
void replaceNode(ir::Graph &g, ir::Node *old, ir::Node *repl) {
  old->output(0)->replaceAllUsesWith(repl->output(0));
  g.eraseNode(old);
}

Status convertBatchNorm(ir::Graph &g, ir::Node *n, ir::TrainingRoles &st, Diagnostics &diags) {
  DTC_RETURN_IF_ERROR(requireUnused(*n, 1));
  for (size_t i : {3, 4})
    if (!n->input(i) || !n->input(i)->isParameter())
      return Status::error(n->where(),
                           std::string("the running ") + (i == 3 ? "mean" : "variance") +
                               " must be a model initializer to be updated in training mode");
  DTC_ASSIGN_OR_RETURN(ir::Node * bn, insertBatchNormTraining(g, n, n->name() + "/train", diags));
  st.updates.push_back({n->input(3), bn->output(1)});
  st.updates.push_back({n->input(4), bn->output(2)});
  replaceNode(g, n, bn);
  return Status::ok();
}

Status convertDropout(ir::Graph &g, ir::Node *n, int64_t stream, ir::TrainingRoles &st,
                      Diagnostics &diags) {
  DTC_RETURN_IF_ERROR(requireUnused(*n, 1));
  float ratio = 0.5f;
  if (ir::Value *r = n->input(1)) {
    if (!r->initializer())
      return Status::error(n->where(), "the ratio must be a constant in training mode");
    DTC_ASSIGN_OR_RETURN(std::vector<double> v, r->initializer()->toDoubles());
    if (v.size() != 1)
      return Status::error(n->where(), "the ratio must be a scalar");
    ratio = static_cast<float>(v[0]);
  }
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return Status::error(n->where(), "ratio " + std::to_string(ratio) + " is outside [0, 1)");
  if (ratio == 0.0f)
    return Status::ok(); // the identity either way
  if (!st.rng) {
    st.rng = g.createValue(ir::kRngInput, {ir::DType::kInt64, ir::Shape::ofStatic({3})});
    g.addInput(st.rng);
  }
  const std::string base = n->name() + "/train";
  ir::Node *d = g.insertNodeBefore(
      n, "DropoutTraining", {n->input(0), st.rng},
      {g.uniqueName(base + ".output"), g.uniqueName(base + ".mask")}, ir::kDtcDomain, base);
  d->setAttr("ratio", ir::Attribute(ratio));
  d->setAttr("stream", ir::Attribute(stream));
  DTC_RETURN_IF_ERROR(ops::inferNode(*d, diags));
  replaceNode(g, n, d);
  return Status::ok();
}

class TrainingModePass : public Pass {
public:
  std::string name() const override { return "training-mode"; }
  std::string description() const override {
    return "BatchNormalization with batch statistics and running-statistic updates; active "
           "Dropout";
  }
  Status run(ir::Graph &graph, PassContext &ctx) override {
    if (!ctx.training)
      return Status::error("training-mode", "needs a training compilation");
    int64_t stream = 0;
    for (ir::Node *n : graph.nodes()) {
      if (!n->domain().empty())
        continue;
      if (n->opType() == "BatchNormalization")
        DTC_RETURN_IF_ERROR(convertBatchNorm(graph, n, graph.training(), ctx.diags));
      else if (n->opType() == "Dropout")
        DTC_RETURN_IF_ERROR(convertDropout(graph, n, stream++, graph.training(), ctx.diags));
    }
    return Status::ok();
  }
};

} // namespace

std::unique_ptr<Pass> createTrainingModePass() { return std::make_unique<TrainingModePass>(); }

Expected<ir::Node *> insertBatchNormTraining(ir::Graph &g, ir::Node *n, const std::string &base,
                                             Diagnostics &diags) {
  std::vector<std::string> outs;
  for (const char *s : {"Y", "running_mean", "running_var", "saved_mean", "saved_var"})
    outs.push_back(g.uniqueName(base + "." + s));
  ir::Node *bn = g.insertNodeBefore(n, "BatchNormTraining",
                                    {n->input(0), n->input(1), n->input(2), n->input(3),
                                     n->input(4)},
                                    outs, ir::kDtcDomain, base);
  bn->setAttr("epsilon", ir::Attribute(n->attrFloat("epsilon", 1e-5f)));
  bn->setAttr("momentum", ir::Attribute(n->attrFloat("momentum", 0.9f)));
  DTC_RETURN_IF_ERROR(ops::inferNode(*bn, diags));
  return bn;
}

} // namespace dtc::passes
