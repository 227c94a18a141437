// Upsample (onnx/docs/Operators.md#Upsample). Forms: 7 (scales attribute), 9 (scales input),
// 10 (deprecated, same form, still accepted). Normalization replaces it by the equivalent
// canonical Resize (X, _, scales) with coordinate_transformation_mode="asymmetric" and, for
// mode=nearest, nearest_mode="floor". Upsample computes x_original = x_resized / scale and, for
// nearest, takes floor(x_original) (scales are >= 1, so floor is exact): the ONNX version
// converter's Upsample-9 -> Resize-10 -> Resize-11 adapters (onnx/version_converter/adapters/
// upsample_9_10.h, resize_10_11.h) and onnxruntime's upsample.h (legacy Upsample: asymmetric,
// floor when upscaling) give the same results; onnx-mlir's Upsample -> Resize rewrite (PR #318)
// sets asymmetric for the same reason.
#include "ops/OpDef.h"
#include "ops/nn/NNCommon.h"
#include "ops/Sharding.h"

#include <cmath>

namespace dtc::ops {

namespace {

Status normalizeUpsample(ir::Node &node, NormalizeContext &ctx) {
  DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "mode", {"nearest", "linear"}));
  std::string mode = node.attrString("mode", "nearest");
  ir::Value *scales = nullptr;
  if (ctx.opset() < 9) {
    std::vector<float> values = node.attrFloats("scales");
    for (float s : values)
      if (!(s >= 1.0f))
        return Status::error(node.where(), "scales must be >= 1, got " + std::to_string(s));
    scales = ctx.floatConstant(node, "scales", values);
  } else {
    scales = node.input(1);
  }
  std::map<std::string, ir::Attribute> attrs;
  attrs["mode"] = mode;
  attrs["coordinate_transformation_mode"] = "asymmetric";
  if (mode == "nearest")
    attrs["nearest_mode"] = "floor";
  nn::replaceNode(ctx.graph(), &node, "Resize", {node.input(0), nullptr, scales}, attrs);
  return Status::ok();
}

// Only reached for graphs built without normalization: output = floor(in * scale).
Status inferUpsample(InferenceContext &ctx) {
  const ir::Shape &x = ctx.inputShape(0);
  if (!x.hasRank()) {
    ctx.setOutputShape(0, x);
    return Status::ok();
  }
  std::vector<double> scales;
  if (ctx.node().hasAttr("scales")) {
    for (float s : ctx.node().attrFloats("scales"))
      scales.push_back(s);
  } else if (ir::TensorDataPtr c = ctx.constantInput(1)) {
    DTC_ASSIGN_OR_RETURN(scales, c->toDoubles());
  } else {
    ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(x.rank())));
    return Status::ok();
  }
  if (scales.size() != x.rank())
    return ctx.error("scales has " + std::to_string(scales.size()) + " values; expected " +
                     std::to_string(x.rank()) + " (the rank of X)");
  std::vector<ir::Dim> out;
  for (size_t i = 0; i < x.rank(); ++i) {
    float scale = static_cast<float>(scales[i]);
    if (!std::isfinite(scale) ||
        (x[i].isStatic() && !(std::floor(static_cast<float>(x[i].value()) * scale) < 9.2e18f)))
      return ctx.error("scale " + std::to_string(scales[i]) + " on axis " + std::to_string(i) +
                       " gives a size that does not fit in int64");
    out.push_back(nn::scaledDim(x[i], scale));
  }
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

} // namespace

OpDef defineUpsample() {
  OpDef d;
  d.name = "Upsample";
  d.version(7)
      .in("X", "T")
      .out("Y", "T")
      .attr("mode", ir::AttrKind::kString)
      .attr("scales", ir::AttrKind::kFloats, /*required=*/true)
      .type("T", kAllTypes);
  OpVersion &v9 = d.version(9);
  v9.attrs = {{"mode", ir::AttrKind::kString, false}};
  v9.in("scales", "F").type("F", bit(ir::DType::kFloat32));
  d.version(10);
  d.normalize = normalizeUpsample;
  d.infer = inferUpsample;
  // As Resize (nn::resizeFlops); import rewrites Upsample into Resize.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(nn::resizeFlops(ctx.node().attrString("mode", "nearest"), ctx.inputDims(0),
                                         ctx.outputDims(0), false));
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
