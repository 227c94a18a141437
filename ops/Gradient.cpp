// GradientContext: the helpers gradient rules use to append backward nodes, and per-node type
// inference for nodes made after the shape-inference pass.
#include "ops/Gradient.h"

#include "ops/OpDef.h"

namespace dtc::ops {

GradientContext::GradientContext(ir::Graph &graph, ir::Node &node,
                                 std::vector<ir::Value *> outputGrads, std::vector<bool> needsGrad,
                                 Diagnostics &diags)
    : graph_(graph), node_(node), outputGrads_(std::move(outputGrads)),
      needsGrad_(std::move(needsGrad)), inputGrads_(node.numInputs(), nullptr), diags_(diags) {}

void GradientContext::setInputGrad(size_t i, ir::Value *grad) {
  if (i < inputGrads_.size())
    inputGrads_[i] = grad;
}

Status inferNode(ir::Node &node, Diagnostics &diags) {
  const OpDef *def = lookupOp(node.domain(), node.opType());
  if (!def)
    return Status::error(node.where(), "unsupported operator '" + node.opType() + "'" +
                                           (node.domain().empty()
                                                ? std::string()
                                                : " in domain '" + node.domain() + "'"));
  for (ir::Value *out : node.outputs())
    out->setType({});
  DTC_RETURN_IF_ERROR(checkTypesAndSetOutputDTypes(node, def->canonical()));
  ShapeValueMap shapeValues;
  InferenceContext ictx(node, shapeValues, diags);
  return def->infer(ictx);
}

Expected<std::vector<ir::Value *>>
GradientContext::emit(const std::string &op, const std::vector<ir::Value *> &inputs,
                      size_t numOutputs, const std::map<std::string, ir::Attribute> &attrs,
                      const std::string &domain) {
  const std::string base = node_.name() + "/grad/" + op;
  std::vector<std::string> outNames;
  for (size_t i = 0; i < numOutputs; ++i) {
    std::string name = graph_.uniqueName(numOutputs > 1 ? base + "_" + std::to_string(i) : base);
    // Distinct bases give distinct names; a single output needs no reservation.
    outNames.push_back(std::move(name));
  }
  ir::Node *n = graph_.addNode(op, inputs, outNames, domain, base);
  n->setPhase(ir::Phase::kBackward);
  // A backward node runs where its forward node runs (pipeline stage and micro-batch).
  n->setStage(node_.stage());
  n->setMicroBatch(node_.microBatch());
  for (const auto &[name, a] : attrs)
    n->setAttr(name, a);
  Status s = inferNode(*n, diags_);
  if (!s.isOk())
    return Status::error(node_.where(), "gradient: " + s.message());
  return n->outputs();
}

Expected<ir::Value *> GradientContext::emit1(const std::string &op,
                                             const std::vector<ir::Value *> &inputs,
                                             const std::map<std::string, ir::Attribute> &attrs,
                                             const std::string &domain) {
  DTC_ASSIGN_OR_RETURN(std::vector<ir::Value *> outs, emit(op, inputs, 1, attrs, domain));
  return outs[0];
}

ir::Value *GradientContext::constantF32(float value, const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return constantF32s(std::vector<float>(static_cast<size_t>(n), value), dims);
}

ir::Value *GradientContext::constantF32s(const std::vector<float> &values,
                                         const std::vector<int64_t> &dims) {
  const std::string name = graph_.uniqueName(node_.name() + "/grad/const");
  return graph_.addConstant(name, ir::TensorData::fromFloats(name, dims, values));
}

ir::Value *GradientContext::constantI64s(const std::vector<int64_t> &values) {
  const std::string name = graph_.uniqueName(node_.name() + "/grad/shape");
  return graph_.addConstant(
      name, ir::TensorData::fromInt64s(name, {static_cast<int64_t>(values.size())}, values));
}

Expected<ir::Value *> GradientContext::reshapeTo(ir::Value *grad,
                                                 const std::vector<int64_t> &shape) {
  if (grad->shape().isStatic() && grad->shape().staticSizes() == shape)
    return grad;
  return emit1("Reshape", {grad, constantI64s(shape)});
}

Expected<ir::Value *> GradientContext::sumToShape(ir::Value *grad, const ir::Shape &target) {
  if (!grad->shape().isStatic() || !target.isStatic())
    return error("gradient: shapes must be static (got " + grad->shape().str() + " and " +
                 target.str() + ")");
  const std::vector<int64_t> g = grad->shape().staticSizes();
  const std::vector<int64_t> t = target.staticSizes();
  if (g == t)
    return grad;
  if (t.size() > g.size())
    return error("gradient: cannot sum " + grad->shape().str() + " down to " + target.str());
  // Axes of g that t broadcast along: the leading extra axes, and axes where t has size 1.
  const size_t lead = g.size() - t.size();
  std::vector<int64_t> axes;
  for (size_t i = 0; i < g.size(); ++i) {
    if (i < lead) {
      axes.push_back(static_cast<int64_t>(i));
      continue;
    }
    const int64_t td = t[i - lead];
    if (td == 1 && g[i] != 1)
      axes.push_back(static_cast<int64_t>(i));
    else if (td != g[i])
      return error("gradient: cannot sum " + grad->shape().str() + " down to " + target.str());
  }
  ir::Value *summed = grad;
  if (!axes.empty()) {
    DTC_ASSIGN_OR_RETURN(summed, emit1("ReduceSum", {grad, constantI64s(axes)},
                                       {{"keepdims", ir::Attribute(int64_t{1})},
                                        {"noop_with_empty_axes", ir::Attribute(int64_t{0})}}));
  }
  return reshapeTo(summed, t);
}

} // namespace dtc::ops
