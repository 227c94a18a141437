// shape-inference: dtype and shape of every value, from each op's definition
// (ops/), merged with what the model declares (value_info, graph outputs).
#include "passes/ShapeInference.h"

#include "passes/Passes.h"

namespace dtc::passes {
namespace {

/// Merges an inferred type with the type the model declared for the same value.
/// Static disagreements are errors; declared information fills what inference
/// left unknown.
Status mergeDeclared(ir::Value &v, const ir::TensorType &declared, const ir::Node &n) {
  ir::TensorType &t = v.type();
  if (declared.dtype != ir::DType::kUndefined) {
    if (t.dtype == ir::DType::kUndefined)
      t.dtype = declared.dtype;
    else if (t.dtype != declared.dtype)
      return Status::error(n.where(), "output '" + v.name() + "' is declared " +
                                          ir::dtypeName(declared.dtype) + " but computes " +
                                          ir::dtypeName(t.dtype));
  }
  if (!declared.shape.hasRank())
    return Status::ok();
  if (!t.shape.hasRank()) {
    t.shape = declared.shape;
    return Status::ok();
  }
  if (t.shape.rank() != declared.shape.rank())
    return Status::error(n.where(), "output '" + v.name() + "' is declared with shape " +
                                        declared.shape.str() + " but computes " + t.shape.str());
  for (size_t i = 0; i < t.shape.rank(); ++i) {
    ir::Dim &d = t.shape[i];
    const ir::Dim &e = declared.shape[i];
    if (d.isStatic() && e.isStatic() && d.value() != e.value())
      return Status::error(n.where(), "output '" + v.name() + "' is declared with shape " +
                                          declared.shape.str() + " but computes " + t.shape.str());
    if (d.isUnknown())
      d = e;
  }
  return Status::ok();
}

} // namespace

Status inferShapes(ir::Graph &graph, Diagnostics &diags, ops::ShapeValueMap *shapeValuesOut) {
  ops::ShapeValueMap localShapeValues;
  ops::ShapeValueMap &shapeValues = shapeValuesOut ? *shapeValuesOut : localShapeValues;
  shapeValues.clear();
  for (ir::Node *n : graph.nodes()) {
    const ops::OpDef *def = ops::lookupOp(n->domain(), n->opType());
    if (!def)
      return Status::error(n->where(),
                           "unsupported operator '" + n->opType() + "'" +
                               (n->domain().empty() ? "" : " in domain '" + n->domain() + "'"));
    for (size_t i = 0; i < n->numInputs(); ++i)
      if (n->input(i) && n->input(i)->dtype() == ir::DType::kUndefined)
        return Status::error(n->where(), "input '" + n->input(i)->name() + "' has no known type");
    std::vector<ir::TensorType> declared;
    for (ir::Value *out : n->outputs()) {
      declared.push_back(out->type());
      out->setType({});
    }
    DTC_RETURN_IF_ERROR(ops::checkTypesAndSetOutputDTypes(*n, def->canonical()));
    ops::InferenceContext ictx(*n, shapeValues, diags);
    DTC_RETURN_IF_ERROR(def->infer(ictx));
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      ir::Value *out = n->output(i);
      DTC_RETURN_IF_ERROR(mergeDeclared(*out, declared[i], *n));
      if (out->shape().isStatic() && !out->shape().numElements())
        return Status::error(n->where(), "output '" + out->name() + "' has shape " +
                                             out->shape().str() +
                                             " whose element count overflows int64");
    }
  }
  return Status::ok();
}

namespace {

class ShapeInferencePass : public Pass {
public:
  std::string name() const override { return "shape-inference"; }
  std::string description() const override {
    return "infer dtype and shape of every value from the operator definitions";
  }
  Status run(ir::Graph &graph, PassContext &ctx) override { return inferShapes(graph, ctx.diags); }
};

} // namespace

std::unique_ptr<Pass> createShapeInferencePass() { return std::make_unique<ShapeInferencePass>(); }

} // namespace dtc::passes
