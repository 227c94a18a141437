// The cost facet's shared pieces (ops/Cost.h): the static-shape check behind CostContext, the
// cost functions op files opt into, and nodeCost / graphCost, which look ops up in the registry.
#include "ops/Cost.h"

#include "ops/OpDef.h"

namespace dtc::ops {

namespace {

const std::vector<int64_t> kNoDims;

double elements(const std::vector<int64_t> &dims) {
  double n = 1;
  for (int64_t d : dims)
    n *= static_cast<double>(d);
  return n;
}

/// Static sizes of `v` or an error naming the node and the value.
Expected<std::vector<int64_t>> staticDimsOf(const ir::Node &node, const ir::Value *v,
                                            const char *kind, size_t i) {
  std::string which = std::string(kind) + " " + std::to_string(i) + " '" + v->name() + "'";
  if (!v->shape().isStatic())
    return Status::error(node.where(),
                         "cost needs static shapes: " + which + " has type " + v->type().str());
  if (v->dtype() == ir::DType::kUndefined)
    return Status::error(node.where(),
                         "cost needs known dtypes: " + which + " has type " + v->type().str());
  return v->shape().staticSizes();
}

} // namespace

Expected<CostContext> CostContext::make(const ir::Node &node) {
  CostContext ctx(node);
  for (size_t i = 0; i < node.numInputs(); ++i) {
    if (!node.input(i)) {
      ctx.inputDims_.emplace_back();
      continue;
    }
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> d, staticDimsOf(node, node.input(i), "input", i));
    ctx.inputDims_.push_back(std::move(d));
  }
  for (size_t i = 0; i < node.numOutputs(); ++i) {
    if (!node.output(i)) {
      ctx.outputDims_.emplace_back();
      continue;
    }
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> d, staticDimsOf(node, node.output(i), "output", i));
    ctx.outputDims_.push_back(std::move(d));
  }
  return ctx;
}

const std::vector<int64_t> &CostContext::inputDims(size_t i) const {
  return i < inputDims_.size() ? inputDims_[i] : kNoDims;
}
const std::vector<int64_t> &CostContext::outputDims(size_t i) const {
  return i < outputDims_.size() ? outputDims_[i] : kNoDims;
}
double CostContext::inputElements(size_t i) const {
  return hasInput(i) ? elements(inputDims(i)) : 0;
}
double CostContext::outputElements(size_t i) const {
  return hasOutput(i) ? elements(outputDims(i)) : 0;
}
double CostContext::inputBytes(size_t i) const {
  return hasInput(i)
             ? inputElements(i) * static_cast<double>(ir::dtypeSize(node_->input(i)->dtype()))
             : 0;
}
double CostContext::outputBytes(size_t i) const {
  return hasOutput(i)
             ? outputElements(i) * static_cast<double>(ir::dtypeSize(node_->output(i)->dtype()))
             : 0;
}
double CostContext::totalInputBytes() const {
  double b = 0;
  for (size_t i = 0; i < numInputs(); ++i)
    b += inputBytes(i);
  return b;
}
double CostContext::totalOutputBytes() const {
  double b = 0;
  for (size_t i = 0; i < numOutputs(); ++i)
    b += outputBytes(i);
  return b;
}
Status CostContext::error(const std::string &what) const {
  return Status::error(node_->where(), "cost: " + what);
}

CostFn elementwiseCost(double flopsPerElement) {
  return [flopsPerElement](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(flopsPerElement * ctx.outputElements(0));
  };
}

CostFn dataMovementCost() {
  return [](const CostContext &ctx) -> Expected<Cost> { return ctx.withFlops(0); };
}

CostFn viewCost() {
  return [](const CostContext &) -> Expected<Cost> { return Cost{}; };
}

CostFn writeOnlyCost() {
  return [](const CostContext &ctx) -> Expected<Cost> {
    return Cost{0, 0, ctx.totalOutputBytes()};
  };
}

CostFn reductionCost(double flopsPerInputElement, double flopsPerOutputElement) {
  return [=](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(flopsPerInputElement * ctx.inputElements(0) +
                         flopsPerOutputElement * ctx.outputElements(0));
  };
}

double convFlops(double outputElements, const std::vector<int64_t> &weightDims) {
  if (weightDims.empty() || weightDims[0] == 0)
    return 0;
  double perOutput = elements(weightDims) / static_cast<double>(weightDims[0]);
  return 2 * outputElements * perOutput;
}

Expected<Cost> nodeCost(const ir::Node &node) {
  const OpDef *def = lookupOp(node.domain(), node.opType());
  if (!def)
    return Status::error(node.where(), "cost: unknown operator '" + node.opType() + "'");
  if (!def->cost)
    return Status::error(node.where(), "cost: operator '" + node.opType() + "' has no cost facet");
  DTC_ASSIGN_OR_RETURN(CostContext ctx, CostContext::make(node));
  return def->cost(ctx);
}

Expected<Cost> graphCost(const ir::Graph &graph) {
  Cost total;
  for (const ir::Node *n : graph.nodes()) {
    DTC_ASSIGN_OR_RETURN(Cost c, nodeCost(*n));
    total += c;
  }
  return total;
}

} // namespace dtc::ops
