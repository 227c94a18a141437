// ai.dtc.NegativeLogLikelihoodLossGrad: the gradient of NegativeLogLikelihoodLoss with respect to
// its input (log-probabilities), made by that op's gradient rule
// (ops/reduction/NegativeLogLikelihoodLoss.cpp); CPU kernel in ops/cpu/TensorGradLoss.cpp.
#include "ops/tensor/TensorCommon.h"

namespace dtc::ops {

/// Inputs: dloss (a scalar for reduction mean/sum, (N, d1..dk) for none), target (N, d1..dk)
/// int32/int64, optional weight (C). Attributes ignore_index and reduction as on the forward
/// node, and `shape`, the forward input's shape (N, C, d1..dk). Output dinput of that shape:
///   dinput[n, c, j] = -g(n, j) * w[y] * [c == y],  y = target[n, j]
/// with g = dloss (none, sum) or dloss / sum of w[y] over non-ignored elements (mean), and 0
/// where the target is ignore_index (PyTorch's nll_loss backward).
OpDef defineNegativeLogLikelihoodLossGrad() {
  OpDef d;
  d.name = "NegativeLogLikelihoodLossGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dloss", "T")
      .in("target", "Tind")
      .optIn("weight", "T")
      .out("dinput", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .attr("shape", ir::AttrKind::kInts, true)
      .type("T", kFloatTypes)
      .type("Tind", kInt32Or64Types);
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string reduction = ctx.node().attrString("reduction", "mean");
    if (reduction != "none" && reduction != "mean" && reduction != "sum")
      return ctx.error("attribute 'reduction' must be \"none\", \"mean\" or \"sum\", got \"" +
                       reduction + "\"");
    const std::vector<int64_t> shape = ctx.node().attrInts("shape");
    if (shape.size() < 2)
      return ctx.error("attribute 'shape' must be (N, C, d1..dk), got " + intsText(shape));
    for (int64_t s : shape)
      if (s < 0)
        return ctx.error("attribute 'shape' " + intsText(shape) + " has a negative dim");
    const ir::Shape &target = ctx.inputShape(1);
    if (target.hasRank() && target.rank() + 1 != shape.size())
      return ctx.error("target " + target.str() + " must have shape (N, d1..dk) for input " +
                       intsText(shape));
    ctx.setOutputShape(0, ir::Shape::ofStatic(shape));
    return Status::ok();
  };
  // dinput is zero-filled (no FLOPs); per sample (element of target) the negation, the weight
  // multiply with weights, and for mean the weight sum and the divide.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double samples = ctx.inputElements(1);
    bool mean = ctx.node().attrString("reduction", "mean") == "mean";
    return ctx.withFlops(samples * (1 + (ctx.hasInput(2) ? 1 : 0) + (mean ? 2 : 0)));
  };
  return d;
}

} // namespace dtc::ops
