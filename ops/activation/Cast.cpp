// Cast: converts elements to the dtype named by the `to` attribute (an ONNX TensorProto
// DataType number). ONNX Cast-6 (`to`), Cast-9/13 (more types), Cast-19 (`saturate`, which
// only affects float8 targets dtc does not have; Cast-21 only adds 4-bit types). Folds.
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

#include <cstring>

namespace dtc::ops {

namespace {

/// The `to` attribute as a dtc dtype; error naming the node when it is not one dtc knows.
Expected<ir::DType> targetType(const ir::Node &node) {
  const ir::Attribute *a = node.attr("to");
  if (!a || a->kind() != ir::AttrKind::kInt)
    return Status::error(node.where(), "required attribute 'to' is missing");
  int64_t to = a->i();
  if (to <= 0 || to > INT32_MAX || !ir::isKnownDType(static_cast<int32_t>(to)))
    return Status::error(node.where(), "attribute 'to' = " + std::to_string(to) +
                                           " is not a data type dtc supports (" +
                                           typeMaskText(kAllTypes) + ")");
  return static_cast<ir::DType>(to);
}

template <typename T> void putInt(std::string &bytes, size_t i, int64_t v) {
  T x = static_cast<T>(v); // modular, like C++ and numpy for integer narrowing
  std::memcpy(bytes.data() + i * sizeof(T), &x, sizeof(T));
}

/// Integer/bool -> integer/bool, exact for all int64 values.
ir::TensorDataPtr castIntegers(const std::string &name, ir::DType to,
                               const std::vector<int64_t> &dims,
                               const std::vector<int64_t> &values) {
  std::string bytes(values.size() * ir::dtypeSize(to), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = values[i];
    switch (to) {
    case ir::DType::kInt8:
      putInt<int8_t>(bytes, i, v);
      break;
    case ir::DType::kInt16:
      putInt<int16_t>(bytes, i, v);
      break;
    case ir::DType::kInt32:
      putInt<int32_t>(bytes, i, v);
      break;
    case ir::DType::kInt64:
      putInt<int64_t>(bytes, i, v);
      break;
    case ir::DType::kUInt8:
      putInt<uint8_t>(bytes, i, v);
      break;
    case ir::DType::kUInt16:
      putInt<uint16_t>(bytes, i, v);
      break;
    case ir::DType::kUInt32:
      putInt<uint32_t>(bytes, i, v);
      break;
    case ir::DType::kUInt64:
      putInt<uint64_t>(bytes, i, v);
      break;
    case ir::DType::kBool:
      putInt<uint8_t>(bytes, i, v != 0 ? 1 : 0);
      break;
    default:
      break;
    }
  }
  return ir::TensorData::fromBytes(name, to, dims, std::move(bytes));
}

bool isIntOrBool(ir::DType t) { return ir::isInteger(t) || t == ir::DType::kBool; }

} // namespace

Expected<ir::TensorDataPtr> castTensor(const ir::TensorData &in, ir::DType to,
                                       const std::string &name, const std::string &where,
                                       const char *opName) {
  if (in.dtype() == ir::DType::kString || to == ir::DType::kString)
    return Status::error(where, "cannot fold a " + std::string(opName) + " from or to string");
  if (isIntOrBool(in.dtype()) && isIntOrBool(to)) {
    auto ints = in.toInt64s();
    if (!ints)
      return Status::error(where, ints.status().message());
    return castIntegers(name, to, in.dims(), *ints);
  }
  auto values = elementsAsDoubles(in);
  if (!values)
    return Status::error(where, values.status().message());
  return tensorOfType(name, to, in.dims(), *values);
}

Status castGradient(GradientContext &ctx) {
  if (!ctx.needsGrad(0) || !ctx.outputGrad(0))
    return Status::ok();
  ir::Value *dy = ctx.outputGrad(0);
  const ir::DType from = ctx.input(0)->dtype();
  if (dy->dtype() == from) {
    ctx.setInputGrad(0, dy);
    return Status::ok();
  }
  DTC_ASSIGN_OR_RETURN(
      ir::Value * dx, ctx.emit1("Cast", {dy}, {{"to", ir::Attribute(static_cast<int64_t>(from))}}));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

OpDef defineCast() {
  OpDef d;
  d.name = "Cast";
  d.version(6)
      .in("input", "T1")
      .out("output", "T2")
      .attr("to", ir::AttrKind::kInt, /*required=*/true)
      .type("T1", (kNumericTypes | kBoolType) & ~bit(ir::DType::kBFloat16))
      .type("T2", (kNumericTypes | kBoolType) & ~bit(ir::DType::kBFloat16));
  d.version(9)
      .type("T1", kAllTypes & ~bit(ir::DType::kBFloat16))
      .type("T2", kAllTypes & ~bit(ir::DType::kBFloat16));
  d.version(13).type("T1", kAllTypes).type("T2", kAllTypes);
  d.version(19).attr("saturate", ir::AttrKind::kInt);
  // Every form is canonical; normalization only checks `to` early (at import).
  d.normalize = [](ir::Node &node, NormalizeContext &) -> Status {
    return targetType(node).status();
  };
  d.infer = [](InferenceContext &ctx) -> Status {
    DTC_ASSIGN_OR_RETURN(ir::DType to, targetType(ctx.node()));
    ctx.setOutputDType(0, to);
    ctx.setOutputShape(0, ctx.inputShape(0));
    // Integer casts of shape values keep them (Shape -> Cast(int64) -> ...).
    if (ir::isInteger(to) && ir::isInteger(ctx.inputDType(0)))
      if (const std::vector<ir::Dim> *sv = ctx.shapeValue(0))
        ctx.setShapeValue(0, *sv);
    return Status::ok();
  };
  d.fold = [](FoldContext &ctx) -> Expected<std::vector<ir::TensorDataPtr>> {
    DTC_ASSIGN_OR_RETURN(ir::DType to, targetType(ctx.node()));
    DTC_ASSIGN_OR_RETURN(
        ir::TensorDataPtr t,
        castTensor(*ctx.input(0), to, ctx.node().output(0)->name(), ctx.node().where(), "Cast"));
    return std::vector<ir::TensorDataPtr>{t};
  };
  // Float -> float: dX = Cast(dY, to = X's dtype) (dY itself when the dtypes are equal). A cast
  // to an integer or bool type passes no gradient (its output carries none, so autodiff never
  // asks), and integer inputs never need one.
  d.gradient = castGradient;
  // A conversion, not arithmetic: 0 FLOPs, bytes of both dtypes.
  d.cost = dataMovementCost();
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
