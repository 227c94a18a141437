// Broadcast inference and constant evaluation shared by elementwise ops.
#include "ops/elementwise/Elementwise.h"

#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"
#include "ops/Sharding.h"

#include <cmath>
#include <cstring>

namespace dtc::ops {

Status inferBroadcast(InferenceContext &ctx) {
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    if (ctx.hasInput(i))
      shapes.push_back(ctx.inputShape(i));
  DTC_ASSIGN_OR_RETURN(ir::Shape s, broadcastShapes(shapes, ctx.node().where()));
  ctx.setOutputShape(0, std::move(s));

  // Data propagation for shape arithmetic (x.size(1) * x.size(2) and the like).
  const std::string &op = ctx.node().opType();
  if (ctx.numInputs() == 2 && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")) {
    const std::vector<ir::Dim> *a = ctx.shapeValue(0);
    const std::vector<ir::Dim> *b = ctx.shapeValue(1);
    if (a && b && (a->size() == b->size() || a->size() == 1 || b->size() == 1)) {
      size_t n = std::max(a->size(), b->size());
      std::vector<ir::Dim> out;
      for (size_t i = 0; i < n; ++i) {
        const ir::Dim &x = (*a)[a->size() == 1 ? 0 : i];
        const ir::Dim &y = (*b)[b->size() == 1 ? 0 : i];
        if (op == "Mul")
          out.push_back(x * y);
        else if (op == "Div")
          out.push_back(x.dividedBy(y).value_or(ir::Dim::unknown()));
        else if (op == "Add")
          out.push_back(x + y);
        else if (x.isStatic() && y.isStatic())
          out.push_back(ir::Dim::fixed(x.value() - y.value()));
        else
          out.push_back(ir::Dim::unknown());
      }
      ctx.setShapeValue(0, std::move(out));
    }
  }
  return Status::ok();
}

Status inferSameShape(InferenceContext &ctx) {
  ctx.setOutputShape(0, ctx.inputShape(0));
  return Status::ok();
}

ir::TensorDataPtr makeTensor(const std::string &name, ir::DType dtype,
                             const std::vector<int64_t> &dims, const std::vector<double> &values) {
  return tensorOfType(name, dtype, dims, values);
}

Expected<std::vector<ir::TensorDataPtr>>
foldBinary(FoldContext &ctx, const std::function<Expected<int64_t>(int64_t, int64_t)> &intFn,
           const std::function<double(double, double)> &floatFn, ir::DType outType) {
  const ir::TensorData &a = *ctx.input(0);
  const ir::TensorData &b = *ctx.input(1);
  std::vector<ir::Shape> shapes = {ir::Shape::ofStatic(a.dims()), ir::Shape::ofStatic(b.dims())};
  DTC_ASSIGN_OR_RETURN(ir::Shape outShape, broadcastShapes(shapes, ctx.node().where()));
  std::vector<int64_t> dims = outShape.staticSizes();
  int64_t n = outShape.numElements().value_or(0);
  size_t rank = dims.size();
  // Strides of each input in the broadcast index space (0 on broadcast axes).
  auto strides = [&](const std::vector<int64_t> &d) {
    std::vector<int64_t> st(rank, 0);
    int64_t s = 1;
    for (size_t k = 0; k < d.size(); ++k) {
      size_t axis = rank - 1 - k;
      size_t src = d.size() - 1 - k;
      st[axis] = d[src] == 1 ? 0 : s;
      s *= d[src];
    }
    return st;
  };
  std::vector<int64_t> sa = strides(a.dims()), sb = strides(b.dims());
  auto offsets = [&](int64_t flat, int64_t &ia, int64_t &ib) {
    ia = ib = 0;
    for (size_t k = rank; k-- > 0;) {
      int64_t idx = flat % dims[k];
      flat /= dims[k];
      ia += idx * sa[k];
      ib += idx * sb[k];
    }
  };
  ir::DType inType = a.dtype();
  ir::DType resultType = outType == ir::DType::kUndefined ? inType : outType;
  std::vector<double> out(n);
  if (ir::isInteger(inType) || inType == ir::DType::kBool) {
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> va, a.toInt64s());
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> vb, b.toInt64s());
    for (int64_t i = 0; i < n; ++i) {
      int64_t ia, ib;
      offsets(i, ia, ib);
      Expected<int64_t> r = intFn(va[ia], vb[ib]);
      if (!r)
        return ctx.error(r.status().message());
      out[i] = static_cast<double>(*r);
    }
  } else {
    DTC_ASSIGN_OR_RETURN(std::vector<double> va, a.toDoubles());
    DTC_ASSIGN_OR_RETURN(std::vector<double> vb, b.toDoubles());
    for (int64_t i = 0; i < n; ++i) {
      int64_t ia, ib;
      offsets(i, ia, ib);
      out[i] = floatFn(va[ia], vb[ib]);
      if (inType == ir::DType::kFloat32 && resultType == inType)
        out[i] = static_cast<float>(out[i]);
    }
  }
  if (resultType == ir::DType::kInt64 && (ir::isInteger(inType))) {
    // Exact int64 path: avoid double rounding for large values.
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> va, a.toInt64s());
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> vb, b.toInt64s());
    std::vector<int64_t> exact(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t ia, ib;
      offsets(i, ia, ib);
      exact[i] = *intFn(va[ia], vb[ib]);
    }
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromInt64s(ctx.node().output(0)->name(), dims, exact)};
  }
  return std::vector<ir::TensorDataPtr>{
      makeTensor(ctx.node().output(0)->name(), resultType, dims, out)};
}

OpDef logicalDef(const std::string &name, const std::function<bool(bool, bool)> &fn) {
  OpDef d;
  d.name = name;
  d.version(7).in("A", "T").in("B", "T").out("C", "T1").type("T", kBoolType).type("T1", kBoolType);
  d.infer = inferBroadcast;
  d.fold = [fn](FoldContext &ctx) {
    return foldBinary(
        ctx, [fn](int64_t a, int64_t b) -> Expected<int64_t> { return fn(a != 0, b != 0) ? 1 : 0; },
        [fn](double a, double b) { return fn(a != 0, b != 0) ? 1.0 : 0.0; }, ir::DType::kBool);
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

OpDef bitwiseDef(const std::string &name, const std::function<int64_t(int64_t, int64_t)> &fn) {
  OpDef d;
  d.name = name;
  d.version(18).in("A", "T").in("B", "T").out("C", "T").type("T", kIntTypes);
  d.infer = inferBroadcast;
  d.fold = [fn](FoldContext &ctx) {
    return foldBinary(
        ctx, [fn](int64_t a, int64_t b) -> Expected<int64_t> { return fn(a, b); },
        [](double, double) { return 0.0; });
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

OpDef comparisonDef(const std::string &name, int since, TypeMask types,
                    const std::function<bool(double, double)> &fn) {
  OpDef d;
  d.name = name;
  d.version(since).in("A", "T").in("B", "T").out("C", "T1").type("T", types).type("T1", kBoolType);
  d.infer = inferBroadcast;
  d.fold = [fn](FoldContext &ctx) {
    // Integers compare exactly (int64 values beyond 2^53 would not survive doubles).
    return foldBinary(
        ctx,
        [fn](int64_t a, int64_t b) -> Expected<int64_t> {
          if (a == b)
            return fn(0, 0) ? 1 : 0;
          return fn(a < b ? 0 : 1, a < b ? 1 : 0) ? 1 : 0;
        },
        [fn](double a, double b) { return fn(a, b) ? 1.0 : 0.0; }, ir::DType::kBool);
  };
  d.cost = elementwiseCost();
  d.sharding = elementwiseSharding();
  return d;
}

Expected<std::vector<ir::TensorDataPtr>>
foldVariadic(FoldContext &ctx, const std::function<Expected<int64_t>(int64_t, int64_t)> &intFn,
             const std::function<double(double, double)> &floatFn) {
  if (ctx.numInputs() == 0)
    return ctx.error("needs at least one input");
  if (ctx.numInputs() == 1) {
    // One input: the output is the input itself.
    DTC_ASSIGN_OR_RETURN(const std::string *bytes, ctx.input(0)->bytes());
    return std::vector<ir::TensorDataPtr>{ir::TensorData::fromBytes(
        ctx.node().output(0)->name(), ctx.input(0)->dtype(), ctx.input(0)->dims(), *bytes)};
  }
  ir::TensorDataPtr acc = ctx.input(0);
  for (size_t i = 1; i < ctx.numInputs(); ++i) {
    FoldContext pair(ctx.node(), {acc, ctx.input(i)});
    DTC_ASSIGN_OR_RETURN(std::vector<ir::TensorDataPtr> r, foldBinary(pair, intFn, floatFn));
    acc = r[0];
  }
  return std::vector<ir::TensorDataPtr>{acc};
}

OpDef variadicDef(const std::string &name, const std::string &output, bool integerTypes) {
  OpDef d;
  d.name = name;
  const TypeMask older = kFloatNoBf16Types;
  d.version(6).variadicIn("data_0", "T").out(output, "T").type("T", older);
  d.version(8);
  if (integerTypes)
    d.version(12).type("T", older | kIntTypes);
  d.version(13).type("T", integerTypes ? kNumericTypes : kFloatTypes);
  d.infer = inferBroadcast;
  d.cost = elementwiseCost(); // n - 1 operations per element are counted as one, as Add does
  d.sharding = elementwiseSharding();
  return d;
}

Status selectedInputGradient(GradientContext &ctx) {
  ir::Value *dy = ctx.outputGrad(0);
  ir::Value *y = ctx.output(0);
  const size_t n = ctx.node().numInputs();
  if (dy->dtype() != ir::DType::kFloat32)
    return ctx.error("gradient: " + ctx.node().opType() + "'s gradient rule supports f32 (got " +
                     std::string(ir::dtypeName(dy->dtype())) + ")");
  if (n == 1) {
    if (ctx.needsGrad(0))
      ctx.setInputGrad(0, dy);
    return Status::ok();
  }
  std::vector<ir::Value *> masks;
  ir::Value *count = nullptr;
  for (size_t i = 0; i < n; ++i) {
    DTC_ASSIGN_OR_RETURN(ir::Value * m, ctx.emit1("Equal", {ctx.input(i), y}));
    masks.push_back(m);
    DTC_ASSIGN_OR_RETURN(
        ir::Value * c,
        ctx.emit1("Cast", {m}, {{"to", ir::Attribute(static_cast<int64_t>(ir::DType::kFloat32))}}));
    if (count) {
      DTC_ASSIGN_OR_RETURN(count, ctx.emit1("Add", {count, c}));
    } else {
      count = c;
    }
  }
  DTC_ASSIGN_OR_RETURN(ir::Value * share, ctx.emit1("Div", {dy, count}));
  ir::Value *zero = ctx.constantF32(0.f);
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.needsGrad(i))
      continue;
    DTC_ASSIGN_OR_RETURN(ir::Value * full, ctx.emit1("Where", {masks[i], share, zero}));
    DTC_ASSIGN_OR_RETURN(ir::Value * g, ctx.sumToShape(full, ctx.input(i)->shape()));
    ctx.setInputGrad(i, g);
  }
  return Status::ok();
}

Expected<std::vector<ir::TensorDataPtr>> foldUnary(FoldContext &ctx,
                                                   const std::function<double(double)> &fn) {
  const ir::TensorData &x = *ctx.input(0);
  if (x.dtype() == ir::DType::kInt64) {
    // Through doubles element by element; exact for results that are small integers (Sign).
    DTC_ASSIGN_OR_RETURN(std::vector<int64_t> v, x.toInt64s());
    for (int64_t &e : v)
      e = static_cast<int64_t>(fn(static_cast<double>(e)));
    return std::vector<ir::TensorDataPtr>{
        ir::TensorData::fromInt64s(ctx.node().output(0)->name(), x.dims(), v)};
  }
  DTC_ASSIGN_OR_RETURN(std::vector<double> v, elementsAsDoubles(x));
  for (double &e : v)
    e = fn(e);
  return std::vector<ir::TensorDataPtr>{
      makeTensor(ctx.node().output(0)->name(), x.dtype(), x.dims(), v)};
}

Status zeroGradient(GradientContext &ctx) {
  if (!ctx.needsGrad(0))
    return Status::ok();
  ir::Value *dy = ctx.outputGrad(0);
  if (dy->dtype() != ir::DType::kFloat32)
    return ctx.error("gradient: " + ctx.node().opType() + "'s gradient rule supports f32 (got " +
                     std::string(ir::dtypeName(dy->dtype())) + ")");
  DTC_ASSIGN_OR_RETURN(ir::Value * dx, ctx.emit1("ZeroGradient", {dy, dy}, {}, ir::kDtcDomain));
  ctx.setInputGrad(0, dx);
  return Status::ok();
}

OpDef unaryDef(const std::string &name, int since, TypeMask types) {
  OpDef d;
  d.name = name;
  d.version(since).in("X", "T").out("Y", "T").type("T", types);
  d.infer = inferSameShape;
  d.sharding = elementwiseSharding();
  return d;
}

} // namespace dtc::ops
