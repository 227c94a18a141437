// Resize (onnx/docs/Operators.md#Resize). Forms: 10 (X, scales; mode nearest|linear),
// 11 (X, roi, scales, sizes; coordinate_transformation_mode, cubic_coeff_a, exclude_outside,
// extrapolation_value, nearest_mode), 13 (roi and scales optional), 18 (antialias, axes,
// keep_aspect_ratio_policy), 19 (coordinate_transformation_mode half_pixel_symmetric).
// Canonical: the 19 form (X, roi?, scales?, sizes?). Normalization:
//  - opset 10: (X, scales) -> (X, _, scales) with coordinate_transformation_mode="asymmetric"
//    and, for mode=nearest, nearest_mode="floor". Resize-10 computes x_original = x_resized /
//    scale (the only transform it has: onnxruntime issue #4419, its upsample.h legacy path) and
//    nearest picks floor(x_original) when upscaling; the ONNX version converter
//    (onnx/version_converter/adapters/resize_10_11.h, later revisions) sets the same two
//    attributes. (onnxruntime rounds up instead when downscaling with Resize-10; dtc follows the
//    converter.)
//  - every opset: a roi, scales or sizes input known to hold 0 elements is treated as absent
//    (the opset 11-12 way of omitting it); trailing omitted inputs are dropped.
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"
#include "ops/nn/NNCommon.h"
#include "ops/Sharding.h"

#include <algorithm>
#include <cmath>

namespace dtc::ops {

namespace {

const std::vector<std::string> kModes = {"nearest", "linear", "cubic"};
const std::vector<std::string> kNearestModes = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                                "ceil"};
const std::vector<std::string> kPolicies = {"stretch", "not_larger", "not_smaller"};

std::vector<std::string> transformModes(int64_t opset) {
  // tf_half_pixel_for_nn was removed in Resize-13, but tf2onnx still writes it (Keras'
  // UpSampling2D with nearest interpolation) at opset 13 and later, and onnxruntime runs it with
  // a deprecation warning: accepted at every opset, with a warning from 13 on (normalizeResize).
  std::vector<std::string> m = {"half_pixel",         "pytorch_half_pixel",
                                "align_corners",      "asymmetric",
                                "tf_crop_and_resize", "tf_half_pixel_for_nn"};
  if (opset >= 19)
    m.push_back("half_pixel_symmetric");
  return m;
}

Status normalizeResize(ir::Node &node, NormalizeContext &ctx) {
  int64_t opset = ctx.opset();
  if (opset < 11) {
    DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "mode", {"nearest", "linear"}));
    ir::Value *scales = node.input(1);
    node.setInput(1, nullptr);
    node.addInput(scales);
    node.setAttr("coordinate_transformation_mode", "asymmetric");
    if (node.attrString("mode", "nearest") == "nearest")
      node.setAttr("nearest_mode", "floor");
  } else {
    DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "mode", kModes));
    DTC_RETURN_IF_ERROR(
        nn::checkStringAttr(node, "coordinate_transformation_mode", transformModes(opset)));
    if (opset >= 13 &&
        node.attrString("coordinate_transformation_mode", "") == "tf_half_pixel_for_nn")
      ctx.diags().warning(node.where(),
                          "coordinate_transformation_mode=\"tf_half_pixel_for_nn\" was removed "
                          "in Resize-13; accepted with its Resize-11 meaning (x_original = "
                          "(x_resized + 0.5) / scale), as onnxruntime does");
  }
  for (size_t i = 1; i <= 3; ++i)
    if (nn::isEmptyTensor(node.input(i)))
      node.setInput(i, nullptr);
  nn::dropTrailingOmittedInputs(node);
  return Status::ok();
}

Status inferResize(InferenceContext &ctx) {
  const ir::Node &node = ctx.node();
  DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "mode", kModes));
  DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "nearest_mode", kNearestModes));
  DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "keep_aspect_ratio_policy", kPolicies));
  std::vector<std::string> transforms = transformModes(19);
  transforms.push_back("tf_half_pixel_for_nn"); // kept from opset 11-12 models
  DTC_RETURN_IF_ERROR(nn::checkStringAttr(node, "coordinate_transformation_mode", transforms));
  int64_t antialias = node.attrInt("antialias", 0);
  if (antialias != 0 && antialias != 1)
    return ctx.error("antialias must be 0 or 1, got " + std::to_string(antialias));

  bool hasScales = ctx.hasInput(2) && !nn::isEmptyTensor(node.input(2));
  bool hasSizes = ctx.hasInput(3) && !nn::isEmptyTensor(node.input(3));
  if (hasScales && hasSizes)
    return ctx.error("only one of 'scales' and 'sizes' may be given");
  if (!hasScales && !hasSizes)
    return ctx.error("one of 'scales' and 'sizes' must be given");

  const ir::Shape &x = ctx.inputShape(0);
  if (!x.hasRank()) {
    ctx.setOutputShape(0, x);
    return Status::ok();
  }
  int64_t rank = static_cast<int64_t>(x.rank());
  std::vector<int64_t> axes;
  if (node.hasAttr("axes")) {
    for (int64_t a : node.attrInts("axes")) {
      DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a, rank, node.where(), "axes value"));
      if (std::find(axes.begin(), axes.end(), axis) != axes.end())
        return ctx.error("axes contains axis " + std::to_string(axis) + " twice");
      axes.push_back(axis);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  std::vector<ir::Dim> out = x.dims();
  auto markUnknown = [&] {
    for (int64_t a : axes)
      out[a] = ir::Dim::unknown();
  };

  if (hasSizes) {
    const ir::Shape &ss = ctx.inputShape(3);
    if (ss.hasRank() && ss.rank() == 1 && ss[0].isStatic() &&
        ss[0].value() != static_cast<int64_t>(axes.size()))
      return ctx.error("sizes has " + ss[0].str() + " values; expected " +
                       std::to_string(axes.size()) + " (one per resized axis)");
    const std::vector<ir::Dim> *sizes = ctx.shapeValue(3);
    if (!sizes) {
      markUnknown();
    } else if (sizes->size() != axes.size()) {
      return ctx.error("sizes has " + std::to_string(sizes->size()) + " values; expected " +
                       std::to_string(axes.size()) + " (one per resized axis)");
    } else {
      for (const ir::Dim &s : *sizes)
        if (s.isStatic() && s.value() < 0)
          return ctx.error("sizes must be non-negative, got " + s.str());
      std::string policy = node.attrString("keep_aspect_ratio_policy", "stretch");
      if (policy == "stretch") {
        for (size_t i = 0; i < axes.size(); ++i)
          out[axes[i]] = (*sizes)[i];
      } else {
        // One scale for all resized axes: the smallest (not_larger) or largest (not_smaller)
        // sizes[i] / in[i]; out = round(scale * in) (Resize-18 keep_aspect_ratio_policy).
        bool allStatic = true;
        float scale = policy == "not_larger" ? INFINITY : 0.0f;
        for (size_t i = 0; i < axes.size(); ++i) {
          const ir::Dim &in = x[axes[i]];
          const ir::Dim &s = (*sizes)[i];
          if (!in.isStatic() || !s.isStatic() || in.value() == 0) {
            allStatic = false;
            break;
          }
          float r = static_cast<float>(s.value()) / static_cast<float>(in.value());
          scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
        }
        for (int64_t a : axes)
          out[a] = allStatic ? ir::Dim::fixed(static_cast<int64_t>(
                                   std::round(scale * static_cast<float>(x[a].value()))))
                             : ir::Dim::unknown();
      }
    }
  } else {
    ir::TensorDataPtr c = ctx.constantInput(2);
    if (!c) {
      markUnknown();
    } else {
      DTC_ASSIGN_OR_RETURN(std::vector<double> scales, c->toDoubles());
      if (scales.size() != axes.size())
        return ctx.error("scales has " + std::to_string(scales.size()) + " values; expected " +
                         std::to_string(axes.size()) + " (one per resized axis)");
      for (size_t i = 0; i < axes.size(); ++i) {
        if (!(scales[i] > 0))
          return ctx.error("scales must be positive, got " + std::to_string(scales[i]));
        const ir::Dim &in = x[axes[i]];
        float scale = static_cast<float>(scales[i]);
        if (!std::isfinite(scale) ||
            (in.isStatic() && !(std::floor(static_cast<float>(in.value()) * scale) < 9.2e18f)))
          return ctx.error("scale " + std::to_string(scales[i]) + " on axis " +
                           std::to_string(axes[i]) + " gives a size that does not fit in int64");
        out[axes[i]] = nn::scaledDim(in, scale);
      }
    }
  }
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

/// Gradient of Y = Resize(X) for modes nearest and linear: dX = ai.dtc.ResizeGrad(dY), the
/// adjoint of the forward's interpolation (every dY element is added to the X elements it was
/// read from, with the forward's weights; ops/cpu/ResizeCoords.h has the shared coordinate
/// math). scales/sizes must be constants; ResizeGrad gets one scale per axis (the forward's
/// float scales, or, for sizes with keep_aspect_ratio_policy, the common scale), or none for
/// sizes with policy stretch (scale = out / in, as the forward kernel uses).
Status resizeGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  if (!dy || !ctx.needsGrad(0))
    return Status::ok();
  const ir::Node &node = ctx.node();
  std::string mode = node.attrString("mode", "nearest");
  std::string ct = node.attrString("coordinate_transformation_mode", "half_pixel");
  if (mode != "nearest" && mode != "linear")
    return ctx.error("gradient: mode=" + mode + " has no gradient rule (nearest and linear do)");
  if (ct == "tf_crop_and_resize")
    return ctx.error("gradient: coordinate_transformation_mode=tf_crop_and_resize has no "
                     "gradient rule");
  if (node.attrInt("antialias", 0) != 0 || node.attrInt("exclude_outside", 0) != 0)
    return ctx.error("gradient: antialias and exclude_outside are not supported");
  const ir::Shape &xShape = ctx.input(0)->shape(), &yShape = dy->shape();
  if (!xShape.isStatic() || !yShape.isStatic())
    return ctx.error("gradient: X and Y must have static shapes");
  std::vector<int64_t> xs = xShape.staticSizes(), ys = yShape.staticSizes();
  int64_t rank = static_cast<int64_t>(xs.size());
  std::vector<int64_t> axes;
  if (node.hasAttr("axes")) {
    for (int64_t a : node.attrInts("axes")) {
      DTC_ASSIGN_OR_RETURN(int64_t axis, normalizeAxis(a, rank, node.where(), "axes value"));
      axes.push_back(axis);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  }
  std::map<std::string, ir::Attribute> attrs = {
      {"mode", ir::Attribute(mode)},
      {"coordinate_transformation_mode", ir::Attribute(ct)},
      {"nearest_mode", ir::Attribute(node.attrString("nearest_mode", "round_prefer_floor"))},
      {"input_shape", ir::Attribute(xs)}};
  ir::Value *scalesIn = ctx.input(2), *sizesIn = ctx.input(3);
  std::vector<float> scales(static_cast<size_t>(rank), 1.0f);
  if (scalesIn && !nn::isEmptyTensor(scalesIn)) {
    if (!scalesIn->isInitializer())
      return ctx.error("gradient: scales must be a constant");
    DTC_ASSIGN_OR_RETURN(std::vector<double> sc, scalesIn->initializer()->toDoubles());
    if (sc.size() != axes.size())
      return ctx.error("gradient: scales must have one value per resized axis");
    for (size_t i = 0; i < axes.size(); ++i)
      scales[static_cast<size_t>(axes[i])] = static_cast<float>(sc[i]);
    attrs["scales"] = ir::Attribute(scales);
  } else if (sizesIn) {
    std::string policy = node.attrString("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch") {
      if (!sizesIn->isInitializer())
        return ctx.error("gradient: sizes must be a constant");
      DTC_ASSIGN_OR_RETURN(std::vector<int64_t> sz, sizesIn->initializer()->toInt64s());
      if (sz.size() != axes.size() || axes.empty())
        return ctx.error("gradient: sizes must have one value per resized axis");
      float common = policy == "not_larger" ? INFINITY : 0.0f;
      for (size_t i = 0; i < axes.size(); ++i) {
        float r = static_cast<float>(sz[i]) / static_cast<float>(xs[static_cast<size_t>(axes[i])]);
        common = policy == "not_larger" ? std::min(common, r) : std::max(common, r);
      }
      for (int64_t a : axes)
        scales[static_cast<size_t>(a)] = common;
      attrs["scales"] = ir::Attribute(scales);
    }
  } else {
    return ctx.error("gradient: one of scales and sizes must be given");
  }
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("ResizeGrad", {dy}, attrs, "ai.dtc"));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

} // namespace

OpDef defineResize() {
  OpDef d;
  d.name = "Resize";
  d.version(10)
      .in("X", "T")
      .in("scales", "F")
      .out("Y", "T")
      .attr("mode", ir::AttrKind::kString)
      .type("T", kAllTypes)
      .type("F", bit(ir::DType::kFloat32));
  OpVersion &v11 = d.version(11);
  v11.inputs = {{"X", "T1", false, false},
                {"roi", "T2", false, false},
                {"scales", "F", false, false},
                {"sizes", "I", true, false}};
  v11.outputs = {{"Y", "T1", false, false}};
  v11.typeVars.clear();
  v11.attr("coordinate_transformation_mode", ir::AttrKind::kString)
      .attr("cubic_coeff_a", ir::AttrKind::kFloat)
      .attr("exclude_outside", ir::AttrKind::kInt)
      .attr("extrapolation_value", ir::AttrKind::kFloat)
      .attr("nearest_mode", ir::AttrKind::kString)
      .type("T1", kAllTypes)
      .type("T2", kFloatTypes & ~bit(ir::DType::kBFloat16))
      .type("F", bit(ir::DType::kFloat32))
      .type("I", kInt64Type);
  OpVersion &v13 = d.version(13);
  v13.inputs[1].optional = true;
  v13.inputs[2].optional = true;
  d.version(18)
      .attr("antialias", ir::AttrKind::kInt)
      .attr("axes", ir::AttrKind::kInts)
      .attr("keep_aspect_ratio_policy", ir::AttrKind::kString);
  d.version(19);
  d.normalize = normalizeResize;
  d.infer = inferResize;
  d.gradient = resizeGradient;
  // nn::resizeFlops: nearest 0 FLOPs, linear / cubic a multiply-add per tap.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    return ctx.withFlops(nn::resizeFlops(ctx.node().attrString("mode", "nearest"), ctx.inputDims(0),
                                         ctx.outputDims(0), false));
  };
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
