// ai.dtc.SoftmaxCrossEntropyLossGrad: the gradient of SoftmaxCrossEntropyLoss (ONNX, = PyTorch
// CrossEntropyLoss) with respect to its scores, made by that op's gradient rule
// (ops/reduction/SoftmaxCrossEntropyLoss.cpp); CPU kernel in ops/cpu/TensorGradLoss.cpp.
#include "ops/OpDef.h"

namespace dtc::ops {

/// Inputs: dloss (the loss output's gradient: a scalar for reduction mean/sum, (N, d1..dk) for
/// none), scores (N, C, d1..dk), labels (N, d1..dk) int32/int64, optional weights (C), optional
/// dlog_prob (N, C, d1..dk: the gradient of the forward node's log_prob output). Attributes
/// ignore_index and reduction as on the forward node. Output dscores (N, C, d1..dk):
///   dscores[n, c, j] = g(n, j) * w[y] * (softmax(scores)[n, c, j] - [c == y])
///                      + dlog_prob[n, c, j] - softmax[n, c, j] * sum_c' dlog_prob[n, c', j]
/// with y = labels[n, j], g = dloss (none), dloss (sum) or dloss / sum of w[y] over the
/// non-ignored elements (mean), and 0 for elements whose label is ignore_index (the formula
/// of PyTorch's nll_loss / log_softmax backward).
OpDef defineSoftmaxCrossEntropyLossGrad() {
  OpDef d;
  d.name = "SoftmaxCrossEntropyLossGrad";
  d.domain = "ai.dtc";
  d.version(1)
      .in("dloss", "T")
      .in("scores", "T")
      .in("labels", "Tind")
      .optIn("weights", "T")
      .optIn("dlog_prob", "T")
      .out("dscores", "T")
      .attr("ignore_index", ir::AttrKind::kInt)
      .attr("reduction", ir::AttrKind::kString)
      .type("T", kFloatTypes)
      .type("Tind", kInt32Or64Types);
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string reduction = ctx.node().attrString("reduction", "mean");
    if (reduction != "none" && reduction != "mean" && reduction != "sum")
      return ctx.error("attribute 'reduction' must be \"none\", \"mean\" or \"sum\", got \"" +
                       reduction + "\"");
    const ir::Shape &scores = ctx.inputShape(1);
    const ir::Shape &labels = ctx.inputShape(2);
    if (scores.hasRank() && scores.rank() < 2)
      return ctx.error("scores must have shape (N, C, d1..dk), got " + scores.str());
    if (scores.hasRank() && labels.hasRank() && labels.rank() + 1 != scores.rank())
      return ctx.error("labels " + labels.str() + " must have shape (N, d1..dk) for scores " +
                       scores.str());
    const ir::Shape &dloss = ctx.inputShape(0);
    if (reduction != "none" && dloss.hasRank() && dloss.rank() != 0)
      return ctx.error("dloss must be a scalar for reduction \"" + reduction + "\", got " +
                       dloss.str());
    if (reduction == "none" && dloss.hasRank() && labels.hasRank() && dloss.rank() != labels.rank())
      return ctx.error("dloss " + dloss.str() + " must have the labels' shape " + labels.str());
    if (ctx.hasInput(4) && ctx.inputShape(4).hasRank() && scores.hasRank() &&
        ctx.inputShape(4).rank() != scores.rank())
      return ctx.error("dlog_prob " + ctx.inputShape(4).str() + " must have the scores' shape " +
                       scores.str());
    ctx.setOutputShape(0, scores);
    return Status::ok();
  };
  // Per score: 5 to recompute softmax (max, subtract, exp, sum, divide) and 1 to scale by the
  // sample's factor; with dlog_prob 4 more (the row sum, multiply, subtract, add). Per sample:
  // the one-hot subtraction, the g * w[y] product with weights, and for mean the weight sum.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    double n = ctx.inputElements(1), samples = ctx.inputElements(2);
    bool weighted = ctx.hasInput(3);
    bool mean = ctx.node().attrString("reduction", "mean") == "mean";
    return ctx.withFlops((ctx.hasInput(4) ? 10 : 6) * n +
                         samples * (1 + (weighted ? 1 : 0) + (mean && weighted ? 1 : 0)));
  };
  return d;
}

} // namespace dtc::ops
