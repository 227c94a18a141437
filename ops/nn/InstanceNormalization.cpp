// InstanceNormalization (onnx/docs/Operators.md#InstanceNormalization; Ulyanov et al. 2016):
// each (sample, channel) of X (N, C, D1..Dn) is normalized over its spatial elements, then
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c] (biased variance). Form 6 (opset 1's
// consumed_inputs form is older than any opset dtc accepts). Gradient: ai.dtc.GroupNormGrad with
// one group per channel (ops/training/NNGradGroupNorm.cpp).
#include "ops/OpDef.h"
#include "ops/Sharding.h"
#include "ops/nn/NormCommon.h"

namespace dtc::ops {

namespace {

Status inferInstanceNorm(InferenceContext &ctx) { return nn::inferChannelNorm(ctx).status(); }

// Shapes are static when autodiff runs, so C is known.
Status instanceNormGrad(GradientContext &ctx) {
  const ir::Shape &x = ctx.input(0)->shape();
  if (!x.hasRank() || x.rank() < 2 || !x[1].isStatic())
    return ctx.error("the gradient needs a static channel count; X is " + x.str());
  return nn::emitGroupNormGrad(ctx, x[1].value());
}

} // namespace

OpDef defineInstanceNormalization() {
  OpDef d;
  d.name = "InstanceNormalization";
  d.version(6)
      .in("input", "T")
      .in("scale", "T")
      .in("B", "T")
      .out("output", "T")
      .attr("epsilon", ir::AttrKind::kFloat)
      .type("T", kFloatTypes);
  d.infer = inferInstanceNorm;
  d.gradient = instanceNormGrad;
  d.cost = nn::groupNormCost;
  // Batch and channels are independent (statistics per sample and channel); a split of the
  // channels splits scale and B with them, as BatchNormalization's rule does.
  d.sharding = independentAxesSharding(
      [](const ShardingContext &ctx) {
        std::vector<int64_t> axes;
        for (int64_t a = 2; a < static_cast<int64_t>(ctx.inputDims(0).size()); ++a)
          axes.push_back(a);
        return axes;
      },
      false, 1);
  return d;
}

} // namespace dtc::ops
