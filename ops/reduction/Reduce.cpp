// Forms, normalization and shape inference shared by ReduceMean/ReduceSum/ReduceMax, and
// shape inference of SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss.
#include "ops/reduction/Reduce.h"

#include <algorithm>

#include "ops/ShapeHelpers.h"

#include <set>

namespace dtc::ops {

OpVersion &reduceAttrForm(OpDef &d, int since, TypeMask types) {
  OpVersion &v = d.version(since);
  if (v.inputs.empty())
    v.in("data", "T").out("reduced", "T");
  return v.attr("axes", ir::AttrKind::kInts).attr("keepdims", ir::AttrKind::kInt).type("T", types);
}

OpVersion &reduceInputForm(OpDef &d, int since) {
  OpVersion &v = d.version(since);
  v.attrs.clear();
  v.optIn("axes", "tensor(int64)")
      .attr("keepdims", ir::AttrKind::kInt)
      .attr("noop_with_empty_axes", ir::AttrKind::kInt)
      .type("tensor(int64)", kInt64Type);
  return v;
}

NormalizeFn reduceNormalizer(int inputSince) {
  return [inputSince](ir::Node &node, NormalizeContext &ctx) -> Status {
    if (ctx.opset() < inputSince)
      ctx.attrToInput(node, "axes", 1);
    return Status::ok();
  };
}

Status inferReduce(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  bool keepdims = node.attrInt("keepdims", 1) != 0;
  bool noop = node.attrInt("noop_with_empty_axes", 0) != 0;
  const ir::Shape &in = ctx.inputShape(0);
  int64_t rank = static_cast<int64_t>(in.rank());

  std::optional<std::vector<int64_t>> axes; // nullopt: not known
  if (!ctx.hasInput(1)) {
    axes = std::vector<int64_t>{};
  } else {
    const ir::Shape &axesShape = ctx.inputShape(1);
    if (axesShape.hasRank() && axesShape.rank() > 1)
      return ctx.error("axes must be a 1-D tensor, got shape " + axesShape.str());
    if (const std::vector<ir::Dim> *sv = ctx.shapeValue(1)) {
      std::vector<int64_t> values;
      for (const ir::Dim &x : *sv)
        if (x.isStatic())
          values.push_back(x.value());
      if (values.size() == sv->size())
        axes = std::move(values);
    }
    if (!axes) { // axes computed at run time
      if (!in.hasRank()) {
        ctx.setOutputShape(0, ir::Shape::unknownRank());
      } else if (keepdims) {
        std::vector<ir::Dim> dims;
        for (const ir::Dim &x : in.dims())
          dims.push_back(x.isStatic() && x.value() == 1 ? x : ir::Dim::unknown());
        ctx.setOutputShape(0, ir::Shape(dims));
      } else if (axesShape.hasRank() && axesShape.rank() == 1 && axesShape[0].isStatic() &&
                 axesShape[0].value() > 0 && axesShape[0].value() <= rank) {
        ctx.setOutputShape(
            0, ir::Shape(std::vector<ir::Dim>(rank - axesShape[0].value(), ir::Dim::unknown())));
      } else {
        ctx.setOutputShape(0, ir::Shape::unknownRank());
      }
      return Status::ok();
    }
  }

  if (axes->empty()) {
    if (noop) {
      ctx.setOutputShape(0, in);
    } else if (!keepdims) {
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>{}));
    } else if (in.hasRank()) {
      ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(rank, ir::Dim::fixed(1))));
    } else {
      ctx.setOutputShape(0, ir::Shape::unknownRank());
    }
    return Status::ok();
  }
  if (!in.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  std::set<int64_t> reduced;
  for (int64_t a : *axes) {
    DTC_ASSIGN_OR_RETURN(int64_t k, normalizeAxis(a, rank, node.where(), "axes"));
    if (!reduced.insert(k).second)
      return ctx.error("axes names axis " + std::to_string(k) + " more than once");
  }
  std::vector<ir::Dim> dims;
  for (int64_t i = 0; i < rank; ++i) {
    if (!reduced.count(i))
      dims.push_back(in[i]);
    else if (keepdims)
      dims.push_back(ir::Dim::fixed(1));
  }
  ctx.setOutputShape(0, ir::Shape(dims));
  return Status::ok();
}

namespace {

/// Two dims that must be equal: error when both are static and differ; else the more exact.
Expected<ir::Dim> mergeDims(const ir::Dim &a, const ir::Dim &b, InferenceContext &ctx,
                            const std::string &what) {
  if (a.isStatic() && b.isStatic() && a.value() != b.value())
    return ctx.error(what + ": " + a.str() + " vs " + b.str());
  if (a.isStatic() || b.isUnknown())
    return a;
  if (b.isStatic() || a.isUnknown())
    return b;
  return a;
}

} // namespace

Status inferLoss(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  const bool sce = node.opType() == "SoftmaxCrossEntropyLoss";
  const std::string scoresName = sce ? "scores" : "input";
  const std::string labelsName = sce ? "labels" : "target";
  std::string reduction = node.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "mean" && reduction != "sum")
    return ctx.error("attribute 'reduction' must be \"none\", \"mean\" or \"sum\", got \"" +
                     reduction + "\"");
  const ir::Shape &scores = ctx.inputShape(0);
  const ir::Shape &labels = ctx.inputShape(1);
  if (scores.hasRank() && scores.rank() < 2)
    return ctx.error(scoresName + " must have shape (N, C, d1..dk), got " + scores.str());

  // The per-sample loss shape (N, d1..dk): labels' dims merged with the scores' dims.
  ir::Shape perSample;
  if (scores.hasRank() && labels.hasRank()) {
    if (labels.rank() != scores.rank() - 1)
      return ctx.error(labelsName + " must have shape (N, d1..dk) for " + scoresName + " " +
                       scores.str() + ", got " + labels.str());
    std::vector<ir::Dim> dims;
    for (size_t i = 0; i < labels.rank(); ++i) {
      size_t j = i == 0 ? 0 : i + 1;
      DTC_ASSIGN_OR_RETURN(ir::Dim d,
                           mergeDims(labels[i], scores[j], ctx,
                                     labelsName + " " + labels.str() + " does not match " +
                                         scoresName + " " + scores.str() + " at " + labelsName +
                                         " axis " + std::to_string(i)));
      dims.push_back(d);
    }
    perSample = ir::Shape(dims);
  } else if (scores.hasRank()) {
    std::vector<ir::Dim> dims = scores.dims();
    dims.erase(dims.begin() + 1);
    perSample = ir::Shape(dims);
  } else {
    perSample = labels;
  }

  if (ctx.hasInput(2)) {
    const ir::Shape &w = ctx.inputShape(2);
    if (w.hasRank() && w.rank() != 1)
      return ctx.error("weights must have shape (C), got " + w.str());
    if (w.hasRank() && scores.hasRank())
      DTC_RETURN_IF_ERROR(mergeDims(w[0], scores[1], ctx,
                                    "weights " + w.str() + " do not match the class axis of " +
                                        scoresName + " " + scores.str())
                              .status());
  }

  ctx.setOutputShape(0, reduction == "none" ? perSample : ir::Shape(std::vector<ir::Dim>{}));
  if (node.numOutputs() > 1 && node.output(1))
    ctx.setOutputShape(1, scores);
  return Status::ok();
}

Expected<std::vector<int64_t>> reducedAxes(GradientContext &ctx) {
  ir::Node &n = ctx.node();
  const int64_t rank = static_cast<int64_t>(n.input(0)->shape().rank());
  std::vector<int64_t> axes;
  if (n.input(1)) {
    const ir::TensorDataPtr &t = n.input(1)->initializer();
    if (!t)
      return ctx.error("gradient: the axes must be constant");
    DTC_ASSIGN_OR_RETURN(axes, t->toInt64s());
  }
  if (axes.empty()) {
    if (n.attrInt("noop_with_empty_axes", 0))
      return axes;
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
    return axes;
  }
  for (int64_t &a : axes)
    if (a < 0)
      a += rank;
  std::sort(axes.begin(), axes.end());
  return axes;
}

Expected<ir::Value *> broadcastReduceGrad(GradientContext &ctx, ir::Value *dy) {
  DTC_ASSIGN_OR_RETURN(std::vector<int64_t> axes, reducedAxes(ctx));
  const std::vector<int64_t> inShape = ctx.input(0)->shape().staticSizes();
  std::vector<int64_t> kept = inShape;
  for (int64_t a : axes)
    kept[static_cast<size_t>(a)] = 1;
  DTC_ASSIGN_OR_RETURN(ir::Value * r, ctx.reshapeTo(dy, kept));
  if (kept == inShape)
    return r;
  return ctx.emit1("Expand", {r, ctx.constantI64s(inShape)});
}

double lossReductionFlops(double samples, const std::string &reduction, bool weighted) {
  if (reduction == "none")
    return 0;
  if (reduction == "sum")
    return samples;
  return samples * (weighted ? 2 : 1) + 1;
}

} // namespace dtc::ops
