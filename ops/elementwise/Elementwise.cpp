// Broadcast inference and constant evaluation shared by elementwise ops.
#include "ops/elementwise/Elementwise.h"

#include "ops/ShapeHelpers.h"
#include "ops/activation/Activation.h"

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

OpDef unaryDef(const std::string &name, int since, TypeMask types) {
  OpDef d;
  d.name = name;
  d.version(since).in("X", "T").out("Y", "T").type("T", types);
  d.infer = inferSameShape;
  return d;
}

} // namespace dtc::ops
