// ConstantOfShape (opset 9): a tensor of the shape given by a 1-D int64 input, filled with the
// one-element `value` attribute (default float32 0). Later versions only widen the value types.
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {
namespace {

/// The fill value: the attribute's tensor, or float32 0.
Expected<ir::TensorDataPtr> fillValue(const ir::Node &node) {
  const ir::Attribute *a = node.attr("value");
  if (!a)
    return ir::TensorDataPtr(ir::TensorData::fromFloats("value", {1}, {0.0f}));
  const ir::TensorDataPtr &t = a->t();
  if (t->numElements() != 1)
    return Status::error(node.where(), "attribute 'value' must hold exactly one element, got " +
                                           std::to_string(t->numElements()));
  if (t->dtype() == ir::DType::kString)
    return Status::error(node.where(), "attribute 'value' must not be a string tensor");
  return t;
}

} // namespace

OpDef defineConstantOfShape() {
  OpDef d;
  d.name = "ConstantOfShape";
  d.version(9)
      .in("input", "T1")
      .out("output", "T2")
      .attr("value", ir::AttrKind::kTensor)
      .type("T1", kInt64Type)
      .type("T2", kNumericTypes | kBoolType);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr value, fillValue(ctx.node()));
    ctx.setOutputDType(0, value->dtype());
    const ir::Shape &in = ctx.inputShape(0);
    if (in.hasRank() && in.rank() != 1)
      return ctx.error("input 'input' must be 1-D, got shape " + in.str());
    if (const std::vector<ir::Dim> *dims = ctx.shapeValue(0)) {
      for (const ir::Dim &x : *dims)
        if (x.isStatic() && x.value() < 0)
          return ctx.error("shape " + ir::Shape(*dims).str() + " has a negative dimension");
      ctx.setOutputShape(0, ir::Shape(*dims));
    } else if (in.hasRank() && in[0].isStatic() && in[0].value() <= kMaxInferredRank) {
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(in[0].value(), ir::Dim::unknown())));
    }
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr value, fillValue(ctx.node()));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.input(0)->toInt64s());
    if (ctx.input(0)->dims().size() != 1)
      return ctx.error("input 'input' must be 1-D");
    for (int64_t x : dims)
      if (x < 0)
        return ctx.error("shape " + intsText(dims) + " has a negative dimension");
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr out, remapElements(
                                                    ctx.node().output(0)->name(), *value, dims,
                                                    [](int64_t) { return int64_t{0}; }, where));
    return std::vector<ir::TensorDataPtr>{out};
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
