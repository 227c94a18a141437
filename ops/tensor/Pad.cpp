// Pad: pads (or, with negative pads, crops) each axis. Forms: `pads`/`mode`/`value` attributes
// (2), inputs data, int64 pads and optional constant_value (11, 13), optional axes input (18),
// mode "wrap" (19, canonical). Modes: constant, reflect, edge, wrap. Folds constants.
#include "ops/tensor/TensorCommon.h"
#include "ops/Sharding.h"

#include <cmath>
#include <cstring>

namespace dtc::ops {
namespace {

bool isKnownMode(const std::string &mode, int64_t opset) {
  return mode == "constant" || mode == "reflect" || mode == "edge" ||
         (mode == "wrap" && opset >= 19);
}

/// IEEE half from float (round to nearest even; overflow to inf).
uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31)
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1)))
    ++half;
  return static_cast<uint16_t>(half);
}

} // namespace

OpDef definePad() {
  OpDef d;
  d.name = "Pad";
  d.version(2)
      .in("data", "T")
      .out("output", "T")
      .attr("pads", ir::AttrKind::kInts, true)
      .attr("mode", ir::AttrKind::kString)
      .attr("value", ir::AttrKind::kFloat)
      .type("T", kFloatTypes);
  OpVersion &v11 = d.version(11);
  v11.attrs.clear();
  v11.attr("mode", ir::AttrKind::kString)
      .in("pads", "TPads")
      .optIn("constant_value", "T")
      .type("T", kNumericTypes)
      .type("TPads", kInt64Type);
  d.version(13).type("T", kAllTypes);
  d.version(18).optIn("axes", "Tind").type("Tind", kInt32Or64Types);
  d.version(19);
  d.normalize = [](ir::Node &node, NormalizeContext &ctx) -> Status {
    std::string mode = node.attrString("mode", "constant");
    if (!isKnownMode(mode, ctx.opset()))
      return Status::error(node.where(), "unknown pad mode '" + mode + "' in opset " +
                                             std::to_string(ctx.opset()) +
                                             (mode == "wrap" ? " (wrap needs opset 19)" : ""));
    if (ctx.opset() >= 11)
      return Status::ok();
    float value = node.attrFloat("value", 0.0f);
    node.removeAttr("value");
    ctx.attrToInput(node, "pads", 1);
    if (value == 0.0f || mode != "constant")
      return Status::ok();
    ir::DType t = node.input(0) ? node.input(0)->dtype() : ir::DType::kUndefined;
    ir::Value *c = nullptr;
    if (t == ir::DType::kFloat64) {
      double v = value;
      std::string bytes(8, '\0');
      std::memcpy(bytes.data(), &v, 8);
      std::string name = node.name() + ".value";
      c = ctx.graph().addConstant(name, ir::TensorData::fromBytes(name, t, {}, bytes));
    } else if (t == ir::DType::kFloat16) {
      uint16_t h = toHalf(value);
      std::string bytes(2, '\0');
      std::memcpy(bytes.data(), &h, 2);
      std::string name = node.name() + ".value";
      c = ctx.graph().addConstant(name, ir::TensorData::fromBytes(name, t, {}, bytes));
    } else {
      c = ctx.floatConstant(node, "value", {value}, /*scalar=*/true);
    }
    node.addInput(c);
    return Status::ok();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    const std::string where = ctx.node().where();
    std::string mode = ctx.node().attrString("mode", "constant");
    if (!isKnownMode(mode, 21))
      return ctx.error("unknown pad mode '" + mode + "'");
    if (ctx.inputShape(1).hasRank() && ctx.inputShape(1).rank() != 1)
      return ctx.error("input 'pads' must be 1-D, got shape " + ctx.inputShape(1).str());
    if (ctx.hasInput(2)) {
      const ir::Shape &cv = ctx.inputShape(2);
      if (cv.hasRank() && !(cv.rank() == 0 || (cv.rank() == 1 && cv[0] == ir::Dim::fixed(1))))
        return ctx.error("input 'constant_value' must be a scalar, got shape " + cv.str());
    }
    const ir::Shape &in = ctx.inputShape(0);
    if (!in.hasRank())
      return Status::ok();
    int64_t rank = static_cast<int64_t>(in.rank());
    std::optional<std::vector<int64_t>> pads = staticInts(ctx, 1);
    std::optional<std::vector<int64_t>> axes;
    if (ctx.hasInput(3)) {
      axes = staticInts(ctx, 3);
      if (!axes) {
        ctx.setOutputShape(0, ir::Shape(std::vector<ir::Dim>(in.rank(), ir::Dim::unknown())));
        return Status::ok();
      }
    } else {
      axes.emplace();
      for (int64_t a = 0; a < rank; ++a)
        axes->push_back(a);
    }
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(*axes, rank, where, "axes"));
    std::vector<ir::Dim> dims = in.dims();
    if (!pads) {
      for (int64_t a : norm)
        dims[a] = ir::Dim::unknown();
      ctx.setOutputShape(0, ir::Shape(std::move(dims)));
      return Status::ok();
    }
    size_t n = norm.size();
    if (pads->size() != 2 * n)
      return ctx.error("pads " + intsText(*pads) + " must have 2 entries per padded axis (" +
                       std::to_string(2 * n) + ")");
    for (size_t i = 0; i < n; ++i) {
      int64_t a = norm[i], b = (*pads)[i], e = (*pads)[i + n];
      const ir::Dim &dim = in[a];
      if (b == 0 && e == 0)
        continue;
      if (!dim.isStatic()) {
        dims[a] = ir::Dim::unknown();
        continue;
      }
      int64_t size;
      if (__builtin_add_overflow(dim.value(), b, &size) || __builtin_add_overflow(size, e, &size) ||
          size < 0)
        return ctx.error("pads " + intsText(*pads) + " give axis " + std::to_string(a) +
                         " of size " + dim.str() + " a negative or overflowing size");
      if (mode != "constant" && dim.value() == 0 && size > 0)
        return ctx.error("cannot pad an empty axis in " + mode + " mode");
      if (mode == "reflect" && (b >= dim.value() || e >= dim.value()))
        return ctx.error("reflect pads " + intsText(*pads) + " must be smaller than the size " +
                         dim.str() + " of axis " + std::to_string(a));
      dims[a] = ir::Dim::fixed(size);
    }
    ctx.setOutputShape(0, ir::Shape(std::move(dims)));
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    const std::string where = ctx.node().where();
    std::string mode = ctx.node().attrString("mode", "constant");
    if (!isKnownMode(mode, 21))
      return ctx.error("unknown pad mode '" + mode + "'");
    const ir::TensorData &data = *ctx.input(0);
    const std::vector<int64_t> &inDims = data.dims();
    int64_t rank = static_cast<int64_t>(inDims.size());
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ctx.input(1)->toInt64s());
    std::vector<int64_t> axes;
    if (ctx.numInputs() > 3 && ctx.input(3)) {
      DTC_ASSIGN_OR_RETURN(axes, ctx.input(3)->toInt64s());
    } else {
      for (int64_t a = 0; a < rank; ++a)
        axes.push_back(a);
    }
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> norm, normalizeAxes(axes, rank, where, "axes"));
    size_t n = norm.size();
    if (pads.size() != 2 * n)
      return ctx.error("pads " + intsText(pads) + " must have 2 entries per padded axis");
    std::vector<int64_t> begin(rank, 0), outDims = inDims;
    for (size_t i = 0; i < n; ++i) {
      int64_t a = norm[i];
      begin[a] = pads[i];
      if (__builtin_add_overflow(outDims[a], pads[i], &outDims[a]) ||
          __builtin_add_overflow(outDims[a], pads[i + n], &outDims[a]) || outDims[a] < 0)
        return ctx.error("pads " + intsText(pads) + " give a negative or overflowing size");
      if (mode != "constant" && inDims[a] == 0 && outDims[a] > 0)
        return ctx.error("cannot pad an empty axis in " + mode + " mode");
    }
    std::string fill;
    if (mode == "constant" && ctx.numInputs() > 2 && ctx.input(2)) {
      const ir::TensorData &cv = *ctx.input(2);
      if (cv.dtype() != data.dtype() || cv.numElements() != 1)
        return ctx.error("constant_value must be one element of the data's type");
      DTC_ASSIGN_OR_RETURN(const std::string *b, cv.bytes());
      fill = *b;
    }
    std::vector<int64_t> inStrides = rowMajorStrides(inDims);
    auto src = [&](int64_t k) -> int64_t {
      int64_t s = 0;
      for (int64_t a = rank; a-- > 0;) {
        int64_t c = padSourceIndex(k % outDims[a] - begin[a], inDims[a], mode);
        k /= outDims[a];
        if (c < 0)
          return -1;
        s += c * inStrides[a];
      }
      return s;
    };
    DTC_ASSIGN_OR_RETURN(ir::TensorDataPtr t, remapElements(ctx.node().output(0)->name(), data,
                                                            outDims, src, where, fill));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // Constant mode only: dX = Pad(dY, -pads) (crops the padding, and puts zeros back where a
  // negative pad cropped the input); the constant_value input's gradient is the sum of dY over
  // the padded positions, sum(dY) - sum(dX). reflect/edge/wrap are an error naming the node.
  d.gradient = [](GradientContext &ctx) -> Status {
    const ir::Node &n = ctx.node();
    const std::string mode = n.attrString("mode", "constant");
    if (mode != "constant")
      return ctx.error("gradient: Pad mode '" + mode + "' has no gradient rule (only constant)");
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> pads, gradConstantInts(ctx, 1, "pads"));
    for (int64_t &p : pads)
      p = -p;
    std::vector<ir::Value *> ins = {ctx.outputGrad(0), ctx.constantI64s(pads)};
    if (n.input(3)) {
      ins.push_back(nullptr);
      ins.push_back(n.input(3));
    }
    DTC_ASSIGN_OR_RETURN(ir::Value * dx,
                         ctx.emit1("Pad", ins, {{"mode", ir::Attribute("constant")}}));
    if (ctx.needsGrad(0))
      ctx.setInputGrad(0, dx);
    if (ctx.needsGrad(2)) {
      const std::map<std::string, ir::Attribute> all = {{"keepdims", ir::Attribute(int64_t{0})}};
      DTC_ASSIGN_OR_RETURN(ir::Value * total, ctx.emit1("ReduceSum", {ctx.outputGrad(0)}, all));
      DTC_ASSIGN_OR_RETURN(ir::Value * kept, ctx.emit1("ReduceSum", {dx}, all));
      DTC_ASSIGN_OR_RETURN(ir::Value * dv, ctx.emit1("Sub", {total, kept}));
      DTC_ASSIGN_OR_RETURN(dv, ctx.reshapeTo(dv, n.input(2)->shape().staticSizes()));
      ctx.setInputGrad(2, dv);
    }
    return Status::ok();
  };
  d.cost = dataMovementCost();
  d.sharding = replicatedSharding();
  return d;
}

} // namespace dtc::ops
