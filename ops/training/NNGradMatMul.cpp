// ai.dtc.MatMulT: Y = alpha * op(A) @ op(B), numpy matmul with batch broadcasting where op(X)
// swaps the last two axes of X when transA / transB is 1. The MatMul and Gemm gradient rules use
// it so that the transposed operand of dA = dY @ B^T and dB = A^T @ dY costs no copy (oneDNN
// matmul reads the transpose through strides).
#include "ops/OpDef.h"
#include "ops/ShapeHelpers.h"

namespace dtc::ops {

namespace {

Status inferMatMulT(InferenceContext &ctx) {
  const ir::Shape &a = ctx.inputShape(0);
  const ir::Shape &b = ctx.inputShape(1);
  for (const char *t : {"transA", "transB"}) {
    int64_t v = ctx.node().attrInt(t, 0);
    if (v != 0 && v != 1)
      return ctx.error(std::string(t) + " must be 0 or 1, got " + std::to_string(v));
  }
  if (!a.hasRank() || !b.hasRank()) {
    ctx.setOutputShape(0, ir::Shape::unknownRank());
    return Status::ok();
  }
  if (a.rank() < 2 || b.rank() < 2)
    return ctx.error("MatMulT operands must have rank >= 2, got A " + a.str() + " and B " +
                     b.str());
  bool transA = ctx.node().attrInt("transA", 0) != 0;
  bool transB = ctx.node().attrInt("transB", 0) != 0;
  size_t ra = a.rank(), rb = b.rank();
  const ir::Dim &m = a[transA ? ra - 1 : ra - 2];
  const ir::Dim &ka = a[transA ? ra - 2 : ra - 1];
  const ir::Dim &kb = b[transB ? rb - 1 : rb - 2];
  const ir::Dim &n = b[transB ? rb - 2 : rb - 1];
  if (ka.isStatic() && kb.isStatic() && ka.value() != kb.value())
    return ctx.error("inner dimensions do not match: A " + a.str() +
                     " (transA=" + std::to_string(transA) + ") has K=" + ka.str() + ", B " +
                     b.str() + " (transB=" + std::to_string(transB) + ") has K=" + kb.str());
  ir::Shape batchA(std::vector<ir::Dim>(a.dims().begin(), a.dims().end() - 2));
  ir::Shape batchB(std::vector<ir::Dim>(b.dims().begin(), b.dims().end() - 2));
  DTC_ASSIGN_OR_RETURN(ir::Shape batch, broadcastShapes({batchA, batchB}, ctx.node().where()));
  std::vector<ir::Dim> out = batch.dims();
  out.push_back(m);
  out.push_back(n);
  ctx.setOutputShape(0, ir::Shape(std::move(out)));
  return Status::ok();
}

} // namespace

OpDef defineMatMulT() {
  OpDef d;
  d.name = "MatMulT";
  d.domain = "ai.dtc";
  d.version(1)
      .in("A", "T")
      .in("B", "T")
      .out("Y", "T")
      .attr("transA", ir::AttrKind::kInt)
      .attr("transB", ir::AttrKind::kInt)
      .attr("alpha", ir::AttrKind::kFloat)
      .type("T", kFloatTypes);
  d.infer = inferMatMulT;
  // As MatMul: 2 * numel(Y) * K FLOPs with K = A's last axis (second to last when transA), plus
  // numel(Y) for the alpha scale when alpha != 1. The transposes are read through strides.
  d.cost = [](const CostContext &ctx) -> Expected<Cost> {
    const std::vector<int64_t> &a = ctx.inputDims(0);
    if (a.size() < 2)
      return ctx.error("A must have rank >= 2");
    double k = static_cast<double>(a[a.size() - (ctx.node().attrInt("transA", 0) != 0 ? 2 : 1)]);
    double y = ctx.outputElements(0);
    return ctx.withFlops(2 * y * k + (ctx.node().attrFloat("alpha", 1.f) != 1.f ? y : 0));
  };
  return d;
}

} // namespace dtc::ops
