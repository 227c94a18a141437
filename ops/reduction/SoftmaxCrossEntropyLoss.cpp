// SoftmaxCrossEntropyLoss: loss = -weights[label] * log_softmax(scores, axis 1)[label] per
// sample, reduced by `reduction` (none | mean, the default | sum); labels equal to
// `ignore_index` contribute nothing. ONNX SoftmaxCrossEntropyLoss-12 is the first version (the
// op does not exist before opset 12); -13 adds bfloat16. Shapes: see inferLoss (Reduce.h).
#include "ops/reduction/Reduce.h"
#include "ops/Sharding.h"

namespace dtc::ops {

OpDef defineSoftmaxCrossEntropyLoss() {
  OpDef d;
  d.name = "SoftmaxCrossEntropyLoss";
  d.version(12)
      .in("scores", "T")
      .in("labels", "Tind")
      .optIn("weights", "T")
      .out("output", "T")
      .optOut("log_prob", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .type("T", bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kFloatTypes);
  d.infer = inferLoss;
  // dscores = ai.dtc.SoftmaxCrossEntropyLossGrad(dloss, scores, labels[, weights][, dlog_prob])
  // (formula in ops/training/TensorGradSoftmaxCrossEntropyLoss.cpp; PyTorch's cross_entropy
  // backward): softmax minus the one-hot label, times the sample's weight and the reduction's
  // scale; ignored labels get 0. The log_prob output's gradient, when used, is folded into the
  // same node. Class weights get no gradient (an error when one is asked for).
  d.gradient = [](GradientContext &ctx) -> Status {
    if (ctx.needsGrad(2))
      return ctx.error("gradient: no gradient with respect to input 'weights' (class weights "
                       "must not depend on trained parameters)");
    if (!ctx.needsGrad(0))
      return Status::ok();
    ir::Value *dloss = ctx.outputGrad(0);
    ir::Value *dlogProb = ctx.outputGrad(1);
    if (!dloss && !dlogProb)
      return Status::ok();
    if (!dloss)
      dloss = ctx.constantF32(0.0f, ctx.output(0)->shape().staticSizes());
    std::vector<ir::Value *> ins = {dloss, ctx.input(0), ctx.input(1), ctx.input(2), dlogProb};
    while (!ins.back())
      ins.pop_back();
    std::map<std::string, ir::Attribute> attrs;
    for (const char *name : {"reduction", "ignore_index"})
      if (const ir::Attribute *a = ctx.node().attr(name))
        attrs[name] = *a;
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("SoftmaxCrossEntropyLossGrad", ins, attrs, "ai.dtc"));
    ctx.setInputGrad(0, dx);
    return Status::ok();
  };
  // log_softmax over the classes as LogSoftmax (5 FLOPs per score, one log per sample), then
  // NegativeLogLikelihoodLoss's count (a negation, a weight multiply, the reduction).
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double samples = ctx.inputElements(1);
    bool weighted = ctx.hasInput(2);
    return ctx.withFlops(
        5 * ctx.inputElements(0) + samples * (weighted ? 3 : 2) +
        lossReductionFlops(samples, ctx.node().attrString("reduction", "mean"), weighted));
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
