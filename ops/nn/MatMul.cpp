// MatMul: numpy-style matrix product (onnx/docs/Operators.md#MatMul). 1-D operands are promoted
// (A: [K] -> [1,K], B: [K] -> [K,1]) and the added axis removed from the result; leading batch
// axes broadcast. The form is the same in every opset (1, 9, 13 only widen the types).
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"

namespace dtc::ops {

namespace {

// Two contraction sizes conflict only when both are static and differ (distinct symbols may
// still be equal at run time).
bool dimsCompatible(const ir::Dim &a, const ir::Dim &b) {
  return !(a.isStatic() && b.isStatic() && a.value() != b.value());
}

Status inferMatMul(InferenceContext &ctx) {
  const ir::Shape &a = ctx.inputShape(0);
  const ir::Shape &b = ctx.inputShape(1);
  if (!a.hasRank() || !b.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  if (a.rank() == 0 || b.rank() == 0)
    return ctx.error("MatMul operands must have rank >= 1, got A " + a.str() + " and B " + b.str());
  std::vector<ir::Dim> da = a.dims(), db = b.dims();
  bool aVector = da.size() == 1, bVector = db.size() == 1;
  if (aVector)
    da.insert(da.begin(), ir::Dim::fixed(1));
  if (bVector)
    db.push_back(ir::Dim::fixed(1));
  const ir::Dim &ka = da.back();
  const ir::Dim &kb = db[db.size() - 2];
  if (!dimsCompatible(ka, kb))
    return ctx.error("inner dimensions do not match: A " + a.str() + " has K=" + ka.str() + ", B " +
                     b.str() + " has K=" + kb.str());
  ir::Shape batchA(std::vector<ir::Dim>(da.begin(), da.end() - 2));
  ir::Shape batchB(std::vector<ir::Dim>(db.begin(), db.end() - 2));
  DTC_ASSIGN_OR_RETURN(ir::Shape batch, broadcastShapes({batchA, batchB}, ctx.node().where()));
  std::vector<ir::Dim> out = batch.dims();
  if (!aVector)
    out.push_back(da[da.size() - 2]);
  if (!bVector)
    out.push_back(db.back());
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

} // namespace

OpDef defineMatMul() {
  OpDef d;
  d.name = "MatMul";
  constexpr TypeMask kTypes = kFloatTypes | bit(ir::DType::kInt32) | bit(ir::DType::kInt64) |
                              bit(ir::DType::kUInt32) | bit(ir::DType::kUInt64);
  d.version(1).in("A", "T").in("B", "T").out("Y", "T").type("T", kTypes);
  d.infer = inferMatMul;
  return d;
}

} // namespace dtc::ops
