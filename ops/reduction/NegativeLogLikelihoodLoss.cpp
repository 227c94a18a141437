// NegativeLogLikelihoodLoss: loss = -weight[target] * input[target] per sample (input holds
// log-probabilities (N, C, d1..dk)), reduced by `reduction` (none | mean, the default | sum);
// targets equal to `ignore_index` contribute nothing. ONNX NegativeLogLikelihoodLoss-12 is the
// first version (absent before opset 12); -13 adds bfloat16. Shapes: see inferLoss (Reduce.h).
#include "ops/reduction/Reduce.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineNegativeLogLikelihoodLoss() {
  OpDef d;
  d.name = "NegativeLogLikelihoodLoss";
  d.version(12)
      .in("input", "T")
      .in("target", "Tind")
      .optIn("weight", "T")
      .out("loss", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .type("T", bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferLoss;
  // dinput = ai.dtc.NegativeLogLikelihoodLossGrad(dloss, target[, weight]) with the input's
  // shape: -weight[target] times the reduction's scale at the target class, 0 elsewhere and for
  // ignored targets (ops/training/TensorGradNegativeLogLikelihoodLoss.cpp; PyTorch's nll_loss
  // backward). Class weights get no gradient (an error when one is asked for).
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ctx.needsGrad(2))
      return ctx.error("gradient: no gradient with respect to input 'weight' (class weights "
                       "must not depend on trained parameters)");
    if (!ctx.needsGrad(0))
      return Status::ok();
    std::vector<ir::Value *> ins = {ctx.outputGrad(0), ctx.input(1)};
    if (ctx.input(2))
      ins.push_back(ctx.input(2));
    std::map<std::string, ir::Attribute> attrs;
    for (const char *name : {"reduction", "ignore_index"})
      if (const ir::Attribute *a = ctx.node().attr(name))
        attrs[name] = *a;
    attrs["shape"] = ir::Attribute(ctx.input(0)->shape().staticSizes());
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("NegativeLogLikelihoodLossGrad", ins, attrs, "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // Per sample (element of target): a negation and, with weights, a multiply; then the
  // reduction (lossReductionFlops).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double samples = ctx.inputElements(1);
    bool weighted = ctx.hasInput(2);
    return ctx.withFlops(
        samples * (weighted ? 2 : 1) +
        lossReductionFlops(samples, ctx.node().attrString("reduction", "mean"), weighted));
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
