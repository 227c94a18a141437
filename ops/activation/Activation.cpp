// Element conversions shared by Cast folding and Clip normalization, and the Softmax/LogSoftmax
// definition with the rewrite of their pre-13 "flatten to 2-D" semantics.
#include "ops/activation/Activation.h"

#include "ops/ShapeHelpers.h"
#include "ops/elementwise/Elementwise.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace dtc::ops {

Expected<std::vector<double>> elementsAsDoubles(const ir::TensorData &t) {
  if (t.dtype() == ir::DType::kFloat16 || t.dtype() == ir::DType::kBFloat16) {
    DTC_ASSIGN_OR_RETURN(const std::string *bytes, t.bytes());
    std::vector<double> out(t.numElements());
    for (size_t i = 0; i < out.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, bytes->data() + 2 * i, 2);
      out[i] = t.dtype() == ir::DType::kFloat16 ? halfToFloat(h) : bfloat16ToFloat(h);
    }
    return out;
  }
  if (ir::isFloat(t.dtype()))
    return t.toDoubles();
  if (ir::isInteger(t.dtype()) || t.dtype() == ir::DType::kBool) {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> ints, t.toInt64s());
    if (t.dtype() == ir::DType::kUInt64) {
      std::vector<double> out(ints.size());
      for (size_t i = 0; i < ints.size(); ++i)
        out[i] = static_cast<double>(static_cast<uint64_t>(ints[i]));
      return out;
    }
    return std::vector<double>(ints.begin(), ints.end());
  }
  return Status::error("tensor '" + t.name() + "'",
                       std::string("cannot read elements of type ") + ir::dtypeName(t.dtype()));
}

namespace {
/// static_cast<T>(v) without undefined behaviour for NaN or out-of-range values (-> 0).
template <typename T> T toIntChecked(double v) {
  if (std::isnan(v) || v <= static_cast<double>(std::numeric_limits<T>::min()) - 1.0 ||
      v >= static_cast<double>(std::numeric_limits<T>::max()) + 1.0)
    return 0;
  return static_cast<T>(v);
}

template <typename T> void put(char *p, T x) { std::memcpy(p, &x, sizeof(T)); }
} // namespace

ir::TensorDataPtr tensorOfType(const std::string &name, ir::DType dtype,
                               const std::vector<int64_t> &dims,
                               const std::vector<double> &values) {
  int64_t size = ir::dtypeSize(dtype);
  std::string bytes(values.size() * size, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    char *p = bytes.data() + i * size;
    double v = values[i];
    switch (dtype) {
    case ir::DType::kFloat32:
      put(p, static_cast<float>(v));
      break;
    case ir::DType::kFloat64:
      put(p, v);
      break;
    case ir::DType::kFloat16:
      put(p, floatToHalf(static_cast<float>(v)));
      break;
    case ir::DType::kBFloat16:
      put(p, floatToBFloat16(static_cast<float>(v)));
      break;
    case ir::DType::kInt8:
      put(p, toIntChecked<int8_t>(v));
      break;
    case ir::DType::kInt16:
      put(p, toIntChecked<int16_t>(v));
      break;
    case ir::DType::kInt32:
      put(p, toIntChecked<int32_t>(v));
      break;
    case ir::DType::kInt64:
      put(p, toIntChecked<int64_t>(v));
      break;
    case ir::DType::kUInt8:
      put(p, toIntChecked<uint8_t>(v));
      break;
    case ir::DType::kUInt16:
      put(p, toIntChecked<uint16_t>(v));
      break;
    case ir::DType::kUInt32:
      put(p, toIntChecked<uint32_t>(v));
      break;
    case ir::DType::kUInt64:
      put(p, toIntChecked<uint64_t>(v));
      break;
    case ir::DType::kBool:
      put(p, static_cast<uint8_t>(v != 0 ? 1 : 0));
      break;
    default:
      break;
    }
  }
  return ir::TensorData::fromBytes(name, dtype, dims, std::move(bytes));
}

namespace {

/// Rewrites a pre-13 Softmax/LogSoftmax into the opset-13 form.
///
/// Source: ONNX Operators.md changelog, Softmax-11 vs Softmax-13 (same for LogSoftmax).
/// Softmax-1/11 coerce the input [a_0..a_{k-1}, a_k..a_{n-1}] (k = axis, default 1) into the
/// 2-D tensor [a_0*..*a_{k-1}, a_k*..*a_{n-1}] and normalize each row; Softmax-13 normalizes
/// along the single axis `axis` (default -1). The two agree when k is the last axis, so then
/// only the axis is made explicit; otherwise (or when the rank is not known at import) the
/// node becomes   Shape(X) -> s;  Flatten(X, axis=k) -> f;  Op(f, axis=1) -> g;
/// Reshape(g, s) -> Y   which computes the old semantics with the new op.
Status normalizeSoftmaxFamily(ir::Node &node, NormalizeContext &ctx) {
  if (ctx.opset() >= 13)
    return Status::ok();
  int64_t axis = node.attrInt("axis", 1);
  ir::Value *x = node.input(0);
  if (!x)
    return Status::error(node.where(), "input 0 ('input') is missing");
  if (x->shape().hasRank()) {
    int64_t rank = static_cast<int64_t>(x->shape().rank());
    DTC_ASSIGN_OR_RETURN(int64_t k, normalizeAxis(axis, rank, node.where()));
    if (k == rank - 1) {
      node.setAttr("axis", ir::Attribute(k));
      return Status::ok();
    }
    axis = k;
  } // else: Flatten takes a negative axis with the same meaning (counted from the back).
  ir::Graph &g = ctx.graph();
  ir::Value *y = node.output(0);
  std::string base = node.name().empty() ? node.opType() : node.name();
  std::string yName = y ? y->name() : base;

  ir::Node *shape = g.insertNodeBefore(&node, "Shape", {x}, {g.uniqueName(yName + ".shape")}, "",
                                       base + "/shape");
  ir::Node *flat = g.insertNodeBefore(&node, "Flatten", {x}, {g.uniqueName(yName + ".flat")}, "",
                                      base + "/flatten");
  flat->setAttr("axis", ir::Attribute(axis));
  // The flattened value is known to be 2-D even before shape inference (a re-normalization of
  // the inner node then sees its axis is the last one).
  flat->output(0)->setType({x->dtype(), ir::Shape({ir::Dim::unknown(), ir::Dim::unknown()})});
  ir::Node *inner = g.insertNodeBefore(&node, node.opType(), {flat->output(0)},
                                       {g.uniqueName(yName + ".2d")}, node.domain(), base + "/2d");
  inner->setAttr("axis", ir::Attribute(int64_t{1}));
  inner->output(0)->setType(flat->output(0)->type());
  ir::Node *reshape = g.insertNodeBefore(&node, "Reshape", {inner->output(0), shape->output(0)}, {},
                                         "", base + "/reshape");
  g.transferOutputs(&node, reshape);
  g.eraseNode(&node);
  return Status::ok();
}

Status inferSoftmaxFamily(InferenceContext &ctx) {
  const ir::Shape &s = ctx.inputShape(0);
  if (s.hasRank())
    DTC_RETURN_IF_ERROR(normalizeAxis(ctx.node().attrInt("axis", -1),
                                      static_cast<int64_t>(s.rank()), ctx.node().where())
                            .status());
  ctx.setOutputShape(0, s);
  return Status::ok();
}

} // namespace

OpDef softmaxFamilyDef(const std::string &name) {
  OpDef d;
  d.name = name;
  d.version(1)
      .in("input", "T")
      .out("output", "T")
      .attr("axis", ir::AttrKind::kInt)
      .type("T", bit(ir::DType::kFloat16) | bit(ir::DType::kFloat32) | bit(ir::DType::kFloat64));
  d.version(11); // negative axis allowed; same form
  d.version(13).type("T", kFloatTypes);
  d.normalize = normalizeSoftmaxFamily;
  d.infer = inferSoftmaxFamily;
  return d;
}

Status checkScalarInput(InferenceContext &ctx, size_t i, const std::string &what) {
  if (!ctx.hasInput(i))
    return Status::ok();
  const ir::Shape &s = ctx.inputShape(i);
  std::optional<int64_t> n = s.numElements();
  if (n && *n != 1)
    return ctx.error(what + " must be a scalar, got shape " + s.str());
  if (s.hasRank() && s.rank() > 1)
    return ctx.error(what + " must be a scalar, got rank " + std::to_string(s.rank()));
  return Status::ok();
}

Status eltwiseGradRule(GradientContext &ctx, const std::string &algorithm, bool fromOutput,
                       float alpha, float beta) {
  if (!ctx.needsGrad(0))
    return Status::ok();
  ir::Value *t = fromOutput ? ctx.output(0) : ctx.input(0);
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("EltwiseGrad", {ctx.outputGrad(0), t},
                                                 {{"algorithm", ir::Attribute(algorithm)},
                                                  {"alpha", ir::Attribute(alpha)},
                                                  {"beta", ir::Attribute(beta)}},
                                                 "ai.dtc"));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

namespace {

/// The values of an activation's float attributes on `node` (defaults where absent), padded
/// to two with zeros.
std::array<float, 2> activationParams(const ir::Node &node,
                                      const std::vector<ActivationAttr> &attrs) {
  std::array<float, 2> p = {0.f, 0.f};
  for (size_t i = 0; i < attrs.size() && i < 2; ++i)
    p[i] = node.attrFloat(attrs[i].name, attrs[i].defaultValue);
  return p;
}

} // namespace

OpDef activationDef(const std::string &name, int since, TypeMask types,
                    const std::string &gradAlgorithm, ActivationFn fn,
                    std::vector<ActivationAttr> attrs) {
  OpDef d = unaryDef(name, since, types);
  for (const ActivationAttr &a : attrs)
    d.versions.back().attr(a.name, ir::AttrKind::kFloat);
  d.fold = [fn, attrs](FoldContext &ctx) {
    const std::array<float, 2> p = activationParams(ctx.node(), attrs);
    return foldUnary(ctx, [&](double x) { return fn(x, p[0], p[1]); });
  };
  d.gradient = [gradAlgorithm, attrs](GradientContext &ctx) {
    const std::array<float, 2> p = activationParams(ctx.node(), attrs);
    return eltwiseGradRule(ctx, gradAlgorithm, false, p[0], p[1]);
  };
  d.cost = elementwiseCost();
  return d;
}

} // namespace dtc::ops
