// ScatterElements: a copy of `data` in which, for every position p of `indices` (same rank r as
// data; negative indices count from the back), the element at p with coordinate `axis` replaced
// by indices[p] receives updates[p] (shape of indices), combined by `reduction`: "none"
// (overwrite; ONNX leaves repeated indices undefined, dtc applies them in order), "add", "mul"
// (opset 16), "min", "max" (opset 18). ONNX ScatterElements-11/13/16/18. Folds. Gradient
// (reduction none or add, as PyTorch's scatter / scatter_add backward): d updates =
// GatherElements(dY, indices); d data = dY with the scattered elements zeroed (none) or dY (add).
#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

namespace dtc::ops {

namespace {

Status checkReduction(const std::string &r, const std::string &where) {
  if (r == "none" || r == "add" || r == "mul" || r == "min" || r == "max")
    return Status::ok();
  return Status::error(where,
                       "attribute 'reduction' must be none, add, mul, min or max, got '" + r + "'");
}

} // namespace

/// Shared by ScatterElements and ScatterND: the gradient rule for reduction none / add.
/// `gatherOp` is GatherElements or GatherND (the adjoint of the scatter for the updates).
Status scatterGradient(GradientContext &ctx, const std::string &gatherOp) {
  const ir::Node &n = ctx.node();
  const std::string reduction = n.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return ctx.error("gradient: no gradient rule for reduction '" + reduction +
                     "' (none and add have one)");
  ir::Value *dy = ctx.outputGrad(0);
  std::map<std::string, ir::Attribute> gatherAttrs;
  if (gatherOp == "GatherElements")
    gatherAttrs["axis"] = ir::Attribute(n.attrInt("axis", 0));
  if (ctx.needsGrad(2)) {
    DTC_ASSIGN_OR_RETURN(ir::Value * du, ctx.emit1(gatherOp, {dy, ctx.input(1)}, gatherAttrs));
    ctx.setInputGrad(2, du);
  }
  if (ctx.needsGrad(0)) {
    if (reduction == "add") {
      ctx.setInputGrad(0, dy);
    } else {
      if (dy->dtype() != ir::DType::kFloat32)
        return ctx.error("gradient: the rule supports f32 (got " +
                         std::string(ir::dtypeName(dy->dtype())) + ")");
      DTC_ASSIGN_OR_RETURN(ir::Value * zeros,
                           ctx.emit1("ZeroGradient", {ctx.input(2), dy}, {}, ir::kDtcDomain));
      std::map<std::string, ir::Attribute> attrs = gatherAttrs;
      DTC_ASSIGN_OR_RETURN(ir::Value * dd, ctx.emit1(n.opType(), {dy, ctx.input(1), zeros}, attrs));
      ctx.setInputGrad(0, dd);
    }
  }
  return Status::ok();
}

/// Folds a scatter given each update's destination element offset (-1 - k for a bad index k
/// reported by `bad`).
Expected<std::vector<ir::TensorDataPtr>>
foldScatter(FoldContext &ctx, const std::vector<int64_t> &destination, int64_t slice) {
  const ir::TensorData &data = *ctx.input(0), &updates = *ctx.input(2);
  if (!ir::isFloat(data.dtype()) && !ir::isInteger(data.dtype()))
    return ctx.error("folds numeric tensors only");
  const std::string reduction = ctx.node().attrString("reduction", "none");
  DTC_RETURN_IF_ERROR(checkReduction(reduction, ctx.node().where()));
  const bool integer = ir::isInteger(data.dtype());
  std::vector<double> out, upd;
  std::vector<int64_t> outI, updI;
  if (integer) {
    DTC_ASSIGN_OR_RETURN(outI, data.toInt64s());
    DTC_ASSIGN_OR_RETURN(updI, updates.toInt64s());
  } else {
    DTC_ASSIGN_OR_RETURN(out, data.toDoubles());
    DTC_ASSIGN_OR_RETURN(upd, updates.toDoubles());
  }
  auto apply = [&](auto &dst, const auto &src) {
    for (size_t t = 0; t < destination.size(); ++t)
      for (int64_t e = 0; e < slice; ++e) {
        auto &d = dst[static_cast<size_t>(destination[t] + e)];
        auto u = src[t * static_cast<size_t>(slice) + static_cast<size_t>(e)];
        if (reduction == "add")
          d += u;
        else if (reduction == "mul")
          d *= u;
        else if (reduction == "min")
          d = u < d ? u : d;
        else if (reduction == "max")
          d = u > d ? u : d;
        else
          d = u;
      }
  };
  const std::string &name = ctx.node().output(0)->name();
  if (integer) {
    apply(outI, updI);
    if (data.dtype() == ir::DType::kInt64)
      return std::vector<ir::TensorDataPtr>{ir::TensorData::fromInt64s(name, data.dims(), outI)};
    out.assign(outI.begin(), outI.end());
  } else {
    apply(out, upd);
  }
  return std::vector<ir::TensorDataPtr>{tensorOfType(name, data.dtype(), data.dims(), out)};
}

OpDef defineScatterElements() {
  OpDef d;
  d.name = "ScatterElements";
  d.version(11)
      .in("data", "T")
      .in("indices", "Tind")
      .in("updates", "T")
      .out("output", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", kAllTypes & ~bit(ir::DType::kBFloat16))
      .type("Tind", kInt32Or64Types);
  d.version(13).type("T", kAllTypes);
  d.version(16).attr("reduction", ir::AttrKind::kString);
  d.version(18);
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_RETURN_IF_ERROR(
        checkReduction(ctx.node().attrString("reduction", "none"), ctx.node().where()));
    const ir::Shape &data = ctx.inputShape(0), &idx = ctx.inputShape(1), &upd = ctx.inputShape(2);
    if (data.hasRank() && idx.hasRank()) {
      if (data.rank() == 0 || idx.rank() != data.rank())
        return ctx.error("inputs 'data' " + data.str() + " and 'indices' " + idx.str() +
                         " must have one rank >= 1");
      DTC_RETURN_IF_ERROR(normalizeAxis(ctx.node().attrInt("axis", 0),
                                        static_cast<int64_t>(data.rank()), ctx.node().where())
                              .status());
    }
    if (idx.isStatic() && upd.isStatic() && idx != upd)
      return ctx.error("input 'updates' " + upd.str() + " must have the shape of 'indices' " +
                       idx.str());
    ctx.setOutputShape(0, data);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const ir::TensorData &data = *ctx.input(0), &indices = *ctx.input(1);
    const std::vector<int64_t> &dd = data.dims(), &id = indices.dims();
    if (dd.empty() || id.size() != dd.size() || ctx.input(2)->dims() != id)
      return ctx.error("inputs must have one rank >= 1 and updates the shape of indices");
    DTC_ASSIGN_OR_RETURN(int64_t axis,
                         normalizeAxis(ctx.node().attrInt("axis", 0),
                                       static_cast<int64_t>(dd.size()), ctx.node().where()));
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> idx, indices.toInt64s());
    const std::vector<int64_t> ds = rowMajorStrides(dd), is = rowMajorStrides(id);
    std::vector<int64_t> dest(idx.size());
    for (size_t p = 0; p < idx.size(); ++p) {
      int64_t off = 0, rest = static_cast<int64_t>(p);
      for (size_t a = 0; a < id.size(); ++a) {
        int64_t c = rest / is[a];
        rest %= is[a];
        if (static_cast<int64_t>(a) == axis) {
          c = idx[p];
          const int64_t s = dd[a];
          if (c < -s || c >= s)
            return ctx.error("index " + std::to_string(c) + " is out of range for axis " +
                             std::to_string(axis) + " of size " + std::to_string(s));
          c = c < 0 ? c + s : c;
        } else if (c >= dd[a]) {
          return ctx.error("'indices' " + intsText(id) + " is larger than 'data' " + intsText(dd));
        }
        off += c * ds[a];
      }
      dest[p] = off;
    }
    return foldScatter(ctx, dest, 1);
  };
  d.gradient = [](GradientContext &ctx) { return scatterGradient(ctx, "GatherElements"); };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
